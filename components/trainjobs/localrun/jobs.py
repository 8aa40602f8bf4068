"""Job semantics for a local run: Indexed completion, backoff, deadlines, and the run's outcome.

As the Job controller, for each selected Job:
- pods are started up to `parallelism`; in Indexed mode each index must succeed once, and the
  Job is Complete when every index has;
- a pod fails when one of its containers exits non-zero (restartPolicy Never); each failed pod
  counts against `backoffLimit`, and a failed index gets a new pod after the controller's backoff
  (10 s, doubling) while failures stay within the limit. Beyond it the Job fails
  (BackoffLimitExceeded) and its running pods are stopped: with `backoffLimit: 0` the first failed
  pod stops the rest;
- `activeDeadlineSeconds` fails the Job (DeadlineExceeded) and stops its pods;
- `podFailurePolicy` decides first, by the first matching rule (`policies.py`): FailJob fails the Job
  at once (PodFailurePolicy), Ignore replaces the pod without counting it (a disruption, by default),
  FailIndex fails the index; with `backoffLimitPerIndex` failures count per index, and
  `maxFailedIndexes` bounds how many may fail. A replacement starts once the failed pod is gone.

A JobSet's Jobs are held and recreated by its controller (`jobsets.py`), `--disrupt` evicts pods, and
`--admit` and `--resize` run a Job with fewer pods and resize it while it runs (`resize.py`).

Jobs of one training job (pods sharing a subdomain) run side by side; when one fails, the others
are stopped too, as nothing else would end them. The whole run is bounded by a timeout; on
timeout, Ctrl-C or SIGTERM every pod is stopped (SIGTERM, then SIGKILL after its grace period)
and everything the run created is removed before it returns.
"""

import json
import secrets
import shutil
import signal
import socket
import threading
import time
import traceback
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainjobs.tools.cli.podview import ObjectIndex
from .jobsets import Disruption, jobset_runs
from .network import Network
from .output import Filter
from .plan import JobSpec, PodSpec, Selection, pod_spec
from .resize import Resize
from .policies import (BACKOFF_LIMIT_EXCEEDED, DEADLINE_EXCEEDED, DISRUPTION_TARGET, FAILED_INDEXES,
                       MAX_FAILED_INDEXES_EXCEEDED, POD_FAILURE_POLICY, pod_verdict)
from .pods import ContainerRun, Holders, Sandbox, SandboxError, tcp_sockets

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
TICK = 0.05
LOG_TAIL_LINES = 20
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' generated name suffixes


def _shorten(line: str, width: int = 160) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def _suffix() -> str:
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


class Console:
    """Serialized output from the run and from the log pumps."""

    def __init__(self, write: Callable[[str], None]):
        self._write = write
        self._lock = threading.Lock()

    def __call__(self, line: str = "") -> None:
        with self._lock:
            self._write(line)


class Echo:
    """The containers' output on the console, prefixed with the pod: all of it when verbose, else
    without the lines left out by default (`output.Filter`), which it counts by kind."""

    def __init__(self, console: Console, verbose: bool):
        self.console, self.verbose = console, verbose
        self.left_out: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, prefix: str, line: str, left_out: str | None) -> None:
        if self.verbose or not left_out:
            self.console(prefix + line)
        else:
            with self._lock:
                self.left_out[left_out] += 1

    def note(self) -> str:
        """What was left out, for the end of the run; empty when nothing was."""
        if not self.left_out:
            return ""
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(self.left_out.items()))
        return f"(left out: {counts}; --verbose shows them, the logs have every line)"


