"""Offline render: a Pulumi program's Kubernetes objects as YAML files, with no CLI and no cluster.

The program runs under mocks; every Kubernetes object it registers is written as one YAML
document per file, named as pulumi-kubernetes' renderYamlToDirectory names them, with stable
key order and secrets redacted, so re-running gives byte-identical files for review in a PR.
YAML goes through libyaml when it is installed; the pure-Python dumper writes the same bytes.
"""

import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from yaml.events import DocumentStartEvent, ScalarEvent

from trainjobs.core.deferred import REDACTED
from trainjobs.backends import (controller_jobs, is_workload, pod_count, pod_set_requests, pod_sets, replaced_on,
                                total_requests)
from trainjobs.scheduling import placement_of
from trainjobs.kube import requests
from trainjobs.kube.quantity import parse_quantity
from trainjobs.kube.resources import is_gpu
from trainjobs.tools.podview import MountedFile, ObjectIndex, PodView, pod_view
from trainjobs.tools.engine import StackResult
from trainjobs.tools.cli.runs import run_changes
from trainjobs.tools.cli.summary import SUMMARY_FILE, Changes, fewest_pods, pods_text, sort_key, summary

MARKER = ".trainjobs-render"
RANKS_FILE = "ranks.txt"
TREE_FILE = "tree.txt"
# A Job with more pods than this is summarised in ranks.txt and `explain`: its first and last
# PODS_AT_EACH_END pods are shown in full, the pods between once, as a template with `<index>`
# where each has its completion index (the only place where their views differ).
FULL_PODS_PER_JOB = 16
PODS_AT_EACH_END = 2
_FIRST_KEYS = ("apiVersion", "kind", "metadata", "name", "namespace")

# --- YAML ------------------------------------------------------------------------------------------

# Strings with a character libyaml only writes escaped (controls, C1, line and paragraph separators,
# byte order mark, beyond the BMP) are written double-quoted by both dumpers.
_NEEDS_ESCAPES = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
_ESCAPED_IN_DOUBLE_QUOTES = re.compile('[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]|["\\\\\x85\u2028\u2029\ufeff]')
_LINE_BREAK = re.compile("[\r\n\x85\u2028\u2029]")


