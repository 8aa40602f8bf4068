"""Custom resources checked as the cluster checks them: against the CRDs their controllers install, and
against the webhook rules those CRDs do not carry.

The CRDs are the published files of JobSet, Kueue, Volcano and scheduler-plugins in `../shared/crds/`
beside the repository (its README names their commits). `crd_problems` validates an object against the
`openAPIV3Schema` of its group, version and kind, as the API server does, with one difference that
matters: a field the schema does not declare (outside `x-kubernetes-preserve-unknown-fields`) is a
problem here, where the server would silently prune it. `jobset_webhook_problems` and
`kueue_webhook_problems` are the admission rules of JobSet's and Kueue's webhooks, written from the
rules listed in that README (JobSet `pkg/webhooks/jobset_webhook.go`; Kueue
`pkg/controller/jobframework/validation.go`), not from the library's own checks.
"""

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import pytest
import yaml
from jsonschema import Draft4Validator

CRDS = Path(__file__).resolve().parents[1].parent / "shared" / "crds"


def crd_directory() -> Path:
    """The CRD files; outside CI their absence skips the test, under CI=true it fails it."""
    if not CRDS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CRDS} is missing: the CRD schemas are needed in CI")
        pytest.skip(f"{CRDS} is absent: the CRD schemas are not available here")
    return CRDS


@lru_cache(maxsize=1)
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema, for every served version of every CRD."""
    found = {}
    for path in sorted(crd_directory().glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served"):
                found[f"{spec['group']}/{version['name']}", spec["names"]["kind"]] = \
                    version["schema"]["openAPIV3Schema"]
    return found


# What the API server keeps of an object's metadata (ObjectMeta), in the shape trainjobs can set.
_STRING = {"type": "string"}
_STRING_MAP = {"type": "object", "additionalProperties": _STRING}
OBJECT_META = {
    "type": "object", "additionalProperties": False,
    "properties": {"name": _STRING, "generateName": _STRING, "namespace": _STRING, "labels": _STRING_MAP,
                   "annotations": _STRING_MAP, "finalizers": {"type": "array", "items": _STRING},
                   "ownerReferences": {"type": "array", "items": {"type": "object"}}},
}
_TYPE_META = {"apiVersion": _STRING, "kind": _STRING, "metadata": OBJECT_META}
# Keywords of a CRD's structural schema that mean the same in JSON Schema draft 4.
_KEPT = ("type", "enum", "pattern", "format", "maxLength", "minLength", "minimum", "maximum", "exclusiveMinimum",
         "exclusiveMaximum", "multipleOf", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
         "required")
_FORMAT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
PRUNED = "not in the schema: the API server would prune it"


def json_schema(node: dict[str, Any], root: bool = True) -> dict[str, Any]:
    """A CRD schema node as a draft 4 JSON Schema that refuses what the API server would prune.

    Kubernetes' extensions: `x-kubernetes-int-or-string` takes an integer or a string;
    `nullable` also takes null; `x-kubernetes-preserve-unknown-fields` keeps fields the node does not
    declare; `x-kubernetes-embedded-resource` (and the root) carries apiVersion, kind and an ObjectMeta.
    Every other object node keeps only the fields it declares.
    """
    out = {key: node[key] for key in _KEPT if key in node}
    for combinator in ("anyOf", "allOf", "oneOf"):
        if combinator in node:
            out[combinator] = [json_schema(branch, root=False) for branch in node[combinator]]
    if "not" in node:
        out["not"] = json_schema(node["not"], root=False)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("format") in _FORMAT_RANGES and node.get("type") == "integer":
        low, high = _FORMAT_RANGES[node["format"]]
        out.setdefault("minimum", low)
        out.setdefault("maximum", high)
    if "items" in node:
        out["items"] = json_schema(node["items"], root=False)
    properties = {name: json_schema(sub, root=False) for name, sub in (node.get("properties") or {}).items()}
    if root or node.get("x-kubernetes-embedded-resource"):
        properties = {**properties, **_TYPE_META}
    if properties:
        out["properties"] = properties
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = json_schema(additional, root=False)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    elif node.get("x-kubernetes-preserve-unknown-fields"):
        pass
    elif node.get("type") == "object" or properties:
        out["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def format_path(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(object)"


def schema_problems(obj: Any, schema: dict[str, Any]) -> list[str]:
    """Where `obj` breaks the CRD schema `schema`: each problem `path: what`, unknown fields one by one."""
    problems = []
    for error in Draft4Validator(json_schema(schema)).iter_errors(obj):
        where = format_path(error.absolute_path)
        if error.validator == "additionalProperties" and error.validator_value is False:
            declared = set((error.schema.get("properties") or {}))
            problems += [f"{format_path([*error.absolute_path, key])}: {PRUNED}"
                         for key in error.instance if key not in declared]
        else:
            problems.append(f"{where}: {error.message}")
    return sorted(problems)


def is_custom_resource(obj: dict[str, Any]) -> bool:
    """Whether `obj` is of a kind a CRD defines: its API group has a dot and is not one of Kubernetes' own
    (`*.k8s.io`; the SIGs' `*.x-k8s.io` groups are CRDs)."""
    group = obj["apiVersion"].rpartition("/")[0]
    return "." in group and not group.endswith(".k8s.io")


def crd_problems(obj: dict[str, Any]) -> list[str]:
    """`obj` against its CRD's schema; an object no CRD here defines is a problem too."""
    schema = schemas().get((obj["apiVersion"], obj["kind"]))
    if schema is None:
        return [f"no CRD in {CRDS} serves {obj['apiVersion']} {obj['kind']}"]
    return schema_problems(obj, schema)


# Webhook rules, as the README of ../shared/crds lists them.
_RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                        "PodFailurePolicy"}
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
POD_SUFFIX = "-abcde"   # the webhook measures pod names with the 5 random characters and their "-"


