"""A training job's state, derived from the plain objects a cluster (or run-local) holds: its Jobs or JobSet,
their pods, Kueue's Workload and the gang's PodGroup. Pure: the objects are read elsewhere (`cluster.py`,
`local.py`), so the cluster and run-local are read by the same rules.

Each field follows the objects' own status fields: a Job's `status.failed` against `spec.backoffLimit`, a
JobSet's `status.restarts` against `spec.failurePolicy.maxRestarts`, a Workload's conditions (Kueue
v1beta2: QuotaReserved, Admitted, Evicted, Preempted, Finished) and `status.requeueState.count`, a
PodGroup's `status.phase` and conditions, a pod's container states and its DisruptionTarget condition.
"""

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from trainjobs.kube.manifests import LABEL_JOB, LABEL_ROLE, MAIN_CONTAINER, MIN_PODS
from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION
from trainjobs.kube.policies import DISRUPTION_TARGET, pod_verdict
from trainjobs.scheduling.kueue import PREFERRED_TOPOLOGY, QUEUE_LABEL, REQUIRED_TOPOLOGY, SLICE_TOPOLOGY

_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
# A pod the Job controller deleted because its Job failed or was suspended stops with SIGKILL's 128 + 9.
KILLED = 137

# The overall states a job can be in, as `wait --for` and the exit statuses name them.
QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, PENDING, SUSPENDED = (
    "queued", "admitted", "running", "succeeded", "failed", "pending", "suspended")


@dataclass(frozen=True)
class Admission:
    """What holds the job back or lets it run: Kueue's Workload, or the gang's PodGroup (Volcano's or the
    coscheduling plugin's)."""

    kind: str
    """`Workload` or `PodGroup`."""
    name: str
    state: str
    """A Workload: queued, quota reserved, admitted, preempted, evicted, finished or inactive; a PodGroup: its
    `status.phase` (Pending, Inqueue, Running, Completed, Unknown)."""
    reason: str = ""
    message: str = ""
    queue: str = ""
    """The ClusterQueue that admitted the Workload, else its LocalQueue; a PodGroup's `spec.queue`."""
    requeues: int = 0
    """How many times Kueue put the Workload back in its queue after an eviction."""
    cluster: str = ""
    """The worker cluster MultiKueue dispatched the Workload to (its `status.clusterName`): the job's Jobs and pods
    are there, and this cluster's JobSet carries their status."""


@dataclass(frozen=True)
class PodStatus:
    """One pod of a role, named by rank as `trainjobs explain` names it (`<Job>-<index>`, its hostname)."""

    name: str
    rank: str
    role: str
    index: int | None
    phase: str
    restarts: int = 0
    age_seconds: int | None = None
    node: str = ""
    domain: str = ""
    """The value of the placement's topology label on the pod's node (e.g. its rack), when placed."""
    exit_code: int | None = None
    reason: str = ""
    """Why it stopped: the container's reason (Error, OOMKilled), the pod's (DeadlineExceeded, Evicted),
    `preempted` for a DisruptionTarget, with `fatal exit code` when the failure policy fails the job on it."""
    message: str = ""
    created_at: str = ""
    finished_at: str = ""
    replaced_by: str = ""
    """A preempted pod's successor: the next pod of its rank. A preempted pod that was replaced is no failure of
    the job (its pod failure policy ignores the disruption), so it is never the first failed rank."""


@dataclass(frozen=True)
class RoleStatus:
    """A role's Job: its state, its pods by phase, how far it went into its backoff, an elastic Job's size."""

    role: str
    job: str
    state: str
    """Complete, Failed, Suspended, Running or Pending."""
    reason: str = ""
    message: str = ""
    pods: tuple[PodStatus, ...] = ()
    phases: Mapping[str, int] = field(default_factory=dict)
    failed: int = 0
    backoff_limit: int | None = None
    size: int = 0
    """Pods it runs at once now (`spec.parallelism`)."""
    min_size: int | None = None
    """An elastic job's fewest pods (`trainjobs.io/min-pods`); None when the job is not elastic."""
    max_size: int = 0
    """Its most (`spec.completions`)."""


@dataclass(frozen=True)
class JobSetStatus:
    name: str
    state: str
    """Completed, Failed, Suspended or Running."""
    reason: str = ""
    message: str = ""
    restarts: int = 0
    max_restarts: int = 0


