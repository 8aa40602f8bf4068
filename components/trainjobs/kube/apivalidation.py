"""What the Kubernetes API server would refuse in the objects a job renders.

The JSON schemas only type-check. The API server's own validation (name and label syntax,
quantities, int32 ranges, uniqueness, sizes) is code; this module follows it for the fields
trainjobs emits into Services, ConfigMaps, Secrets, PersistentVolumeClaims, ResourceClaimTemplates and batch/v1
Jobs, so a
bad value fails when a job is constructed rather than on the cluster, or in every pod a Job creates.
It also refuses what the API server admits but a pod then cannot run: an image with surrounding
whitespace, and an env string longer than Linux passes to a process.

Pure: manifests in (plain dicts), problems out. A value that is not plain JSON data (a Pulumi
output, a generated key) is opaque and its checks are skipped.
"""

import base64
import binascii
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable

from trainjobs.kube.naming import (ENV_NAME, FIELD_KEY_PATH, MAX_DNS_LABEL, image_problem, is_dns_label, is_dns_subdomain,
                                   is_rfc1035_label, label_key_problem, label_value_problem, shown)
from trainjobs.kube.quantity import QuantityError, parse_quantity

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_INDEXED_PARALLELISM = 100_000           # the parallelism of an Indexed Job
MAX_ANNOTATIONS_BYTES = 256 * 1024          # all annotations of one object, keys and values
MAX_CONFIG_BYTES = 1024 * 1024              # a ConfigMap's or Secret's values (decoded, without the keys)
MAX_OBJECT_BYTES = 1536 * 1024              # etcd's default request limit, where the API server stores objects
# Linux's limit on one "NAME=value" string given to execve (MAX_ARG_STRLEN, with its NUL): a longer
# variable makes the container fail to start with "argument list too long".
MAX_ENV_STRING = 131072
MAX_DNS_SEARCHES, MAX_DNS_SEARCH_CHARS = 32, 2048

Path = tuple[str | int, ...]
_PLAIN = (str, int, float, bool, type(None), dict, list)
_ENV_NAME = re.compile(ENV_NAME)
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_PORT_NAME = re.compile(r"[-a-z0-9]+")
_FIELD_PATHS = {"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
                "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

_RESOURCE_FIELDS = {f"{side}.{name}" for side in ("limits", "requests") for name in ("cpu", "memory", "ephemeral-storage")}
_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_VALUE_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
_ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}
_PROTOCOLS = {"TCP", "UDP", "SCTP"}
_PULL_POLICIES = {"Always", "IfNotPresent", "Never"}
_COMPLETION_MODES = {"NonIndexed", "Indexed"}
_JOB_RESTART_POLICIES = {"Never", "OnFailure"}
_TAINT_EFFECTS = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"}
_EMPTYDIR_MEDIA = {"", "Memory", "HugePages"}
_ID_FIELDS = ("runAsUser", "runAsGroup", "fsGroup")
MAX_DEVICE_REQUESTS = 32                    # requests of one device claim (resource.k8s.io/v1 DeviceRequestsMaxSize)
_ALLOCATION_MODES = {"ExactCount", "All"}


@dataclass(frozen=True)
class Problem:
    """One value the cluster would refuse: the object ("Job/n-node-0"), where in it, and why.

    `later`: a check the API server does not make (docs/api-rules.md). The server accepts the value, and it fails
    afterwards: etcd does not store the object, the kubelet cannot pull the image, set up the volume or start the
    process, or an older API server that the project supports refuses it (the server relaxed the rule since).
    """

    object: str
    path: Path
    message: str
    later: bool = False

    def __str__(self) -> str:
        return f"{self.object} {format_path(self.path)}: {self.message}"


