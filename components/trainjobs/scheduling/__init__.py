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
from functools import cached_property
from typing import Any

from trainjobs.backends.jobset import child_job_name
from trainjobs.core.args import GANG_SCHEDULERS, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.backends import pod_count, total_requests

__all__ = ["Gang", "GangScheduler", "PodSet", "Scheduled", "pod_sets", "pod_templates", "schedule"]


@dataclass(frozen=True)
class PodSet:
    """Pods of one shape: a Job, or a replicated job of a JobSet (each of its Jobs alike)."""

    job_name: str
    """The Job that runs them (for a JobSet, the name its controller gives the first Job)."""
    owner: dict[str, Any]
    """The registered object holding them: the Job, or the JobSet."""
    jobs: int
    job_spec: dict[str, Any]
    starts_after: tuple[str, ...] = ()
    """Job names of the pod sets that must be ready or complete before these pods are created."""

    @property
    def template(self) -> dict[str, Any]:
        return self.job_spec["template"]

    def as_jobs(self) -> list[dict[str, Any]]:
        """The pod set as the Jobs that run it, for counting pods and requests."""
        return [{"apiVersion": "batch/v1", "kind": "Job", "spec": self.job_spec}] * self.jobs


def pod_sets(manifests: list[dict[str, Any]]) -> list[PodSet]:
    """Every pod set of the Jobs and JobSets among `manifests`, in order."""
    found = []
    for obj in manifests:
        if obj["kind"] == "Job":
            found.append(PodSet(obj["metadata"]["name"], obj, 1, obj["spec"]))
        elif obj["kind"] == "JobSet":
            jobset = obj["metadata"]["name"]
            for replicated in obj["spec"].get("replicatedJobs", []):
                after = tuple(child_job_name(jobset, d["name"], 0) for d in replicated.get("dependsOn", []))
                found.append(PodSet(child_job_name(jobset, replicated["name"], 0), obj,
                                    int(replicated.get("replicas", 1)), replicated["template"]["spec"], after))
    return found


@dataclass(frozen=True)
class Gang:
    """What a scheduler module decorates: the job's objects, and which of their pods must run together."""

    name: str
    args: TrainJobArgs
    manifests: list[dict[str, Any]]
    members: tuple[str, ...]
    """Names of the Jobs whose pods must run together (the training roles')."""
    issues: IssueCollector

    @cached_property
    def all_sets(self) -> list[PodSet]:
        return pod_sets(self.manifests)

    def member_sets(self) -> list[PodSet]:
        return [p for p in self.all_sets if p.job_name in self.members]

    def member_objects(self) -> list[dict[str, Any]]:
        """The registered objects holding the gang's pods (Jobs, or one JobSet)."""
        owners: list[dict[str, Any]] = []
        for pod_set in self.member_sets():
            if not any(pod_set.owner is o for o in owners):
                owners.append(pod_set.owner)
        return owners

    def first_together(self) -> list[PodSet]:
        """The gang's pod sets created at once. A set that starts after another member (a JobSet's MPI
        launcher after its nodes are ready) is created only once those run: it joins the group then,
        and cannot be waited for before they are placed."""
        return [p for p in self.member_sets() if not set(p.starts_after) & set(self.members)]

    def min_member(self) -> int:
        return pod_count(job for p in self.first_together() for job in p.as_jobs())

    def min_resources(self) -> dict[str, str]:
        """What the pods counted in min_member request together (a PodGroup's minResources)."""
        return total_requests(job for p in self.first_together() for job in p.as_jobs())

    def member_templates(self) -> list[dict[str, Any]]:
        return [p.template for p in self.member_sets()]

    def other_templates(self) -> list[dict[str, Any]]:
        return [p.template for p in self.all_sets if p.job_name not in self.members]


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

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        """Arguments this scheduler cannot honour, reported with the field and the fix."""

    def decorate(self, gang: Gang, scheduled: Scheduled) -> None:
        """Add the scheduler's labels, annotations and objects to `scheduled` (changed in place)."""
        raise NotImplementedError


def integration(name: str) -> GangScheduler:
    """The integration of a gang scheduler named in GANG_SCHEDULERS, its module imported when first used."""
    return importlib.import_module(f"{__name__}.{name}").SCHEDULER


def schedule(name: str, args: TrainJobArgs, manifests: list[dict[str, Any]], members: list[str],
             issues: IssueCollector) -> Scheduled:
    """The job's objects with `scheduler_name`, `suspend` and the gang scheduler's part applied.

    The objects are the ones the pipeline has just built for this job alone, and are decorated in
    place (metadata, pod specs and Job specs get keys; no value shared with the arguments is changed).
    """
    _check_combinations(args, issues)
    scheduled = Scheduled(list(manifests))
    if args.scheduler_name is None and args.suspend is None and args.gang_scheduler is None:
        return scheduled
    if args.scheduler_name:
        for template in pod_templates(scheduled.manifests):
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


def pod_templates(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod template of the Jobs and JobSets among `manifests`."""
    return [p.template for p in pod_sets(manifests)]


def set_labels(target: dict[str, Any], labels: dict[str, str], key: str = "labels") -> None:
    """Add to a metadata block's labels (or annotations)."""
    target[key] = {**target.get(key, {}), **labels}