@dataclass
class PodRun:
    spec: PodSpec
    job: "JobRun"
    attempt: int
    sandbox: Sandbox
    phase: str = "Pending"  # Pending, Running, Succeeded, Failed, Stopped
    reason: str = ""
    exit_code: int | None = None
    started: float = 0.0
    finished: float | None = None
    _next: int = 0  # the next init container to start
    _waiting_on: ContainerRun | None = None
    stop_deadline: float | None = None
    network_note: str = ""  # what the pod's sockets were doing when the run had to stop it
    conditions: set[str] = field(default_factory=set)  # pod conditions with status True (DisruptionTarget)

    @property
    def index(self) -> int:
        return self.spec.slot.index

    def reported(self) -> dict[str, str]:
        """The last line each main container printed that is not left out (`output.Filter`), by container."""
        return {c.spec.name: c.pump.last for c in self.sandbox.containers if c.spec.kind == "main"}

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed", "Stopped")

    @property
    def ready(self) -> bool:
        """Running with every main container started (readiness probes are not emulated)."""
        return self.phase == "Running" and self._waiting_on is None and self._next >= len(self.spec.containers)

    @property
    def settled(self) -> bool:
        """Done, and every process of it gone: its slot (hostname, address) is free for a new pod."""
        return self.done and self.stop_deadline is None

    def exit_codes(self) -> dict[str, int]:
        """Each terminated container's exit code, by container name, as podFailurePolicy reads them."""
        return {c.spec.name: c.exit_code for c in self.sandbox.containers if c.exit_code is not None}

    def disrupt(self, why: str, now: float) -> None:
        """Evicted as a preemption evicts: condition DisruptionTarget, SIGTERM, SIGKILL after the grace period."""
        if self.done:
            return
        self.conditions.add(DISRUPTION_TARGET)
        self.phase, self.reason, self.finished = "Failed", f"{DISRUPTION_TARGET}: {why}", now
        self.begin_stop(now)

    def prefix(self, container: str) -> str:
        name = self.spec.slot.hostname + (f"#{self.attempt}" if self.attempt > 1 else "")
        if len(self.spec.containers) > 1:
            name += f"/{container}"
        return f"[{name}] "

    def start_containers(self, echo: Echo | None, now: float) -> None:
        """Advance through init containers (one at a time), then start every main container."""
        order = self.spec.containers
        while self._next < len(order) and self._waiting_on is None:
            container = order[self._next]
            self._next += 1
            run = self.sandbox.run(container, echo, self.prefix(container.name))
            if container.kind == "init":
                self._waiting_on = run  # sidecars and main containers do not block what follows
        self.phase = "Running"

    def step(self, echo: Echo | None, now: float) -> None:
        if self.done or self.phase == "Pending":
            return
        if self._waiting_on is not None:
            code = self._waiting_on.poll()
            if code is None:
                return
            if code != 0:
                return self._finish("Failed", code, f"init container {self._waiting_on.spec.name} exited {code}", now)
            self._waiting_on = None
            self.start_containers(echo, now)
            return
        mains = [c for c in self.sandbox.containers if c.spec.kind == "main"]
        if self._next < len(self.spec.containers) or any(c.poll() is None for c in mains):
            return
        failed = next((c for c in mains if c.exit_code != 0), None)
        if failed is None:
            self._finish("Succeeded", 0, "", now)
        else:
            self._finish("Failed", failed.exit_code, f"container {failed.spec.name} exited {failed.exit_code}", now)

    def _finish(self, phase: str, code: int | None, reason: str, now: float) -> None:
        self.phase, self.exit_code, self.reason, self.finished = phase, code, reason, now
        self.begin_stop(now)  # sidecars and any leftover process of the pod go with it

    def begin_stop(self, now: float) -> None:
        if self.stop_deadline is None:
            self.stop_deadline = now + self.spec.grace_seconds + 1.0
            self.sandbox.begin_stop()

    def after_resize(self, removed: bool) -> None:
        """What a resize makes the pod print goes to its logs only (`output.Filter.after_resize`)."""
        for container in self.sandbox.containers:
            container.pump.filter.after_resize(removed)

    def terminate(self, reason: str, now: float) -> None:
        """Stopped from outside (Job failed, timeout, Ctrl-C): SIGTERM now, SIGKILL after the grace period."""
        if self.done:
            return
        self.phase, self.reason, self.finished = "Stopped", reason, now
        self.begin_stop(now)

    def settle(self, now: float) -> bool:
        """Drive a stopping pod to its end; True once every process of it is gone and cleaned up."""
        if self.stop_deadline is None:
            return False
        if not self.sandbox.stopped():
            if now < self.stop_deadline:
                return False
            self.sandbox.kill()
            if not self.sandbox.stopped():
                return False
        self.sandbox.cleanup()
        if self.exit_code is None:   # stopped from outside, or evicted
            codes = [c.exit_code for c in self.sandbox.containers if c.spec.kind == "main" and c.exit_code is not None]
            self.exit_code = next((c for c in codes if c != 0), codes[0] if codes else None)
        self.stop_deadline = None
        return True


