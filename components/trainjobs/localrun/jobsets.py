"""JobSet semantics for a local run, and injected disruptions.

As the JobSet controller, for each JobSet among the rendered objects (its Jobs run as `jobs.JobRun`s):
- start order: a replicated job's Jobs are created once each `dependsOn` entry is met: `Ready`
  (every Job of it has its pods ready or succeeded) or `Complete` (every Job of it succeeded);
- `successPolicy`: the JobSet completes when All (or Any) Jobs of the target replicated jobs
  (default: all) complete; its Jobs still running are then stopped, as the controller deletes them;
- `failurePolicy`: without one, the first failed Job fails the JobSet. With one, the first rule that
  matches a failed Job (its reason, message, replicated job) decides: FailJobSet, or RestartJobSet
  (the default), which recreates every Job once all their pods are gone (BlockingRecreate), until
  `maxRestarts` restarts have been made; then the JobSet fails (ReachedMaxRestarts).

A disruption evicts a chosen pod as a preemption would: the pod gets the DisruptionTarget condition
and is stopped (SIGTERM, then SIGKILL after its grace period); its Job's podFailurePolicy decides
what that failure counts for.
"""

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainjobs.backends.jobset import API_VERSION, KIND, REPLICATED_JOB
from trainjobs.kube.policies import jobset_rule

if TYPE_CHECKING:
    from .jobs import JobRun, PodRun

DEFAULT_ACTION = "RestartJobSet"
EMULATED_ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")


@dataclass
class JobSetRun:
    name: str
    manifest: dict[str, Any]
    jobs: dict[str, list["JobRun"]]  # by replicated job, in the JobSet's order
    restarts: int = 0
    state: str = ""  # "", Completed, Failed
    reason: str = ""
    restarting: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        return self.manifest["spec"]

    def all_jobs(self) -> list["JobRun"]:
        return [job for jobs in self.jobs.values() for job in jobs]

    def step(self, now: float) -> None:
        """One reconcile: finish a restart, apply the failure or success policy, release Jobs in order."""
        if self.state:
            return
        if self.restarting:
            if not all(pod.settled for job in self.all_jobs() for pod in job.pods):
                return
            for job in self.all_jobs():
                job.recreate(now)
            self.restarting = False
        failed = sorted((j for j in self.all_jobs() if j.state == "Failed"), key=lambda j: j.finished or 0)
        if failed:
            return self._on_failure(failed, now)
        if self._succeeded():
            self.state, self.reason = "Completed", "AllJobsCompleted: jobset completed successfully"
            for job in self.all_jobs():
                for pod in list(job.active.values()):
                    pod.terminate(f"stopped: JobSet {self.name} completed", now)
                job.fail("Stopped", f"JobSet {self.name} completed", now, state="Stopped")
            return
        for replicated in self.spec["replicatedJobs"]:
            held = not self._dependencies_met(replicated)
            for job in self.jobs[replicated["name"]]:
                if job.held and not held:
                    job.started = now   # the controller creates the Job now
                job.held = held

    def _dependencies_met(self, replicated: dict[str, Any]) -> bool:
        for dependency in replicated.get("dependsOn") or []:
            for job in self.jobs[dependency["name"]]:
                if dependency["status"] == "Complete" and job.state != "Complete":
                    return False
                ready = len(job.succeeded) + sum(1 for pod in job.active.values() if pod.ready)
                if dependency["status"] == "Ready" and job.state != "Complete" and ready < job.spec.parallelism:
                    return False
        return True

    def _succeeded(self) -> bool:
        policy = self.spec.get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or list(self.jobs)
        done = [job.state == "Complete" for name in targets for job in self.jobs[name]]
        return any(done) if policy.get("operator") == "Any" else all(done)

    def _on_failure(self, failed: list["JobRun"], now: float) -> None:
        policy = self.spec.get("failurePolicy")
        first = failed[0]
        if policy is None:
            return self._fail("FailedJobs", f"jobset failed due to one or more job failures (first failed job: "
                                            f"{first.name}: {first.reason})", now)
        rule, job = None, first
        for candidate in policy.get("rules") or []:
            matched = [j for j in failed if jobset_rule([candidate], replicated_job(j), j.failure_reason,
                                                        j.failure_message)]
            if matched:
                rule, job = candidate, matched[0]
                break
        action = rule["action"] if rule else DEFAULT_ACTION
        why = f"Job {job.name}: {job.reason}" + (f" (rule {rule['name']})" if rule else "")
        if action == "FailJobSet":
            return self._fail("FailJobSetFailurePolicyAction", why, now)
        if action == "RestartJobSet" and self.restarts >= int(policy.get("maxRestarts", 0)):
            return self._fail("ReachedMaxRestarts", f"jobset failed due to reaching max number of restarts "
                                                    f"({self.restarts}); last: {why}", now)
        self.restarts += 1
        self.restarting = True
        for each in self.all_jobs():
            for pod in list(each.active.values()):
                pod.terminate(f"stopped: JobSet {self.name} restart {self.restarts}", now)
            each.active.clear()
            each.state, each.held = "Restarting", True
        self.reason = f"restart {self.restarts} after {why}"

    def _fail(self, reason: str, message: str, now: float) -> None:
        self.state, self.reason = "Failed", f"{reason}: {message}"
        for job in self.all_jobs():
            job.fail("Stopped", f"JobSet {self.name} failed", now, state="Stopped")


