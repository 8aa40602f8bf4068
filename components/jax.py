"""JAX family: `jax.distributed.initialize()` configured by JAX_* env, as Kubeflow Trainer's JAX plugin.

One Indexed Job `N-node-0` of `num_nodes` pods, one JAX process per pod; pod 0 is the coordinator.
JAX reads JAX_COORDINATOR_ADDRESS by itself; the training code passes JAX_NUM_PROCESSES and
JAX_PROCESS_ID to `jax.distributed.initialize()` (see docs/components.md).
"""

from typing import Annotated, Any

import pulumi
from pydantic import Field

from . import core
from .args import PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtimes
from .component import TrainJobComponent
from .errors import IssueCollector

ROLE = "node"
COORDINATOR_PORT = 29500


class JaxRuntime(TrainingRuntime):
    """A reusable JAX runtime: the template of the `node` pods."""

    node: PodTemplate = Field(default_factory=PodTemplate)


JAX_DISTRIBUTED = JaxRuntime(name="jax-distributed", node=PodTemplate(image="nvcr.io/nvidia/jax:25.10-py3"))
BUILTIN_RUNTIMES = builtin_runtimes("JAX", JAX_DISTRIBUTED)


class JaxTrainJobArgs(TrainJobArgs):
    """Arguments of JaxTrainJob."""

    runtime: Annotated[JaxRuntime, BUILTIN_RUNTIMES] = JAX_DISTRIBUTED


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
                     outputs={"service_name": name, "job_name": core.job_name(name, ROLE),
                              "coordinator_address": coordinator_address(name), "num_processes": args.num_nodes,
                              "namespace": args.namespace})


class JaxTrainJob(TrainJobComponent):
    """Multi-process JAX on any cluster: headless Service `N` + Indexed Job `N-node-0`."""

    args_type = JaxTrainJobArgs
    derive = staticmethod(derive_jax)

    service_name: pulumi.Output[str]
    """Headless Service (and pod DNS subdomain)."""
    job_name: pulumi.Output[str]
    """The Indexed Job running the JAX processes."""
    coordinator_address: pulumi.Output[str]
    """`<N>-node-0-0.<N>:29500`."""
    num_processes: pulumi.Output[int]
    """One JAX process per pod."""
    namespace: pulumi.Output[str | None]
    """Namespace given, or None for the provider's default."""

    def __init__(self, name: str, args: JaxTrainJobArgs | dict, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