@dataclass
class JobRun:
    spec: JobSpec
    pending: deque = field(default_factory=deque)
    retry_at: dict[int, float] = field(default_factory=dict)
    active: dict[int, PodRun] = field(default_factory=dict)
    pods: list[PodRun] = field(default_factory=list)
    succeeded: set[int] = field(default_factory=set)
    failures: int = 0
    state: str = ""  # "", Complete, Failed, Stopped, TimedOut, Interrupted
    reason: str = ""
    started: float = 0.0
    finished: float | None = None
    cause: PodRun | None = None  # the pod whose failure failed the Job
    held: bool = False  # its JobSet has not created it yet (start order, or a restart under way)
    failure_reason: str = ""  # the reason of its Failed condition (BackoffLimitExceeded, PodFailurePolicy, ...)
    failure_message: str = ""
    ignored_failures: int = 0  # failed pods a podFailurePolicy Ignore rule did not count
    index_failures: Counter = field(default_factory=Counter)  # per index, with backoffLimitPerIndex
    failed_indexes: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.pending.extend(range(self.spec.completions))

    def recreate(self, now: float) -> None:
        """A new Job of the same name, as a JobSet restart creates it: every index pending again."""
        self.pending = deque(range(self.spec.completions))
        self.retry_at, self.active, self.succeeded = {}, {}, set()
        self.failures = self.ignored_failures = 0
        self.index_failures, self.failed_indexes = Counter(), set()
        self.state, self.reason, self.started, self.finished, self.cause = "", "", now, None, None
        self.failure_reason = self.failure_message = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def due(self, now: float) -> list[int]:
        """Indexes to start a pod for now, within parallelism and past their backoff."""
        if self.state or self.held:
            return []
        if self.spec.active_deadline_seconds and now - self.started > self.spec.active_deadline_seconds:
            self.fail(DEADLINE_EXCEEDED, f"activeDeadlineSeconds {self.spec.active_deadline_seconds} passed", now)
            return []
        chosen = []
        for index in list(self.pending):
            if len(self.active) + len(chosen) >= self.spec.parallelism:
                break
            # A replacement waits for the failed pod to be gone (podReplacementPolicy Failed): it takes its slot.
            if self.retry_at.get(index, 0) <= now and all(p.settled for p in self.pods if p.index == index):
                chosen.append(index)
                self.pending.remove(index)
        return chosen

    def resize(self, pods: int, now: float) -> list["PodRun"]:
        """`parallelism` and `completions` set to `pods` while it runs (an elastic Indexed Job): new indexes get
        pods; the pods of indexes past `pods` are removed (stopped, neither failed nor succeeded), and returned."""
        before = self.spec.completions
        self.spec.completions = self.spec.parallelism = pods
        self.pending.extend(i for i in range(before, pods) if i not in self.succeeded and i not in self.pending)
        removed = [self.active[i] for i in sorted(self.active, reverse=True) if i >= pods]  # highest indexes first
        for pod in self.active.values():   # before the signal: what it makes them print goes to their logs only
            pod.after_resize(removed=pod in removed)
        for pod in removed:
            self.active.pop(pod.index).terminate(f"removed: Job scaled down to {pods} pod(s)", now)
        self.pending = deque(i for i in self.pending if i < pods)
        self.succeeded = {i for i in self.succeeded if i < pods}
        self.retry_at = {i: at for i, at in self.retry_at.items() if i < pods}
        self._check_indexes(now)
        return removed

    def pod_finished(self, pod: PodRun, now: float) -> None:
        self.active.pop(pod.index, None)
        if self.state:
            return
        if pod.phase == "Succeeded":
            self.succeeded.add(pod.index)
            self._check_indexes(now)
            return
        verdict = (pod_verdict(self.spec.pod_failure_rules, pod.spec.name, pod.exit_codes(), pod.conditions)
                   if self.spec.pod_failure_rules else None)
        action = verdict.action if verdict else "Count"
        if action == "FailJob":   # counted in the Job's failed pods, as the controller counts it
            self.failures += 1
            self.cause = pod
            self.fail(POD_FAILURE_POLICY, verdict.message, now)
            return
        if action == "Ignore":   # replaced at once, counted nowhere
            self.ignored_failures += 1
            self.pending.appendleft(pod.index)
            return
        self.failures += 1
        if self.spec.backoff_limit_per_index is not None:
            self.index_failures[pod.index] += 1
            if action == "FailIndex" or self.index_failures[pod.index] > self.spec.backoff_limit_per_index:
                self.failed_indexes.add(pod.index)
                limit = self.spec.max_failed_indexes
                if limit is not None and len(self.failed_indexes) > limit:
                    self.cause = pod
                    self.fail(MAX_FAILED_INDEXES_EXCEEDED, f"{len(self.failed_indexes)} failed indexes, more than "
                                                           f"maxFailedIndexes {limit}", now)
                    return
                self._check_indexes(now)
                if self.state:
                    return
        if self.failures > self.spec.backoff_limit:
            self.cause = pod
            self.fail(BACKOFF_LIMIT_EXCEEDED,
                      f"pod {pod.spec.name} (index {pod.index}) failed: {pod.reason}; "
                      f"backoffLimit {self.spec.backoff_limit} reached", now)
            return
        if pod.index in self.failed_indexes:
            return
        delay = min(10.0 * 2 ** (self.failures - 1), 360.0)
        self.retry_at[pod.index] = now + delay
        self.pending.appendleft(pod.index)

    def _check_indexes(self, now: float) -> None:
        """Complete when every index succeeded; Failed (FailedIndexes) when the rest failed for good."""
        if len(self.succeeded) + len(self.failed_indexes) < self.spec.completions:
            return
        if self.failed_indexes:
            self.fail(FAILED_INDEXES, f"indexes {', '.join(map(str, sorted(self.failed_indexes)))} failed "
                                      f"(backoffLimitPerIndex {self.spec.backoff_limit_per_index})", now)
        else:
            self.state, self.finished = "Complete", now

    def fail(self, state_reason: str, message: str, now: float, state: str = "Failed") -> None:
        if self.state:
            return
        self.state, self.reason, self.finished = state, f"{state_reason}: {message}", now
        self.failure_reason, self.failure_message = state_reason, message
        for pod in list(self.active.values()):
            pod.terminate(f"stopped: Job {state.lower()}", now)
        self.pending.clear()


