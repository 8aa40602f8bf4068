"""What each pod of a rendered job will see: hostname, DNS names, resolved env, mounted files.

Resolves a container's env the way the kubelet does (envFrom, `$(VAR)` expansion, downward-API
fieldRefs with the pod's completion index, ConfigMap and Secret keys), from the rendered objects
alone. Used by `trainjobs explain` and by the local pod emulator; knows no training framework.
"""

import base64
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .quantity import parse_quantity

COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
CLUSTER_DOMAIN = "cluster.local"
REDACTED = "[secret]"
_FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")
_VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


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


@dataclass
class PodView:
    job: str
    index: int
    hostname: str
    subdomain: str | None
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: list[ContainerView]
    init_containers: list[ContainerView]
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # mount path -> (content, mode)

    @property
    def dns_names(self) -> list[str]:
        """Names other pods reach this one by (short form first), if it has a subdomain."""
        if not self.subdomain:
            return []
        short = f"{self.hostname}.{self.subdomain}"
        return [short, f"{short}.{self.namespace}.svc.{CLUSTER_DOMAIN}"]


class ObjectIndex:
    """The rendered objects by kind and name, for resolving references between them."""

    def __init__(self, objects: list[dict[str, Any]]):
        self.objects = objects
        self._by_key = {(o["kind"], o["metadata"]["name"]): o for o in objects}

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self._by_key.get((kind, name))

    def jobs(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == "Job"]

    def data(self, kind: str, name: str, reveal: bool) -> dict[str, str] | None:
        """A ConfigMap's or Secret's data as text; Secret values redacted unless `reveal`."""
        obj = self.get(kind, name)
        if obj is None:
            return None
        result = dict(obj.get("data") or {})
        if kind == "Secret":
            result = {k: _b64decode(v) for k, v in result.items()}
            result.update(obj.get("stringData") or {})
            if not reveal:
                result = {k: REDACTED for k in result}
        return result


    def raw_data(self, kind: str, name: str) -> dict[str, bytes] | None:
        """A ConfigMap's or Secret's values as the bytes a volume file holds (secrets revealed).

        ConfigMap `data` and `binaryData` (base64), Secret `data` (base64) and `stringData`.
        """
        obj = self.get(kind, name)
        if obj is None:
            return None
        result: dict[str, bytes] = {}
        if kind == "ConfigMap":
            result.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
            result.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        else:
            result.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
            result.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
        return result


class MissingVolumeSource(LookupError):
    """A volume refers to a ConfigMap, Secret or key the rendering does not contain."""


def _b64decode(value: str) -> str:
    try:
        return base64.b64decode(value).decode()
    except Exception:
        return value  # already redacted


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined vars replaced, `$$` escapes, unknown refs kept."""
    def sub(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))
    return _VAR_REF.sub(sub, value)


def pod_views(objects: list[dict[str, Any]], job: str | None = None, reveal: bool = False,
              facts: PodFacts = PodFacts()) -> list[PodView]:
    """One view per pod of every Job (or of the Job named `job`), in job then index order."""
    index = ObjectIndex(objects)
    views = []
    for manifest in index.jobs():
        if job is not None and manifest["metadata"]["name"] != job:
            continue
        for i in range(manifest["spec"].get("completions", 1)):
            views.append(pod_view(manifest, i, index, reveal, facts))
    return views


def pod_view(job: dict[str, Any], completion_index: int, index: ObjectIndex, reveal: bool = False,
             facts: PodFacts = PodFacts()) -> PodView:
    job_name = job["metadata"]["name"]
    namespace = job["metadata"].get("namespace", "default")
    template = job["spec"]["template"]
    indexed = job["spec"].get("completionMode") == "Indexed"
    labels = dict(template.get("metadata", {}).get("labels", {}))
    annotations = dict(template.get("metadata", {}).get("annotations", {}))
    labels.update({"job-name": job_name, "batch.kubernetes.io/job-name": job_name})
    if indexed:
        labels[COMPLETION_INDEX_KEY] = str(completion_index)
        annotations[COMPLETION_INDEX_KEY] = str(completion_index)
    hostname = f"{job_name}-{completion_index}" if indexed else job_name
    spec = template["spec"]
    pod = {
        "name": f"{hostname}-{facts.pod_name_suffix}",
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

    view_ = PodView(
        job=job_name, index=completion_index, hostname=hostname, subdomain=spec.get("subdomain"),
        namespace=namespace, labels=labels, annotations=annotations,
        containers=[view(c) for c in spec.get("containers", [])],
        init_containers=[view(c) for c in spec.get("initContainers", [])],
    )
    view_.files = mounted_files(spec, index, reveal)
    return view_


def resolve_env(container: dict[str, Any], pod: dict[str, Any], index: ObjectIndex, reveal: bool,
                completion_index: int | None) -> tuple[dict[str, str], dict[str, str]]:
    """The container's final env, and for each derived value where it came from."""
    env: dict[str, str] = {}
    sources: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source:
                data = index.data(kind, source[key]["name"], reveal) or {}
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
        match = _FIELD_KEY.match(path)
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
            data = index.data(kind, ref[key]["name"], reveal) or {}
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


def volume_files(volume: dict[str, Any], index: ObjectIndex) -> dict[str, tuple[bytes, int]] | None:
    """The files of a ConfigMap or Secret volume: relative path -> (content, mode), secrets revealed.

    None for other volume kinds. A missing object or key raises MissingVolumeSource unless the
    volume is `optional` (then the object gives no files, or the key is left out), as the
    kubelet would refuse to start the pod.
    """
    for kind, key, name_key in _VOLUME_SOURCES:
        if key not in volume:
            continue
        source = volume[key]
        data = index.raw_data(kind, source[name_key])
        optional = bool(source.get("optional"))
        if data is None:
            if optional:
                return {}
            raise MissingVolumeSource(f'volume "{volume["name"]}": {kind} "{source[name_key]}" is not in the rendering')
        files = {}
        for item_key, path, mode in volume_items(source, list(data)):
            if item_key not in data:
                if optional:
                    continue
                raise MissingVolumeSource(f'volume "{volume["name"]}": {kind} "{source[name_key]}" has no key "{item_key}"')
            files[path] = (data[item_key], mode)
        return files
    return None


def mounted_files(spec: dict[str, Any], index: ObjectIndex, reveal: bool) -> dict[str, tuple[str, int]]:
    """Files that ConfigMap and Secret volumes put in the pod, by absolute path, with their modes."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    files: dict[str, tuple[str, int]] = {}
    for container in spec.get("containers", []):
        for mount in container.get("volumeMounts", []):
            volume = volumes.get(mount["name"], {})
            for kind, key, name_key in _VOLUME_SOURCES:
                if key not in volume:
                    continue
                source = volume[key]
                data = index.data(kind, source[name_key], reveal) or {}
                for item_key, item_path, mode in volume_items(source, list(data)):
                    if mount.get("subPath") and item_path != mount["subPath"]:
                        continue
                    path = mount["mountPath"] if mount.get("subPath") else f"{mount['mountPath']}/{item_path}"
                    files[path] = (data.get(item_key, ""), mode)
    return files
