"""`trainjobs status`, `logs` and `wait`: a deployed job's state, its ranks' logs, and a wait for an outcome,
read from the cluster of the kubeconfig's context or from a run-local run (`--local`)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterator

from trainjobs.backends import pod_sets
from trainjobs.tools.cli import render
from trainjobs.tools.cli.render import shown

if TYPE_CHECKING:
    from trainjobs.observe import JobStatus, RoleStatus

# trainjobs.observe is imported by the three commands only: the command's other uses start without it.

# `trainjobs wait`'s exit statuses, one per outcome (2 is every command's usage error).
WAIT_REACHED, WAIT_FAILED, WAIT_SUCCEEDED, WAIT_TIMEOUT = 0, 1, 3, 124
WAIT_FOR = ("admitted", "complete", "failed", "running")
POLL_SECONDS = 2.0


def _satisfies(state: str, wait_for: str) -> bool:
    """Whether a job in `state` is what `wait --for wait_for` waits for (a job that runs or ended was admitted)."""
    from trainjobs.observe.state import ADMITTED, FAILED, RUNNING, SUCCEEDED

    return state in {"complete": {SUCCEEDED}, "failed": {FAILED}, "running": {RUNNING},
                     "admitted": {ADMITTED, RUNNING, SUCCEEDED, FAILED}}[wait_for]


def _ended(job: JobStatus) -> bool:
    from trainjobs.observe.state import FAILED, SUCCEEDED

    return job.state in (SUCCEEDED, FAILED)


def _command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose StatusError is said on stderr with exit status 2, as every command's errors are."""
    @functools.wraps(run)
    def command(args: argparse.Namespace) -> int:
        from trainjobs.observe import StatusError

        try:
            return run(args)
        except StatusError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return command


def age(seconds: int | None) -> str:
    """As kubectl shows an age: 45s, 12m, 5h, 3d."""
    if seconds is None:
        return "-"
    seconds = max(seconds, 0)
    for limit, unit, size in ((120, "s", 1), (7200, "m", 60), (172800, "h", 3600)):
        if seconds < limit:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"


def _table(rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths))).rstrip() for row in rows]


def _said(reason: str, message: str) -> str:
    text = ": ".join(part for part in (reason, message) if part)
    return f" ({shown(text)})" if text else ""


def _role_lines(role: RoleStatus, topology: str) -> list[str]:
    lines = [f"  role {role.role}, Job {role.job}: {role.state}{_said(role.reason, role.message)}"]
    counts = ", ".join(f"{n} {phase}" for phase, n in sorted(role.phases.items())) or "none yet"
    facts = [f"pods: {counts}"]
    if role.backoff_limit is not None:
        facts.append(f"backoff: {role.failed} failed pod{'' if role.failed == 1 else 's'} of backoffLimit "
                     f"{role.backoff_limit}")
    if role.min_size is not None:
        facts.append(f"elastic: {role.size} pods of {role.min_size}..{role.max_size}")
    lines.append("    " + "; ".join(facts))
    if role.pods:
        rows = [["RANK", "POD", "PHASE", "RESTARTS", "AGE", "NODE"] + ([topology.upper()] if topology else [])
                + ["EXIT", "REASON"]]
        for pod in role.pods:
            rows.append([pod.rank, pod.name, pod.phase, str(pod.restarts), age(pod.age_seconds), pod.node or "-"]
                        + ([pod.domain or "-"] if topology else [])
                        + ["-" if pod.exit_code is None else str(pod.exit_code), shown(pod.reason) or "-"])
        lines += _table(rows, "    ")
    return lines


def _stopped(exit_code: int | None, reason: str, message: str) -> str:
    """How a pod stopped: its exit code, reason and message."""
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    return f"{code}, {shown(reason) or 'no reason given'}{f' ({shown(message)})' if message else ''}"