def _represent_dict(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    ordered = [k for k in _FIRST_KEYS if k in data] + sorted(k for k in data if k not in _FIRST_KEYS)
    return dumper.represent_mapping("tag:yaml.org,2002:map", [(k, data[k]) for k in ordered])


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    """Multi-line text as a literal block; text that needs escapes double-quoted, as both dumpers agree."""
    style = '"' if _NEEDS_ESCAPES.search(data) else "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


class PythonDumper(yaml.SafeDumper):
    """PyYAML's pure-Python dumper, made to write what libyaml writes where the two differ:
    folding of long double-quoted strings, which keys stay simple, and the `...` that ends a
    document whose last block scalar kept its trailing line breaks."""

    _kept_breaks = False

    def check_simple_key(self) -> bool:
        if isinstance(self.event, ScalarEvent):  # one line of at most 128 bytes
            return not _LINE_BREAK.search(self.event.value) and len(self.event.value.encode()) <= 128
        return super().check_simple_key()

    def determine_block_hints(self, text: str) -> str:
        hints = super().determine_block_hints(text)
        self._kept_breaks = hints.endswith("+")
        return hints

    def expect_document_start(self, first: bool = False) -> None:
        if isinstance(self.event, DocumentStartEvent):
            self._kept_breaks = False
        elif self._kept_breaks:  # the stream ends right after a `|+` block scalar
            self.open_ended = True
        super().expect_document_start(first)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """libyaml's way: the same escapes, and a fold at the first space past the width."""
        self.write_indicator('"', True)
        spaces = False
        for i, ch in enumerate(text):
            if _ESCAPED_IN_DOUBLE_QUOTES.match(ch):
                if ch in self.ESCAPE_REPLACEMENTS:
                    data = "\\" + self.ESCAPE_REPLACEMENTS[ch]
                elif ch <= "\xff":
                    data = f"\\x{ord(ch):02X}"
                elif ch <= "\uffff":
                    data = f"\\u{ord(ch):04X}"
                else:
                    data = f"\\U{ord(ch):08X}"
                spaces = False
            elif ch == " ":
                # The fold stands for this space; a space right after it would be lost, so it is escaped.
                if split and not spaces and self.column > self.best_width and 0 < i < len(text) - 1:
                    self.write_indent()
                    data = "\\" if text[i + 1] == " " else ""
                else:
                    data = " "
                spaces = True
            else:
                data = ch
                spaces = False
            self.column += len(data)
            self.stream.write(data)
        self.write_indicator('"', False)


class _LibyamlDumper(yaml.CSafeDumper if yaml.__with_libyaml__ else PythonDumper):
    """libyaml's dumper where it is installed."""


for _dumper in (PythonDumper, _LibyamlDumper):
    _dumper.add_representer(dict, _represent_dict)
    _dumper.add_representer(str, _represent_str)
DUMPER = _LibyamlDumper
LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


def to_yaml(obj: Any, dumper: type = DUMPER) -> str:
    return yaml.dump(obj, Dumper=dumper, default_flow_style=False, width=120, allow_unicode=True)


def file_name(obj: dict[str, Any]) -> str:
    """`<apiVersion>-<kind>-<namespace>-<name>.yaml`, as renderYamlToDirectory names files."""
    api = obj["apiVersion"].replace("/", "_")
    namespace = obj["metadata"].get("namespace", "default")
    return f"{api}-{obj['kind'].lower()}-{namespace}-{obj['metadata']['name']}.yaml"


def kubernetes_objects(result: StackResult, redact: bool = True) -> list[dict[str, Any]]:
    objects = [r.redacted_manifest if redact else r.manifest for r in result.kubernetes()]
    return sorted(objects, key=sort_key)


def files(result: StackResult, objects: list[dict[str, Any]],
          previous: dict[str, str] | None = None) -> tuple[dict[str, str], Changes | None]:
    """Every file of a render, by name: one YAML file per object (`objects`: the result's
    `kubernetes_objects`), the per-pod view, the tree and the summary with its diagrams; and, given the
    `previous` render's files, what this render changes (the summary shows it too)."""
    texts = {file_name(obj): to_yaml(obj) for obj in objects}
    texts[RANKS_FILE] = ranks_text(objects)
    texts[TREE_FILE] = tree(result) + "\n"
    changed = changes_since(previous, texts, objects) if previous else None
    texts[SUMMARY_FILE] = summary(result, changed)
    return texts, changed


def previous_files(out: Path) -> dict[str, str]:
    """The files of the render `out` holds, by name (none if `out` is missing or empty). Refuses a
    directory the render did not write."""
    if not out.exists() or not any(out.iterdir()):
        return {}
    if not (out / MARKER).exists():
        raise FileExistsError(f"{out} is not empty and was not written by `trainjobs render`; "
                              "choose another --out directory")
    return {path.name: path.read_text() for path in out.iterdir() if path.is_file() and path.name != MARKER}


def write_files(out: Path, texts: dict[str, str], previous: dict[str, str]) -> None:
    """Make `out` hold exactly `texts`: files that went away are removed, and only new or changed
    files are written (a re-render of an unchanged program writes nothing)."""
    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    if not marker.exists():
        marker.write_text("Written by `trainjobs render`; the directory is replaced on each render.\n")
    for name in previous.keys() - texts.keys():
        (out / name).unlink()
    for name, text in texts.items():
        if previous.get(name) != text:
            (out / name).write_text(text)


def tree(result: StackResult) -> str:
    """The components and the objects under them, as an indented tree; each object also names what
    outside its own component it is created after (its dependencies)."""
    lines = [f"Stack {result.project}-{result.stack}"]
    by_urn = {r.urn: r for r in result.resources}
    children: dict[str | None, list] = {}
    for resource in result.resources:
        children.setdefault(resource.parent_urn, []).append(resource)
    manifests = {r.urn: r.manifest for r in result.kubernetes()}   # each made once: the tree reads them often
    claims = requests.ClaimTemplates(manifests.values())   # pods' device claims resolve across the stack

    def label(resource) -> str:
        if resource.is_kubernetes:
            obj = manifests[resource.urn]
            return f"{obj['kind']} {obj['metadata']['name']}"
        return f"{resource.type.rsplit(':', 1)[-1]} {resource.name}"

    def after(resource) -> str:
        own = resource.parent_urn   # a component's objects are ordered among themselves by the component
        outside = [by_urn[urn] for urn in resource.dependencies if urn in by_urn and urn != own
                   and (own is None or by_urn[urn].parent_urn != own)]
        names = sorted({label(dependency) for dependency in outside})
        return f"  after {', '.join(names)}" if names else ""

    def order(resource) -> tuple:
        return sort_key(manifests[resource.urn]) if resource.is_kubernetes else ("~", resource.name)

    def walk(resource, prefix: str, last: bool) -> None:
        detail = ""
        if resource.is_kubernetes:
            manifest = manifests[resource.urn]
            sets = pod_sets([manifest])
            if sets:
                own = len(sets) == 1 and sets[0].name == manifest["metadata"]["name"]   # the object is its pods' own
                counts = (pods_text(sets[0].count, fewest_pods(sets)) if own
                          else ", ".join(f"{s.name}: {pods_text(s.count, fewest_pods([s]))}" for s in sets))
                detail = f"  ({counts}, requests {requests.summary(pod_set_requests(sets, claims))})"
        elif children.get(resource.urn):
            owned = pod_sets(manifests[urn] for urn in _descendants(resource.urn, children) if urn in manifests)
            if sum(s.running for s in owned):
                detail = f"  (requests {requests.summary(pod_set_requests(owned, claims))})"
        lines.append(prefix + ("└─ " if last else "├─ ") + label(resource) + detail + after(resource))
        kids = sorted(children.get(resource.urn, []), key=order)
        for i, child in enumerate(kids):
            walk(child, prefix + ("   " if last else "│  "), i == len(kids) - 1)

    roots = sorted(children.get(None, []), key=lambda r: (r.type, r.name))
    for i, root in enumerate(roots):
        walk(root, "", i == len(roots) - 1)
    every = list(manifests.values())
    pods = pods_text(pod_count(every), fewest_pods(pod_sets(every)))
    lines.append(f"Stack requests: {requests.summary(total_requests(every))} in {pods}")
    return "\n".join(lines)


def _descendants(urn: str, children: dict[str | None, list]) -> list[str]:
    found = []
    for child in children.get(urn, []):
        found += [child.urn, *_descendants(child.urn, children)]
    return found


# --- per-pod views --------------------------------------------------------------------------------

def ranks_text(objects: list[dict[str, Any]], jobs: list[str] | None = None) -> str:
    """Per pod (of every pod set, or of those named in `jobs`): DNS names, the env it really sees, its
    mounted files.

    Each file and multi-line script is shown once, above the pods that refer to it; secrets are
    redacted; text that could fake a line or hide itself is escaped (see `shown`). Each Job is
    resolved as two pods, index 0 and index 1: where their text differs is where every pod has its
    index, so any pod's view follows from them and the work grows with Jobs, not pods.
    """
    index = ObjectIndex(objects)
    claims = requests.ClaimTemplates(objects)
    templates = {s.name: (s, pod_view(s, 0, index), pod_view(s, 1, index)) for s in index.pod_sets}
    sites = _file_sites(v0 for _, v0, _ in templates.values())
    hosts = _HostIndex(sites)
    scripts = _Scripts()
    files: dict[tuple, None] = {}
    pods: list[str] = []
    for name, (pod_set, v0, v1) in templates.items():
        if jobs is None or name in jobs:
            files.update(dict.fromkeys(_source_key(f) for f in v0.files.values() if f.content is not None))
            each = requests.total_requests([(1, pod_set.pod_spec, pod_set.namespace)], claims)
            count = pods_text(pod_set.running, fewest_pods([pod_set]))
            pods += [f"{shown(pod_set.made_by)}: {count}, each requests {requests.summary(each)}; in all "
                     f"{requests.summary(pod_set_requests([pod_set], claims))}"]
            placed = placement_of(pod_set, objects)
            pods += [f"  placement: {shown(placed)}"] if placed else []
            pods += [""]
            pods += _job_lines(pod_set.count, v0, v1, hosts, scripts)
    shared = []
    for key in files:
        file, where = sites[key]
        shared.append(f"file {_source(file)}, mounted at {_where(where)}:")
        shared += _content_lines(file.content) + [""]
    return "\n".join(shared + scripts.lines() + pods)


def pod_sets_named(objects: list[dict[str, Any]], name: str) -> list[str]:
    """The pod sets `explain --job name` shows: a training job's (`allreduce`), or the one a role's Job runs
    (`allreduce-launcher-0`), whichever backend registered them; else those whose Job's name starts with
    `name-` (a job of another origin)."""
    sets = pod_sets(objects)
    return ([s.name for s in sets if name in (s.name, s.job_name)]
            or [s.name for s in sets if s.name.startswith(f"{name}-")])


def shown(text: str) -> str:
    """`text` as it is, or as bash's `$'...'` with escapes when it holds what a terminal would act
    on or a reader could not see: control characters (C0, DEL, C1), line separators, bidi and other
    format characters (all that `str.isprintable` rejects). So a value cannot fake a line or hide."""
    if text.isprintable() and not text.startswith("$'"):
        return text
    return _ansi_c(text)


_C_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}
_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def _ansi_c(text: str) -> str:
    def escaped(ch: str) -> str:
        if ch in _C_ESCAPES:
            return _C_ESCAPES[ch]
        if ch.isprintable():
            return ch
        code = ord(ch)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return "$'" + "".join(map(escaped, text)) + "'"


