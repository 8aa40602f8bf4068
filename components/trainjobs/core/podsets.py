"""A job's pods before any object holds them: the write side of the pod-set model.

As Kubeflow Trainer's runtime framework builds its pod sets before a JobSet exists, the pipeline
(trainjobs.pipeline.pipeline) describes every role's pods as a `PodSetSpec`: the role, how many pods, their
pod template and the Job-level rules they run under (completion mode, backoff, failure policy), when
they start (after which role is Ready or Complete), whether they belong to the gang, and whether
their completion completes the job. Families declare their roles (trainjobs.core.family.TrainingRole)
and the pipeline makes them pod sets; the failure policy, the override fields and the gang scheduler
(trainjobs.scheduling) decorate the pod sets and the `Workload` around them; only then does the
chosen backend (trainjobs.backends) materialize them, as Indexed Jobs or as one JobSet, with its own
object shapes and names.

The read side is `trainjobs.backends.PodSet`: what a registered object makes, read back from it by
the backend that owns it, for every tool. They are two classes because they answer two questions:
a `PodSetSpec` is mutable and exists before any name or object (a scheduler adds a label to it); a
`PodSet` is read from finished objects, which may come from a cluster or another program, and knows
the controller's names. A `PodSetSpec` never survives materialization.
"""

from dataclasses import dataclass, field
from typing import Any

from trainjobs.core.args import Placement, TrainJobArgs

__all__ = ["COMPLETE", "INITIALIZER_ARGUMENTS", "INITIALIZER_ROLES", "READY", "PodSetSpec", "StartAfter", "Workload"]

READY = "Ready"
"""The pods of the role started after are running and ready (an MPI launcher after its nodes' sshd)."""
COMPLETE = "Complete"
"""The role started after has completed (training after the initializers)."""
INITIALIZER_ROLES = ("dataset-initializer", "model-initializer")
"""The roles the pipeline adds before training when a job asks for them (trainjobs.pipeline.initializers)."""
INITIALIZER_ARGUMENTS = dict(zip(INITIALIZER_ROLES, ("dataset_initializer", "model_initializer")))
"""Each initializer role's argument."""


@dataclass(frozen=True)
class StartAfter:
    role: str
    status: str
    """READY or COMPLETE."""


@dataclass(slots=True)
class PodSetSpec:
    """One role's pods, as every backend will run them: decorated in place until a backend builds them."""

    role: str
    count: int
    """Pods, all running at once, each with its index (hostname `<job>-<index>`)."""
    template: dict[str, Any]
    """The pod template: `metadata` (labels, annotations) and `spec` (a PodSpec), plain data."""
    rules: dict[str, Any]
    """Job-level rules, in batch/v1 JobSpec fields: completionMode, backoffLimit, podFailurePolicy,
    backoffLimitPerIndex, activeDeadlineSeconds, ttlSecondsAfterFinished, and the job_spec_overrides."""
    labels: dict[str, str]
    """Labels of the object that holds these pods (the role's Job, or the replicated job)."""
    annotations: dict[str, str]
    """Annotations of that object, with how Pulumi awaits it (waitFor, timeoutSeconds)."""
    starts_after: tuple[StartAfter, ...] = ()
    gang: bool = False
    """Training pods: they run together (the gang a gang scheduler places whole) and get the failure
    policy's exit-code rules and the override fields."""
    completes_job: bool = False
    """Their completion completes the job (JobSet `successPolicy`)."""
    separate: bool = False
    """Pods beside the job (extra roles): registered on their own, outside a backend's workload object."""
    placement: Placement | None = None
    """Where these pods land together (the job's placement, on its training pods): the gang scheduler
    renders it when it decorates, or, without one, the backend or pod affinity (trainjobs.scheduling)."""
    claim_template: dict[str, Any] | None = None
    """The ResourceClaimTemplate each pod's device claim is made from (`resourceClaims` in the template), when
    the role claims devices: registered before the pods."""


@dataclass(slots=True)
class Workload:
    """Every pod set of a job, and what applies to every object a backend registers to run them."""

    name: str
    """The job's name `N`, which every object is named after."""
    args: TrainJobArgs
    """The job's arguments over its profile's defaults."""
    given: TrainJobArgs
    """The job's own arguments, before its profile's: what the job itself asks (a profile's default that a
    backend cannot act on, such as max_restarts under `jobs`, is not the job's request)."""
    pod_sets: list[PodSetSpec]
    """Initializers, then the training roles in the family's order, then extra roles."""
    labels: dict[str, str] = field(default_factory=dict)
    """Added to every registered object that runs pods (Kueue's queue name), not to the pods."""
    suspend: bool | None = None
    """`spec.suspend` of every registered object that runs pods; None leaves it unset."""
    ignore_changes: tuple[str, ...] = ()
    """Input paths of those objects Pulumi must not diff (fields another controller owns)."""
    objects_before: list[dict[str, Any]] = field(default_factory=list)
    """Objects the pods need when they are created (a PodGroup), registered before them."""
    needs: tuple[dict[str, Any], ...] = ()
    """The objects beside the pods that they read (the MPI hostfile and key, the workspace claim): what a
    dispatcher that copies only the workload object to another cluster would leave behind."""
    managed_by: str | None = None
    """`spec.managedBy` of every registered object that runs pods (MultiKueue's), None leaves it unset."""
    service: bool = True
    """Whether the job registers its headless Service; False when the backend's controller makes it where
    the pods run (a JobSet dispatched by MultiKueue to a worker cluster)."""

    def gang(self) -> list[PodSetSpec]:
        return [p for p in self.pod_sets if p.gang]
