"""Offline render: a Pulumi program's Kubernetes objects as YAML files, with no CLI and no cluster.

The program runs under mocks; every Kubernetes object it registers is written as one YAML
document per file, named as pulumi-kubernetes' renderYamlToDirectory names them, with stable
key order and secrets redacted, so re-running gives byte-identical files for review in a PR.
"""

import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from .podview import pod_views
from .testing import StackResult

MARKER = ".trainjobs-render"
RANKS_FILE = "ranks.txt"
_FIRST_KEYS = ("apiVersion", "kind", "metadata", "name", "namespace")
_KIND_ORDER = ("Namespace", "ServiceAccount", "Secret", "ConfigMap", "Service", "Job")


class _Dumper(yaml.SafeDumper):
    pass


def _represent_dict(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    ordered = [k for k in _FIRST_KEYS if k in data] + sorted(k for k in data if k not in _FIRST_KEYS)
    return dumper.represent_mapping("tag:yaml.org,2002:map", [(k, data[k]) for k in ordered])


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(dict, _represent_dict)
_Dumper.add_representer(str, _represent_str)


def to_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, width=120, allow_unicode=True)


def sort_key(obj: dict[str, Any]) -> tuple:
    kind = obj["kind"]
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    return (obj["metadata"].get("namespace", ""), rank, kind, obj["metadata"]["name"])


def file_name(obj: dict[str, Any]) -> str:
    """`<apiVersion>-<kind>-<namespace>-<name>.yaml`, as renderYamlToDirectory names files."""
    api = obj["apiVersion"].replace("/", "_")
    namespace = obj["metadata"].get("namespace", "default")
    return f"{api}-{obj['kind'].lower()}-{namespace}-{obj['metadata']['name']}.yaml"


def kubernetes_objects(result: StackResult, redact: bool = True) -> list[dict[str, Any]]:
    objects = [r.redacted_manifest if redact else r.manifest for r in result.kubernetes()]
    return sorted(objects, key=sort_key)


def write(result: StackResult, out: Path) -> list[Path]:
    """Replace `out`'s rendered files with this result's. Refuses a directory it did not write."""
    objects = kubernetes_objects(result)
    documents = {file_name(obj): to_yaml(obj) for obj in objects}
    documents[RANKS_FILE] = ranks_text(objects)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise FileExistsError(f"{out} is not empty and was not written by `trainjobs render`; "
                              "choose another --out directory")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("Written by `trainjobs render`; the directory is replaced on each render.\n")
    paths = []
    for name, text in sorted(documents.items()):
        path = out / name
        path.write_text(text)
        paths.append(path)
    return paths


def tree(result: StackResult) -> str:
    """The components and the objects under them, as an indented tree."""
    lines = [f"Stack {result.project}-{result.stack}"]
    roots = sorted((r for r in result.resources if r.parent_urn is None), key=lambda r: (r.type, r.name))

    def walk(resource, prefix: str, last: bool) -> None:
        branch = "└─ " if last else "├─ "
        if resource.is_kubernetes:
            obj = resource.manifest
            detail = ""
            if obj["kind"] == "Job":
                detail = f"  ({obj['spec'].get('completions', 1)} pods)"
            label = f"{obj['kind']} {obj['metadata']['name']}{detail}"
        else:
            label = f"{resource.type.rsplit(':', 1)[-1]} {resource.name}"
        lines.append(prefix + branch + label)
        children = sorted(result.children(resource), key=lambda r: (sort_key(r.manifest) if r.is_kubernetes else ("~", r.name)))
        for i, child in enumerate(children):
            walk(child, prefix + ("   " if last else "│  "), i == len(children) - 1)

    for i, root in enumerate(roots):
        walk(root, "", i == len(roots) - 1)
    return "\n".join(lines)