def is_dns1035_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1035_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def jobset_webhook_problems(jobset: dict[str, Any]) -> list[str]:
    """What JobSet's validating webhook refuses on create."""
    problems = []
    name, spec = jobset["metadata"]["name"], jobset["spec"]
    replicated = spec.get("replicatedJobs") or []
    names = [rj["name"] for rj in replicated]
    if replicated and replicated[0].get("dependsOn"):
        problems.append(f"replicatedJobs[0] ({names[0]}): the first replicated job cannot have dependsOn")
    for i, rj in enumerate(replicated):
        for dependency in rj.get("dependsOn") or []:
            if dependency["name"] not in names[:i]:
                problems.append(f"replicatedJobs[{i}] ({rj['name']}): dependsOn {dependency['name']} is not an "
                                "earlier replicated job")
        replicas = int(rj.get("replicas", 1))
        job = f"{name}-{rj['name']}-{replicas - 1}"
        if not is_dns1035_label(job):
            problems.append(f"replicatedJobs[{i}] ({rj['name']}): child Job name {job} is not a DNS-1035 label "
                            "of at most 63 characters")
        job_spec = rj["template"]["spec"]
        if job_spec.get("completionMode") == "Indexed" and job_spec.get("completions") is not None:
            pod = f"{job}-{int(job_spec['completions']) - 1}{POD_SUFFIX}"
            if not is_dns1035_label(pod):
                problems.append(f"replicatedJobs[{i}] ({rj['name']}): pod name {pod} is not a DNS-1035 label "
                                "of at most 63 characters")
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            problems.append(f"successPolicy.targetReplicatedJobs: {target} is not a replicated job")
    rules = (spec.get("failurePolicy") or {}).get("rules") or []
    rule_names = [rule.get("name", "") for rule in rules]
    for i, rule in enumerate(rules):
        rule_name = rule_names[i]
        if not 1 <= len(rule_name) <= 128 or not _RULE_NAME.fullmatch(rule_name):
            problems.append(f"failurePolicy.rules[{i}].name: {rule_name!r} must be 1 to 128 characters matching "
                            f"^{_RULE_NAME.pattern}$")
        if rule_names.count(rule_name) > 1 and rule_names.index(rule_name) == i:
            problems.append(f"failurePolicy.rules: the name {rule_name!r} is not unique")
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                problems.append(f"failurePolicy.rules[{i}].targetReplicatedJobs: {target} is not a replicated job")
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in _JOB_FAILURE_REASONS:
                problems.append(f"failurePolicy.rules[{i}].onJobFailureReasons: {reason} is not a Job failure reason")
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain and not (is_dns1123_subdomain(subdomain) and is_dns1035_label(subdomain)):
        problems.append(f"network.subdomain: {subdomain!r} must be a DNS-1035 label")
    return problems


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