def _shell_word(word: str) -> str:
    """A command-line word as a shell reads it: bare, single-quoted, or `$'...'` if it needs escapes."""
    if not word.isprintable():
        return _ansi_c(word)
    if _SHELL_SAFE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _template(at_0: list[str], at_1: list[str]) -> list[tuple[str, ...]]:
    """Lines split where the completion index goes, from the same lines for index 0 and index 1."""
    lines = []
    for a, b in zip(at_0, at_1, strict=True):
        parts, start = [], 0
        if a != b:
            for pos, (x, y) in enumerate(zip(a, b, strict=True)):
                if x != y:
                    assert (x, y) == ("0", "1"), f"not only the index differs between {a!r} and {b!r}"
                    parts.append(a[start:pos])
                    start = pos + 1
        parts.append(a[start:])
        lines.append(tuple(parts))
    return lines


def _fill(template: list[tuple[str, ...]], index: str) -> list[str]:
    return [index.join(parts) for parts in template]


def _job_lines(completions: int, v0: PodView, v1: PodView, hosts: "_HostIndex", scripts: "_Scripts") -> list[str]:
    """The views of a Job's pods, from its pods at index 0 and 1; a big Job's middle pods as one template."""
    names_0, names_1 = scripts.name(v0, v1)
    (head_0, body_0), (head_1, body_1) = _pod_lines(v0, names_0), _pod_lines(v1, names_1)
    head, body, dns = _template(head_0, head_1), _template(body_0, body_1), _template(v0.dns_names, v1.dns_names)

    def pod(i: int) -> list[str]:
        return _fill(head, str(i)) + hosts.lines(_fill(dns, str(i))) + _fill(body, str(i)) + [""]

    if completions <= FULL_PODS_PER_JOB:
        return [line for i in range(completions) for line in pod(i)]
    middle = range(PODS_AT_EACH_END, completions - PODS_AT_EACH_END)
    shapes = [hosts.shape(_fill(dns, str(i))) for i in middle] if hosts else [()] * len(middle)
    usual = Counter(shapes).most_common(1)[0][0]
    odd = [i for i, shape in zip(middle, shapes) if shape != usual]
    note = f"; {len(odd)} listed differently in files are shown in full after it" if odd else ""
    lines = [line for i in range(PODS_AT_EACH_END) for line in pod(i)]
    lines.append(f"pods {middle[0]} to {middle[-1]} of Job {shown(v0.job)} ({len(middle)} pods): each is this pod "
                 f"with <index> its completion index{note}")
    lines += _fill(head, "<index>") + hosts.lines(_fill(dns, "<index>"), usual) + _fill(body, "<index>") + [""]
    lines += [line for i in odd for line in pod(i)]
    lines += [line for i in range(middle[-1] + 1, completions) for line in pod(i)]
    return lines


