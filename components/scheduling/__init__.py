"""Scheduling integrations: how a job's pods reach the scheduler that places them.

The core hands over the job's finished objects (trainjobs.core.pipeline) and this package decorates them:
the pods' `schedulerName` and the Jobs' `suspend` for every job, then, when `gang_scheduler` names one,
that scheduler's module (`kueue`, `volcano`, `coscheduling` here) adds its labels, annotations and
objects so the pods that must run together are placed together. The core imports only this interface.

The gang of a job is its training pods (node pods, and an MPI launcher): they start together and
need each other. Initializers run before them, and extra roles beside them without being needed,
so neither is counted in the gang; each scheduler module still queues them (docs/scheduling.md).
"""

import importlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainjobs.core.args import GANG_SCHEDULERS, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.kube.quantity import parse_quantity

__all__ = ["Gang", "GangScheduler", "Scheduled", "gang_requests", "pod_templates", "schedule"]


@dataclass(frozen=True)
class Gang:
    """What a scheduler module decorates: the job's objects, and which Jobs hold the gang's pods."""

    name: str
    args: TrainJobArgs
    manifests: list[dict[str, Any]]
    members: tuple[str, ...]
    """Names of the objects (Jobs, or a JobSet) whose pods must run together."""
    issues: IssueCollector

    def member_objects(self) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["metadata"]["name"] in self.members and m["kind"] != "Service"]

    def pod_count(self) -> int:
        """Pods of the gang: each member Job's parallelism (a JobSet's replicated jobs, each times replicas)."""
        return sum(replicas * int(job_spec.get("parallelism", 1)) for replicas, job_spec, _ in self.member_pods())

    def member_pods(self) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """(Jobs of this shape, Job spec, pod template) for every Job shape of the gang."""
        found = []
        for obj in self.member_objects():
            if obj["kind"] == "Job":
                found.append((1, obj["spec"], obj["spec"]["template"]))
            elif obj["kind"] == "JobSet":
                for replicated in obj["spec"].get("replicatedJobs", []):
                    job_spec = replicated["template"]["spec"]
                    found.append((int(replicated.get("replicas", 1)), job_spec, job_spec["template"]))
        return found


@dataclass
class Scheduled:
    """The job's objects after scheduling, and Pulumi options some of them need."""

    manifests: list[dict[str, Any]]
    ignore_changes: dict[str, list[str]] = field(default_factory=dict)
    """Object name -> input paths Pulumi must not diff (fields another controller owns)."""

    def add_before_jobs(self, obj: dict[str, Any]) -> None:
        """An object the Jobs' pods need when they are created (a PodGroup), registered before them."""
        kinds = [m["kind"] for m in self.manifests]
        first = min((kinds.index(k) for k in ("Job", "JobSet") if k in kinds), default=len(kinds))
        self.manifests.insert(first, obj)


class GangScheduler:
    """One gang scheduler integration; a module of this package defines one as `SCHEDULER`."""

    name: str = ""

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        """Arguments this scheduler cannot honour, reported with the field and the fix."""

    def decorate(self, gang: Gang, scheduled: Scheduled) -> None:
        """Add the scheduler's labels, annotations and objects to `scheduled` (changed in place)."""
        raise NotImplementedError


def integration(name: str) -> GangScheduler:
    """The module of a gang scheduler named in GANG_SCHEDULERS, imported when first used."""
    return importlib.import_module(f"{__name__}.{name}").SCHEDULER


def schedule(name: str, args: TrainJobArgs, manifests: list[dict[str, Any]], members: list[str],
             issues: IssueCollector) -> Scheduled:
    """The job's objects with `scheduler_name`, `suspend` and the gang scheduler's part applied."""
    scheduled = Scheduled([_copy(m) for m in manifests])
    _check_combinations(args, issues)
    for template in pod_templates(scheduled.manifests):
        if args.scheduler_name:
            template["spec"]["schedulerName"] = args.scheduler_name
    if args.suspend is not None:
        for obj in scheduled.manifests:
            if obj["kind"] in ("Job", "JobSet"):
                obj["spec"]["suspend"] = args.suspend
    if args.gang_scheduler in GANG_SCHEDULERS:
        scheduler = integration(args.gang_scheduler)
        scheduler.check(args, issues)
        scheduler.decorate(Gang(name, args, scheduled.manifests, tuple(members), issues), scheduled)
    return scheduled


