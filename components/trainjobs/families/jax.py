"""JAX family: `jax.distributed.initialize()` configured by JAX_* env, as Kubeflow Trainer's JAX plugin.

One Indexed Job `N-node-0` of `num_nodes` pods, one JAX process per pod; pod 0 is the coordinator.
JAX reads JAX_COORDINATOR_ADDRESS by itself; the training code passes JAX_NUM_PROCESSES and
JAX_PROCESS_ID to `jax.distributed.initialize()` (see docs/components.md).
"""

from typing import Any, Optional

import pulumi
from pydantic import Field, field_validator

from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtime, shared_runtime
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.kube.manifests import completion_index_env
from trainjobs.core.objects import container, effective_template, template_env
from trainjobs.core.naming import job_name, pod_dns_name
from trainjobs.core.outputs import JobOutputs
from trainjobs.kube.templates import upsert_env

ROLE = "node"
COORDINATOR_PORT = 29500


class JaxRuntime(TrainingRuntime):
    """A reusable JAX runtime: the template of the `node` pods."""

    node: Optional[PodTemplate] = Field(default_factory=PodTemplate)
    """Template of the JAX pods."""


JAX_DISTRIBUTED = JaxRuntime(name="jax-distributed", node=PodTemplate(image="nvcr.io/nvidia/jax:25.10-py3"))
BUILTIN_RUNTIMES = {JAX_DISTRIBUTED.name: JAX_DISTRIBUTED}


class JaxTrainJobArgs(TrainJobArgs):
    """Arguments of JaxTrainJob."""

    runtime: Optional[JaxRuntime] = shared_runtime(JAX_DISTRIBUTED)
    """A JaxRuntime, or the name of a built-in one. Default: jax-distributed."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return builtin_runtime(value, "JAX", BUILTIN_RUNTIMES)


class JaxOutputs(JobOutputs):
    """Outputs of JaxTrainJob."""

    coordinator_address: str
    """`<N>-node-0-0.<N>:29500`."""
    num_processes: int
    """One JAX process per pod."""


RESERVED_ENV = {
    "JAX_NUM_PROCESSES": "num_nodes",
    "JAX_PROCESS_ID": "each pod's completion index",
    "JAX_COORDINATOR_ADDRESS": "the job name (pod 0 of the node Job)",
}


def coordinator_address(name: str) -> str:
    return f"{pod_dns_name(name, ROLE, 0)}:{COORDINATOR_PORT}"


class JaxFamily(Family):
    """One JAX process per pod of one Indexed Job, configured by JAX_* env as Kubeflow Trainer's JAX plugin."""

    component = "JaxTrainJob"
    args_type = JaxTrainJobArgs
    outputs_type = JaxOutputs
    reserved_env = RESERVED_ENV   # a deviation: Kubeflow lets user env override them silently

    def roles(self, job: Derivation) -> list[TrainingRole]:
        name, args = job.name, job.args
        template = effective_template(args.runtime.node, args)
        derived = [
            {"name": "JAX_NUM_PROCESSES", "value": str(args.num_nodes)},
            completion_index_env("JAX_PROCESS_ID"),
            {"name": "JAX_COORDINATOR_ADDRESS", "value": coordinator_address(name)},
        ]
        env = upsert_env(template_env(template), derived)
        node = container(template, env, ports=[{"containerPort": COORDINATOR_PORT}], extra_mounts=[])
        return [TrainingRole(ROLE, args.num_nodes, template, node)]

    def restart_refusal(self, job: Derivation) -> str | None:
        return ("jax.distributed.initialize fixes the number of processes and each process id when training "
                "starts, so a replaced pod cannot rejoin the running processes")

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> JaxOutputs:
        name, args = job.name, job.args
        return JaxOutputs.model_construct(service_name=name, job_name=job_name(name, ROLE), namespace=args.namespace,
                                          coordinator_address=coordinator_address(name),
                                          num_processes=args.num_nodes)


JAX = JaxFamily()


class JaxTrainJob(TrainJobComponent):
    """Multi-process JAX on any cluster: headless Service `N` + Indexed Job `N-node-0`."""

    family = JAX

    def __init__(self, name: str, args: JaxTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a JaxTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
