"""Torch family: torchrun configured by PET_* env, derived as Kubeflow Trainer's torch plugin does.

One Indexed Job `N-node-0` runs `num_nodes` pods; pod 0 is the rendezvous master at `N-node-0-0.N:29500`.
With the static rendezvous pod i is node rank i (its completion index); with c10d the ranks come from
the rendezvous, and a node range (min_nodes) lets pods join and leave while the job trains.
"""

import enum
from typing import Any, Optional

import pulumi
from pydantic import Field, field_validator

from trainjobs.core.args import (PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtime,
                                 shared_runtime)
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.errors import IssueCollector
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.kube.manifests import completion_index_env
from trainjobs.core.objects import container, effective_template, gpu_count, template_env
from trainjobs.core.naming import job_name, pod_dns_name
from trainjobs.core.outputs import JobOutputs
from trainjobs.kube.quantity import ceil_value, parse_quantity
from trainjobs.kube.templates import upsert_env

ROLE = "node"
TRAINER_PORT = 29500
# torchrun restarts an elastic job keeps for failures that are not membership changes.
ELASTIC_SPARE_RESTARTS = 3
# Seconds a rendezvous round with the fewest nodes waits for more (torchrun's default): each resize idles
# the job that long, so an elastic job shows it, in the rendezvous configuration its env may set instead.
LAST_CALL_TIMEOUT = 30


class TorchRuntime(TrainingRuntime):
    """A reusable torch runtime: the template of the trainer (`node`) pods."""

    node: Optional[PodTemplate] = Field(default_factory=PodTemplate)
    """Template of the trainer pods."""


