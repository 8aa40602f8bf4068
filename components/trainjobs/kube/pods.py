"""The pods an object makes: each pod template of a Job or a JobSet, and how many pods it gives.

Reads rendered objects (or what Pulumi hands a policy, where numbers arrive as floats), so the render
summary and the policy rules count pods alike.
"""

from collections.abc import Iterator, Mapping
from typing import Any


def kind(obj: Mapping[str, Any]) -> str:
    return obj.get("kind", "")


def describe(obj: Mapping[str, Any]) -> str:
    """`Kind name`, as messages and diagrams name an object."""
    return f"{kind(obj)} {(obj.get('metadata') or {}).get('name', '?')}"


def _count(value: Any, default: int = 1) -> int:
    """A count as an int: Pulumi hands numbers to policies as floats (2.0)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def job_pods(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs to completion: `completions`, else `parallelism`, else 1 (an Indexed Job's
    highest pod index is one less)."""
    return _count(job_spec.get("completions"), _count(job_spec.get("parallelism")))


def running_pods(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once: `parallelism` (1 if unset), at most its `completions`."""
    return min(_count(job_spec.get("parallelism")), job_pods(job_spec))


def pod_templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    """(what, pods running at once, pod template) of each pod template in a Pod, a Job or a JobSet; nothing
    for other kinds."""
    if kind(obj) == "Pod":
        yield describe(obj), 1, obj
    elif kind(obj) == "Job":
        spec = obj.get("spec") or {}
        yield describe(obj), running_pods(spec), spec.get("template") or {}
    elif kind(obj) == "JobSet":
        for replicated in (obj.get("spec") or {}).get("replicatedJobs") or []:
            job = (replicated.get("template") or {}).get("spec") or {}
            yield (f"{describe(obj)} job {replicated.get('name', '?')}",
                   _count(replicated.get("replicas")) * running_pods(job), job.get("template") or {})
