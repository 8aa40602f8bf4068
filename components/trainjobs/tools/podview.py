"""What each pod of a rendered job will see: hostname, DNS names, resolved env, mounted files.

Resolves a container's env the way the kubelet does (envFrom, `$(VAR)` expansion, downward-API
fieldRefs with the pod's completion index, ConfigMap and Secret keys), from the rendered objects
alone. Used by `trainjobs explain` and by the local pod emulator; knows no training framework.
"""

import base64
import binascii
import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from trainjobs.backends import PodSet, pod_sets
from trainjobs.core.deferred import REDACTED
from trainjobs.core.naming import CLUSTER_DOMAIN, ENV_NAME, FIELD_KEY_PATH
from trainjobs.kube.quantity import parse_quantity

_VAR_REF = re.compile(rf"\$\$|\$\(({ENV_NAME})\)")


@dataclass(frozen=True)
class PodFacts:
    """What only a running pod knows; the defaults are shown when nothing runs."""

    pod_name_suffix: str = "<random>"
    pod_ip: str = "<pod IP>"
    node_name: str = "<node>"
    host_ip: str = "<node IP>"


@dataclass
class ContainerView:
    name: str
    image: str | None
    command: list[str]
    args: list[str]
    env: dict[str, str]
    env_sources: dict[str, str]
    mounts: list[dict[str, Any]]


@dataclass(frozen=True)
class MountedFile:
    """A file a ConfigMap or Secret volume puts in the pod, and the object key it comes from."""

    path: str
    mode: int
    kind: str
    name: str
    namespace: str
    key: str | None  # None: the whole object is missing
    content: bytes | None  # None if redacted, or if the object or key is missing (the pod would not start)
    redacted: bool = False  # a Secret's content, not shown


@dataclass
class PodView:
    job: str
    made_by: str   # `Job x`, or `Pod x` for a pod registered as itself
    indexed: bool
    index: int
    hostname: str
    subdomain: str | None
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: list[ContainerView]
    init_containers: list[ContainerView]
    files: dict[str, MountedFile] = field(default_factory=dict)  # by mount path

    @property
    def dns_names(self) -> list[str]:
        """Names other pods reach this one by (short form first), if it has a subdomain."""
        if not self.subdomain:
            return []
        short = f"{self.hostname}.{self.subdomain}"
        return [short, f"{short}.{self.namespace}.svc.{CLUSTER_DOMAIN}"]


class ObjectIndex:
    """The rendered objects by kind, namespace and name, for resolving references between them.

    A ConfigMap's or Secret's values are decoded once and shared by every pod that refers to them.
    `pod_sets` are the pods the objects make, read back by the backend that registered each.
    """

    def __init__(self, objects: list[dict[str, Any]]):
        self.objects = objects
        self.pod_sets: list[PodSet] = pod_sets(objects)
        self._by_name: dict[tuple[str, str], dict[str, Any]] = {}
        self._by_namespace: dict[tuple[str, str, str], dict[str, Any]] = {}
        for obj in objects:
            name = obj["metadata"]["name"]
            self._by_name.setdefault((obj["kind"], name), obj)
            self._by_namespace[(obj["kind"], obj["metadata"].get("namespace", "default"), name)] = obj
        self._decoded: dict[tuple, Mapping[str, Any] | None] = {}

    def pod_set(self, name: str) -> PodSet | None:
        """The pod set of that name (the Job that runs its pods)."""
        return next((s for s in self.pod_sets if s.name == name), None)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object of that kind and name in `namespace` (None: in any namespace)."""
        if namespace is None:
            return self._by_name.get((kind, name))
        return self._by_namespace.get((kind, namespace, name))

    def data(self, kind: str, name: str, reveal: bool, namespace: str | None = None) -> Mapping[str, str] | None:
        """A ConfigMap's `data` or a Secret's values as text, as env sees them; Secret values redacted
        unless `reveal`."""
        key = ("data", kind, name, reveal, namespace)
        if key not in self._decoded:
            obj = self.get(kind, name, namespace)
            if obj is None:
                self._decoded[key] = None
            elif kind == "Secret":
                values = self.raw_data(kind, name, namespace) or {}
                # Bytes that are not UTF-8 survive as surrogates, so a process's env gets them back unchanged.
                self._decoded[key] = MappingProxyType(
                    {k: v.decode(errors="surrogateescape") if reveal else REDACTED for k, v in values.items()})
            else:
                self._decoded[key] = MappingProxyType(dict(obj.get("data") or {}))
        return self._decoded[key]

    def raw_data(self, kind: str, name: str, namespace: str | None = None) -> Mapping[str, bytes] | None:
        """A ConfigMap's or Secret's values as the bytes a volume file holds (secrets revealed).

        ConfigMap `data` and `binaryData` (base64), Secret `data` (base64) and `stringData`.
        """
        key = ("raw", kind, name, namespace)
        if key not in self._decoded:
            obj = self.get(kind, name, namespace)
            values: dict[str, bytes] | None = None
            if obj is not None and kind == "ConfigMap":
                values = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
                values.update({k: _b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
            elif obj is not None:  # a Secret's stringData overrides its data, as the API server merges them
                values = {k: _b64decode(v) for k, v in (obj.get("data") or {}).items()}
                values.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
            self._decoded[key] = None if values is None else MappingProxyType(values)
        return self._decoded[key]


class MissingVolumeSource(LookupError):
    """A volume refers to a ConfigMap, Secret or key the rendering does not contain."""


def _b64decode(value: str) -> bytes:
    try:
        return base64.b64decode(value)
    except binascii.Error:
        return value.encode()  # already redacted: "[secret]"


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined vars replaced, `$$` escapes, unknown refs kept."""
    def sub(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))
    return _VAR_REF.sub(sub, value)


