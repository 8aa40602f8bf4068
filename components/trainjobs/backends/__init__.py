"""Backends: what creates a job's pods, chosen by the `backend` argument.

The core describes every role's pods as pod sets (trainjobs.core.podsets.Workload), the same for every
backend, decorated by the failure policy and the gang scheduler; a backend then materializes them as
the objects it registers, with its own shapes and names. `jobs` registers one Indexed Job per pod
set; `jobset` one JobSet whose controller creates the very same Jobs. Each backend also says what
replaces its objects and reads its objects back into pod sets (`PodSet`) for every tool.

One registry, `trainjobs.registry.BACKENDS`: it names this package's modules, each of which registers its
backend by name when imported (`register`); they are imported when a backend is first looked up. A
backend defined elsewhere (a test's) registers itself the same way. The pipeline looks a backend up by
name and knows none of them; the `backend` argument accepts the registered names, and its description
lists them (`summaries`).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

from trainjobs.kube import requests
from trainjobs.kube.manifests import LABEL_JOB, LABEL_ROLE
from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION
from trainjobs.registry import BACKENDS

if TYPE_CHECKING:   # for annotations only
    from trainjobs.core.errors import IssueCollector
    from trainjobs.core.podsets import PodSetSpec, Workload

__all__ = ["Assembly", "Backend", "PodSet", "backend", "controller_jobs", "deletes_before_replace", "is_workload",
           "names", "pod_count", "pod_set_requests", "pod_sets", "register", "replace_on_changes", "replaced_on", "summaries",
           "total_requests", "unregister", "workload_kinds"]


@dataclass(frozen=True)
class PodSet:
    """Pods of one shape that a registered object makes, as its controller makes them: the one unit every
    tool reads (render tree, requests, explain, summary, policy rules, runs, run-local), whichever backend
    registered the object. A backend reads its own objects back into pod sets (`Backend.pod_sets`)."""

    owner: Mapping[str, Any]
    """The registered object the pods come from (a Job, a JobSet, a Pod, ...)."""
    name: str
    """What the pods are known by: the Job that runs them (its pods' `job-name`) as its controller names it,
    or the pod's own name for a pod registered as itself."""
    template: Mapping[str, Any]
    """The pods' template (metadata and spec) as they are created."""
    count: int = 1
    """Pods the set runs to completion."""
    running: int = 1
    """Pods running at once."""
    indexed: bool = False
    """Pods numbered by a completion index (an Indexed Job's): hostname `<name>-<index>`, the index in a label
    and an annotation."""
    job: Mapping[str, Any] | None = None
    """The batch/v1 Job that runs the pods, as its controller creates it (its failure and success rules),
    or None for pods registered as themselves."""
    starts_after: tuple[str, ...] = ()
    """Names of the pod sets that must be ready or complete before these pods are created."""

    @classmethod
    def of_job(cls, owner: Mapping[str, Any], job: Mapping[str, Any], starts_after: tuple[str, ...] = ()) -> "PodSet":
        """The pods of a batch/v1 Job: `completions` pods (else `parallelism`, else 1), `parallelism` at once."""
        spec = job.get("spec") or {}
        count = _count(spec.get("completions"), _count(spec.get("parallelism")))
        return cls(owner, (job.get("metadata") or {}).get("name", "?"), spec.get("template") or {}, count,
                   min(_count(spec.get("parallelism")), count), spec.get("completionMode") == "Indexed", job,
                   starts_after)

    @property
    def spec(self) -> Mapping[str, Any]:
        """The Job's spec, or nothing for pods registered as themselves."""
        return (self.job or {}).get("spec") or {}

    @property
    def what(self) -> str:
        """How messages name these pods: `Job x`, or `JobSet s job x` for a Job another object makes."""
        owner = f"{self.owner.get('kind', '?')} {(self.owner.get('metadata') or {}).get('name', '?')}"
        return owner if self.job is None or self.owner is self.job else f"{owner} job {self.name}"

    @property
    def made_by(self) -> str:
        """What creates the pods, as the per-pod views name it: `Job x` (a JobSet's Jobs too), or the object
        itself (`Pod x`) for pods registered as themselves."""
        return f"Job {self.name}" if self.job is not None else f"{self.owner.get('kind', '?')} {self.name}"

    @property
    def job_name(self) -> str | None:
        """The training job these pods belong to (its name, with its run), None for objects of other origins."""
        return ((self.template.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB)

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return self.template.get("spec") or {}

    @property
    def role(self) -> str | None:
        """The job's role these pods play (`trainjobs.io/role`), None for objects of other origins."""
        return ((self.template.get("metadata") or {}).get("labels") or {}).get(LABEL_ROLE)

    @property
    def namespace(self) -> str | None:
        return ((self.job or self.owner).get("metadata") or {}).get("namespace")

    def hostname(self, index: int) -> str:
        """Pod `index`'s hostname: `<job>-<index>` for an Indexed Job, as Kubernetes names them; else the
        pod's own (`spec.hostname`), else its name."""
        return f"{self.name}-{index}" if self.indexed else self.pod_spec.get("hostname") or self.name

    def pod_metadata(self, index: int) -> tuple[dict[str, str], dict[str, str]]:
        """Pod `index`'s labels and annotations, with what the Job controller adds to a Job's pods."""
        meta = self.template.get("metadata") or {}
        labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
        if self.job is not None:
            labels.update({"job-name": self.name, "batch.kubernetes.io/job-name": self.name})
        if self.indexed:
            labels[COMPLETION_INDEX_ANNOTATION] = annotations[COMPLETION_INDEX_ANNOTATION] = str(index)
        return labels, annotations


def _count(value: Any, default: int = 1) -> int:
    """A count as an int: Pulumi hands numbers to policies as floats (2.0)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default



@dataclass(frozen=True)
class Assembly:
    """What a backend registers for the workload, in apply order, and (dependent, prerequisite) names
    Pulumi orders them by."""

    objects: tuple[dict[str, Any], ...]
    ordering: tuple[tuple[str, str], ...] = ()


class Backend(Protocol):
    summary: str
    """What it registers, in a few words, for the `backend` argument's description."""
    kinds: tuple[str, ...]
    """The kinds of object this backend registers to run pods."""
    replace_on_changes: tuple[str, ...]
    """Fields of those objects that cannot change in place, beyond those pulumi-kubernetes itself knows:
    a change replaces the object under Pulumi, and restarts its pods."""
    delete_before_replace: bool
    """Whether a replacement deletes the old object first (pulumi-kubernetes does not for its kind)."""
    start_order: frozenset[str]
    """Which start conditions (trainjobs.core.podsets READY, COMPLETE) it honours: a pod set that starts
    after another's is created only then. Pods of a condition it does not honour are created at once."""
    creates_service: bool
    """Whether its controller creates the headless Service of the pods' subdomain where they run, when the
    job registers none (JobSet's network): what lets the job go through MultiKueue, which copies only the
    workload object to a worker cluster."""
    replaced_on: tuple[str, ...]
    """Every field whose change replaces such an object under Pulumi, and its pods with it (training starts
    over): `replace_on_changes` and what pulumi-kubernetes replaces by itself. Read by the change list."""

    def check(self, issues: "IssueCollector", workload: "Workload") -> None:
        """What the job asks of its backend that this one cannot do, or that its controller refuses."""

    def materialize(self, workload: "Workload") -> Assembly:
        """The objects that run the workload's pod sets, in apply order."""

    def holders(self, workload: "Workload", pod_sets: "Iterable[PodSetSpec]") -> list[str]:
        """The names of the registered objects that would hold `pod_sets`, each once, in order: what a
        controller such as Kueue admits as one unit."""

    def place(self, issues: "IssueCollector", workload: "Workload", pod_sets: "list[PodSetSpec]") -> bool:
        """Place `pod_sets` (the gang, with a placement and no gang scheduler) by the backend's own means
        (JobSet's exclusive placement), reporting what it cannot honour; False leaves it to pod affinity."""

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The Jobs a controller creates from `manifest` when it is this backend's object, else None."""

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[PodSet] | None:
        """The pod sets `manifest` makes when it is this backend's object, else None."""


register, unregister, names, summaries = BACKENDS.register, BACKENDS.unregister, BACKENDS.names, BACKENDS.summaries


def _backends() -> dict[str, Backend]:
    return BACKENDS.members()


def backend(name: str) -> Backend:
    return _backends()[name]


def workload_kinds() -> tuple[str, ...]:
    """Every kind a backend registers to run pods: under Pulumi these wait for the job's other objects."""
    return tuple(dict.fromkeys(kind for b in _backends().values() for kind in b.kinds))


def replace_on_changes(kind: str) -> list[str]:
    """The fields whose change replaces an object of `kind` a backend registers (for Pulumi)."""
    return [f for b in _backends().values() if kind in b.kinds for f in b.replace_on_changes]


def deletes_before_replace(kind: str) -> bool:
    return any(kind in b.kinds and b.delete_before_replace for b in _backends().values())


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
    """What every pod the objects make requests in all (`kube.requests.total_requests` of their pod sets), with
    the devices their claims get from the objects' ResourceClaimTemplates."""
    manifests = list(manifests)
    return pod_set_requests(pod_sets(manifests), requests.ClaimTemplates(manifests))


def pod_set_requests(sets: Iterable[PodSet], claims: requests.ClaimTemplates) -> dict[str, str]:
    """What the pod sets' running pods request in all, their claims resolved by `claims` (the templates among
    the stack's objects, which a pod set's own object does not hold)."""
    return requests.total_requests(((s.running, s.pod_spec, s.namespace) for s in sets), claims)


def pod_count(manifests: Iterable[Mapping[str, Any]]) -> int:
    """How many pods the objects make, counted as total_requests counts them."""
    return sum(s.running for s in pod_sets(manifests))