def format_path(path: Path) -> str:
    """`spec.template.spec.containers[0].env[2].name`; map keys as `labels["app.kubernetes.io/name"]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            text += f".{part}" if text else part
        else:
            text += f"[{shown(part)}]"
    return text


def problems(manifests: Iterable[dict[str, Any]]) -> list[Problem]:
    """Every problem in the manifests, in manifest order."""
    found: list[Problem] = []
    for manifest in manifests:
        meta = manifest.get("metadata") or {}
        where = f"{manifest.get('kind')}/{meta.get('name')}"
        _check_object(manifest, lambda path, message, later=False: found.append(Problem(where, path, message, later)))
    return found


Add = Callable[..., None]   # add(path, message, later=False)


def _plain(value: Any) -> bool:
    return isinstance(value, _PLAIN)


def _string(add: Add, path: Path, value: Any) -> str | None:
    """`value` if a string; None if opaque; a problem if plain data of another type."""
    if isinstance(value, str):
        return value
    if value is None:
        add(path, "required")
    elif _plain(value):
        add(path, f"must be a string (got {shown(value)})")
    return None


def _integer(add: Add, path: Path, value: Any, low: int, high: int) -> int | None:
    if not _plain(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        add(path, f"must be an integer (got {shown(value)})")
        return None
    if not low <= value <= high:
        add(path, f"must be between {low} and {high} (got {value})")
        return None
    return value


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=lambda _: "", ensure_ascii=False).encode())


def _items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _entries(value: Any) -> list[tuple[int, Any]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)] if isinstance(value, list) else []


def _name_problem(kind: str, name: str) -> str | None:
    if kind == "Service":
        if not is_rfc1035_label(name):
            return (f"Service name {shown(name)} must be an RFC 1035 label: at most {MAX_DNS_LABEL} lowercase "
                    'letters, digits and "-", starting with a letter and ending with a letter or digit')
    elif not is_dns_subdomain(name):
        return (f"{shown(name)} must be a DNS subdomain: at most 253 lowercase letters, digits, \"-\" and \".\", "
                "starting and ending with a letter or digit")
    return None


def _dns_subdomain(add: Add, path: Path, value: Any, what: str) -> None:
    text = _string(add, path, value)
    if text is not None and not is_dns_subdomain(text):
        add(path, f"{what} {shown(text)} must be a DNS subdomain (lowercase letters, digits, \"-\" and \".\")")


# --- metadata ----------------------------------------------------------------------------------

def _check_object(manifest: dict[str, Any], add: Add) -> None:
    kind = manifest.get("kind")
    meta = manifest.get("metadata") or {}
    name = meta.get("name")
    if isinstance(name, str):
        problem = _name_problem(kind, name)
        if problem:
            # Kubernetes 1.36 accepts a Service name that starts with a digit (RelaxedServiceNameValidation).
            add(("metadata", "name"), problem, later=kind == "Service" and is_dns_label(name))
    if "namespace" in meta:
        namespace = _string(add, ("metadata", "namespace"), meta["namespace"])
        if namespace is not None and not is_dns_label(namespace):
            add(("metadata", "namespace"), f"namespace {shown(namespace)} must be a DNS label")
    _check_metadata(meta, ("metadata",), add)
    if kind == "Job":
        _check_job(manifest, add)
    elif kind == "Pod":
        _check_pod(manifest.get("spec") or {}, ("spec",), add)
    elif kind == "PersistentVolumeClaim":
        _check_claim(manifest.get("spec") or {}, add)
    elif kind == "ResourceClaimTemplate":
        _check_device_claim(((manifest.get("spec") or {}).get("spec") or {}).get("devices") or {},
                            ("spec", "spec", "devices"), add)
    elif kind in ("ConfigMap", "Secret"):
        _check_data(manifest, add)
    elif kind == "Service":
        for key, value in _items((manifest.get("spec") or {}).get("selector")):
            _label(add, ("spec", "selector", key), key, value)
    if (size := _json_size(manifest)) > MAX_OBJECT_BYTES:
        add((), f"the object is {size} bytes; the API server cannot store objects over {MAX_OBJECT_BYTES} bytes "
                "(etcd's default request limit)", later=True)


def _label(add: Add, path: Path, key: Any, value: Any) -> None:
    if not isinstance(key, str):
        return
    problem = label_key_problem(key)
    text = _string(add, path, value)
    if problem is None and text is not None:
        problem = label_value_problem(text)
    if problem:
        add(path, f"label {problem}")


def _check_metadata(meta: dict[str, Any], at: Path, add: Add) -> None:
    for key, value in _items(meta.get("labels")):
        _label(add, (*at, "labels", key), key, value)
    annotations = meta.get("annotations")
    for key, value in _items(annotations):
        # An annotation key is a label key in which case does not matter.
        problem = label_key_problem(key.lower()) if isinstance(key, str) else None
        if problem:
            add((*at, "annotations", key), f"annotation {problem}")
        _string(add, (*at, "annotations", key), value)
    if annotations and (size := _pairs_size(annotations)) > MAX_ANNOTATIONS_BYTES:
        add((*at, "annotations"), f"annotations total {size} bytes; the limit is {MAX_ANNOTATIONS_BYTES} (256 KiB)")


def _pairs_size(mapping: dict[str, Any]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in mapping.items() if isinstance(k, str) and isinstance(v, str))


def _check_data(manifest: dict[str, Any], add: Add) -> None:
    size = 0
    encoded = "data" if manifest.get("kind") == "Secret" else "binaryData"
    for field in ("data", "binaryData", "stringData"):
        for key, value in _items(manifest.get(field)):
            if isinstance(key, str) and (problem := config_key_problem(key)):
                add((field, key), problem)
            if isinstance(value, str):
                size += _decoded_size(value) if field == encoded else len(value.encode())
    if size > MAX_CONFIG_BYTES:
        add(("data",), f"the values are {size} bytes; a {manifest.get('kind')} holds at most {MAX_CONFIG_BYTES} "
                       "(1 MiB)")


def _decoded_size(value: str) -> int:
    """The bytes a base64 value holds (the API server counts those); its own length if it is not base64."""
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value.encode())


def _check_claim(spec: dict[str, Any], add: Add) -> None:
    for i, mode in enumerate(spec.get("accessModes") or []):
        if _plain(mode) and mode not in _ACCESS_MODES:
            add(("spec", "accessModes", i), f"{shown(mode)} is not one of {', '.join(sorted(_ACCESS_MODES))}")
    if spec.get("storageClassName"):
        _dns_subdomain(add, ("spec", "storageClassName"), spec["storageClassName"], "storage class")
    requests = (spec.get("resources") or {}).get("requests") or {}
    path = ("spec", "resources", "requests", "storage")
    if "storage" not in requests:
        add(path, "a claim must request storage")
    elif (value := _quantity(add, path, requests["storage"])) is not None and value <= 0:
        add(path, f"must be greater than zero (got {shown(requests['storage'])})")


def _check_device_claim(devices: dict[str, Any], at: Path, add: Add) -> None:
    """A claim's device requests (resource.k8s.io/v1): named by unique DNS labels, each an exact count (at
    least one) or all devices of a DeviceClass named by a DNS subdomain."""
    requests = devices.get("requests") or []
    if isinstance(requests, list) and len(requests) > MAX_DEVICE_REQUESTS:
        add((*at, "requests"), f"{len(requests)} requests; a claim holds at most {MAX_DEVICE_REQUESTS}")
    names: set[str] = set()
    for i, request in _entries(requests):
        path = (*at, "requests", i)
        name = _string(add, (*path, "name"), request.get("name"))
        if name is not None:
            if not is_dns_label(name):
                add((*path, "name"), f"request name {shown(name)} must be a DNS label")
            elif name in names:
                add((*path, "name"), f"a second request named {shown(name)} in the claim; request names are unique")
            names.add(name)
        exactly = request.get("exactly")
        if not isinstance(exactly, dict):
            if "firstAvailable" not in request:
                add((*path, "exactly"), "required: a request gives exactly one of exactly or firstAvailable")
            continue
        _dns_subdomain(add, (*path, "exactly", "deviceClassName"), exactly.get("deviceClassName"), "device class")
        mode = exactly.get("allocationMode", "ExactCount")
        if _plain(mode) and mode not in _ALLOCATION_MODES:
            add((*path, "exactly", "allocationMode"), f"{shown(mode)} is not ExactCount or All")
        elif mode == "ExactCount" and "count" in exactly:
            _integer(add, (*path, "exactly", "count"), exactly["count"], 1, INT64_MAX)
        elif mode == "All" and "count" in exactly:
            add((*path, "exactly", "count"), "a request for all devices gives no count")


# --- Jobs and pods -------------------------------------------------------------------------------

def _check_job(job: dict[str, Any], add: Add) -> None:
    name = (job.get("metadata") or {}).get("name")
    spec = job.get("spec") or {}
    for field in ("backoffLimit", "ttlSecondsAfterFinished", "completions", "parallelism"):
        if field in spec:
            _integer(add, ("spec", field), spec[field], 0, INT32_MAX)
    if "activeDeadlineSeconds" in spec:
        _integer(add, ("spec", "activeDeadlineSeconds"), spec["activeDeadlineSeconds"], 0, INT64_MAX)
    if _plain(spec.get("completionMode")) and spec.get("completionMode", "NonIndexed") not in _COMPLETION_MODES:
        add(("spec", "completionMode"), f"{shown(spec['completionMode'])} is not NonIndexed or Indexed")
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if _plain(restart) and restart not in _JOB_RESTART_POLICIES:
        add(("spec", "template", "spec", "restartPolicy"),
            f"a Job's pods restart Never or OnFailure, not {shown(restart)}")
    if spec.get("completionMode") == "Indexed":
        count = spec.get("parallelism")
        if isinstance(count, int) and not isinstance(count, bool) and MAX_INDEXED_PARALLELISM < count <= INT32_MAX:
            add(("spec", "parallelism"), f"an Indexed Job runs at most {MAX_INDEXED_PARALLELISM} pods at once "
                                         f"(got {count})")
        completions = spec.get("completions")
        if isinstance(name, str) and isinstance(completions, int) and completions > 0:
            hostname = f"{name}-{completions - 1}"
            if len(hostname) > MAX_DNS_LABEL:
                over = len(hostname) - MAX_DNS_LABEL
                # Shown whole (up to twice the limit): the overflow is the part the user has to cut.
                add(("metadata", "name"), f"derived pod hostname {shown(hostname, 2 * MAX_DNS_LABEL)} is over the "
                                          f"{MAX_DNS_LABEL}-character limit by {over}: shorten the name by at least "
                                          f"{over} character{'s' if over > 1 else ''} or use fewer pods")
            elif not is_dns_label(hostname):
                add(("metadata", "name"), f"pod hostname {shown(hostname)} must be a DNS label")
    max_failed, completions = spec.get("maxFailedIndexes"), spec.get("completions")
    if isinstance(max_failed, int) and isinstance(completions, int) and max_failed > completions:
        add(("spec", "maxFailedIndexes"), f"is {max_failed}, more than the Job's {completions} indexes; the API server "
                                          "allows at most completions")
    if isinstance(name, str) and len(name) > MAX_DNS_LABEL:
        add(("metadata", "name"), f"Job name {shown(name)} is {len(name)} characters; the limit is {MAX_DNS_LABEL} "
                                  "(it becomes the job-name label of its pods)")
    template = spec.get("template") or {}
    _check_metadata(template.get("metadata") or {}, ("spec", "template", "metadata"), add)
    _check_pod(template.get("spec") or {}, ("spec", "template", "spec"), add)


def _check_pod(pod: dict[str, Any], at: Path, add: Add) -> None:
    for field in ("hostname", "subdomain"):
        if field in pod:
            value = _string(add, (*at, field), pod[field])
            if value is not None and not is_dns_label(value):
                add((*at, field), f"{shown(value)} must be a DNS label")
    for field, what in (("serviceAccountName", "service account"), ("priorityClassName", "priority class")):
        if pod.get(field):
            _dns_subdomain(add, (*at, field), pod[field], what)
    for key, value in _items(pod.get("nodeSelector")):
        _label(add, (*at, "nodeSelector", key), key, value)
    for i, toleration in _entries(pod.get("tolerations")):
        _check_toleration(toleration, (*at, "tolerations", i), add)
    _check_ids(pod.get("securityContext"), (*at, "securityContext"), add)
    if isinstance(pod.get("dnsConfig"), dict):
        _check_dns_config(pod["dnsConfig"], (*at, "dnsConfig"), add)

    volumes = set()
    for i, volume in _entries(pod.get("volumes")):
        _check_volume(volume, (*at, "volumes", i), volumes, add)
    claims = _check_pod_claims(pod.get("resourceClaims"), (*at, "resourceClaims"), add)
    containers = set()
    for field in ("containers", "initContainers"):
        for i, container in _entries(pod.get(field)):
            _check_container(container, (*at, field, i), field, containers, volumes, add)
            for k, claim in _entries((container.get("resources") or {}).get("claims")
                                     if isinstance(container.get("resources"), dict) else None):
                name = claim.get("name")
                if isinstance(name, str) and name not in claims:
                    add((*at, field, i, "resources", "claims", k, "name"),
                        f"no resource claim named {shown(name)} in the pod's resourceClaims")


def _check_pod_claims(claims: Any, at: Path, add: Add) -> set[str]:
    """A pod's resourceClaims: unique DNS-label names, each from exactly one ResourceClaim or template. Returns
    their names, which containers refer to."""
    names: set[str] = set()
    for i, claim in _entries(claims):
        name = _string(add, (*at, i, "name"), claim.get("name"))
        if name is not None:
            if not is_dns_label(name):
                add((*at, i, "name"), f"resource claim name {shown(name)} must be a DNS label")
            elif name in names:
                add((*at, i, "name"), f"a second resource claim named {shown(name)} in the pod")
            names.add(name)
        sources = [field for field in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(field)]
        if len(sources) != 1:
            add((*at, i), "gives exactly one of resourceClaimName and resourceClaimTemplateName")
        for field in sources:
            _dns_subdomain(add, (*at, i, field), claim[field], "resource claim" if field == "resourceClaimName"
                           else "resource claim template")
    return names


def _check_toleration(toleration: dict[str, Any], at: Path, add: Add) -> None:
    key, operator, value = toleration.get("key", ""), toleration.get("operator", ""), toleration.get("value", "")
    if key and isinstance(key, str) and (problem := label_key_problem(key)):
        add((*at, "key"), problem)
    if operator not in ("", "Equal", "Exists"):
        if _plain(operator):
            add((*at, "operator"), f"{shown(operator)} is not a toleration operator: use Exists or Equal")
    elif not key and operator != "Exists" and _plain(key):
        add((*at, "operator"), 'must be "Exists" when the key is empty (a toleration of every taint)')
    elif operator == "Exists" and value:
        add((*at, "operator"), f'with "Exists" the value must be empty (got {shown(value)})')
    elif isinstance(value, str) and value and (problem := label_value_problem(value)):
        add((*at, "value"), problem)
    effect = toleration.get("effect", "")
    if _plain(effect) and effect not in _TAINT_EFFECTS:
        add((*at, "effect"), f"{shown(effect)} is not a taint effect: use NoSchedule, PreferNoSchedule or NoExecute")
    elif toleration.get("tolerationSeconds") is not None and effect != "NoExecute" and _plain(effect):
        add((*at, "effect"), "must be NoExecute when tolerationSeconds is set")


def _check_ids(context: Any, at: Path, add: Add) -> None:
    for field in _ID_FIELDS:
        if isinstance(context, dict) and field in context:
            _integer(add, (*at, field), context[field], 0, INT32_MAX)


def _check_dns_config(config: dict[str, Any], at: Path, add: Add) -> None:
    searches = config.get("searches") or []
    if isinstance(searches, list) and len(searches) > MAX_DNS_SEARCHES:
        add((*at, "searches"), f"at most {MAX_DNS_SEARCHES} search domains (got {len(searches)})")
    texts = []
    for i, domain in enumerate(searches if isinstance(searches, list) else []):
        text = _string(add, (*at, "searches", i), domain)
        if text is None:
            continue
        texts.append(text)
        bare = text[:-1] if text.endswith(".") else text
        if not is_dns_subdomain(bare):
            # Kubernetes 1.33 accepts "_" in a search domain, and "." alone (RelaxedDNSSearchValidation).
            add((*at, "searches", i), f"search domain {shown(text)} must be a DNS subdomain "
                                      "(lowercase letters, digits, \"-\" and \".\")",
                later=text == "." or is_dns_subdomain(bare.replace("_", "x")))
    if (total := len(" ".join(texts))) > MAX_DNS_SEARCH_CHARS:   # the resolv.conf line, with its spaces
        add((*at, "searches"), f"search domains total {total} characters with the spaces between them; the limit "
                               f"is {MAX_DNS_SEARCH_CHARS}")


def _check_volume(volume: dict[str, Any], at: Path, seen: set[str], add: Add) -> None:
    name = _string(add, (*at, "name"), volume.get("name"))
    if name is not None:
        if not is_dns_label(name):
            add((*at, "name"), f"volume name {shown(name)} must be a DNS label")
        elif name in seen:
            add((*at, "name"), f"a second volume named {shown(name)}")
        seen.add(name)
    for source, name_field in (("secret", "secretName"), ("configMap", "name")):
        spec = volume.get(source)
        if not isinstance(spec, dict):
            continue
        if not spec.get(name_field) and _plain(spec.get(name_field)):
            add((*at, source, name_field), "required")
        elif (text := _string(add, (*at, source, name_field), spec.get(name_field))) and not is_dns_subdomain(text):
            # The server asks for a name only; no object has this one, and the pods wait for it forever.
            add((*at, source, name_field), f"{source} {shown(text)} must be a DNS subdomain (lowercase letters, "
                                           "digits, \"-\" and \".\")", later=True)
        if "defaultMode" in spec:
            _integer(add, (*at, source, "defaultMode"), spec["defaultMode"], 0, 0o777)
        for i, item in _entries(spec.get("items")):
            if "mode" in item:
                _integer(add, (*at, source, "items", i, "mode"), item["mode"], 0, 0o777)
            _relative_path(add, (*at, source, "items", i, "path"), item.get("path"))
    claim = volume.get("persistentVolumeClaim")
    if isinstance(claim, dict) and not claim.get("claimName") and _plain(claim.get("claimName")):
        add((*at, "persistentVolumeClaim", "claimName"), "required")
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, dict):
        if _plain(empty_dir.get("medium", "")) and empty_dir.get("medium", "") not in _EMPTYDIR_MEDIA:
            add((*at, "emptyDir", "medium"), f"{shown(empty_dir['medium'])} is not Memory or HugePages",
                later=True)   # the kubelet cannot set up the volume
        if "sizeLimit" in empty_dir:
            limit = _quantity(add, (*at, "emptyDir", "sizeLimit"), empty_dir["sizeLimit"])
            if limit is not None and limit < 0:
                add((*at, "emptyDir", "sizeLimit"), "must be greater than or equal to 0")


def _relative_path(add: Add, path: Path, value: Any) -> None:
    text = _string(add, path, value)
    if text is not None and (not text or text.startswith("/") or ".." in text.split("/")):
        add(path, f"{shown(text)} must be a relative path without \"..\"")


# --- containers ----------------------------------------------------------------------------------

def _check_container(container: dict[str, Any], at: Path, field: str, names: set[str], volumes: set[str],
                     add: Add) -> None:
    name = _string(add, (*at, "name"), container.get("name"))
    if name is not None:
        if not is_dns_label(name):
            add((*at, "name"), f"container name {shown(name)} must be a DNS label")
        elif name in names:
            add((*at, "name"), f"a second container named {shown(name)} in the pod "
                               "(containers and init containers share names)")
        names.add(name)
    image = container.get("image")
    if image is None or image == "":
        add((*at, "image"), "required: every container of a pod needs an image")
    elif (text := _string(add, (*at, "image"), image)) is not None and (problem := image_problem(text)):
        add((*at, "image"), problem, later=text == text.strip())   # whitespace: the server refuses the pods
    if _plain(container.get("imagePullPolicy")) and container.get("imagePullPolicy", "Always") not in _PULL_POLICIES:
        add((*at, "imagePullPolicy"), f"{shown(container['imagePullPolicy'])} is not Always, IfNotPresent or Never")
    if field == "initContainers" and container.get("restartPolicy") not in (None, "Always"):
        add((*at, "restartPolicy"), "an init container's restartPolicy may only be Always (a sidecar)")
    _check_ids(container.get("securityContext"), (*at, "securityContext"), add)
    for field in ("command", "args"):
        words = container.get(field)
        for i, word in enumerate(words if isinstance(words, list) else []):
            if isinstance(word, str) and "\0" in word:
                add((*at, field, i), "contains a NUL byte, which no process can be given", later=True)
    for i, entry in _entries(container.get("env")):
        _check_env(entry, (*at, "env", i), add)
    for i, source in _entries(container.get("envFrom")):
        _check_env_from(source, (*at, "envFrom", i), add)
    _check_ports(container.get("ports"), (*at, "ports"), add)
    _check_resources(container.get("resources"), (*at, "resources"), add)
    paths = set()
    for i, mount in _entries(container.get("volumeMounts")):
        mount_name = mount.get("name")
        if isinstance(mount_name, str) and mount_name not in volumes:
            add((*at, "volumeMounts", i, "name"), f"no volume named {shown(mount_name)} in the pod")
        mount_path = _string(add, (*at, "volumeMounts", i, "mountPath"), mount.get("mountPath"))
        if mount_path is not None:
            if not mount_path:
                add((*at, "volumeMounts", i, "mountPath"), "required")
            elif mount_path in paths:
                add((*at, "volumeMounts", i, "mountPath"), f"{shown(mount_path)} is mounted twice in the container")
            paths.add(mount_path)
        if mount.get("subPath"):
            _relative_path(add, (*at, "volumeMounts", i, "subPath"), mount["subPath"])


def _check_env(entry: dict[str, Any], at: Path, add: Add) -> None:
    name = _string(add, (*at, "name"), entry.get("name"))
    if name is not None and (problem := env_name_problem(name)):
        add((*at, "name"), problem, later=_relaxed_env_name(name))
    value, source = entry.get("value"), entry.get("valueFrom")
    if source is not None and value not in (None, ""):
        add((*at, "valueFrom"), "may not be given together with a non-empty value")
    if isinstance(value, str) and "\0" in value:
        add((*at, "value"), "contains a NUL byte, which no process can be given", later=True)
    if isinstance(name, str) and isinstance(value, str) and (size := len(f"{name}={value}".encode())) >= MAX_ENV_STRING:
        add((*at, "value"), f"NAME=value is {size} bytes; Linux starts no process with an env string over "
                            f"{MAX_ENV_STRING - 1}", later=True)
    if isinstance(source, dict):
        given = [k for k in _VALUE_SOURCES if k in source]
        if len(given) != 1:
            add((*at, "valueFrom"), f"must name exactly one of {', '.join(_VALUE_SOURCES)} (got {len(given)})")
            return
        ref = source[given[0]]
        if not isinstance(ref, dict):
            return
        if given[0] == "fieldRef":
            path = ref.get("fieldPath")
            match = FIELD_KEY_PATH.fullmatch(path) if isinstance(path, str) else None
            if _plain(path) and path not in _FIELD_PATHS and not (match and not label_key_problem(match.group(2))):
                add((*at, "valueFrom", "fieldRef", "fieldPath"), f"{shown(path)} is not a field an env var can read")
        elif given[0] == "resourceFieldRef":
            resource = ref.get("resource")
            if _plain(resource) and resource not in _RESOURCE_FIELDS and not (
                    isinstance(resource, str) and re.fullmatch(r"(limits|requests)\.hugepages-.+", resource)):
                add((*at, "valueFrom", "resourceFieldRef", "resource"), f"{shown(resource)} is not a resource an env "
                                                                        "var can read")
        else:
            _key_ref(ref, (*at, "valueFrom", given[0]), add)


@lru_cache(maxsize=4096)   # see trainjobs.kube.naming.label_key_problem
def env_name_problem(name: str) -> str | None:
    """Why `name` is not an env var name the API server accepts, or None."""
    if not _ENV_NAME.fullmatch(name) or name in (".", "..") or name.startswith(".."):
        return (f"env name {shown(name)} is invalid: use letters, digits, \"_\", \"-\" and \".\", not starting "
                "with a digit")
    return None


def _relaxed_env_name(name: str) -> bool:
    """Kubernetes 1.32 accepts any printable ASCII but "=" in an env name (RelaxedEnvironmentVariableValidation)."""
    return bool(name) and all(" " <= c <= "~" and c != "=" for c in name)


def _key_ref(ref: dict[str, Any], at: Path, add: Add) -> None:
    if not ref.get("name") and _plain(ref.get("name")):
        add((*at, "name"), "required")
    elif ref.get("name"):
        _dns_subdomain(add, (*at, "name"), ref["name"], "name")
    key = _string(add, (*at, "key"), ref.get("key", ""))
    if key is not None and (problem := config_key_problem(key)):
        add((*at, "key"), problem)


def config_key_problem(key: str) -> str | None:
    """Why `key` is not a key of a ConfigMap or Secret, or None. Not ".", ".." or "..name": a volume's files
    are links into a "..<timestamp>" folder, which such a key would overwrite."""
    if len(key) > 253 or not _CONFIG_KEY.fullmatch(key) or key == "." or key.startswith(".."):
        return (f"key {shown(key)} must be 1 to 253 letters, digits, \"-\", \"_\" or \".\", and neither \".\" nor "
                "start with \"..\"")
    return None


def _check_env_from(source: dict[str, Any], at: Path, add: Add) -> None:
    given = [k for k in ("configMapRef", "secretRef") if k in source]
    if len(given) != 1:
        add(at, f"must name exactly one of configMapRef, secretRef (got {len(given)})")
    for field in given:
        ref = source[field]
        if isinstance(ref, dict) and not ref.get("name") and _plain(ref.get("name")):
            add((*at, field, "name"), "required")
        elif isinstance(ref, dict):
            _dns_subdomain(add, (*at, field, "name"), ref["name"], "name")
    prefix = source.get("prefix")
    if isinstance(prefix, str) and prefix and (problem := env_name_problem(prefix)):
        add((*at, "prefix"), problem, later=_relaxed_env_name(prefix))


def port_name_problem(name: str) -> str | None:
    """Why `name` is not an IANA service name (a port name), or None."""
    if (len(name) > 15 or not _PORT_NAME.fullmatch(name) or not re.search("[a-z]", name) or "--" in name
            or name.startswith("-") or name.endswith("-")):
        return (f"port name {shown(name)} is invalid: at most 15 lowercase letters, digits and \"-\", with a letter, "
                "no \"--\" and no \"-\" at either end")
    return None


def _check_ports(ports: Any, at: Path, add: Add) -> None:
    names = set()
    for i, port in _entries(ports):
        if "containerPort" not in port:
            add((*at, i, "containerPort"), "required")
        else:
            _integer(add, (*at, i, "containerPort"), port["containerPort"], 1, 65535)
        if port.get("hostPort") not in (None, 0):
            _integer(add, (*at, i, "hostPort"), port["hostPort"], 1, 65535)
        if _plain(port.get("protocol")) and port.get("protocol", "TCP") not in _PROTOCOLS:
            add((*at, i, "protocol"), f"{shown(port['protocol'])} is not TCP, UDP or SCTP")
        if "name" in port and (name := _string(add, (*at, i, "name"), port["name"])) is not None:
            if problem := port_name_problem(name):
                add((*at, i, "name"), problem)
            elif name in names:
                add((*at, i, "name"), f"a second port named {shown(name)} in the container")
            names.add(name)


def resource_name_problem(name: str) -> str | None:
    """Why `name` is not a resource a container may request, or None."""
    if label_key_problem(name):
        return f"resource name {shown(name)} is invalid: use cpu, memory, ephemeral-storage or a domain/name"
    if "/" not in name and name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        return (f"{shown(name)} is not a standard resource: use cpu, memory or ephemeral-storage, or a device "
                "resource with its domain (e.g. nvidia.com/gpu)")
    return None


def is_extended_resource(name: str) -> bool:
    """A resource outside Kubernetes' own (device plugins: GPUs, NICs): integer, request equal to limit."""
    return "/" in name and "kubernetes.io/" not in name


