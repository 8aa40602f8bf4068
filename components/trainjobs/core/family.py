"""What a framework family declares, for the pipeline to drive (see trainjobs.pipeline.pipeline.derive).

A family is one module: a `Family` subclass that says what the family reserves (env names, role
names), what it checks, its training roles and the env each gets, its extra objects and its outputs,
plus the thin component class that names it. The pipeline runs the same steps for every family, as
Kubeflow Trainer's runtime framework runs its plugins (Validate, EnforceMLPolicy, ComponentBuilder),
and adds what every job has: the headless Service, initializers, extra roles, override fields, the
checks on names and on every derived object.
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.core.outputs import JobOutputs

__all__ = ["Derivation", "Family", "TrainingRole"]


@dataclass(frozen=True)
class TrainingRole:
    """One role of training pods, as a family declares it: its pods' template, main container and extras,
    and its place in the job. The core makes it a pod set (trainjobs.core.podsets.PodSetSpec)."""

    name: str
    pods: int
    template: PodTemplate
    container: dict[str, Any]
    extra_volumes: tuple[dict[str, Any], ...] = ()
    init_containers: tuple[dict[str, Any], ...] = ()
    dns_config: dict[str, Any] | None = None
    starts_after: str | None = None
    """A role whose pods must be ready before these start (an MPI launcher after its nodes' sshd)."""
    completes_job: bool = True
    """Whether these pods' completion completes the job (an MPI job ends with its launcher, not its nodes)."""


@dataclass
class Derivation:
    """The job being derived: what every hook reads, and where each reports what is wrong."""

    name: str
    args: TrainJobArgs
    """The job's arguments over its profile's defaults."""
    given: TrainJobArgs | None = None
    """The job's own arguments, before its profile's defaults (None: the same as `args`)."""
    issues: IssueCollector = field(default_factory=IssueCollector)
    warnings: IssueCollector = field(default_factory=IssueCollector)
    """What is allowed but likely not meant (more processes than GPUs): shown, and the job still derives."""
    derived: dict[str, Any] = field(default_factory=dict)
    """Values a hook works out for later hooks (e.g. the resolved processes per pod, for the outputs)."""

    @property
    def runtime(self) -> TrainingRuntime:
        return self.args.runtime


class Family:
    """Base of every framework family; a subclass sets the class attributes and the hooks it needs.

    Hooks run in this order: `roles` (the training roles: their templates, env and ports, which starts
    after which, which end the job), `check` (rules that need those roles), `objects` (extra objects such
    as a hostfile or a key Secret), `outputs`. Each gets the `Derivation` as `job`. A hook reports a
    problem with `job.issues.add(argument, message)`; the pipeline raises every problem at once, after all
    hooks ran, before anything registers. The core makes the roles pod sets; no family knows which
    backend or scheduler will take them.
    """

    component: ClassVar[str]
    """The component's class name: the Pulumi type token's last part, and the subject of its errors."""
    args_type: ClassVar[type[TrainJobArgs]]
    outputs_type: ClassVar[type[JobOutputs]]
    roles_used: ClassVar[tuple[str, ...]] = ("node",)
    """Roles the family's Jobs and objects are named after; no extra role may take these names."""
    reserved_env: ClassVar[Mapping[str, str]] = {}
    """Variables the family derives, each with the argument that sets it instead; user env may not set them."""

    def roles(self, job: Derivation) -> list[TrainingRole]:
        raise NotImplementedError

    def check(self, job: Derivation, roles: list[TrainingRole]) -> None:
        """Rules of the family beyond what the pipeline checks for every job."""

    def objects(self, job: Derivation, roles: list[TrainingRole]) -> list[dict[str, Any]]:
        """Extra objects of the job, registered before its Jobs."""
        return []

    def object_arguments(self, job: Derivation) -> dict[str, dict[tuple, str]]:
        """For refused content of `objects`: per object name, path prefix -> the argument behind it."""
        return {}

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> JobOutputs:
        raise NotImplementedError

    def restart_refusal(self, job: Derivation) -> str | None:
        """Why a training pod replaced alone (failure_policy.backoff_limit_per_index) could not rejoin the
        running ranks, or None when it can. Most families fix every rank's peers when the pods start."""
        return ("a replaced pod cannot rejoin the running ranks: the family fixes each rank and its peers "
                "when the job starts")

    def elastic_refusal(self, job: Derivation) -> str | None:
        """Why the job cannot run with a node range (min_nodes: pods joining and leaving while it trains),
        or None when it can. Most families fix the world size when the pods start."""
        return "the family fixes the number of processes and each one's rank when the job starts"

    def reserved_env_message(self, names: list[str]) -> str:
        """The error for user env that sets reserved variables, in Kubeflow Trainer's words."""
        instead = "; ".join(f"{n} comes from {self.reserved_env[n]}" for n in names)
        return f"must not have reserved envs, invalid envs configured: [{', '.join(names)}]. {instead}"