def _pod_lines(pod: PodView, scripts: dict[str, str]) -> tuple[list[str], list[str]]:
    """A pod's view: the lines above its host listings (name, DNS names) and the lines below them."""
    head = [f"pod {shown(pod.hostname)}  ({shown(pod.made_by)}" + (f", index {pod.index})" if pod.indexed else ")")]
    if pod.dns_names:
        head.append("  dns: " + "  ".join(map(shown, pod.dns_names)))
    body = []
    for kind, containers in (("init container", pod.init_containers), ("container", pod.containers)):
        for c in containers:
            body.append(f"  {kind} {shown(c.name)}: {shown(str(c.image))}")
            if c.command or c.args:
                body.append("    run: " + " ".join(scripts.get(w) or _shell_word(w) for w in c.command + c.args))
            for name, value in c.env.items():
                source = f"   <- {shown(c.env_sources[name])}" if name in c.env_sources else ""
                body.append(f"    {shown(name)}={shown(value)}{source}")
    for path, file in pod.files.items():
        body.append(f"  file {shown(path)} (mode {_octal(file.mode)}) = {_reference(file)}")
    return head, body


def _octal(mode: Any) -> str:
    return f"{mode:04o}" if isinstance(mode, int) else shown(str(mode))


def _source_key(file: MountedFile) -> tuple:
    return (file.kind, file.namespace, file.name, file.key)


