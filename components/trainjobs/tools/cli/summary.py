"""The render's summary for review: a Markdown page with one Mermaid diagram per job.

A pull request that changes a stack shows `summary.md` as pictures (GitHub renders Mermaid blocks), so a
reviewer sees each job's objects, what each is created after, its pods and what it asks the cluster
for, without reading YAML. Built from the same registrations as the render tree. Rendered over a previous
render, it also says what the change does: objects added, removed and replaced, which jobs' training
restarts, and the GPUs it adds or frees.
"""

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from trainjobs.backends import PodSet, pod_count, pod_sets, total_requests
from trainjobs.kube.manifests import MIN_PODS
from trainjobs.scheduling import placement_of
from trainjobs.kube.resources import is_gpu
from trainjobs.tools.engine import RegisteredResource, StackResult

SUMMARY_FILE = "summary.md"
_KIND_ORDER = ("Namespace", "ServiceAccount", "Secret", "ConfigMap", "Service", "Job")
# The totals a job's heading shows, when its pods request them: what a reviewer weighs a change by.
_SHOWN = (("GPUs", is_gpu), ("CPU", lambda name: name == "cpu"),
          ("memory", lambda name: name == "memory"))


def pods_text(count: int, fewest: int | None = None) -> str:
    """`1 pod`, `4 pods`, or `2–4 pods` when elastic Jobs may run fewer: as the tree, the summary and explain
    count pods."""
    if fewest is not None and fewest < count:
        return f"{fewest}–{count} pods"
    return f"{count} pod{'' if count == 1 else 's'}"


def sort_key(obj: dict[str, Any]) -> tuple:
    """The order of objects in the render's files, the tree and the summary."""
    kind = obj["kind"]
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    return (obj["metadata"].get("namespace", ""), rank, kind, obj["metadata"]["name"])


@dataclass(frozen=True)
class Changes:
    """What a re-render changes: the change list the terminal prints, and what the summary a pull request
    shows says of it."""

    lines: tuple[str, ...]
    """The runs started and replaced, then each object's change (`changes`)."""
    counts: Mapping[str, int]
    """Objects created, deleted, replaced and updated in place."""
    restarts: tuple[str, ...]
    """Jobs whose training starts over: an object that runs their pods is replaced."""
    starts: tuple[str, ...]
    """Jobs whose pods an added object runs."""
    stops: tuple[str, ...]
    """Jobs whose pods a deleted object ran: their training stops."""
    gpus_before: int
    gpus_after: int


def fewest_pods(sets: Iterable[PodSet]) -> int:
    """The pods the sets run at the least: an elastic job's (`trainjobs.io/min-pods`), else all they run."""
    def fewest(pod_set: PodSet) -> int:
        value = (((pod_set.job or {}).get("metadata") or {}).get("annotations") or {}).get(MIN_PODS, "")
        return min(int(value), pod_set.running) if value.isdigit() else pod_set.running
    return sum(fewest(s) for s in sets)


def _label(resource: RegisteredResource, manifest: dict[str, Any] | None) -> str:
    if manifest is not None:
        return f"{manifest['kind']} {manifest['metadata']['name']}"
    return f"{resource.type.rsplit(':', 1)[-1]} {resource.name}"


def _node_text(label: str, manifest: dict[str, Any] | None) -> str:
    text = label
    if manifest is not None and pod_sets([manifest]):
        text += f"<br/>{pods_text(pod_count([manifest]), fewest_pods(pod_sets([manifest])))}"
    return text.replace('"', "#quot;")


def totals_text(manifests: list[dict[str, Any]]) -> str:
    """`4 pods · 32 GPUs · CPU 64 · memory 512Gi`: the pods, and each total the pods request."""
    parts = [pods_text(pod_count(manifests), fewest_pods(pod_sets(manifests)))]
    requested = total_requests(manifests)
    for title, matches in _SHOWN:
        names = [name for name in requested if matches(name)]
        if title == "GPUs":
            parts += [f"{requested[name]} GPUs ({name})" if len(names) > 1 else f"{requested[name]} GPUs"
                      for name in names]
        else:
            parts += [f"{title} {requested[name]}" for name in names]
    return " · ".join(parts)


def placement_text(manifests: list[dict[str, Any]], every: list[dict[str, Any]]) -> list[str]:
    """`Placement: `llm-node-0` required example.com/rack (Kueue)`, for each pod set that has one."""
    placed = [(s.name, placement_of(s, every)) for s in pod_sets(manifests)]
    shown = [f"`{name}` {where}" for name, where in placed if where]
    return [f"Placement: {'; '.join(shown)}.", ""] if shown else []