def _items_keys(value: Any) -> set:
    return set(value) if isinstance(value, dict) else set()


def _quantity(add: Add, path: Path, value: Any):
    if not _plain(value):
        return None
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        add(path, str(exc))
        return None


def _check_resources(resources: Any, at: Path, add: Add) -> None:
    if not isinstance(resources, dict):
        return
    parsed: dict[str, dict[str, Any]] = {}
    for side in ("requests", "limits"):
        for name, value in _items(resources.get(side)):
            path = (*at, side, name)
            if not isinstance(name, str):
                continue
            if problem := resource_name_problem(name):
                add(path, problem)
                continue
            quantity = _quantity(add, path, value)
            if quantity is None:
                continue
            if quantity < 0:
                add(path, f"must be greater than or equal to 0 (got {shown(value)})")
            elif is_extended_resource(name) and quantity != quantity.to_integral_value():
                add(path, f"{name} must be a whole number (got {shown(value)}): devices are not shared")
            else:
                parsed.setdefault(side, {})[name] = (quantity, value)
    for name, (request, shown_request) in parsed.get("requests", {}).items():
        if name not in parsed.get("limits", {}):
            if is_extended_resource(name) and name not in _items_keys(resources.get("limits")):
                add((*at, "limits", name), f"{name} needs a limit equal to its request: device resources are "
                                             "not overcommitted")
            continue
        limit, shown_limit = parsed["limits"][name]
        if is_extended_resource(name) and request != limit:
            add((*at, "requests", name), f"{shown(shown_request)} must equal the {name} limit {shown(shown_limit)}: "
                                         "device resources are not overcommitted")
        elif request > limit:
            add((*at, "requests", name), f"{shown(shown_request)} must be less than or equal to the {name} limit "
                                         f"{shown(shown_limit)}")