_TAS = "kueue.x-k8s.io/podset-"
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    return (not slash or is_dns1123_subdomain(prefix)) and len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def kueue_webhook_problems(obj: dict[str, Any]) -> list[str]:
    """What Kueue's webhook refuses on creating a Job or JobSet it manages: a queue name that is not a
    DNS-1123 subdomain, and topology-aware scheduling annotations on its pod sets against the rules of
    `pkg/controller/jobframework/tas_validation.go` (at most one of required, preferred, unconstrained;
    level names are label keys; slice size with, and only with, a slice level, at least 1 and at most the
    pod set's count; a group name with required or preferred, without slices, not a number; a group of
    exactly 2 pod sets, one of count 1, with the same required or preferred value)."""
    queue = (obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if queue is None:
        return []
    problems = []
    if not is_dns1123_subdomain(queue):
        problems.append(f"metadata.labels[{KUEUE_QUEUE_LABEL}]: {queue!r} is not a DNS-1123 subdomain")
    if "spec" not in obj:
        return problems
    if obj["kind"] == "Job":   # one pod set `main`, count min(parallelism, completions)
        spec = obj["spec"]
        pod_sets = [("main", min(int(spec.get("parallelism", 1)), int(spec.get("completions", spec.get("parallelism", 1)))),
                     spec["template"])]
    else:                      # a pod set per replicated job, count replicas x min(parallelism, completions)
        pod_sets = []
        for rj in obj["spec"].get("replicatedJobs") or []:
            spec = rj["template"]["spec"]
            pods = min(int(spec.get("parallelism", 1)), int(spec.get("completions", spec.get("parallelism", 1))))
            pod_sets.append((rj["name"], int(rj.get("replicas", 1)) * pods, spec["template"]))
    groups: dict[str, list[tuple[str, int, dict]]] = {}
    for name, count, template in pod_sets:
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        where = f"pod set {name}: "
        modes = [k for k in ("required-topology", "preferred-topology", "unconstrained-topology")
                 if _TAS + k in annotations]
        if len(modes) > 1:
            problems.append(where + f"more than one topology annotation: {modes}")
        for key in ("required-topology", "preferred-topology", "slice-required-topology"):
            if _TAS + key in annotations and not _is_label_key(annotations[_TAS + key]):
                problems.append(where + f"{key} {annotations[_TAS + key]!r} is not a label key")
        slice_level, size = annotations.get(_TAS + "slice-required-topology"), annotations.get(_TAS + "slice-size")
        if (slice_level is None) != (size is None):
            problems.append(where + "slice-required-topology and slice-size go together")
        if size is not None and (not size.isdigit() or not 1 <= int(size) <= count):
            problems.append(where + f"slice-size {size!r} must be an integer from 1 to the pod count {count}")
        group = annotations.get(_TAS + "group-name")
        if group is not None:
            if group.isdigit():
                problems.append(where + f"group-name {group!r} must not be a number")
            if slice_level is not None or size is not None:
                problems.append(where + "group-name may not be set with slices")
            if not ({"required-topology", "preferred-topology"} & set(modes)):
                problems.append(where + "group-name needs required-topology or preferred-topology")
            groups.setdefault(group, []).append((name, count, annotations))
    for group, members in groups.items():
        if len(members) != 2:
            problems.append(f"group {group}: {len(members)} pod sets, Kueue groups exactly 2")
            continue
        (_, count1, a1), (_, count2, a2) = members
        if count1 != 1 and count2 != 1:
            problems.append(f"group {group}: neither pod set has count 1 ({count1}, {count2})")
        if any(a1.get(_TAS + k) != a2.get(_TAS + k) for k in ("required-topology", "preferred-topology")):
            problems.append(f"group {group}: the pod sets' required or preferred topology differ")
    return problems


def cluster_problems(objects: Iterable[dict[str, Any]]) -> list[str]:
    """Every problem the cluster would find in the custom resources among `objects` (CRD schema, pruning,
    JobSet and Kueue webhooks), each prefixed by its object."""
    problems = []
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        found = []
        if is_custom_resource(obj):
            found += crd_problems(obj)
        if obj["kind"] == "JobSet" and obj["apiVersion"].startswith("jobset.x-k8s.io/"):
            found += jobset_webhook_problems(obj)
        if obj["kind"] in ("Job", "JobSet"):
            found += kueue_webhook_problems(obj)
        problems += [f"{where} {problem}" for problem in found]
    return problems


def immutable_paths(schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields a CRD's CEL rules declare immutable (`self == oldSelf`), as dotted paths (`[]` for list
    items): the API server refuses any update that changes them."""
    found = []
    if any(re.sub(r"\s+", "", rule.get("rule", "")) == "self==oldSelf"
           for rule in schema.get("x-kubernetes-validations") or []):
        found.append(path)
    for name, sub in (schema.get("properties") or {}).items():
        found += immutable_paths(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        found += immutable_paths(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += immutable_paths(schema["additionalProperties"], f"{path}.*")
    return found