def replicated_job(job: "JobRun") -> str | None:
    """The replicated job a JobSet's Job belongs to, from the label its controller sets."""
    return ((job.spec.manifest.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB)


def jobset_runs(jobs: list["JobRun"]) -> tuple[list[JobSetRun], list[str]]:
    """A controller per JobSet whose Jobs run here (the object their pod sets were read from), and what
    of their policies is not emulated."""
    owners: dict[str, dict[str, Any]] = {}
    for job in jobs:
        owner = job.spec.pod_set.owner if job.spec.pod_set is not None else {}
        if owner.get("apiVersion") == API_VERSION and owner.get("kind") == KIND:
            owners.setdefault(owner["metadata"]["name"], owner)
    runs, notes = [], []
    for name, manifest in owners.items():
        mine = [j for j in jobs if j.spec.owner == name]
        by_replicated = {r["name"]: [j for j in mine if replicated_job(j) == r["name"]]
                         for r in manifest["spec"]["replicatedJobs"]}
        runs.append(JobSetRun(name, manifest, by_replicated))
        for rule in (manifest["spec"].get("failurePolicy") or {}).get("rules") or []:
            if rule["action"] not in EMULATED_ACTIONS:
                notes.append(f"JobSet {name}: failure policy action {rule['action']} is not emulated")
    return runs, notes


@dataclass
class Disruption:
    """Evict the pod with this hostname `after_seconds` after its containers started, or once its
    output holds `after_output`; once."""

    hostname: str
    after_seconds: float | None = None
    after_output: str | None = None
    done: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> "Disruption":
        """`HOSTNAME@SECONDS` or `HOSTNAME@output:TEXT`."""
        hostname, at, when = text.partition("@")
        if not at or not hostname:
            raise ValueError(f"--disrupt {text}: expected HOSTNAME@SECONDS or HOSTNAME@output:TEXT")
        if when.startswith("output:") and len(when) > len("output:"):
            return cls(hostname, after_output=when[len("output:"):])
        match = re.fullmatch(r"(\d+(?:\.\d+)?)s?", when)
        if not match:
            raise ValueError(f"--disrupt {text}: {when!r} is neither seconds (e.g. 30) nor output:TEXT")
        return cls(hostname, after_seconds=float(match.group(1)))

    def due(self, pod: "PodRun", now: float) -> bool:
        if self.done or pod.done or pod.spec.slot.hostname != self.hostname or pod.phase != "Running":
            return False
        if self.after_seconds is not None:
            return now - pod.started >= self.after_seconds
        for container in pod.sandbox.containers:
            try:
                if self.after_output in container.log_path.read_text(errors="replace"):
                    return True
            except OSError:
                continue
        return False