def _plural(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _jobs(names: tuple[str, ...]) -> str:
    return ("job " if len(names) == 1 else "jobs ") + ", ".join(f"`{name}`" for name in names)


def _their(names: tuple[str, ...]) -> str:
    return "its" if len(names) == 1 else "their"


def changes_text(changes: Changes) -> list[str]:
    """The summary's account of a re-render: counts, training that restarts, starts or stops, the GPUs the
    change adds or frees, then the change list itself."""
    lines = ["## Changes since the previous render", ""]
    counted = [f"{count} {change}" for change, count in changes.counts.items() if count]
    lines += [f"Objects: {', '.join(counted)}." if counted else "Objects: none changed.", ""]
    if changes.restarts:
        lines += [f"**Training restarts** for {_jobs(changes.restarts)}: {_their(changes.restarts)} pods are "
                  "replaced, and training starts again from the beginning.", ""]
    if changes.stops:
        lines += [f"**Training stops** for {_jobs(changes.stops)}: {_their(changes.stops)} pods are deleted.", ""]
    if changes.starts:
        lines += [f"Training starts for {_jobs(changes.starts)}.", ""]
    delta = changes.gpus_after - changes.gpus_before
    gpus = (f"adds {_plural(delta, 'GPU')} ({changes.gpus_before} before, {changes.gpus_after} after)" if delta > 0
            else f"frees {_plural(-delta, 'GPU')} ({changes.gpus_before} before, {changes.gpus_after} after)"
            if delta < 0 else f"leaves the GPUs requested as they were ({changes.gpus_after})")
    lines += [f"The change {gpus}.", "",
              "```text", *changes.lines, "```", ""]
    return lines


def summary(result: StackResult, changes: Changes | None = None) -> str:
    """The summary page: the stack's totals, what changed since the previous render (given `changes`; a
    render that changes nothing writes the page a first render writes),
    then each component (each job, and others such as a TrainingNamespace) with its objects as a Mermaid
    flowchart in which an arrow leads from an object to each object created after it."""
    by_urn = {r.urn: r for r in result.resources}
    manifests = {r.urn: r.manifest for r in result.kubernetes()}
    children: dict[str | None, list[RegisteredResource]] = {}
    for resource in result.resources:
        children.setdefault(resource.parent_urn, []).append(resource)

    def owned(urn: str) -> list[RegisteredResource]:
        """A component's objects, in the render's order (registration order varies with Outputs)."""
        found = []
        for child in children.get(urn, []):
            found += [child] if child.custom else []
            found += owned(child.urn)
        return sorted(found, key=lambda r: sort_key(manifests[r.urn]) if r.urn in manifests else ("~", r.type, r.name))

    jobs = sorted((r for r in result.resources if not r.custom and owned(r.urn)
                   and any(o.urn in manifests for o in owned(r.urn))), key=lambda r: (r.type, r.name))
    every = list(manifests.values())
    trains = sum(1 for component in jobs if component.type.endswith("TrainJob"))
    others = len(jobs) - trains
    counted = f"{trains} job{'s' if trains != 1 else ''}" + (
        f" and {others} other component{'s' if others != 1 else ''}" if others else "")
    lines = [f"# Stack {result.project}-{result.stack}", "", f"{counted}: {totals_text(every)}.", "",
             "Each diagram is one job (or other component): its objects, and an arrow from each object to those "
             "created after it (under `pulumi up`, and in this order by GitOps tools that follow it). Objects from "
             "outside the job are drawn with dashed borders.", ""]
    if changes is not None and changes.lines:
        lines[4:4] = changes_text(changes)
    for job in jobs:
        objects = owned(job.urn)
        inside = {o.urn for o in objects}
        outside = sorted({dep for o in objects for dep in o.dependencies
                          if dep in by_urn and dep not in inside and by_urn[dep].custom},
                         key=lambda urn: _label(by_urn[urn], manifests.get(urn)))
        ids = {urn: f"o{i}" for i, urn in enumerate([o.urn for o in objects] + outside)}
        mine = [manifests[o.urn] for o in objects if o.urn in manifests]
        lines += [f"## {job.type.rsplit(':', 1)[-1]} {job.name}", "", totals_text(mine), ""]
        lines += placement_text(mine, every)
        lines += ["```mermaid", "flowchart LR", "  classDef outside stroke-dasharray: 4 3"]
        for urn in outside:
            label = _label(by_urn[urn], manifests.get(urn))
            lines.append(f'  {ids[urn]}["{_node_text(label, manifests.get(urn))}"]:::outside')
        lines.append(f'  subgraph job["{job.name}"]')
        for o in objects:
            lines.append(f'    {ids[o.urn]}["{_node_text(_label(o, manifests.get(o.urn)), manifests.get(o.urn))}"]')
        lines.append("  end")
        after = {urn: {d for d in by_urn[urn].dependencies if d in ids} for urn in ids}
        for o in objects:
            for dep in sorted(_direct(after, o.urn), key=lambda d: ids[d]):
                lines.append(f"  {ids[dep]} --> {ids[o.urn]}")
        lines += ["```", ""]
    return "\n".join(lines)


def _direct(after: dict[str, set[str]], urn: str) -> set[str]:
    """What `urn` is created after, less what it follows anyway through another of those: the arrows
    that remain say the whole order, and the picture stays readable."""
    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for dep in after.get(todo.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    before = after.get(urn, set())
    implied = set().union(*(reachable(dep) for dep in before)) if before else set()
    return before - implied