def pod_view(pod_set: PodSet, completion_index: int, index: ObjectIndex, reveal: bool = False,
             facts: PodFacts = PodFacts()) -> PodView:
    """Pod `completion_index` of a pod set, as it will run."""
    job_name = pod_set.name
    namespace = pod_set.namespace or "default"
    indexed = pod_set.indexed
    labels, annotations = pod_set.pod_metadata(completion_index)
    hostname = pod_set.hostname(completion_index)
    spec = pod_set.pod_spec
    pod = {
        # A Job's pod is named after its hostname and a random suffix; a pod registered as itself keeps its name.
        "name": f"{hostname}-{facts.pod_name_suffix}" if pod_set.job is not None else pod_set.name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
        "serviceAccountName": spec.get("serviceAccountName", "default"),
        "facts": facts,
    }

    def view(container: dict[str, Any]) -> ContainerView:
        env, sources = resolve_env(container, pod, index, reveal, completion_index if indexed else None)
        return ContainerView(
            name=container["name"], image=container.get("image"),
            command=[expand(c, env) for c in container.get("command", [])],
            args=[expand(a, env) for a in container.get("args", [])],
            env=env, env_sources=sources, mounts=list(container.get("volumeMounts", [])))

    containers = [view(c) for c in spec.get("containers", [])]
    init_containers = [view(c) for c in spec.get("initContainers", [])]
    return PodView(
        job=job_name, made_by=pod_set.made_by, indexed=indexed, index=completion_index, hostname=hostname,
        subdomain=spec.get("subdomain"),
        namespace=namespace, labels=labels, annotations=annotations,
        containers=containers, init_containers=init_containers,
        files=mounted_files(spec, namespace, index, reveal, {c.name: c.env for c in init_containers + containers}),
    )


def resolve_env(container: dict[str, Any], pod: dict[str, Any], index: ObjectIndex, reveal: bool,
                completion_index: int | None) -> tuple[dict[str, str], dict[str, str]]:
    """The container's final env, and for each derived value where it came from."""
    env: dict[str, str] = {}
    sources: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source:
                data = index.data(kind, source[key]["name"], reveal, pod["namespace"]) or {}
                for k, v in data.items():
                    env[prefix + k] = v
                    sources[prefix + k] = f"{kind} {source[key]['name']}"
    for entry in container.get("env", []):
        name = entry["name"]
        if "valueFrom" in entry:
            env[name], sources[name] = _value_from(entry["valueFrom"], container, pod, index, reveal)
        else:
            env[name] = expand(entry.get("value", ""), env)
    if completion_index is not None and "JOB_COMPLETION_INDEX" not in env:
        env["JOB_COMPLETION_INDEX"] = str(completion_index)
        sources["JOB_COMPLETION_INDEX"] = "set by Kubernetes for Indexed Jobs"
    return env, sources


def _value_from(ref: dict[str, Any], container: dict[str, Any], pod: dict[str, Any], index: ObjectIndex,
                reveal: bool) -> tuple[str, str]:
    facts: PodFacts = pod["facts"]
    if "fieldRef" in ref:
        path = ref["fieldRef"]["fieldPath"]
        match = FIELD_KEY_PATH.fullmatch(path)
        if match:
            value = pod[match.group(1)].get(match.group(2), "")
        else:
            value = {"metadata.name": pod["name"], "metadata.namespace": pod["namespace"],
                     "spec.nodeName": facts.node_name, "spec.serviceAccountName": pod["serviceAccountName"],
                     "status.podIP": facts.pod_ip, "status.podIPs": facts.pod_ip,
                     "status.hostIP": facts.host_ip, "status.hostIPs": facts.host_ip}.get(path, f"<{path}>")
        return value, f"fieldRef {path}"
    if "resourceFieldRef" in ref:
        resource = ref["resourceFieldRef"]["resource"]
        side, _, name = resource.partition(".")
        quantity = container.get("resources", {}).get(side, {}).get(name)
        divisor = parse_quantity(ref["resourceFieldRef"].get("divisor", "1"))
        value = str(math.ceil(parse_quantity(quantity) / divisor)) if quantity else "<node allocatable>"
        return value, f"resourceFieldRef {resource}"
    for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
        if key in ref:
            data = index.data(kind, ref[key]["name"], reveal, pod["namespace"]) or {}
            return data.get(ref[key]["key"], f"<missing {kind} {ref[key]['name']}>"), f"{kind} {ref[key]['name']}"
    return "<unresolved>", "valueFrom"


