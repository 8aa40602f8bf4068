"""JAX family: `jax.distributed.initialize()` configured by JAX_* env, as Kubeflow Trainer's JAX plugin.

One Indexed Job `N-node-0` of `num_nodes` pods, one JAX process per pod; pod 0 is the coordinator.
JAX reads JAX_COORDINATOR_ADDRESS by itself; the training code passes JAX_NUM_PROCESSES and
JAX_PROCESS_ID to `jax.distributed.initialize()` (see docs/components.md).
"""

from typing import Any, Optional

import pulumi
from pydantic import Field, field_validator

from . import core
from .args import PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtime, resolve_input_types
from .component import TrainJobComponent
from .errors import IssueCollector
from .outputs import JobOutputs

ROLE = "node"
COORDINATOR_PORT = 29500


class JaxRuntime(TrainingRuntime):
    """A reusable JAX runtime: the template of the `node` pods."""

    node: Optional[PodTemplate] = Field(default_factory=PodTemplate)
    """Template of the JAX pods."""


resolve_input_types(JaxRuntime)
JAX_DISTRIBUTED = JaxRuntime(name="jax-distributed", node=PodTemplate(image="nvcr.io/nvidia/jax:25.10-py3"))
BUILTIN_RUNTIMES = {JAX_DISTRIBUTED.name: JAX_DISTRIBUTED}


class JaxTrainJobArgs(TrainJobArgs):
    """Arguments of JaxTrainJob."""

    runtime: Optional[JaxRuntime] = JAX_DISTRIBUTED
    """A JaxRuntime, or the name of a built-in one. Default: jax-distributed."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return builtin_runtime(value, "JAX", BUILTIN_RUNTIMES)


resolve_input_types(JaxTrainJobArgs)


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
    return f"{core.pod_dns_name(name, ROLE, 0)}:{COORDINATOR_PORT}"


def derive_jax(name: str, args: JaxTrainJobArgs) -> core.TrainJobPlan:
    """The objects of a JAX job, or TrainJobError listing every problem."""
    issues = IssueCollector()
    template = core.effective_template(args.runtime.node, args)
    core.check_template(issues, template, ROLE)
    core.check_reserved_env(issues, RESERVED_ENV, template)
    derived = [
        {"name": "JAX_NUM_PROCESSES", "value": str(args.num_nodes)},
        {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": core.COMPLETION_INDEX_FIELD}}},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": coordinator_address(name)},
    ]
    env = core.upsert_env(core.template_env(template), derived)
    node = core.container(template, env, ports=[{"containerPort": COORDINATOR_PORT}], extra_mounts=[])
    return core.plan("JaxTrainJob", name, args, args.runtime, issues,
                     [core.TrainingRole(ROLE, args.num_nodes, template, node)],
                     outputs=JaxOutputs.model_construct(
                         service_name=name, job_name=core.job_name(name, ROLE), namespace=args.namespace,
                         coordinator_address=coordinator_address(name), num_processes=args.num_nodes))


class JaxTrainJob(TrainJobComponent):
    """Multi-process JAX on any cluster: headless Service `N` + Indexed Job `N-node-0`."""

    args_type = JaxTrainJobArgs
    outputs_type = JaxOutputs
    derive = staticmethod(derive_jax)

    def __init__(self, name: str, args: JaxTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a JaxTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
