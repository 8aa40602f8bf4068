"""XGBoost family: xgboost's collective configured by DMLC_* env, as Kubeflow Trainer's XGBoost plugin.

One Indexed Job `N-node-0` of `num_nodes` pods. Nothing in the image starts the tracker: the
training code of the pod with DMLC_TASK_ID 0 starts xgboost's RabitTracker on DMLC_TRACKER_PORT,
and every worker joins it at DMLC_TRACKER_URI (see docs/components.md).
"""

from typing import Any, Optional

import pulumi
from pydantic import Field, field_validator

from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtime, shared_runtime
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.kube.manifests import completion_index_env
from trainjobs.core.objects import container, effective_template, gpu_count, template_env
from trainjobs.core.naming import job_name, pod_dns_name
from trainjobs.core.outputs import JobOutputs
from trainjobs.kube.templates import upsert_env

ROLE = "node"
TRACKER_PORT = 29500


class XGBoostRuntime(TrainingRuntime):
    """A reusable XGBoost runtime: the template of the `node` pods."""

    node: Optional[PodTemplate] = Field(default_factory=PodTemplate)
    """Template of the XGBoost worker pods."""


XGBOOST_DISTRIBUTED = XGBoostRuntime(name="xgboost-distributed",
                                     node=PodTemplate(image="ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"))
BUILTIN_RUNTIMES = {XGBOOST_DISTRIBUTED.name: XGBOOST_DISTRIBUTED}


class XGBoostTrainJobArgs(TrainJobArgs):
    """Arguments of XGBoostTrainJob."""

    runtime: Optional[XGBoostRuntime] = shared_runtime(XGBOOST_DISTRIBUTED)
    """An XGBoostRuntime, or the name of a built-in one. Default: xgboost-distributed (image
    ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0, no command)."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return builtin_runtime(value, "XGBoost", BUILTIN_RUNTIMES)


class XGBoostOutputs(JobOutputs):
    """Outputs of XGBoostTrainJob."""

    tracker_uri: str
    """DNS name of the pod whose code runs the tracker (DMLC_TASK_ID 0): `<N>-node-0-0.<N>`."""
    tracker_port: int
    """Port the tracker listens on (29500)."""
    num_workers: int
    """DMLC_NUM_WORKER: `num_nodes` × GPUs per pod (one worker per GPU, one per CPU pod)."""


RESERVED_ENV = {
    "DMLC_TRACKER_URI": "the job name (pod 0 of the node Job)",
    "DMLC_TRACKER_PORT": f"the tracker port {TRACKER_PORT}",
    "DMLC_TASK_ID": "each pod's completion index",
    "DMLC_NUM_WORKER": "num_nodes × the GPUs of each pod (at least 1)",
}


def tracker_uri(name: str) -> str:
    return pod_dns_name(name, ROLE, 0)


class XGBoostFamily(Family):
    """xgboost workers on every pod of one Indexed Job, configured by DMLC_* env as Kubeflow Trainer's
    XGBoost plugin."""

    component = "XGBoostTrainJob"
    args_type = XGBoostTrainJobArgs
    outputs_type = XGBoostOutputs
    reserved_env = RESERVED_ENV

    def roles(self, job: Derivation) -> list[TrainingRole]:
        name, args = job.name, job.args
        template = effective_template(args.runtime.node, args)
        # One worker per GPU on GPU pods, one per pod otherwise, from the pod's merged resources.
        num_workers = args.num_nodes * max(1, gpu_count(template))
        job.derived["num_workers"] = num_workers
        derived = [
            {"name": "DMLC_TRACKER_URI", "value": tracker_uri(name)},
            {"name": "DMLC_TRACKER_PORT", "value": str(TRACKER_PORT)},
            completion_index_env("DMLC_TASK_ID"),
            {"name": "DMLC_NUM_WORKER", "value": str(num_workers)},
        ]
        env = upsert_env(template_env(template), derived)
        node = container(template, env, ports=[{"containerPort": TRACKER_PORT}], extra_mounts=[])
        return [TrainingRole(ROLE, args.num_nodes, template, node)]

    def restart_refusal(self, job: Derivation) -> str | None:
        return ("the tracker on rank 0 assigns every worker its rank once, when training starts, so a replaced "
                "pod cannot rejoin the running workers")

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> XGBoostOutputs:
        name, args = job.name, job.args
        return XGBoostOutputs.model_construct(service_name=name, job_name=job_name(name, ROLE),
                                              namespace=args.namespace, tracker_uri=tracker_uri(name),
                                              tracker_port=TRACKER_PORT, num_workers=job.derived["num_workers"])

    def reserved_env_message(self, names: list[str]) -> str:
        """Kubeflow's message for each name, with what sets the variable instead."""
        return "; ".join(f"{n} is reserved for the XGBoost runtime (it comes from {self.reserved_env[n]})"
                         for n in names)


XGBOOST = XGBoostFamily()


class XGBoostTrainJob(TrainJobComponent):
    """Distributed XGBoost on any cluster: headless Service `N` + Indexed Job `N-node-0`."""

    family = XGBOOST

    def __init__(self, name: str, args: XGBoostTrainJobArgs,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: an XGBoostTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
