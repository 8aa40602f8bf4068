"""A local run and its outcome: every selected Job's pods, as the Job controller (`jobs.py`) and the JobSet
controller (`jobsets.py`) run them, until they finish.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainjobs.observe.local import RUN_DIR_PREFIX
from trainjobs.tools.podview import ObjectIndex
from .jobs import Console, Echo, JobRun, PodRun
from .jobsets import Disruption, jobset_runs
from .network import Network
from . import objects as api_objects
from .output import Filter
from .plan import Selection, pod_spec
from .resize import Resize
from .pods import Holders, Sandbox, SandboxError, tcp_sockets

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
        self.run_dir = run_root / f"{RUN_DIR_PREFIX}{self.network.prefix}"
        self._signal: int | None = None
        self._stopping: list[PodRun] = []
        self.holders: Holders | None = None
        self.node_name = socket.gethostname()
        self._written: tuple = ()

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
        self._write_objects(finished=True)
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
            self._write_objects()
            if all(j.state and j.state != "Restarting" for j in self.jobs) and not self._stopping:
                return self._outcome()
            time.sleep(TICK)

    def _write_objects(self, finished: bool = False) -> None:
        """The run's objects for `trainjobs status --local`, when a pod, Job or JobSet has changed."""
        seen = (finished, tuple((p.spec.name, p.phase, p.exit_code, tuple(p.conditions)) for j in self.jobs for p in j.pods),
                tuple((j.state, j.failures) for j in self.jobs), tuple((s.state, s.restarts) for s in self.jobsets))
        if seen != self._written:
            self._written = seen
            api_objects.write(self.run_dir, self.jobs, self.jobsets, self.node_name, finished)

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
