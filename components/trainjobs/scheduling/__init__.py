"""Scheduling integrations: how a job's pods reach the scheduler that places them.

The core hands over the job's pod sets before any object is built (trainjobs.core.podsets.Workload) and
this package decorates them: the pods' `schedulerName` and the registered objects' `suspend` for every
job, then, when `gang_scheduler` names one, that scheduler's labels, annotations and objects, so the pods
that must run together are placed together. The backend then builds objects that carry them all.

One registry, `trainjobs.registry.GANG_SCHEDULERS`: it names this package's modules, each of which
registers its `GangScheduler` by name when imported (`register`); they are imported when a scheduler is
first looked up, and one defined elsewhere registers itself the same way. The `gang_scheduler` argument accepts the registered names,
and its description lists them (`summaries`). Each declares the arguments it reads (`reads`), from which
this package refuses an argument that no chosen scheduler reads; its own `check` refuses the rest.

The gang of a job is its training pods (node pods, and an MPI launcher): they start together and
need each other. Initializers run before them, and extra roles beside them without being needed,
so neither is counted in the gang; each scheduler module still queues them (docs/scheduling.md).

A job's `placement` is a property of its training pod sets: the chosen scheduler renders it in
`decorate` and reads it back in `placed`; without one, `placement.py` leaves it to the backend (JobSet's
exclusive placement) or to pod affinity. `multikueue` implies Kueue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from trainjobs.kube.naming import shown
from trainjobs.kube.requests import ClaimTemplates, total_requests
from trainjobs.registry import GANG_SCHEDULERS
from trainjobs.scheduling import placement

if TYPE_CHECKING:   # for annotations only
    from trainjobs.backends import Backend, PodSet
    from trainjobs.core.args import TrainJobArgs
    from trainjobs.core.errors import IssueCollector
    from trainjobs.core.podsets import PodSetSpec, Workload

__all__ = ["Gang", "GangScheduler", "Reads", "integration", "names", "placement_of", "register", "schedule", "summaries",
           "unregister"]


@dataclass(frozen=True)
class Gang:
    """What a scheduler decorates: the job's pod sets, which of them must run together, and the backend
    that will hold them (which start order it keeps, which objects hold which pod sets)."""

    workload: Workload
    backend: Backend
    issues: IssueCollector

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def args(self) -> TrainJobArgs:
        return self.workload.args

    def members(self) -> list[PodSetSpec]:
        """The pod sets whose pods must run together (the training roles')."""
        return self.workload.gang()

    def others(self) -> list[PodSetSpec]:
        return [p for p in self.workload.pod_sets if not p.gang]

    def first_together(self) -> list[PodSetSpec]:
        """The gang's pod sets created at once. A set the backend starts only after another member is
        ready (a JobSet's MPI launcher after its nodes) joins the group then, and cannot be waited for
        before they are placed."""
        members = {p.role for p in self.members()}
        return [p for p in self.members()
                if not any(a.role in members and a.status in self.backend.start_order for a in p.starts_after)]

    def min_member(self) -> int:
        return sum(p.count for p in self.first_together())

    def min_resources(self) -> dict[str, str]:
        """What the pods counted in min_member request together (a PodGroup's minResources), with the devices
        they claim."""
        together = self.first_together()
        claims = ClaimTemplates(p.claim_template for p in together if p.claim_template)
        return total_requests(((p.count, p.template["spec"], self.args.namespace) for p in together), claims)

    def holders(self) -> list[str]:
        """The registered objects that will hold the gang's pods (Jobs, or one JobSet), by name."""
        return self.backend.holders(self.workload, self.members())


@dataclass(frozen=True)
class Reads:
    """What an argument is to the scheduler that reads it."""

    meaning: str
    """e.g. "a Kueue LocalQueue", for when no gang scheduler is chosen."""
    only_here: str
    """e.g. "only the coscheduling PodGroup has a schedule timeout", for when another one is."""


class GangScheduler:
    """One gang scheduler integration; a module of this package registers one."""

    summary: str = ""
    """What it does with the gang, in a few words, for the `gang_scheduler` argument's description."""
    reads: Mapping[str, Reads] = {}
    """The scheduling arguments it reads beyond gang_scheduler (queue, priority_class, ...)."""

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        """Arguments this scheduler cannot honour, reported with the field and the fix."""

    def decorate(self, gang: Gang) -> None:
        """Add the scheduler's labels, annotations and objects to the gang's workload (changed in place)."""
        raise NotImplementedError

    def placed(self, pod_set: PodSet, manifests: Iterable[Mapping[str, Any]]) -> str | None:
        """The placement this scheduler gives `pod_set`, read back from the rendered objects, for the tools."""
        return None


register, unregister = GANG_SCHEDULERS.register, GANG_SCHEDULERS.unregister
names, summaries = GANG_SCHEDULERS.names, GANG_SCHEDULERS.summaries


def _schedulers() -> dict[str, GangScheduler]:
    return GANG_SCHEDULERS.members()


def integration(name: str) -> GangScheduler:
    return _schedulers()[name]


def schedule(workload: Workload, backend: Backend, issues: IssueCollector) -> None:
    """The workload with `scheduler_name`, `suspend` and the gang scheduler's part applied, in place
    (pod templates, labels and objects of this job alone; no value shared with the arguments changes)."""
    args = workload.args
    if args.scheduler_name:
        for pod_set in workload.pod_sets:
            pod_set.template["spec"]["schedulerName"] = args.scheduler_name
    if args.suspend is not None:
        workload.suspend = args.suspend
    chosen = args.gang_scheduler
    if args.multikueue:   # MultiKueue dispatches what Kueue admits
        if chosen not in (None, MULTIKUEUE_SCHEDULER):
            issues.add("multikueue", f"MultiKueue dispatches jobs Kueue admits from a LocalQueue, and "
                                     f"gang_scheduler is {shown(chosen)}: set gang_scheduler \"kueue\" (or leave "
                                     "it unset), or remove multikueue")
            return
        chosen = MULTIKUEUE_SCHEDULER
    if chosen is None:
        _check_unread(args, issues)
        placement.place_unscheduled(workload, backend, issues)
        return
    scheduler = integration(chosen)
    scheduler.check(args, issues)
    _check_unread(args, issues, scheduler, chosen)
    scheduler.decorate(Gang(workload, backend, issues))


MULTIKUEUE_SCHEDULER = "kueue"
"""The gang scheduler `multikueue` implies."""


def placement_of(pod_set: PodSet, manifests: Iterable[Mapping[str, Any]]) -> str | None:
    """How `pod_set` is placed, read back from the rendered objects: by the gang scheduler that placed it
    (Kueue's annotations, Volcano's PodGroup), else by JobSet's exclusive placement or pod affinity; None
    when nothing places it."""
    manifests = list(manifests)
    for scheduler in _schedulers().values():
        found = scheduler.placed(pod_set, manifests)
        if found:
            return found
    return placement.placed_unscheduled(pod_set)


def _check_unread(args: TrainJobArgs, issues: IssueCollector, chosen: GangScheduler | None = None,
                  chosen_name: str | None = None) -> None:
    """Scheduling arguments only a gang scheduler reads, given when none is chosen or when the chosen one
    does not read them (and its own check said nothing about them)."""
    readers: dict[str, list[Reads]] = {}
    for scheduler in _schedulers().values():
        for field_name, reads in scheduler.reads.items():
            readers.setdefault(field_name, []).append(reads)
    reported = {issue.field for issue in issues.issues}
    for field_name, reads in readers.items():
        if getattr(args, field_name) is None or field_name in reported:
            continue
        if chosen is None:
            issues.add(field_name, f"is {' or '.join(r.meaning for r in reads)}, and no gang scheduler reads it: "
                                   f"set gang_scheduler, or remove {field_name}")
        elif field_name not in chosen.reads:
            issues.add(field_name, f"{'; '.join(r.only_here for r in reads)}; {chosen_name} has none: "
                                   f"remove {field_name}")


def set_labels(target: dict[str, Any], labels: dict[str, str], key: str = "labels") -> None:
    """Add to a metadata block's labels (or annotations)."""
    target[key] = {**target.get(key, {}), **labels}