TORCH_DISTRIBUTED = TorchRuntime(
    name="torch-distributed",
    node=PodTemplate(image="pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
)
BUILTIN_RUNTIMES = {runtime.name: runtime for runtime in (TORCH_DISTRIBUTED,)}


@classmethod
def checked_num_proc_per_node(cls: type, value: Any) -> Any:
    """Processes per pod as torchrun takes it: "auto", or a whole number >= 1 (ints become strings)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value == "auto" or (isinstance(value, str) and value.isdigit() and int(value) >= 1):
        return value
    raise ValueError(f'must be a whole number >= 1 or "auto" (got {value!r})')


class Rendezvous(str, enum.Enum):
    """How torchrun's workers meet."""

    STATIC = "static"
    C10D = "c10d"


class TorchTrainJobArgs(TrainJobArgs):
    """Arguments of TorchTrainJob. Everything the runtime sets can be overridden here."""

    num_proc_per_node: Optional[str] = "auto"
    """Processes per pod (PET_NPROC_PER_NODE): a whole number, or "auto": the GPU count on GPU pods
    (torchrun counts them), else the pod's CPU request (or limit) rounded up, else 1."""
    rendezvous: Optional[Rendezvous] = Rendezvous.STATIC.value
    """"static": PET_MASTER_ADDR and PET_MASTER_PORT, as Kubeflow. "c10d": PET_RDZV_BACKEND=c10d,
    PET_RDZV_ENDPOINT=N-node-0-0.N:29500, PET_RDZV_ID=N and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (so a
    replaced or added pod can join); ranks are assigned by join order."""
    torchrun: Optional[bool] = True
    """False runs one process per pod without torchrun (as training-operator v1 and Volcano): MASTER_ADDR,
    MASTER_PORT, WORLD_SIZE (training pods only, never extra roles) and RANK from the completion index;
    num_proc_per_node must then be 1."""
    env_injection: Optional[list[str]] = Field(default_factory=list)
    """Names of sidecars and init containers of the trainer pods that also get the derived torch env
    (Kubeflow's envInjection)."""
    runtime: Optional[TorchRuntime] = shared_runtime(TORCH_DISTRIBUTED)
    """A TorchRuntime, or the name of a built-in one. Default: torch-distributed (image
    pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime, no command)."""

    _nproc = field_validator("num_proc_per_node", mode="before")(checked_num_proc_per_node)

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return builtin_runtime(value, "torch", BUILTIN_RUNTIMES)


class TorchOutputs(JobOutputs):
    """Outputs of TorchTrainJob."""

    master_addr: str
    """DNS name of rank 0: `<N>-node-0-0.<N>`."""
    master_port: int
    """Rendezvous port (29500)."""
    num_nodes: int
    """Number of trainer pods."""
    num_proc_per_node: str
    """PET_NPROC_PER_NODE as resolved: a whole number, or "auto" on GPU pods."""


# Derived variables, each with the argument that sets it instead (for the reserved-env error).
PET_ENV = {
    "PET_NNODES": "num_nodes (and min_nodes)",
    "PET_NPROC_PER_NODE": "num_proc_per_node",
    "PET_NODE_RANK": "each pod's completion index",
    "PET_MASTER_ADDR": "the job name (pod 0 of the node Job)",
    "PET_MASTER_PORT": f"the trainer port {TRAINER_PORT}",
    "PET_RDZV_BACKEND": "the job's rendezvous",
    "PET_RDZV_ENDPOINT": "the job's rendezvous and name",
    "PET_RDZV_ID": "the job name",
}
# torchrun's c10d agents hand their workers the store of the first rendezvous round they joined, and an
# agent that keeps it never publishes a later round's store address: a pod that joins later (a replacement,
# or one an elastic job grows by) waits for it until its workers time out. With this each round has its own.
OWN_STORE_PER_ROUND = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
C10D_ENV = {OWN_STORE_PER_ROUND: "rendezvous c10d (1: each rendezvous round gives the workers a store of its "
                                 "own, which pods that join later find)"}
PROCESS_PER_POD_ENV = {
    "MASTER_ADDR": "the job name (pod 0 of the node Job)",
    "MASTER_PORT": f"the trainer port {TRAINER_PORT}",
    "WORLD_SIZE": "num_nodes (one process per pod)",
    "RANK": "each pod's completion index",
}


def resolve_num_proc_per_node(requested: int | str, template: PodTemplate) -> str:
    """PET_NPROC_PER_NODE as Kubeflow Trainer v2.3 derives it, from the pod's merged resources.

    An int is kept. "auto" stays "auto" when the pod has a GPU, as a resource or claimed through Dynamic
    Resource Allocation (torchrun counts devices);
    otherwise it becomes ceil(cpu) with cpu the request, else the limit, at least 1, and 1 with
    no CPU given, so torchrun never counts the host's CPUs.
    """
    if requested != "auto":
        return str(requested)
    if gpu_count(template) > 0:
        return "auto"
    resources, cpu = template.resources, None
    if resources is not None:
        for side in (resources.requests, resources.limits):
            if "cpu" in side and parse_quantity(side["cpu"]) > 0:
                cpu = side["cpu"]
                break
    return str(max(1, ceil_value(cpu))) if cpu is not None else "1"


def master_addr(name: str) -> str:
    return pod_dns_name(name, ROLE, 0)


def static_pet_env(name: str, num_nodes: int, nproc: str) -> list[dict[str, Any]]:
    """The five PET_* variables of torchrun's static rendezvous, as Kubeflow Trainer injects them."""
    return [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        completion_index_env("PET_NODE_RANK"),
        {"name": "PET_MASTER_ADDR", "value": master_addr(name)},
        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
    ]


def elastic_max_restarts(args: TorchTrainJobArgs) -> int:
    """torchrun's worker-group restarts for an elastic job, unless env sets PET_MAX_RESTARTS: a pod joining
    restarts the group without counting, but a pod leaving fails its peers' collectives, which counts; so
    two per pod the job may lose (it may also come back and leave again), and 3 for ordinary failures."""
    return ELASTIC_SPARE_RESTARTS + 2 * (args.num_nodes - args.min_nodes)


def torch_env(name: str, args: TorchTrainJobArgs, nproc: str, user_env: set[str] = frozenset()) -> list[dict[str, Any]]:
    """PET_* for torchrun (with c10d also C10D_ENV); or, with `torchrun: false`, the plain env:// variables of
    one process per pod. An elastic job (min_nodes) gets PET_NNODES=MIN:MAX, and PET_MAX_RESTARTS and
    PET_RDZV_CONF unless `user_env` sets them."""
    if not args.torchrun:
        return [
            {"name": "MASTER_ADDR", "value": master_addr(name)},
            {"name": "MASTER_PORT", "value": str(TRAINER_PORT)},
            {"name": "WORLD_SIZE", "value": str(args.num_nodes)},
            completion_index_env("RANK"),
        ]
    if args.rendezvous == "static":
        return static_pet_env(name, args.num_nodes, nproc)
    nnodes = str(args.num_nodes) if args.min_nodes is None else f"{args.min_nodes}:{args.num_nodes}"
    env = [
        {"name": "PET_NNODES", "value": nnodes},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {"name": "PET_RDZV_BACKEND", "value": "c10d"},
        {"name": "PET_RDZV_ENDPOINT", "value": f"{master_addr(name)}:{TRAINER_PORT}"},
        {"name": "PET_RDZV_ID", "value": name},
        {"name": OWN_STORE_PER_ROUND, "value": "1"},
    ]
    if args.min_nodes is not None and "PET_MAX_RESTARTS" not in user_env:
        env.append({"name": "PET_MAX_RESTARTS", "value": str(elastic_max_restarts(args))})
    if args.min_nodes is not None and "PET_RDZV_CONF" not in user_env:
        env.append({"name": "PET_RDZV_CONF", "value": f"last_call_timeout={LAST_CALL_TIMEOUT}"})
    return env


def inject_env(issues: IssueCollector, template: PodTemplate, targets: list[str],
               env: list[dict[str, Any]]) -> PodTemplate:
    """The training env added to the named sidecars and init containers of the training pods."""
    found = {c.get("name") for c in (template.sidecars or []) + (template.init_containers or [])}
    for target in targets:
        if target not in found:
            issues.add("env_injection", f'envInjection target podSet "{ROLE}" container "{target}" not found in '
                                        f"the pod template; sidecars and init containers: {sorted(found) or 'none'}")

    def inject(containers: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if containers is None:
            return None
        return [{**c, "env": upsert_env(list(c.get("env", [])), env)} if c.get("name") in targets else c
                for c in containers]

    return template.model_copy(update={"sidecars": inject(template.sidecars),
                                       "init_containers": inject(template.init_containers)})


class TorchFamily(Family):
    """torchrun on every pod of one Indexed Job, configured by PET_* env as Kubeflow Trainer's torch plugin."""

    component = "TorchTrainJob"
    args_type = TorchTrainJobArgs
    outputs_type = TorchOutputs
    reserved_env = {**PET_ENV, **C10D_ENV, **PROCESS_PER_POD_ENV}

    def roles(self, job: Derivation) -> list[TrainingRole]:
        name, args = job.name, job.args
        template = effective_template(args.runtime.node, args)
        nproc = "1" if not args.torchrun else resolve_num_proc_per_node(args.num_proc_per_node, template)
        job.derived["nproc"] = nproc
        gpus = gpu_count(template)
        if nproc.isdigit() and 0 < gpus < int(nproc):
            job.warnings.add("num_proc_per_node", f"{nproc} processes per pod on {gpus} GPUs: each process usually "
                                                  f"takes one GPU (its LOCAL_RANK), so ranks {gpus} to {int(nproc) - 1} "
                                                  f"of each pod would share or find none; set {gpus}, or \"auto\"")
        derived = torch_env(name, args, nproc, {e.name for e in template.env or ()})
        template = inject_env(job.issues, template, args.env_injection, derived)
        env = upsert_env(template_env(template), derived)
        node = container(template, env, ports=[{"containerPort": TRAINER_PORT}], extra_mounts=[])
        return [TrainingRole(ROLE, args.num_nodes, template, node)]

    def check(self, job: Derivation, roles: list[TrainingRole]) -> None:
        if not job.args.torchrun and job.args.num_proc_per_node not in ("auto", "1"):
            job.issues.add("num_proc_per_node", 'with torchrun: false each pod runs one process; use 1 (or "auto")')
        if not job.args.torchrun and job.args.rendezvous == Rendezvous.C10D.value:
            job.issues.add("rendezvous", "c10d is torchrun's rendezvous, and torchrun: false runs no torchrun (each "
                                         "process gets MASTER_ADDR, WORLD_SIZE and RANK): remove rendezvous, or set "
                                         "torchrun: true")

    def restart_refusal(self, job: Derivation) -> str | None:
        """A replaced pod rejoins only through torchrun's c10d rendezvous, which admits new members."""
        if not job.args.torchrun:
            return ("with torchrun: false each process joins the process group once, when training starts, so a "
                    "replaced pod cannot rejoin it")
        if job.args.rendezvous != Rendezvous.C10D.value:
            return ("with the static rendezvous each pod's rank and the world are fixed when training starts, so a "
                    "replaced pod cannot rejoin the running ranks: set rendezvous: c10d, with which the torchrun "
                    "agents rendezvous again when a pod is replaced")
        return None

    def elastic_refusal(self, job: Derivation) -> str | None:
        """Only torchrun's c10d rendezvous admits pods joining and leaving, re-forming the ranks each time."""
        if not job.args.torchrun:
            return ("with torchrun: false each process gets a fixed RANK and WORLD_SIZE: set torchrun: true and "
                    "rendezvous: c10d, or give num_nodes as a number")
        if job.args.rendezvous != Rendezvous.C10D.value:
            return ("the static rendezvous fixes PET_NNODES and each pod's rank: set rendezvous: c10d, whose "
                    "rendezvous admits pods joining and leaving, or give num_nodes as a number")
        return None

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> TorchOutputs:
        name, args = job.name, job.args
        return TorchOutputs.model_construct(
            service_name=name, job_name=job_name(name, ROLE), namespace=args.namespace, master_addr=master_addr(name),
            master_port=TRAINER_PORT, num_nodes=args.num_nodes, num_proc_per_node=job.derived["nproc"])


TORCH = TorchFamily()


class TorchTrainJob(TrainJobComponent):
    """Distributed PyTorch with torchrun on any cluster: headless Service `N` + Indexed Job `N-node-0`."""

    family = TORCH

    def __init__(self, name: str, args: TorchTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a TorchTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