def _source(file: MountedFile) -> str:
    namespace = f" in namespace {shown(file.namespace)}" if file.namespace != "default" else ""
    key = f" key {shown(file.key)}" if file.key is not None else ""
    return f"{file.kind} {shown(file.name)}{key}{namespace}"


def _reference(file: MountedFile) -> str:
    if file.redacted:
        return f"{_source(file)}: {REDACTED}"
    if file.content is None:
        return f"{_source(file)}: not in the rendering, so the pod would not start"
    return f"{_source(file)}, shown above"


def _content_lines(content: bytes) -> list[str]:
    try:
        text = content.decode()
    except UnicodeDecodeError:
        return [f"  ({len(content)} bytes of binary data, not shown)"]
    if not text:
        return ["  (empty)"]
    return [f"  | {shown(line)}" for line in text.removesuffix("\n").split("\n")]


_Sites = dict[tuple, tuple[MountedFile, dict[str, list[str]]]]


def _file_sites(pods: Any) -> _Sites:
    """Each file source with content (ConfigMap or Secret key) and where it is mounted: path -> Jobs.

    `pods` holds one pod per Job: a Job's pods all mount the same files."""
    sites: _Sites = {}
    for pod in pods:
        for file in pod.files.values():
            if file.content is not None:
                sites.setdefault(_source_key(file), (file, {}))[1].setdefault(file.path, []).append(pod.job)
    return sites