def job_text(job: JobStatus) -> str:
    """A job's state as `trainjobs status` prints it."""
    lines = [f"{job.name} (namespace {job.namespace}): {job.state}"]
    for admission in job.admission:
        queue = f" in queue {admission.queue}" if admission.queue else ""
        times = admission.requeues
        requeued = f"; requeued {times} time{'' if times == 1 else 's'}" if times else ""
        lines.append(f"  admission: {admission.kind} {admission.name}{queue}: {admission.state}"
                     f"{_said(admission.reason, admission.message)}{requeued}")
        if admission.cluster:
            lines.append(f"  dispatched by MultiKueue to the worker cluster {admission.cluster}: its Jobs and pods run "
                         "there")
    if job.jobset:
        s = job.jobset
        lines.append(f"  JobSet {s.name}: {s.state}{_said(s.reason, s.message)}; restarts: {s.restarts} of "
                     f"maxRestarts {s.max_restarts}")
    if job.topology_key:
        lines.append(f"  placement: pods by {job.topology_key}")
    for role in job.roles:
        lines += _role_lines(role, job.topology_key)
    for pod in (p for role in job.roles for p in role.pods if p.replaced_by):
        lines.append(f"  replaced after preemption: {pod.rank} (pod {pod.name} by pod {pod.replaced_by}, role "
                     f"{pod.role}): {_stopped(pod.exit_code, pod.reason, pod.message)}")
    failure = job.first_failure
    if failure:
        lines.append(f"  first failed rank: {failure.rank} (pod {failure.pod}, role {failure.role}): "
                     f"{_stopped(failure.exit_code, failure.reason, failure.message)}")
        lines += [f"    | {shown(line)}" for line in failure.log_tail]
    return "\n".join(lines)


def _namespaces_and_names(args: argparse.Namespace) -> list[tuple[str | None, list[str]]]:
    """(namespace, job names) to read: the program's jobs by namespace (as `render` reads the program), else the
    names given in `--namespace`, or in every namespace (`--all-namespaces`, and `--local` without one)."""
    if getattr(args, "program", None):
        program = argparse.Namespace(program=args.program, stack=args.stack, config=args.config,
                                     stack_output=args.stack_output)
        found: dict[str, set[str]] = {}
        for pod_set in pod_sets(render.kubernetes_objects(args.run_program(program))):
            if pod_set.job_name:
                found.setdefault(pod_set.namespace or "default", set()).add(pod_set.job_name)
        wanted = set(args.jobs)
        return [(ns, sorted(n for n in names if not wanted or n in wanted)) for ns, names in sorted(found.items())
                if not wanted or names & wanted]
    names = list(getattr(args, "jobs", None) or ([args.job] if getattr(args, "job", None) else []))
    if args.namespace:
        return [(args.namespace, names)]
    return [(None, names)]


def _read(args: argparse.Namespace, where, log_lines: int | None = None) -> list[JobStatus]:
    from trainjobs import observe

    found = []
    for namespace, names in _namespaces_and_names(args):
        found += observe.read(where, names, namespace, log_lines)
    return found


def _source(args: argparse.Namespace):
    from trainjobs import observe

    return observe.source(args.context, args.kubeconfig, args.local)


def _fingerprint(jobs: list[JobStatus]) -> str:
    """What a change is, for --watch: everything but the pods' ages."""
    data = [j.to_json() for j in jobs]
    for job in data:
        for role in job["roles"]:
            for pod in role["pods"]:
                pod["age_seconds"] = None
    return json.dumps(data, sort_keys=True)


@_command
def cmd_status(args: argparse.Namespace) -> int:
    where = _source(args)
    shown_before = None
    while True:
        jobs = _read(args, where, args.log_lines)
        if not jobs and not args.watch:
            print("no training jobs found" if args.output == "text" else json.dumps({"jobs": []}))
            return 0
        now = _fingerprint(jobs)
        if now != shown_before:
            if args.output == "json":   # with --watch, one document a line
                print(json.dumps({"jobs": [j.to_json() for j in jobs]}, indent=None if args.watch else 2), flush=True)
            else:
                print(("\n" if shown_before is not None else "") + "\n\n".join(job_text(j) for j in jobs), flush=True)
            shown_before = now
        if not args.watch or (jobs and all(_ended(j) for j in jobs)):
            return 0
        time.sleep(args.poll)


def _one_job(args: argparse.Namespace, where) -> JobStatus:
    from trainjobs.observe import StatusError

    jobs = _read(args, where, log_lines=0)
    if len(jobs) > 1:
        raise StatusError(f"job {args.job} is in namespaces {', '.join(j.namespace for j in jobs)}: "
                          "name one with --namespace")
    return jobs[0]


@_command
def cmd_logs(args: argparse.Namespace) -> int:
    from trainjobs import observe

    where = _source(args)
    job = _one_job(args, where)
    pods = observe.pods_of(job, args.rank, args.role)
    several = len(pods) > 1
    if not args.follow:
        for pod in pods:
            for line in where.log(job.namespace, pod.name, tail=args.tail):
                print(f"[{pod.rank}] {line}" if several else line)
        return 0
    # Ranks one after another when several: a rank's lines are printed as its pod writes them, and a pod that
    # stops is followed to its successor (the next pod of the same rank) while the job goes on.
    for rank in [p.rank for p in pods]:
        for line in _follow_rank(args, where, job, rank):
            print(f"[{rank}] {line}" if several else line, flush=True)
    return 0