@dataclass
class RunResult:
    status: str  # succeeded, failed, timeout, interrupted
    exit_code: int
    run_dir: Path
    duration: float
    jobs: list[JobRun]
    message: str
    leftovers: list[str]
    jobsets: list = field(default_factory=list)  # JobSetRun

    def to_json(self) -> dict:
        return {
            "status": self.status, "exit_code": self.exit_code, "duration_seconds": round(self.duration, 2),
            "message": self.message, "leftovers": self.leftovers,
            "jobsets": [{"name": s.name, "state": s.state, "reason": s.reason, "restarts": s.restarts}
                        for s in self.jobsets],
            "jobs": [{"name": j.name, "state": j.state, "reason": j.reason, "completions": j.spec.completions,
                      "succeeded": sorted(j.succeeded),
                      "failed_pods": j.failures, "ignored_failed_pods": j.ignored_failures,
                      "failed_indexes": sorted(j.failed_indexes)} for j in self.jobs],
            "pods": [{"name": p.spec.name, "hostname": p.spec.slot.hostname, "job": j.name, "index": p.index,
                      "attempt": p.attempt, "ip": p.spec.slot.ip, "phase": p.phase, "exit_code": p.exit_code,
                      "reason": p.reason, "conditions": sorted(p.conditions), "reported": p.reported(),
                      "duration_seconds": round((p.finished or p.started) - p.started, 2) if p.started else None,
                      "logs": {c.spec.name: str(c.log_path) for c in p.sandbox.containers}}
                     for j in self.jobs for p in j.pods],
        }