def _check_combinations(args: TrainJobArgs, issues: IssueCollector) -> None:
    """Scheduling arguments that only mean something with a gang scheduler that reads them."""
    if args.gang_scheduler is None:
        for field_name, what in (("queue", "a Kueue LocalQueue or a Volcano queue"),
                                 ("priority_class", "a Kueue WorkloadPriorityClass or a Volcano PodGroup's priority "
                                                    "(the pods' own priority is priority_class_name)"),
                                 ("schedule_timeout_seconds", "the coscheduling PodGroup's timeout")):
            if getattr(args, field_name) is not None:
                issues.add(field_name, f"is {what}, and no gang scheduler reads it: set gang_scheduler, or remove "
                                       f"{field_name}")
    elif args.schedule_timeout_seconds is not None and args.gang_scheduler != "coscheduling":
        issues.add("schedule_timeout_seconds", f"only the coscheduling PodGroup has a schedule timeout; "
                                               f"{args.gang_scheduler} has none: remove schedule_timeout_seconds")


def pod_templates(manifests: list[dict[str, Any]], names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Every pod template of the Jobs and JobSets among `manifests` (those named in `names`, if given)."""
    found = []
    for obj in manifests:
        if names is not None and obj["metadata"]["name"] not in names:
            continue
        if obj["kind"] == "Job":
            found.append(obj["spec"]["template"])
        elif obj["kind"] == "JobSet":
            found.extend(r["template"]["spec"]["template"] for r in obj["spec"].get("replicatedJobs", []))
    return found


def set_labels(target: dict[str, Any], labels: dict[str, str], key: str = "labels") -> None:
    """Add to a metadata block's labels (or annotations)."""
    target[key] = {**target.get(key, {}), **labels}


# --- what the gang requests -----------------------------------------------------------------------

def gang_requests(gang: Gang) -> dict[str, str]:
    """Total requests of the gang's pods per resource, as quantities (a PodGroup's minResources).

    Each pod requests the larger of its running containers' sum (main and native sidecars) and its
    largest plain init container, as the scheduler counts it.
    """
    totals: dict[str, Decimal] = {}
    for replicas, job_spec, template in gang.member_pods():
        pods = replicas * int(job_spec.get("parallelism", 1))
        for resource, amount in _pod_requests(template["spec"]).items():
            totals[resource] = totals.get(resource, Decimal(0)) + amount * pods
    return {resource: _quantity(resource, amount) for resource, amount in sorted(totals.items()) if amount}


def _pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    running: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    sidecars = [c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    for container in [*pod.get("containers", []), *sidecars]:
        for resource, amount in _requests(container).items():
            running[resource] = running.get(resource, Decimal(0)) + amount
    for container in pod.get("initContainers", []):
        if container.get("restartPolicy") != "Always":
            for resource, amount in _requests(container).items():
                init_peak[resource] = max(init_peak.get(resource, Decimal(0)), amount)
    return {r: max(running.get(r, Decimal(0)), init_peak.get(r, Decimal(0))) for r in {*running, *init_peak}}


def _requests(container: dict[str, Any]) -> dict[str, Decimal]:
    """A container's requests; a limit alone counts as the request, as Kubernetes defaults it."""
    resources = container.get("resources") or {}
    given = {**resources.get("limits", {}), **resources.get("requests", {})}
    return {name: parse_quantity(value) for name, value in given.items() if isinstance(value, (str, int, float))}


def _quantity(resource: str, amount: Decimal) -> str:
    if amount == amount.to_integral_value():
        return str(int(amount))
    if resource == "cpu":
        return f"{int((amount * 1000).to_integral_value())}m"
    return str(int(amount.to_integral_value(rounding="ROUND_CEILING")))


def _copy(value: Any) -> Any:
    """A copy of the manifest's dicts and lists (leaves, which may be placeholders, are shared)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value