def _where(paths: dict[str, list[str]]) -> str:
    return "; ".join(f"{shown(path)} in Job{'s' if len(jobs) > 1 else ''} {', '.join(map(shown, jobs))}"
                     for path, jobs in paths.items())


class _HostIndex:
    """Where mounted files (an MPI hostfile, say) list a pod by one of its DNS names, by name."""

    def __init__(self, sites: _Sites):
        self.listings: dict[str, list[tuple[str, str]]] = {}
        for file, paths in sites.values():
            try:
                text = file.content.decode()
            except UnicodeDecodeError:
                continue
            where = _where(paths)
            for line in text.split("\n"):
                words = line.split()
                if words:  # `host slots=N` (Open MPI) or `host:N` (MPICH, Intel MPI)
                    self.listings.setdefault(words[0].split(":")[0], []).append((line.strip(), where))

    def __bool__(self) -> bool:
        return bool(self.listings)

    def shape(self, names: list[str]) -> tuple[tuple[int, str, str], ...]:
        """A pod's listings with its own name left out: (which of its names, rest of the line, where)."""
        return tuple((form, line[len(name):], where) for form, name in enumerate(names)
                     for line, where in self.listings.get(name, ()))

    def lines(self, names: list[str], shape: tuple[tuple[int, str, str], ...] | None = None) -> list[str]:
        shape = self.shape(names) if shape is None else shape
        return [f"  host: {shown(names[form] + rest)}   <- {where}" for form, rest, where in shape]


class _Scripts:
    """Multi-line command-line words (`sh -c` scripts), each shown once and named `<script N>`."""

    def __init__(self):
        # (text at index 0, at index 1) -> (number, "<kind> <container>" -> Jobs)
        self.seen: dict[tuple[str, str], tuple[int, dict[str, dict[str, None]]]] = {}

    def name(self, v0: PodView, v1: PodView) -> tuple[dict[str, str], dict[str, str]]:
        """Name the scripts of a Job's pods at index 0 and 1 (a script may hold the index)."""
        names_0, names_1 = {}, {}
        for kind, containers in (("init container", zip(v0.init_containers, v1.init_containers)),
                                 ("container", zip(v0.containers, v1.containers))):
            for c0, c1 in containers:
                for w0, w1 in zip(c0.command + c0.args, c1.command + c1.args):
                    if "\n" in w0:
                        number, users = self.seen.setdefault((w0, w1), (len(self.seen) + 1, {}))
                        users.setdefault(f"{kind} {shown(c0.name)}", {})[shown(v0.job)] = None
                        names_0[w0] = names_1[w1] = f"<script {number}>"
        return names_0, names_1

    def lines(self) -> list[str]:
        lines = []
        for (w0, w1), (number, users) in self.seen.items():
            run_by = "; ".join(f"{user} in Job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}"
                               for user, jobs in users.items())
            held = ", with <index> the pod's completion index" if w0 != w1 else ""
            lines.append(f"script {number}, run by {run_by}{held}:")
            at_0, at_1 = ([f"  | {shown(line)}" for line in word.split("\n")] for word in (w0, w1))
            lines += _fill(_template(at_0, at_1), "<index>") + [""]
        return lines


# --- what a re-render changes ---------------------------------------------------------------------

# Fields whose change makes pulumi-kubernetes replace an object of a plain kind rather than update it; what
# replaces an object that runs pods is its backend's to say (`trainjobs.backends.replaced_on`).
_REPLACED_BY = {
    "ConfigMap": ("data", "binaryData"),
    "Secret": ("data", "stringData", "type"),
    "PersistentVolumeClaim": ("spec",),
    "Service": ("spec.clusterIP",),
}


