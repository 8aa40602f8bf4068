"""Job semantics for a local run: Indexed completion, backoff, deadlines and the failure policy.

As the Job controller, for each selected Job:
- pods are started up to `parallelism`; in Indexed mode each index must succeed once, and the
  Job is Complete when every index has;
- a pod fails when one of its containers exits non-zero (restartPolicy Never); each failed pod
  counts against `backoffLimit`, and a failed index gets a new pod after the controller's backoff
  (10 s, doubling) while failures stay within the limit. Beyond it the Job fails
  (BackoffLimitExceeded) and its running pods are stopped: with `backoffLimit: 0` the first failed
  pod stops the rest. A failed Job's stopped pods count as failed pods too, as the controller that
  deletes them counts them in `status.failed`;
- `activeDeadlineSeconds` fails the Job (DeadlineExceeded) and stops its pods;
- `podFailurePolicy` decides first, by the first matching rule (`trainjobs.kube.policies`): FailJob fails the Job
  at once (PodFailurePolicy), Ignore replaces the pod without counting it (a disruption, by default),
  FailIndex fails the index; with `backoffLimitPerIndex` failures count per index, and
  `maxFailedIndexes` bounds how many may fail. A replacement starts once the failed pod is gone.

The run itself, its JobSets and its disruptions and resizes are driven by `run.py`.
"""

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable

from trainjobs.kube.policies import (BACKOFF_LIMIT_EXCEEDED, DEADLINE_EXCEEDED, DISRUPTION_TARGET, FAILED_INDEXES,
                                     MAX_FAILED_INDEXES_EXCEEDED, POD_FAILURE_POLICY, pod_verdict)
from .plan import JobSpec, PodSpec
from .pods import ContainerRun, Sandbox


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
        verdict = (pod_verdict(self.spec.pod_failure_rules, f"{self.spec.namespace}/{pod.spec.name}",
                               pod.exit_codes(), pod.conditions)
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
        if state == "Failed":   # the Job controller deletes the running pods: they end Failed, and count in status.failed
            self.failures += len(self.active)
        for pod in list(self.active.values()):
            pod.terminate(f"stopped: Job {state.lower()}", now)
        self.pending.clear()
