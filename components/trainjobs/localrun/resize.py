"""Admitting part of a Job, and resizing a running one, as Kueue and the Job controller do.

`--admit JOB=N` runs only a Job's first N indexes, as Kueue's partial admission starts a Job that has it
(it rewrites `parallelism`, and `completions` too with `job-completions-equal-parallelism`).
`--resize JOB=N@WHEN` sets a running Job's `parallelism` and `completions` to N, as scaling an elastic
Indexed Job does (under Kueue a Job marked `elastic-job`, for which growing is a new workload slice): the
new indexes get pods;
on a shrink the Job controller removes the pods of the indexes past N, highest first, counted neither as
failed nor as succeeded. A Job's resizes apply in the order given, each once the one before it is done,
so a test drives them by what the training prints rather than by the clock.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from trainjobs.scheduling.kueue import ELASTIC_JOB, MIN_PARALLELISM
from .plan import JobSpec, PlanError


def _count(option: str, text: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise PlanError(f"{option} {text}: {value!r} is not a number of pods (1 or more)")
    return int(value)


@dataclass(frozen=True)
class Admission:
    """Run `pods` of the Job's indexes, as Kueue admits part of it."""

    job: str
    pods: int

    @classmethod
    def parse(cls, text: str) -> "Admission":
        """`JOB=N`."""
        job, eq, pods = text.partition("=")
        if not eq or not job:
            raise PlanError(f"--admit {text}: expected JOB=N (e.g. myjob-node-0=2)")
        return cls(job, _count("--admit", text, pods))

    def check(self, spec: JobSpec) -> None:
        _check_resizable("--admit", self.job, self.pods, spec)
        minimum = (spec.manifest["metadata"].get("annotations") or {}).get(MIN_PARALLELISM)
        if minimum is None and self.pods < len(spec.slots):
            # Kueue's Workload has a minCount only from this annotation: without it the Job is admitted whole or waits.
            raise PlanError(f"--admit {self.job}={self.pods}: Kueue admits a Job in part only with partial admission "
                            f"({MIN_PARALLELISM}, elastic_admission: partial); it admits this Job whole or not at all")
        if minimum is not None and minimum.isdigit() and self.pods < int(minimum):
            raise PlanError(f"--admit {self.job}={self.pods}: Kueue admits at least {minimum} of its pods "
                            f"({MIN_PARALLELISM}), never fewer")

    def apply(self, spec: JobSpec) -> None:
        spec.completions = spec.parallelism = self.pods


@dataclass
class Resize:
    """Set the Job's parallelism and completions to `pods`, `after_seconds` after the Job started or once
    one of its pods prints `after_output` (after the Job's previous resize); once."""

    job: str
    pods: int
    after_seconds: float | None = None
    after_output: str | None = None
    done: bool = field(default=False, compare=False)
    _seen: dict[Path, int] = field(default_factory=dict, compare=False)   # log sizes when it was armed

    @classmethod
    def parse(cls, text: str) -> "Resize":
        """`JOB=N@SECONDS` or `JOB=N@output:TEXT`."""
        target, at, when = text.partition("@")
        job, eq, pods = target.partition("=")
        if not at or not eq or not job:
            raise PlanError(f"--resize {text}: expected JOB=N@SECONDS or JOB=N@output:TEXT")
        count = _count("--resize", text, pods)
        if when.startswith("output:") and len(when) > len("output:"):
            return cls(job, count, after_output=when[len("output:"):])
        match = re.fullmatch(r"(\d+(?:\.\d+)?)s?", when)
        if not match:
            raise PlanError(f"--resize {text}: {when!r} is neither seconds (e.g. 30) nor output:TEXT")
        return cls(job, count, after_seconds=float(match.group(1)))

    def check(self, spec: JobSpec) -> None:
        _check_resizable("--resize", self.job, self.pods, spec)
        annotations = spec.manifest["metadata"].get("annotations") or {}
        if MIN_PARALLELISM in annotations:
            raise PlanError(f"--resize {self.job}: Kueue admitted this Job in part ({MIN_PARALLELISM}) and keeps its "
                            f"size until it ends; a Job that Kueue resizes is marked {ELASTIC_JOB} "
                            "(elastic_admission: slices)")

    def describe(self) -> str:
        when = (f"{self.after_seconds:g}s after it starts" if self.after_seconds is not None
                else f"once one of its pods prints {self.after_output!r}")
        return f"resize: Job {self.job} to {self.pods} pod(s) {when}"

    def arm(self, logs: list[Path]) -> None:
        """From now on, only what the Job's pods print next can trigger it."""
        for path in logs:
            if path not in self._seen:
                self._seen[path] = _size(path)

    def due(self, started: float, now: float, logs: list[Path]) -> bool:
        if self.done:
            return False
        if self.after_seconds is not None:
            return now - started >= self.after_seconds
        for path in logs:
            try:
                with open(path, "rb") as log:
                    log.seek(self._seen.get(path, 0))
                    if self.after_output.encode() in log.read():
                        return True
            except OSError:
                continue
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _check_resizable(option: str, job: str, pods: int, spec: JobSpec) -> None:
    """What Kubernetes and Kueue let change: an Indexed Job's parallelism with its completions, up to the pods
    it was made for; never a JobSet's Job (Kueue admits and sizes a JobSet whole)."""
    if spec.owner is not None:
        raise PlanError(f"{option} {job}: its JobSet {spec.owner} creates it, and Kueue admits a JobSet whole and "
                        "never resizes it")
    if not spec.indexed or spec.completions != spec.parallelism:
        raise PlanError(f"{option} {job}: only an Indexed Job whose completions equal its parallelism can run with "
                        "fewer pods or be resized")
    if pods > len(spec.slots):
        raise PlanError(f"{option} {job}={pods}: the Job is made for {len(spec.slots)} pod(s) at most")


def resolve(admissions: list[Admission], resizes: list[Resize], jobs: list[JobSpec]) -> None:
    """Check each option against the Job it names, and apply the admissions; PlanError before anything runs."""
    by_name = {job.name: job for job in jobs}
    for option, item in [("--admit", a) for a in admissions] + [("--resize", r) for r in resizes]:
        if item.job not in by_name:
            raise PlanError(f"{option} {item.job}: no such Job runs; Jobs: {', '.join(sorted(by_name)) or 'none'}")
        item.check(by_name[item.job])
    for admission in admissions:
        admission.apply(by_name[admission.job])
