"""What a deployed training job is doing: admitted or queued, its pods by phase, the rank that failed first and
why, how far into its backoff or restarts it is, an elastic job's size, where its pods run. Read from a cluster
(the kubeconfig's context) or from a `trainjobs run-local` run, by the same rules (`state.py`).

    import trainjobs
    for job in trainjobs.status(["mnist-ddp"], namespace="default"):
        print(job.state, job.first_failure)

`trainjobs status`, `logs` and `wait` are the command's face of it.
"""

from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Protocol, Sequence

from trainjobs.observe.cluster import ClusterSource, StatusError
from trainjobs.observe.state import (Admission, FailedRank, JobSetStatus, JobStatus, PodStatus, RoleStatus, Snapshot,
                                     job_statuses, parse_time)

__all__ = ["Admission", "FailedRank", "JobSetStatus", "JobStatus", "PodStatus", "RoleStatus", "StatusError",
           "status", "source", "read", "pods_of", "attempts"]

LOG_LINES = 10
_EPOCH = datetime.fromtimestamp(0, timezone.utc)


class Source(Protocol):
    """Where jobs are read from: a cluster (`cluster.ClusterSource`) or a run-local run (`local.LocalSource`)."""

    def snapshot(self, namespace: str | None, names: list[str]) -> Snapshot: ...
    def log(self, namespace: str, pod: str, tail: int | None = None) -> list[str]: ...
    def follow(self, namespace: str, pod: str) -> Iterator[str]: ...


def source(context: str | None = None, kubeconfig: str | None = None, local: bool | str | Path | None = None) -> Source:
    """The cluster of the kubeconfig's context; with `local`, a run-local run (True: the newest)."""
    if local:
        from trainjobs.observe.local import LocalSource
        return LocalSource(None if local is True else Path(local))
    return ClusterSource(context, kubeconfig)


def read(where: Source, names: Sequence[str] = (), namespace: str | None = None,
         log_lines: int | None = LOG_LINES) -> list[JobStatus]:
    """The named jobs (every job, without names) in `namespace` (None: every namespace); a name with no job is
    an error."""
    snapshot = where.snapshot(namespace, list(names))
    log_lines = LOG_LINES if log_lines is None else log_lines

    def logs(pod: PodStatus) -> list[str]:
        found = next(p for p in snapshot.pods if p["metadata"]["name"] == pod.name)
        try:
            return where.log(found["metadata"].get("namespace", "default"), pod.name, tail=log_lines)
        except StatusError as exc:
            return [f"(no log: {exc})"]

    found = job_statuses(snapshot, logs=logs if log_lines else None)
    missing = [n for n in names if n not in {j.name for j in found}]
    if missing:
        known = sorted({j.name for j in job_statuses(where.snapshot(namespace, []))})
        where_ = f"namespace {namespace}" if namespace else "any namespace"
        raise StatusError(f"no training job {', '.join(repr(m) for m in missing)} in {where_}; "
                          f"jobs there: {', '.join(known) or 'none'}")
    return found


def status(jobs: Sequence[str] = (), namespace: str | None = None, *, context: str | None = None,
           kubeconfig: str | None = None, local: bool | str | Path | None = None,
           log_lines: int = LOG_LINES) -> list[JobStatus]:
    """The state of the named training jobs (every job the library made, without names) in `namespace` (None:
    every namespace), read from the kubeconfig's `context` (default: its current one), or with `local` from a
    run-local run (True: the newest; or its directory). Raises StatusError with what to do when the cluster
    cannot be read or a job is not there."""
    return read(source(context, kubeconfig, local), jobs, namespace, log_lines)


def pods_of(job: JobStatus, rank: int | None = None, role: str | None = None) -> list[PodStatus]:
    """The newest pod of each rank of a job (a pod replaced after preemption gives way to its successor), of one
    role, or rank `rank` of the training role (the role whose pods are counted by rank: `node`, else the only
    one)."""
    roles = [r for r in job.roles if role is None or r.role == role]
    if role is not None and not roles:
        raise StatusError(f"job {job.name} has no role {role!r}; roles: {', '.join(r.role for r in job.roles)}")
    newest: dict[str, PodStatus] = {}
    for each in roles:
        for pod in sorted(each.pods, key=lambda p: parse_time(p.created_at) or _EPOCH):
            newest[pod.rank] = pod
    pods = sorted(newest.values(), key=lambda p: ([r.role for r in job.roles].index(p.role) if p.role in
                                                  [r.role for r in job.roles] else 0, p.index or 0, p.rank))
    if rank is None:
        return pods
    training = role or ("node" if any(r.role == "node" for r in job.roles) else job.roles[0].role if job.roles else "")
    chosen = [p for p in pods if p.role == training and p.index == rank]
    if not chosen:
        ranks = sorted({p.index for p in pods if p.role == training and p.index is not None})
        raise StatusError(f"job {job.name} has no rank {rank} in role {training}; ranks: "
                          f"{', '.join(map(str, ranks)) or 'none running'}")
    return chosen


def attempts(job: JobStatus, rank: str) -> list[PodStatus]:
    """Every pod of a rank the job still has, oldest first: a pod replaced after preemption, then its successors."""
    return sorted((p for r in job.roles for p in r.pods if p.rank == rank),
                  key=lambda p: (parse_time(p.created_at) or _EPOCH, p.name))
