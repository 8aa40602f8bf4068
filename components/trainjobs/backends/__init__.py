"""Backends: what creates a job's pods, chosen by the `backend` argument.

The core builds one Indexed Job per role, the same for every backend; a backend then decides what is
registered to run them. `jobs` registers the Jobs themselves; `jobset` wraps them into one JobSet
whose controller creates the very same Jobs. A backend is one module here with a `BACKEND`
instance; the core looks it up by name and knows none of them.
"""

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol

from trainjobs.core.args import TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.core.naming import COMPLETION_INDEX_ANNOTATION
from trainjobs.kube import requests
from trainjobs.kube.manifests import LABEL_JOB, LABEL_ROLE

__all__ = ["Assembly", "Backend", "PodSet", "Workload", "backend", "controller_jobs", "is_workload", "pod_count",
           "pod_sets", "replace_on_changes", "replaced_on", "total_requests", "workload_kinds"]


@dataclass(frozen=True)
class PodSet:
    """Pods of one shape that a registered object makes, as its controller makes them: the one unit every
    tool reads (render tree, requests, explain, summary, policy rules, runs, run-local), whichever backend
    registered the object. A backend reads its own objects back into pod sets (`Backend.pod_sets`)."""

    owner: Mapping[str, Any]
    """The registered object the pods come from (a Job, a JobSet, ...)."""
    name: str
    """What the pods are known by: the Job that runs them (its pods' `job-name`), as its controller names it."""
    job: Mapping[str, Any]
    """That batch/v1 Job as the controller creates it: its spec's counts, template, failure and success rules."""
    starts_after: tuple[str, ...] = ()
    """Names of the pod sets that must be ready or complete before these pods are created."""

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.job.get("spec") or {}

    @property
    def what(self) -> str:
        """How messages name these pods: `Job x`, or `JobSet s job x` for a Job another object makes."""
        owner = f"{self.owner.get('kind', '?')} {(self.owner.get('metadata') or {}).get('name', '?')}"
        return owner if self.owner is self.job else f"{owner} job {self.name}"

    @property
    def job_name(self) -> str | None:
        """The training job these pods belong to (its name, with its run), None for objects of other origins."""
        return ((self.template.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB)

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return self.template.get("spec") or {}

    @property
    def template(self) -> Mapping[str, Any]:
        return self.spec.get("template") or {}

    @property
    def role(self) -> str | None:
        """The job's role these pods play (`trainjobs.io/role`), None for objects of other origins."""
        return ((self.template.get("metadata") or {}).get("labels") or {}).get(LABEL_ROLE)

    @property
    def namespace(self) -> str | None:
        return (self.job.get("metadata") or {}).get("namespace")

    @property
    def count(self) -> int:
        """Pods the set runs to completion: `completions`, else `parallelism`, else 1."""
        return _count(self.spec.get("completions"), _count(self.spec.get("parallelism")))

    @property
    def running(self) -> int:
        """Pods running at once: `parallelism` (1 if unset), at most `count`."""
        return min(_count(self.spec.get("parallelism")), self.count)

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"

    def hostname(self, index: int) -> str:
        """Pod `index`'s hostname: `<job>-<index>` for an Indexed Job, as Kubernetes names them."""
        return f"{self.name}-{index}" if self.indexed else self.name

    def pod_metadata(self, index: int) -> tuple[dict[str, str], dict[str, str]]:
        """Pod `index`'s labels and annotations, with what the Job controller adds."""
        meta = self.template.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), "job-name": self.name, "batch.kubernetes.io/job-name": self.name}
        annotations = dict(meta.get("annotations") or {})
        if self.indexed:
            labels[COMPLETION_INDEX_ANNOTATION] = annotations[COMPLETION_INDEX_ANNOTATION] = str(index)
        return labels, annotations


def _count(value: Any, default: int = 1) -> int:
    """A count as an int: Pulumi hands numbers to policies as floats (2.0)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default



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
    replaced_on: tuple[str, ...]
    """Every field whose change replaces such an object under Pulumi, and its pods with it (training starts
    over): `replace_on_changes` and what pulumi-kubernetes replaces by itself. Read by the change list."""

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        """What the job asks of its backend that this one cannot do, or that its controller refuses."""

    def assemble(self, workload: Workload) -> Assembly:
        """The objects that run the workload's Jobs."""

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The Jobs a controller creates from `manifest` when it is this backend's object, else None."""

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[PodSet] | None:
        """The pod sets `manifest` makes when it is this backend's object, else None."""


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


def pod_sets(manifests: Iterable[Mapping[str, Any]]) -> list[PodSet]:
    """Every pod set the objects make, in order, read back by the backend that owns each object."""
    found: list[PodSet] = []
    for manifest in manifests:
        for candidate in _backends().values():
            read = candidate.pod_sets(manifest)
            if read is not None:
                found += read
                break
    return found


def _owner(manifest: Mapping[str, Any]) -> Backend | None:
    return next((b for b in _backends().values() if b.pod_sets(manifest) is not None), None)


def is_workload(manifest: Mapping[str, Any]) -> bool:
    """Whether a backend registered `manifest` to run pods (a Job, a JobSet, ...)."""
    return _owner(manifest) is not None


def replaced_on(manifest: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The fields whose change replaces `manifest` and restarts its pods, as the backend that owns it says;
    None when no backend registered it."""
    owner = _owner(manifest)
    return None if owner is None else owner.replaced_on


def total_requests(manifests: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """What every pod the objects make requests in all (`kube.requests.total_requests` of their pod sets)."""
    return requests.total_requests((s.running, s.pod_spec) for s in pod_sets(manifests))


def pod_count(manifests: Iterable[Mapping[str, Any]]) -> int:
    """How many pods the objects make, counted as total_requests counts them."""
    return sum(s.running for s in pod_sets(manifests))