@dataclass(frozen=True)
class FailedRank:
    """The rank that failed first: the earliest to stop among the failed pods but the preempted ones that were
    replaced, a pod the Job controller killed after it (exit code 137, or deleted) counting after one that failed
    on its own."""

    pod: str
    rank: str
    role: str
    exit_code: int | None
    reason: str
    message: str = ""
    log_tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobStatus:
    """A training job as the cluster runs it. `state` is one of queued, admitted (and not running yet),
    pending, running, suspended, succeeded, failed."""

    name: str
    namespace: str
    state: str
    admission: tuple[Admission, ...] = ()
    roles: tuple[RoleStatus, ...] = ()
    jobset: JobSetStatus | None = None
    first_failure: FailedRank | None = None
    topology_key: str = ""

    def to_json(self) -> dict[str, Any]:
        """As `trainjobs status --output json` prints it (lists for tuples)."""
        return json.loads(json.dumps(asdict(self)))


@dataclass
class Snapshot:
    """The plain objects of some jobs, as the API server returns them (camelCase fields)."""

    jobs: list[dict] = field(default_factory=list)
    jobsets: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    workloads: list[dict] = field(default_factory=list)
    podgroups: list[dict] = field(default_factory=list)
    nodes: dict[str, dict] = field(default_factory=dict)


def _meta(obj: Mapping) -> Mapping:
    return obj.get("metadata") or {}


def _labels(obj: Mapping) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _condition(obj: Mapping, kind: str) -> Mapping | None:
    """The condition of that type with status True, or None."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind and c.get("status") == "True"), None)


def _state(obj: Mapping, kinds: Iterable[str]) -> tuple[str, str, str] | None:
    """(type, reason, message) of the first of these condition types the object has with status True, or None."""
    for kind in kinds:
        found = _condition(obj, kind)
        if found:
            return kind, found.get("reason", ""), found.get("message", "")
    return None


def parse_time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def job_names(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(namespace, job name) of every training job the snapshot holds a Job or JobSet of, sorted."""
    return sorted({(_meta(o).get("namespace") or "default", _labels(o)[LABEL_JOB])
                   for o in snapshot.jobs + snapshot.jobsets if _labels(o).get(LABEL_JOB)})


def job_statuses(snapshot: Snapshot, now: datetime | None = None, logs=None) -> list[JobStatus]:
    """Each training job of the snapshot. `logs(pod, lines)` gives the last lines of a pod's main container."""
    now = now or datetime.now(timezone.utc)
    return [job_status(snapshot, namespace, name, now, logs) for namespace, name in job_names(snapshot)]


def _of_job(objects: Iterable[dict], namespace: str, name: str) -> list[dict]:
    return [o for o in objects if _labels(o).get(LABEL_JOB) == name
            and (_meta(o).get("namespace") or "default") == namespace]


def job_status(snapshot: Snapshot, namespace: str, name: str, now: datetime, logs=None) -> JobStatus:
    jobsets = _of_job(snapshot.jobsets, namespace, name)
    owners = {_meta(o).get("uid") for o in _of_job(snapshot.jobs, namespace, name) + jobsets} - {None}
    jobs = sorted(_of_job(snapshot.jobs, namespace, name), key=lambda j: _meta(j)["name"])
    pods = _of_job(snapshot.pods, namespace, name)
    topology = next((key for p in pods for a, key in (_meta(p).get("annotations") or {}).items()
                     if a in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, SLICE_TOPOLOGY)), "")
    admission = tuple(
        [_workload(w) for w in snapshot.workloads if {r.get("uid") for r in _meta(w).get("ownerReferences") or []} & owners]
        + [_pod_group(g) for g in _of_job(snapshot.podgroups, namespace, name)])
    pod_states = _successors([_pod(p, now, snapshot.nodes, topology, jobs) for p in pods],
                             {_meta(p).get("name", "") for p in pods if _preempted(p)})
    roles = tuple(_role(j, [p for p in pod_states if p.name in {_meta(q)["name"] for q in pods
                                                                   if _owned_by(q, j)}]) for j in jobs)
    jobset = _jobset(jobsets[0]) if jobsets else None
    first = _first_failure(pod_states, logs)
    return JobStatus(name, namespace, _overall(roles, jobset, admission, pod_states), admission, roles, jobset,
                     first, topology)