def changes_since(previous: dict[str, str], texts: dict[str, str], objects: list[dict[str, Any]]) -> Changes:
    """What applying this render (`texts`, from `objects`) over a previous render's files does; only the
    objects whose file differs are compared, and only their previous files are parsed."""
    differ = {name for name in previous.keys() | texts.keys()
              if name.endswith(".yaml") and previous.get(name) != texts.get(name)}
    before = [yaml.load(previous[name], Loader=LOADER) for name in sorted(differ & previous.keys())]
    unchanged = [obj for obj in objects if file_name(obj) not in differ]   # the same in both renders
    found = _object_changes(before, [obj for obj in objects if file_name(obj) in differ])
    counts = Counter(change for _, change, _, _ in found)

    def jobs(*wanted: str) -> tuple[str, ...]:
        return tuple(sorted({s.job_name or s.owner["metadata"]["name"]
                             for _, change, obj, restarts in found if change in wanted and restarts
                             for s in pod_sets([obj])}))

    return Changes(lines=tuple(run_changes(before + unchanged, objects) + [line for line, *_ in found]),
                   counts={c: counts[c] for c in ("created", "deleted", "replaced", "updated in place")},
                   restarts=jobs("replaced"), starts=jobs("created"), stops=jobs("deleted"),
                   gpus_before=_gpus(before + unchanged), gpus_after=_gpus(objects))


def _gpus(objects: list[dict[str, Any]]) -> int:
    """GPUs (of every device resource) the objects' pods request in all."""
    return int(sum(parse_quantity(amount) for name, amount in total_requests(objects).items() if is_gpu(name)))


def changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """What applying `after` over `before` does to each object, and which changes restart training.

    An object that runs pods (a Job, a JobSet, ...) is replaced when a field its backend cannot change in
    place changes (a Job's pod template or counts, a JobSet's spec): its running pods are deleted and
    training starts again from the beginning.
    """
    return [line for line, *_ in _object_changes(before, after)]


def _object_changes(before: list[dict[str, Any]],
                    after: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any], bool]]:
    """(line, change, the object, whether its pods start, stop or restart) for each object that changes."""
    def key(obj):
        return (obj["kind"], obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])

    old = {key(o): o for o in before}
    new = {key(o): o for o in after}
    # The Jobs a deleted object's controller holds until Pulumi deletes it, after every creation.
    held = {key(job): o for k, o in old.items() if k not in new
            for job in controller_jobs([o]) if job is not o}
    found = []
    for k in sorted(set(old) | set(new)):
        kind, _, name = k
        if k in held and k not in old:
            owner = f"{held[k]['kind']} {held[k]['metadata']['name']}"
            found.append((f"+ {kind} {name}: created, FAILS: {owner}'s controller holds a {kind} of this name until "
                          f"Pulumi deletes the {held[k]['kind']}, after creating this one; change the job's run too, "
                          "or remove the job in one update and add it back in the next", "created", new[k],
                          is_workload(new[k])))
        elif k not in old:
            found.append((f"+ {kind} {name}: created", "created", new[k], is_workload(new[k])))
        elif k not in new:
            runs = is_workload(old[k])
            found.append((f"- {kind} {name}: deleted" + (" (its training stops)" if runs else ""), "deleted", old[k],
                          runs))
        elif old[k] != new[k]:
            paths = _changed_paths(old[k], new[k])
            replacing = replaced_on(new[k])
            restarts = replacing is not None
            replaced = [p for p in paths if any(p == f or p.startswith(f + ".") or p.startswith(f + "[")
                                                for f in (replacing or _REPLACED_BY.get(kind, ())))]
            shown = ", ".join(paths[:4]) + (f", ... ({len(paths)} fields)" if len(paths) > 4 else "")
            if replaced and restarts:
                found.append((f"! {kind} {name}: replaced, TRAINING RESTARTS ({shown})", "replaced", new[k], True))
            elif replaced:
                found.append((f"~ {kind} {name}: replaced ({shown})", "replaced", new[k], False))
            else:
                found.append((f"~ {kind} {name}: updated in place ({shown})", "updated in place", new[k], False))
    return found


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