def _follow_rank(args: argparse.Namespace, where, job: JobStatus, rank: str) -> Iterator[str]:
    """A rank's pods one after another, oldest first, each until it stops, then its successor, until the job ends.
    A pod still Pending has no log yet (its container has not started): it is followed once it has started."""
    from trainjobs import observe

    followed: list[str] = []
    while True:
        new = [p for p in observe.attempts(job, rank) if p.name not in followed and p.phase != "Pending"]
        if not new:
            if _ended(job):
                return
            time.sleep(args.poll)
            job = _one_job(args, where)
            continue
        for pod in new:
            if followed:
                yield f"--- pod {pod.name} replaces the previous pod of rank {rank}"
            followed.append(pod.name)
            yield from where.follow(job.namespace, pod.name)
        job = _one_job(args, where)


@_command
def cmd_wait(args: argparse.Namespace) -> int:
    from trainjobs.observe.state import FAILED

    where = _source(args)
    deadline = time.monotonic() + args.timeout if args.timeout else None
    while True:
        job = _one_job(args, where)
        if _satisfies(job.state, args.wait_for):
            print(f"{job.name}: {job.state} ({args.wait_for} reached)")
            return WAIT_REACHED
        if _ended(job):
            cause = ""
            if job.first_failure:
                f = job.first_failure
                cause = f": rank {f.rank} exited {f.exit_code if f.exit_code is not None else '-'} ({shown(f.reason)})"
            print(f"{job.name}: {job.state}, not {args.wait_for}{cause}")
            return WAIT_FAILED if job.state == FAILED else WAIT_SUCCEEDED
        if deadline is not None and time.monotonic() >= deadline:
            print(f"{job.name}: still {job.state} after {args.timeout:g}s, not {args.wait_for}")
            return WAIT_TIMEOUT
        time.sleep(min(args.poll, max(deadline - time.monotonic(), 0)) if deadline else args.poll)


def add_commands(sub, program_options: Callable[[argparse.ArgumentParser], None], run_program: Callable) -> None:
    """The three commands; `status --program` reads the program with `run_program`, as `render` does."""
    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument("--namespace", "-n", help="the jobs' namespace (default: every namespace)")
        p.add_argument("--context", help="the kubeconfig context to read (default: its current context)")
        p.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
        p.add_argument("--local", nargs="?", const=True, metavar="RUN_DIR",
                       help="read a `trainjobs run-local` run instead of a cluster: the newest, or the one in RUN_DIR")
        p.add_argument("--poll", type=float, default=POLL_SECONDS, metavar="S",
                       help=f"seconds between two reads when following (default: {POLL_SECONDS:g})")

    p = sub.add_parser("status", help="show deployed training jobs: admission, pods by phase, the first failed rank, "
                                      "backoff and restarts, where the pods run")
    p.add_argument("jobs", nargs="*", metavar="JOB", help="training jobs (default: every one the library made)")
    p.add_argument("--program", help="the jobs of this Pulumi program (as `render` reads it), e.g. stacks/__main__.py")
    program_options(p)
    where(p)
    p.add_argument("--watch", "-w", action="store_true", help="print again on every change, until every job ended")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.add_argument("--log-lines", type=int, metavar="N",
                   help="last lines of the first failed rank's log (default: as trainjobs.status(), 10; 0: none)")
    p.set_defaults(func=cmd_status, run_program=run_program)

    p = sub.add_parser("logs", help="print a job's logs by rank, as `explain` names its pods")
    p.add_argument("job", metavar="JOB")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int, metavar="N", help="only rank N (its index) of the training role")
    which.add_argument("--role", metavar="R", help="only this role's pods (node, launcher, ...)")
    p.add_argument("--follow", "-f", action="store_true",
                   help="print lines as they come; a pod replaced after preemption is followed to its successor")
    p.add_argument("--tail", type=int, metavar="N", help="only the last N lines of each pod")
    where(p)
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("wait", help="wait for a job's outcome: exit 0 when reached, 1 failed, 3 succeeded (waiting "
                                    "for another state), 124 timed out")
    p.add_argument("job", metavar="JOB")
    p.add_argument("--for", dest="wait_for", choices=WAIT_FOR, default="complete",
                   help="complete (default), failed, admitted or running")
    p.add_argument("--timeout", type=float, default=0, metavar="S", help="give up after S seconds (default: never)")
    where(p)
    p.set_defaults(func=cmd_wait)