def _owned_by(pod: Mapping, job: Mapping) -> bool:
    uid = _meta(job).get("uid")
    refs = _meta(pod).get("ownerReferences") or []
    if uid and refs:
        return any(r.get("uid") == uid for r in refs)
    return (_labels(pod).get("job-name") or _labels(pod).get("batch.kubernetes.io/job-name")) == _meta(job)["name"]


# A Workload's conditions (Kueue v1beta2), the most telling first, and the state each says.
WORKLOAD_STATES = {"Finished": "finished", "Preempted": "preempted", "Evicted": "evicted", "Admitted": "admitted",
                   "QuotaReserved": "quota reserved"}


def _workload(workload: Mapping) -> Admission:
    """Kueue's Workload (v1beta2) by its conditions, the most telling first."""
    status = workload.get("status") or {}
    spec = workload.get("spec") or {}
    queue = ((status.get("admission") or {}).get("clusterQueue") or spec.get("queueName")
             or _labels(workload).get(QUEUE_LABEL, ""))
    requeues = int((status.get("requeueState") or {}).get("count") or 0)
    cluster = status.get("clusterName") or ""
    name = _meta(workload).get("name", "")
    found = _state(workload, WORKLOAD_STATES)
    if found:
        kind, reason, message = found
        return Admission("Workload", name, WORKLOAD_STATES[kind], reason, message, queue, requeues, cluster)
    if spec.get("active") is False:
        return Admission("Workload", name, "inactive", "", "spec.active is false", queue, requeues, cluster)
    pending = next((c for c in status.get("conditions") or [] if c.get("type") == "QuotaReserved"), {})
    return Admission("Workload", name, "queued", pending.get("reason", ""), pending.get("message", ""), queue, requeues,
                     cluster)


def _pod_group(group: Mapping) -> Admission:
    status = group.get("status") or {}
    last = next((c for c in reversed(status.get("conditions") or []) if c.get("status") == "True"), {})
    return Admission("PodGroup", _meta(group).get("name", ""), status.get("phase") or "Pending",
                     last.get("reason", ""), last.get("message", ""), (group.get("spec") or {}).get("queue", ""))


def _preempted(pod: Mapping) -> Mapping | None:
    """The DisruptionTarget condition of a pod that stopped on it (preempted, evicted, its node drained)."""
    return _condition(pod, DISRUPTION_TARGET) if (pod.get("status") or {}).get("phase") == "Failed" else None


def _successors(pods: list[PodStatus], preempted: set[str]) -> list[PodStatus]:
    """The pods, each preempted one with the pod that replaced it: the next pod created for its rank."""
    def created(p: PodStatus):
        return parse_time(p.created_at) or _EARLIEST, p.name

    def successor(pod: PodStatus) -> str:
        later = [p for p in pods if (p.role, p.rank) == (pod.role, pod.rank) and created(p) > created(pod)]
        return min(later, key=created).name if later else ""

    return [replace(p, replaced_by=successor(p)) if p.name in preempted else p for p in pods]


def _main_status(pod: Mapping) -> Mapping:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == MAIN_CONTAINER), statuses[0] if statuses else {})


def _terminated(container_status: Mapping) -> Mapping:
    return ((container_status.get("state") or {}).get("terminated")
            or (container_status.get("lastState") or {}).get("terminated") or {})