def volume_items(source: dict[str, Any], keys: list[str]) -> list[tuple[str, str, int]]:
    """(key, relative path, mode) of each file a ConfigMap or Secret volume projects.

    `items` picks and renames keys; without it every key becomes a file of its own name.
    Modes are the item's `mode`, else the volume's `defaultMode`, else 0644.
    """
    default_mode = source.get("defaultMode", 0o644)
    items = source.get("items") or [{"key": k, "path": k} for k in sorted(keys)]
    return [(item["key"], item["path"], item.get("mode", default_mode)) for item in items]


_VOLUME_SOURCES = (("ConfigMap", "configMap", "name"), ("Secret", "secret", "secretName"))


def _volume_source(volume: dict[str, Any]) -> tuple[str, dict[str, Any], str] | None:
    """(kind, volume source, object name) of a ConfigMap or Secret volume; None for other kinds."""
    for kind, key, name_key in _VOLUME_SOURCES:
        if key in volume:
            return kind, volume[key], volume[key][name_key]
    return None


def volume_files(volume: dict[str, Any], index: ObjectIndex) -> dict[str, tuple[bytes, int]] | None:
    """The files of a ConfigMap or Secret volume: relative path -> (content, mode), secrets revealed.

    None for other volume kinds. A missing object or key raises MissingVolumeSource unless the
    volume is `optional` (then the object gives no files, or the key is left out), as the
    kubelet would refuse to start the pod.
    """
    found = _volume_source(volume)
    if found is None:
        return None
    kind, source, name = found
    data = index.raw_data(kind, name)
    optional = bool(source.get("optional"))
    if data is None:
        if optional:
            return {}
        raise MissingVolumeSource(f'volume "{volume["name"]}": {kind} "{name}" is not in the rendering')
    files = {}
    for item_key, path, mode in volume_items(source, list(data)):
        if item_key not in data:
            if optional:
                continue
            raise MissingVolumeSource(f'volume "{volume["name"]}": {kind} "{name}" has no key "{item_key}"')
        files[path] = (data[item_key], mode)
    return files


def mounted_files(spec: dict[str, Any], namespace: str, index: ObjectIndex, reveal: bool,
                  envs: dict[str, dict[str, str]]) -> dict[str, MountedFile]:
    """Files that ConfigMap and Secret volumes put in the pod, by absolute path.

    Every container's mounts count (init containers first; the first mount of a path wins).
    `envs` holds each container's env, for `subPathExpr`. A missing object or key that is not
    `optional` is listed with no content: the kubelet would not start the pod.
    """
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    files: dict[str, MountedFile] = {}
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        for mount in container.get("volumeMounts", []):
            found = _volume_source(volumes.get(mount["name"], {}))
            if found is None:
                continue
            kind, source, name = found
            data = index.raw_data(kind, name, namespace)
            optional = bool(source.get("optional"))
            root = mount["mountPath"].rstrip("/")
            sub = mount.get("subPath") or expand(mount.get("subPathExpr", ""), envs.get(container["name"], {}))
            if data is None and not source.get("items"):
                if not optional:
                    files.setdefault(root, MountedFile(root, source.get("defaultMode", 0o644), kind, name,
                                                       namespace, None, None))
                continue
            for item_key, item_path, mode in volume_items(source, list(data or {})):
                path = _file_path(root, sub, item_path)
                if path is None or (optional and (data is None or item_key not in data)):
                    continue
                hidden = kind == "Secret" and not reveal and data is not None and item_key in data
                content = None if hidden or data is None else data.get(item_key)
                files.setdefault(path, MountedFile(path, mode, kind, name, namespace, item_key, content, hidden))
    return files


def _file_path(root: str, sub_path: str, item_path: str) -> str | None:
    """Where a volume item lands under a mount; with a subPath only that file or directory is mounted."""
    if not sub_path:
        return f"{root}/{item_path}"
    if item_path == sub_path:
        return root
    prefix = sub_path.rstrip("/") + "/"
    return f"{root}/{item_path[len(prefix):]}" if item_path.startswith(prefix) else None
