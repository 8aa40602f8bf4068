"""Checks on rendered manifests that the Kubernetes JSON schemas do not make.

The OpenAPI schemas type-check fields but hold no enum values, name formats or cross-field
rules; the API server enforces those. These checks catch them offline.
"""

import base64
import binascii
import re
from typing import Any

from ..naming import MAX_DNS_LABEL, label_key_problem, label_value_problem
from ..quantity import QuantityError, parse_quantity

_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_FIELD_PATHS = re.compile(r"^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\]|"
                          r"spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs))$")
_ENUMS = {
    "completionMode": {"NonIndexed", "Indexed"},
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "protocol": {"TCP", "UDP", "SCTP"},
}


def manifest_problems(objects: list[dict[str, Any]]) -> list[str]:
    """Every problem found in the rendered objects, as `Kind/name: what` strings."""
    problems: list[str] = []
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        problems += [f"{where}: {p}" for p in _object_problems(obj)]
    return problems


def _object_problems(obj: dict[str, Any]) -> list[str]:
    problems = []
    meta = obj["metadata"]
    name = meta.get("name", "")
    if obj["kind"] == "Service":
        if not _RFC1035_LABEL.match(name) or len(name) > MAX_DNS_LABEL:
            problems.append(f"Service name {name!r} is not an RFC 1035 label")
    elif not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        problems.append(f"name {name!r} is not a DNS subdomain")
    if "namespace" in meta and not _RFC1123_LABEL.match(meta["namespace"]):
        problems.append(f"namespace {meta['namespace']!r} is invalid")
    problems += _metadata_problems(meta)
    if obj["kind"] == "Job":
        problems += _job_problems(obj)
    if obj["kind"] == "Secret":
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                if value != "[secret]":
                    problems.append(f"data.{key} is not base64")
    return problems


def _metadata_problems(meta: dict[str, Any]) -> list[str]:
    problems = []
    for key, value in (meta.get("labels") or {}).items():
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            problems.append(f"label {problem}")
    for key in meta.get("annotations") or {}:
        problem = label_key_problem(key)
        if problem:
            problems.append(f"annotation {problem}")
    return problems


def _job_problems(job: dict[str, Any]) -> list[str]:
    problems = []
    spec = job["spec"]
    name = job["metadata"]["name"]
    if len(name) > MAX_DNS_LABEL:
        problems.append("Job names longer than 63 characters cannot label their pods")
    for field in ("completionMode",):
        if field in spec and spec[field] not in _ENUMS[field]:
            problems.append(f"{field} {spec[field]!r} is not one of {sorted(_ENUMS[field])}")
    pod = spec["template"]["spec"]
    problems += _metadata_problems(spec["template"].get("metadata", {}))
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append(f"a Job's restartPolicy must be Never or OnFailure, not {pod.get('restartPolicy')!r}")
    if spec.get("completionMode") == "Indexed":
        last = f"{name}-{max(spec.get('completions', 1) - 1, 0)}"
        if len(last) > MAX_DNS_LABEL or not _RFC1123_LABEL.match(last):
            problems.append(f"pod hostname {last!r} is not a valid DNS label")
        if spec.get("completions") != spec.get("parallelism"):
            problems.append("completions and parallelism differ: not every rank would run at once")
    if "subdomain" in pod and (len(pod["subdomain"]) > MAX_DNS_LABEL or not _RFC1123_LABEL.match(pod["subdomain"])):
        problems.append(f"subdomain {pod['subdomain']!r} is not a DNS label")
    volumes = [v["name"] for v in pod.get("volumes", [])]
    if len(volumes) != len(set(volumes)):
        problems.append(f"duplicate volume names {volumes}")
    for volume in pod.get("volumes", []):
        medium = volume.get("emptyDir", {}).get("medium", "")
        if medium not in ("", "Memory", "HugePages"):
            problems.append(f"emptyDir medium {medium!r} is invalid")
    containers = pod.get("initContainers", []) + pod.get("containers", [])
    names = [c["name"] for c in containers]
    if len(names) != len(set(names)):
        problems.append(f"duplicate container names {names}")
    for c in containers:
        problems += [f"container {c['name']}: {p}" for p in _container_problems(c, set(volumes))]
    return problems


def _container_problems(container: dict[str, Any], volumes: set[str]) -> list[str]:
    problems = []
    if not _RFC1123_LABEL.match(container["name"]):
        problems.append("name is not a DNS label")
    if container.get("imagePullPolicy", "Always") not in _ENUMS["imagePullPolicy"]:
        problems.append(f"imagePullPolicy {container['imagePullPolicy']!r} is invalid")
    env_names = [e["name"] for e in container.get("env", [])]
    if len(env_names) != len(set(env_names)):
        problems.append(f"duplicate env names {sorted(n for n in env_names if env_names.count(n) > 1)}")
    for entry in container.get("env", []):
        if not _ENV_NAME.match(entry["name"]):
            problems.append(f"env name {entry['name']!r} is invalid")
        path = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if path is not None and not _FIELD_PATHS.match(path):
            problems.append(f"env {entry['name']}: fieldPath {path!r} is not supported")
    for port in container.get("ports", []):
        if not 0 < port["containerPort"] < 65536:
            problems.append(f"containerPort {port['containerPort']} out of range")
        if port.get("protocol", "TCP") not in _ENUMS["protocol"]:
            problems.append(f"protocol {port['protocol']!r} is invalid")
    for mount in container.get("volumeMounts", []):
        if mount["name"] not in volumes:
            problems.append(f"volumeMount {mount['name']!r} has no volume")
    paths = [m["mountPath"] for m in container.get("volumeMounts", [])]
    if len(paths) != len(set(paths)):
        problems.append(f"duplicate mount paths {paths}")
    for side, values in container.get("resources", {}).items():
        for resource, quantity in values.items():
            try:
                parse_quantity(quantity)
            except QuantityError:
                problems.append(f"resources.{side}.{resource} {quantity!r} is not a quantity")
    return problems
