"""Backends: what creates a job's pods, chosen by the `backend` argument.

The core builds one Indexed Job per role, the same for every backend; a backend then decides what is
registered to run them. `jobs` registers the Jobs themselves; `jobset` wraps them into one JobSet
whose controller creates the very same Jobs. A backend is one module here with a `BACKEND`
instance; the core looks it up by name and knows none of them.
"""

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from trainjobs.core.args import TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import IssueCollector

__all__ = ["Assembly", "Backend", "Workload", "backend", "controller_jobs", "replace_on_changes", "workload_kinds"]


@dataclass(frozen=True)
class Workload:
    """The Jobs a job runs, as the core built them, and what their order and outcome depend on."""

    name: str
    args: TrainJobArgs
    runtime: TrainingRuntime
    jobs: tuple[dict[str, Any], ...]
    """The training roles' Jobs, in the family's order."""
    prerequisites: tuple[dict[str, Any], ...] = ()
    """Jobs that must complete before training starts (the initializers)."""
    start_after: Mapping[str, str] = field(default_factory=dict)
    """Role -> the role whose pods must be ready before its pods start (an MPI launcher after its nodes)."""
    success_roles: tuple[str, ...] = ()
    """Roles whose completion completes the job; empty: every training role."""


@dataclass(frozen=True)
class Assembly:
    """What a backend registers for the workload, in apply order, and (dependent, prerequisite) names
    Pulumi orders them by."""

    objects: tuple[dict[str, Any], ...]
    ordering: tuple[tuple[str, str], ...] = ()


class Backend(Protocol):
    kinds: tuple[str, ...]
    """The kinds of object this backend registers to run pods."""
    replace_on_changes: tuple[str, ...]
    """Fields of those objects that cannot change in place: a change replaces the object under Pulumi."""

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        """What the job asks of its backend that this one cannot do, or that its controller refuses."""

    def assemble(self, workload: Workload) -> Assembly:
        """The objects that run the workload's Jobs."""

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The Jobs a controller creates from `manifest` when it is this backend's object, else None."""


def _backends() -> dict[str, Backend]:
    from . import jobs, jobset
    return {"jobs": jobs.BACKEND, "jobset": jobset.BACKEND}


def backend(name: str) -> Backend:
    return _backends()[name]


def workload_kinds() -> tuple[str, ...]:
    """Every kind a backend registers to run pods: under Pulumi these wait for the job's other objects."""
    return tuple(dict.fromkeys(kind for b in _backends().values() for kind in b.kinds))


def replace_on_changes(kind: str) -> list[str]:
    """The fields whose change replaces an object of `kind` a backend registers (for Pulumi)."""
    return [f for b in _backends().values() if kind in b.kinds for f in b.replace_on_changes]


def controller_jobs(manifests: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The manifests with each backend object replaced by the Jobs its controller creates from it: what
    runs on a cluster, for checks, per-pod views and local runs."""
    out: list[dict[str, Any]] = []
    for manifest in manifests:
        for candidate in _backends().values():
            created = candidate.jobs_of(manifest)
            if created is not None:
                out += created
                break
        else:
            out.append(manifest)
    return out