class LocalRun:
    """Runs a selection of rendered Jobs as emulated pods on this machine."""

    def __init__(self, objects: list[dict], selection: Selection, run_root: Path, timeout: float | None,
                 max_grace: float, echo_logs: bool, write: Callable[[str], None], verbose: bool = False,
                 disruptions: list[Disruption] = (), resizes: list[Resize] = ()):
        self.index = ObjectIndex(objects)
        self.selection = selection
        self.timeout = timeout
        self.max_grace = max_grace
        self.console = Console(write)
        self.echo = Echo(self.console, verbose) if echo_logs else None
        self.verbose = verbose
        self.jobs = [JobRun(spec) for spec in selection.jobs]
        self.jobsets, self.notes = jobset_runs(self.jobs)
        self.disruptions = list(disruptions)
        self.resizes = list(resizes)
        self.network = Network.plan([slot for job in selection.jobs for slot in job.slots])
        self.run_dir = run_root / f"trainjobs-{self.network.prefix}"
        self._signal: int | None = None
        self._stopping: list[PodRun] = []
        self.holders: Holders | None = None
        self.node_name = socket.gethostname()

    # -- signals ----------------------------------------------------------------------------

    def _on_signal(self, signum, frame) -> None:
        if self._signal is None:
            self._signal = signum
            self.console(f"\n{signal.Signals(signum).name}: stopping every pod and cleaning up ...")

    def _install_signals(self) -> dict:
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        self.run_dir.mkdir(parents=True)
        previous = self._install_signals()
        t0 = time.monotonic()
        status, message = "failed", ""
        try:
            self._print_header()
            self.network.create()
            self.holders = Holders(self.run_dir / "holders.log")
            for job in self.jobs:
                job.started = time.monotonic()
            status, message = self._loop(t0)
        except BaseException as exc:  # anything unexpected still ends with a full cleanup
            status = "failed" if isinstance(exc, Exception) else "interrupted"
            message = f"local run error: {type(exc).__name__}: {exc} (traceback in {self.run_dir / 'error.txt'})"
            (self.run_dir / "error.txt").write_text(traceback.format_exc())
        finally:
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
            try:
                self._stop_everything(status)
            finally:
                if self.holders is not None:
                    self.holders.close()
                leftovers = self.network.teardown()
                shutil.rmtree(self.run_dir / ".sandboxes", ignore_errors=True)
                shutil.rmtree(self.run_dir / ".claims", ignore_errors=True)
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        duration = time.monotonic() - t0
        exit_code = {"succeeded": EXIT_OK, "timeout": EXIT_TIMEOUT, "interrupted": EXIT_INTERRUPTED}.get(status, EXIT_FAILED)
        if leftovers:
            message += "; could not remove: " + ", ".join(leftovers)
            exit_code = exit_code or EXIT_FAILED
        result = RunResult(status, exit_code, self.run_dir, duration, self.jobs, message, leftovers, self.jobsets)
        (self.run_dir / "summary.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
        self._print_summary(result)
        return result

    def _print_header(self) -> None:
        say = self.console
        pods = sum(len(j.spec.slots) for j in self.jobs)
        say(f"trainjobs run-local: {len(self.jobs)} Job(s), {pods} pod(s); run {self.network.prefix}")
        for job, why in self.selection.skipped:
            say(f"  not run: {job}: {why}")
        for warning in self.selection.warnings:
            say(f"  warning: {warning}")
        for job in self.jobs:
            for feature in job.spec.ignored:
                say(f"  note: Job {job.name}: {feature} is not emulated")
        for note in self.notes:
            say(f"  note: {note}")
        for jobset in self.jobsets:
            order = " -> ".join(r["name"] for r in jobset.spec["replicatedJobs"])
            restarts = int((jobset.spec.get("failurePolicy") or {}).get("maxRestarts", 0))
            say(f"  JobSet {jobset.name}: replicated jobs {order}; "
                + (f"a failed Job restarts the whole group, at most {restarts} time(s)" if restarts
                   else "the first failed Job fails it"))
        for disruption in self.disruptions:
            when = (f"{disruption.after_seconds:g}s after it starts" if disruption.after_seconds is not None
                    else f"once it prints {disruption.after_output!r}")
            say(f"  disruption: pod {disruption.hostname} is evicted {when}")
        for job in self.jobs:
            if job.spec.completions < len(job.spec.slots):
                say(f"  admitted: Job {job.name} runs {job.spec.completions} of its {len(job.spec.slots)} pods, as "
                    "Kueue admits part of a Job")
        for resize in self.resizes:
            say(f"  {resize.describe()}")
        say(f"  network: bridge {self.network.bridge}, subnet {self.network.subnet} (no host address, no route out)")
        for job in self.jobs:
            for slot in job.spec.slots:
                names = slot.dns_names()
                say(f"  pod {slot.hostname:<28} {slot.ip:<15} {names[0] if names else '(no DNS name)'}")
        say("  images are not pulled: containers run this machine's programs with the pod's env and volumes")
        for note in self.selection.images:
            say(f"  {note}")
        say(f"  logs: {self.run_dir}/logs/<pod>/<container>.log")
        say()

    def _loop(self, t0: float) -> tuple[str, str]:
        while True:
            now = time.monotonic()
            if self._signal is not None:
                return "interrupted", f"interrupted by {signal.Signals(self._signal).name}"
            if self.timeout and now - t0 > self.timeout:
                running = [p.spec.name for j in self.jobs for p in j.active.values()]
                self._note_sockets()
                return "timeout", (f"timed out after {self.timeout:g}s"
                                   + (f" with pods still running: {', '.join(running)}" if running else ""))
            for jobset in self.jobsets:
                jobset.step(now)
            self._disrupt(now)
            self._resize(now)
            self._start_due_pods(now)
            for job in self.jobs:
                for pod in list(job.active.values()):
                    pod.step(self.echo, now)
                    if pod.done:
                        self._track(pod)
                        job.pod_finished(pod, now)
            self._propagate_failures(now)
            self._settle(now)
            for jobset in self.jobsets:
                jobset.step(now)
            if all(j.state and j.state != "Restarting" for j in self.jobs) and not self._stopping:
                return self._outcome()
            time.sleep(TICK)

    def _outcome(self) -> tuple[str, str]:
        """Succeeded when every JobSet completed and every other Job is complete."""
        failed_sets = [s for s in self.jobsets if s.state != "Completed"]
        owned = {j.name for s in self.jobsets for j in s.all_jobs()}
        failed = [j for j in self.jobs if j.name not in owned and j.state != "Complete"]
        if not failed_sets and not failed:
            done = [f"{len(self.jobsets)} JobSet(s) completed"] if self.jobsets else []
            if len(self.jobs) > len(owned) or not self.jobsets:
                done.append(f"{len(self.jobs) - len(owned)} Job(s) complete")
            return "succeeded", ", ".join(done)
        causes = [f"JobSet {s.name} {s.state.lower() or 'stopped'}: {s.reason}" for s in failed_sets]
        causes += [f"Job {j.name} {j.state.lower()}: {j.reason}" for j in failed]
        return "failed", "; ".join(causes)

    def _disrupt(self, now: float) -> None:
        """Evict the pods whose disruption is due, as a preemption would."""
        for disruption in self.disruptions:
            for job in self.jobs:
                for pod in list(job.active.values()):
                    if disruption.due(pod, now):
                        disruption.done = True
                        self.console(f"disrupting pod {pod.spec.name}: DisruptionTarget (preempted by run-local)")
                        pod.disrupt("preempted by run-local --disrupt", now)

    def _resize(self, now: float) -> None:
        """Resize the Jobs whose next resize is due; the one after it then waits for what is printed next."""
        for job in self.jobs:
            queue = [r for r in self.resizes if r.job == job.name and not r.done]
            if not queue or job.state:
                continue
            if queue[0].due(job.started, now, self._main_logs(job)):
                queue[0].done = True
                self.console(f"resizing Job {job.name}: {job.spec.completions} -> {queue[0].pods} pod(s) "
                             "(run-local --resize)")
                removed = job.resize(queue[0].pods, now)
                if removed:
                    names = ", ".join(p.spec.name for p in removed)
                    self.console(f"  the shrink stops pod(s) {names}: their output, and the lost-peer errors of the "
                                 "pods that remain, go to the logs only")
                if len(queue) > 1:
                    queue[1].arm(self._main_logs(job, every_pod=True))

    @staticmethod
    def _main_logs(job: JobRun, every_pod: bool = False) -> list[Path]:
        pods = job.pods if every_pod else job.active.values()
        return [c.log_path for p in pods for c in p.sandbox.containers if c.spec.kind == "main"]

    def _note_sockets(self) -> None:
        """For each running pod: the ports it listens on and the peers it talks to or tries to reach."""
        names = {slot.ip: slot.hostname for job in self.jobs for slot in job.spec.slots}
        for job in self.jobs:
            for pod in job.active.values():
                if not pod.sandbox.pod_pid:
                    continue
                sockets = tcp_sockets(pod.sandbox.pod_pid)
                listening = sorted({local[1] for state, local, _ in sockets if state == "listening"})
                inbound, outbound = set(), set()
                for state, local, remote in sockets:
                    if state == "listening" or remote[0] in (local[0], "127.0.0.1", "::1"):
                        continue
                    if local[1] in listening:
                        inbound.add(f"{names.get(remote[0], remote[0])} on {local[1]}")
                    else:
                        outbound.add(f"{names.get(remote[0], remote[0])}:{remote[1]} ({state})")
                pod.network_note = (f"listening on {', '.join(map(str, listening)) or 'no port'}; "
                                    f"connected from {', '.join(sorted(inbound)) or 'no pod'}; "
                                    f"connected to {', '.join(sorted(outbound)) or 'no pod'}")

    def _start_due_pods(self, now: float) -> None:
        new: list[PodRun] = []
        for job in self.jobs:
            for index in job.due(now):
                slot = job.spec.slots[index]
                spec = pod_spec(job.spec, slot, self.index, suffix=_suffix(), node_name=self.node_name,
                                max_grace=self.max_grace)
                attempt = sum(1 for p in job.pods if p.index == index) + 1
                sandbox = Sandbox(spec, scratch=self.run_dir / ".sandboxes" / spec.name,
                                  log_dir=self.run_dir / "logs" / spec.name, claims=self.run_dir / ".claims")
                pod = PodRun(spec=spec, job=job, attempt=attempt, sandbox=sandbox, started=now)
                job.pods.append(pod)
                job.active[index] = pod
                new.append(pod)
        for pod in new:  # every sandbox sets itself up in parallel, then containers start
            try:
                pod.sandbox.start(self.holders)
            except SandboxError as exc:
                pod.phase, pod.reason, pod.finished = "Failed", str(exc), time.monotonic()
                pod.begin_stop(time.monotonic())
        for pod in new:
            if pod.phase == "Failed":
                continue
            try:
                pod.sandbox.wait_ready()
            except SandboxError as exc:
                pod.phase, pod.reason, pod.finished = "Failed", str(exc), time.monotonic()
                pod.begin_stop(time.monotonic())
                continue
        for pod in new:
            if pod.phase == "Pending":
                pod.started = time.monotonic()
                pod.start_containers(self.echo, pod.started)
        for pod in new:
            if pod.phase == "Failed":
                self._track(pod)
                pod.job.pod_finished(pod, time.monotonic())

    def _track(self, pod: PodRun) -> None:
        if pod.stop_deadline is not None and pod not in self._stopping:
            self._stopping.append(pod)

    def _propagate_failures(self, now: float) -> None:
        """A failed Job fails its training job: stop the other Jobs sharing its subdomain."""
        failed_sets = {s.name for s in self.jobsets if s.state == "Failed"}
        for job in self.jobs:
            # A JobSet's own failure policy decides for its Jobs; once it has failed, the training job has.
            if job.state == "Failed" and (job.spec.owner is None or job.spec.owner in failed_sets):
                for other in self.jobs:
                    if other is not job and other.spec.group == job.spec.group and not other.state:
                        other.fail("Stopped", f"Job {job.name} of training job {job.spec.group} failed", now,
                                   state="Stopped")
            for pod in job.pods:
                self._track(pod)

    def _settle(self, now: float) -> None:
        self._stopping = [p for p in self._stopping if not p.settle(now)]

    def _stop_everything(self, status: str) -> None:
        now = time.monotonic()
        reason = {"timeout": "stopped: run timed out", "interrupted": "stopped: run interrupted"}.get(status, "stopped")
        state = {"timeout": "TimedOut", "interrupted": "Interrupted"}.get(status, "Stopped")
        for job in self.jobs:
            if not job.state:
                job.state, job.reason, job.finished = state, reason, now
            for pod in list(job.active.values()):
                pod.terminate(reason, now)
            for pod in job.pods:
                self._track(pod)
        while self._stopping:
            self._settle(time.monotonic())
            if self._stopping:
                time.sleep(TICK)

    # -- report -----------------------------------------------------------------------------

    def _print_summary(self, result: RunResult) -> None:
        say = self.console
        say()
        rows = [("POD", "JOB", "INDEX", "STATUS", "EXIT", "DURATION", "REASON")]
        for job in self.jobs:
            for pod in job.pods:
                duration = f"{(pod.finished or pod.started) - pod.started:.1f}s" if pod.started else "-"
                rows.append((pod.spec.name, job.name, str(pod.index), pod.phase,
                             "-" if pod.exit_code is None else str(pod.exit_code), duration, pod.reason))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            say("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
        say()
        for jobset in self.jobsets:
            say(f"JobSet {jobset.name}: {jobset.state or 'Unknown'} after {jobset.restarts} restart(s)"
                + (f": {jobset.reason}" if jobset.reason else ""))
        for job in self.jobs:
            ignored = f", {job.ignored_failures} not counted" if job.ignored_failures else ""
            say(f"Job {job.name}: {job.state or 'Unknown'} ({len(job.succeeded)}/{job.spec.completions} "
                f"indexes succeeded, {job.failures} failed pod(s){ignored})" + (f": {job.reason}" if job.reason else ""))
            for pod in self._latest_attempts(job):  # what each index (a pod, a node rank) said last
                reports = pod.reported()
                said = "; ".join(f"{name}: {line}" if len(reports) > 1 else line for name, line in reports.items()
                                 if line)
                say(f"  {pod.spec.slot.hostname}: {_shorten(said or '(printed nothing)')}")
        if self.echo and self.echo.note():
            say(self.echo.note())
        for pod in self._report_pods(result):
            lines = self._tail(pod, self.verbose)
            if pod.network_note:
                say(f"--- {pod.spec.name} when stopped: {pod.network_note}")
            if lines:
                say(f"--- last lines of {pod.spec.name} ({self._log_names(pod)}) ---")
                for line in lines:
                    say(f"    {line}")
        say()
        verdict = {"succeeded": "SUCCEEDED", "failed": "FAILED", "timeout": "TIMED OUT",
                   "interrupted": "INTERRUPTED"}[result.status]
        say(f"{verdict}: {result.message} ({result.duration:.1f}s); logs and summary.json in {self.run_dir}")

    def _report_pods(self, result: RunResult) -> list[PodRun]:
        """Pods whose logs explain the outcome: the failed ones, or the ones still running at the end."""
        if result.status == "succeeded":
            return []
        failed = [p for j in self.jobs for p in j.pods if p.phase == "Failed"]
        if failed:
            return failed
        return [p for j in self.jobs for p in j.pods if p.phase == "Stopped"]

    @staticmethod
    def _latest_attempts(job: JobRun) -> list[PodRun]:
        latest: dict[int, PodRun] = {}
        for pod in job.pods:
            latest[pod.index] = pod
        return [latest[i] for i in sorted(latest)]

    @staticmethod
    def _log_names(pod: PodRun) -> str:
        return ", ".join(str(c.log_path) for c in pod.sandbox.containers) or str(pod.sandbox.log_dir / "sandbox.log")

    @staticmethod
    def _tail(pod: PodRun, verbose: bool) -> list[str]:
        lines: list[str] = []
        for c in pod.sandbox.containers:
            try:
                text = c.log_path.read_text(errors="replace")
            except OSError:
                continue
            tail = [line for line, left_out in Filter().lines(text.splitlines()) if verbose or not left_out]
            tail = tail[-LOG_TAIL_LINES:]
            prefix = f"{c.spec.name}: " if len(pod.sandbox.containers) > 1 else ""
            lines += [prefix + line for line in tail]
        return lines
