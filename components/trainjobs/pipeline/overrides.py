"""Fields the arguments do not model (pod_spec_overrides, container_overrides, job_spec_overrides):
checked against the Kubernetes API's field names and kinds, refused where the job derives or models
the field, then set on the training pods and Jobs."""

import difflib
import inspect
import re
from collections.abc import Sequence
from typing import Any

from pulumi_kubernetes import _tables as k8s_tables
from pulumi_kubernetes.batch.v1 import JobSpecArgs
from pulumi_kubernetes.core.v1 import ContainerArgs, PodSpecArgs

from trainjobs.core.args import TrainJobArgs
from trainjobs.core.deferred import is_plain
from trainjobs.core.errors import IssueCollector
from trainjobs.core.podsets import PodSetSpec


def _field_kinds(args_class: type) -> dict[str, type]:
    """Kubernetes field (camelCase) -> the JSON kind of its value, from pulumi-kubernetes' typed args."""
    kinds = {}
    for snake, parameter in inspect.signature(args_class.__init__).parameters.items():
        if snake == "__self__":
            continue
        camel = k8s_tables.SNAKE_TO_CAMEL_CASE_TABLE.get(snake) or re.sub(r"_([a-z])", lambda m: m[1].upper(), snake)
        first = typing_args[0] if (typing_args := getattr(parameter.annotation, "__args__", None)) else None
        origin = getattr(first, "__origin__", first)
        kinds[camel] = (bool if first is bool else int if first is int else str if first is str
                        else list if origin in (list, Sequence) else dict)
    return kinds


# Each override target: its fields' kinds, and the fields an argument already sets or the job derives.
_OVERRIDES = {
    "pod_spec_overrides": (_field_kinds(PodSpecArgs), {
        "containers": None, "initContainers": "init_containers and sidecars", "subdomain": None, "hostname": None,
        "restartPolicy": None, "volumes": "volumes", "nodeSelector": "node_selector", "tolerations": "tolerations",
        "affinity": "affinity", "serviceAccountName": "service_account_name", "serviceAccount": "service_account_name",
        "imagePullSecrets": "image_pull_secrets", "priorityClassName": "priority_class_name",
        "securityContext": "security_context", "hostNetwork": "host_network",
        "topologySpreadConstraints": "topology_spread_constraints", "schedulerName": "scheduler_name",
        "resourceClaims": "devices_per_node"}),
    "container_overrides": (_field_kinds(ContainerArgs), {
        "name": None, "image": "image", "command": "command", "args": "args", "env": "env", "envFrom": "env_from",
        "ports": "ports", "resources": "resources_per_node", "volumeMounts": "volume_mounts",
        "workingDir": "working_dir", "imagePullPolicy": "image_pull_policy",
        "securityContext": "container_security_context"}),
    "job_spec_overrides": (_field_kinds(JobSpecArgs), {
        "template": None, "completions": None, "parallelism": None, "completionMode": None, "selector": None,
        "manualSelector": None, "backoffLimit": "backoff_limit", "activeDeadlineSeconds": "active_deadline_seconds",
        "ttlSecondsAfterFinished": "ttl_seconds_after_finished", "podFailurePolicy": "failure_policy",
        "backoffLimitPerIndex": "failure_policy.backoff_limit_per_index",
        "maxFailedIndexes": "failure_policy.max_failed_indexes", "suspend": "suspend"}),
}


def check_overrides(issues: IssueCollector, args: TrainJobArgs) -> None:
    """Override keys are real Kubernetes fields of the right kind that no argument or derivation sets."""
    for field, (kinds, taken) in _OVERRIDES.items():
        for key, value in (getattr(args, field) or {}).items():
            path = f"{field}.{key}"
            if key in taken:
                instead = taken[key]
                issues.add(path, f"use the {instead} argument instead" if instead else
                           f"{key} is derived by the job (names, counts, DNS and env depend on it); it cannot be "
                           "overridden")
            elif key not in kinds:
                close = difflib.get_close_matches(key, list(kinds), n=1)
                issues.add(path, f"not a field of {_TARGET_NAMES[field]}" +
                           (f'; did you mean "{close[0]}"?' if close else " (use Kubernetes' camelCase field names)"))
            elif is_plain(value) and value is not None and not _is_kind(value, kinds[key]):
                issues.add(path, f"{_TARGET_NAMES[field]}.{key} takes a {_KIND_NAMES[kinds[key]]}, "
                                 f"got {type(value).__name__}")


_TARGET_NAMES = {"pod_spec_overrides": "PodSpec", "container_overrides": "Container", "job_spec_overrides": "JobSpec"}
_KIND_NAMES = {bool: "boolean", int: "integer", str: "string", list: "list", dict: "mapping"}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def apply_overrides(pod_set: PodSetSpec, args: TrainJobArgs) -> None:
    """A training pod set with the job's override fields set; a refused field (see check_overrides) is
    left out, so the objects' own checks do not report its consequences as well."""
    pod = pod_set.template["spec"]
    for field, target in (("pod_spec_overrides", pod), ("container_overrides", pod["containers"][0]),
                          ("job_spec_overrides", pod_set.rules)):
        kinds, taken = _OVERRIDES[field]
        target.update({key: value for key, value in (getattr(args, field) or {}).items()
                       if key in kinds and key not in taken})