def _fails_job(pod: Mapping, job: Mapping) -> bool:
    """Whether the Job's pod failure policy fails the Job on this failed pod, as the Job controller evaluates it."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    status = pod.get("status") or {}
    codes = {s.get("name", ""): _terminated(s)["exitCode"]
             for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
             if _terminated(s).get("exitCode") is not None}
    conditions = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    verdict = pod_verdict(rules, f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}", codes, conditions)
    return verdict is not None and verdict.action == "FailJob"


def _pod(pod: Mapping, now: datetime, nodes: Mapping[str, dict], topology: str, jobs: list[dict]) -> PodStatus:
    meta, spec, status = _meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    index_text = (meta.get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
    index = int(index_text) if index_text and index_text.isdigit() else None
    terminated = _terminated(_main_status(pod))
    exit_code = terminated.get("exitCode")
    reason = status.get("reason") or terminated.get("reason", "")
    message = status.get("message") or terminated.get("message", "")
    disrupted = _preempted(pod)
    if disrupted:
        reason = f"preempted ({disrupted.get('reason', '')})" if disrupted.get("reason") else "preempted"
        message = disrupted.get("message", "") or message
    job = next((j for j in jobs if _owned_by(pod, j)), {})
    if exit_code is not None and status.get("phase") == "Failed" and _fails_job(pod, job):
        reason = f"{reason}: fatal exit code" if reason else "fatal exit code"
    created = parse_time(meta.get("creationTimestamp"))
    node = spec.get("nodeName", "")
    return PodStatus(
        name=meta.get("name", ""), rank=spec.get("hostname") or meta.get("name", ""), role=_labels(pod).get(LABEL_ROLE, ""),
        index=index, phase=status.get("phase") or "Pending",
        restarts=sum(int(s.get("restartCount") or 0) for s in status.get("containerStatuses") or []),
        age_seconds=int((now - created).total_seconds()) if created else None, node=node,
        domain=(_labels(nodes.get(node, {})).get(topology, "") if topology and node else ""),
        exit_code=exit_code, reason=reason, message=message, created_at=meta.get("creationTimestamp") or "",
        finished_at=terminated.get("finishedAt") or meta.get("deletionTimestamp") or "")


def _role(job: Mapping, pods: list[PodStatus]) -> RoleStatus:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    running = "Running" if any(p.phase == "Running" for p in pods) else "Pending"
    state, reason, message = _state(job, ("Failed", "Complete", "Suspended")) or (
        "Suspended" if spec.get("suspend") else running, "", "")
    phases: dict[str, int] = {}
    for pod in sorted(pods, key=lambda p: p.phase):
        phases[pod.phase] = phases.get(pod.phase, 0) + 1
    min_pods = (_meta(job).get("annotations") or {}).get(MIN_PODS, "")
    parallelism = int(spec.get("parallelism", 1))
    order = sorted(pods, key=lambda p: (p.index if p.index is not None else -1, parse_time(p.created_at) or _EARLIEST,
                                        p.name))
    return RoleStatus(
        role=_labels(job).get(LABEL_ROLE, ""), job=_meta(job)["name"], state=state, reason=reason, message=message,
        pods=tuple(order), phases=phases, failed=int(status.get("failed") or 0), backoff_limit=spec.get("backoffLimit"),
        size=parallelism, min_size=int(min_pods) if min_pods.isdigit() else None,
        max_size=int(spec.get("completions") or parallelism))


def _jobset(jobset: Mapping) -> JobSetStatus:
    status = jobset.get("status") or {}
    state, reason, message = _state(jobset, ("Failed", "Completed", "Suspended")) or ("Running", "", "")
    return JobSetStatus(_meta(jobset)["name"], state, reason, message, int(status.get("restarts") or 0),
                        int(((jobset.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0))


def _first_failure(pods: list[PodStatus], logs) -> FailedRank | None:
    failed = [p for p in pods if p.phase == "Failed" and not p.replaced_by]
    if not failed:
        return None
    first = min(failed, key=lambda p: (p.finished_at or "~", p.exit_code == KILLED, p.index or 0, p.name))
    tail = tuple(logs(first)) if logs else ()
    return FailedRank(first.name, first.rank, first.role, first.exit_code, first.reason, first.message, tail)


def _overall(roles: tuple[RoleStatus, ...], jobset: JobSetStatus | None, admission: tuple[Admission, ...],
             pods: list[PodStatus]) -> str:
    if (jobset and jobset.state == "Failed") or any(r.state == "Failed" for r in roles):
        return FAILED
    if (jobset and jobset.state == "Completed") or (not jobset and roles and all(r.state == "Complete" for r in roles)):
        return SUCCEEDED
    if any(a.state in ("queued", "quota reserved", "evicted", "preempted", "inactive", "Pending", "Inqueue")
           for a in admission):
        return QUEUED
    if any(p.phase == "Running" for p in pods):
        return RUNNING
    if any(a.state == "admitted" for a in admission):   # Kueue unsuspends an admitted job's Jobs next
        return ADMITTED
    if any(r.state == "Suspended" for r in roles) or (jobset and jobset.state == "Suspended"):
        return SUSPENDED
    return PENDING
