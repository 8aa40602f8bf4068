"""What a change of runs does, in words: a re-render and a review say which run of which job starts,
which it replaces, and which stay as they are (see docs/runs.md).

A job with a `run` argument names its objects `<name>-<run>` and labels them `trainjobs.io/run`, so a
new run is new objects: the previous run's are deleted when its entry goes, and left alone when it stays.
"""

from typing import Any

from trainjobs.backends import is_workload
from trainjobs.kube.manifests import LABEL_JOB, LABEL_RUN


def _runs(objects: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Job name (without its run) -> the runs whose pods' objects (Jobs, a JobSet, ...) are among `objects`."""
    found: dict[str, set[str]] = {}
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        run, name = labels.get(LABEL_RUN), labels.get(LABEL_JOB)
        if run and name and name.endswith(f"-{run}") and is_workload(obj):
            found.setdefault(name.removesuffix(f"-{run}"), set()).add(run)
    return found


def run_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """Runs started, replaced and deleted from `before` (every object of the previous render) to
    `after` (every object of this one)."""
    old, new = _runs(before), _runs(after)
    lines = []
    for job in sorted(old.keys() | new.keys()):
        started, gone = sorted(new.get(job, set()) - old.get(job, set())), sorted(old.get(job, set()) -
                                                                                  new.get(job, set()))
        kept = sorted(old.get(job, set()) & new.get(job, set()))
        for run in started:
            if gone:
                lines.append(f"! job {job}: run {run} replaces {_runs_text(gone)}, deleted with its objects "
                             "(a run still training stops)")
            elif kept:
                lines.append(f"+ job {job}: run {run} starts beside {_runs_text(kept)}, left as it is")
            else:
                lines.append(f"+ job {job}: run {run} starts")
        if gone and not started:
            lines.append(f"- job {job}: {_runs_text(gone)} deleted with its objects (a run still training stops)")
    return lines


def _runs_text(runs: list[str]) -> str:
    return f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)}"