def ranks_text(objects: list[dict[str, Any]], job: str | None = None) -> str:
    """Per pod: DNS names, the env it really sees and its mounted config files (secrets redacted)."""
    out: list[str] = []
    every_pod = pod_views(objects)
    for pod in (p for p in every_pod if job is None or p.job == job):
        out.append(f"pod {pod.hostname}  (Job {pod.job}, index {pod.index})")
        if pod.dns_names:
            out.append(f"  dns: {'  '.join(pod.dns_names)}")
        for listing in _host_listings(pod, every_pod):
            out.append(f"  host: {listing}")
        for kind, containers in (("init container", pod.init_containers), ("container", pod.containers)):
            for c in containers:
                out.append(f"  {kind} {c.name}: {c.image}")
                if c.command or c.args:
                    out.append("    run: " + shlex.join(c.command + c.args).replace("\n", "\n         "))
                for name, value in c.env.items():
                    source = f"   <- {c.env_sources[name]}" if name in c.env_sources else ""
                    out.append(f"    {name}={value}{source}")
        for path, (content, mode) in sorted(pod.files.items()):
            out.append(f"  file {path} (mode {mode:04o}):")
            out.extend(f"    | {line}" for line in content.splitlines())
        out.append("")
    return "\n".join(out)


def _host_listings(pod, every_pod) -> list[str]:
    """Where another pod's mounted files (an MPI hostfile, say) list this pod by its DNS name."""
    listings = []
    for other in every_pod:
        for path, (content, _) in sorted(other.files.items()):
            for line in content.splitlines():
                host = line.split()[0].split(":")[0] if line.strip() else ""
                if host in pod.dns_names:
                    listings.append(f"{line.strip()!r} in {path} of pod {other.hostname}")
    return listings


# --- what a re-render changes ---------------------------------------------------------------------

# Fields whose change makes pulumi-kubernetes replace the object rather than update it.
_REPLACED_BY = {
    "Job": ("spec.template", "spec.completions", "spec.parallelism", "spec.completionMode", "spec.selector"),
    "ConfigMap": ("data", "binaryData"),
    "Secret": ("data", "stringData", "type"),
    "PersistentVolumeClaim": ("spec",),
    "Service": ("spec.clusterIP",),
}


def read_rendered(out: Path) -> list[dict[str, Any]]:
    """The objects of a previous render in `out` (none if it holds none)."""
    if not (out / MARKER).exists():
        return []
    return [yaml.safe_load(path.read_text()) for path in sorted(out.glob("*.yaml"))]


def changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """What applying `after` over `before` does to each object, and which changes restart training.

    A Job is replaced when its pod template or counts change; Kubernetes cannot update them, so the
    running pods are deleted and training starts again from the beginning.
    """
    def key(obj):
        return (obj["kind"], obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])

    old = {key(o): o for o in before}
    new = {key(o): o for o in after}
    lines = []
    for k in sorted(set(old) | set(new)):
        kind, _, name = k
        if k not in old:
            lines.append(f"+ {kind} {name}: created")
        elif k not in new:
            lines.append(f"- {kind} {name}: deleted" + (" (its training stops)" if kind == "Job" else ""))
        elif old[k] != new[k]:
            paths = _changed_paths(old[k], new[k])
            replaced = [p for p in paths if any(p == f or p.startswith(f + ".") or p.startswith(f + "[")
                                                for f in _REPLACED_BY.get(kind, ()))]
            shown = ", ".join(paths[:4]) + (f", ... ({len(paths)} fields)" if len(paths) > 4 else "")
            if replaced and kind == "Job":
                lines.append(f"! {kind} {name}: replaced, TRAINING RESTARTS ({shown})")
            elif replaced:
                lines.append(f"~ {kind} {name}: replaced ({shown})")
            else:
                lines.append(f"~ {kind} {name}: updated in place ({shown})")
    return lines


def _changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for k in sorted(set(old) | set(new), key=str):
            found += _changed_paths(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for i, (a, b) in enumerate(zip(old, new)):
            found += _changed_paths(a, b, f"{path}[{i}]")
        return found
    return [] if old == new else [path]
