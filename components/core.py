"""Framework-agnostic derivation: runtime + job args -> plain Kubernetes manifests.

Nothing here knows torch, MPI or JAX. A framework module decides the roles, counts, env and
ports of its pods and calls these builders, which own the naming, labels, pod defaults and the
checks every job needs.
"""

from dataclasses import dataclass, field
from typing import Any

from .args import DEFAULT_SHM_SIZE, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from .errors import IssueCollector
from .naming import (label_key_problem, label_value_problem, rfc1035_label_problem,
                     rfc1123_label_problem)
from .quantity import ceil_value, parse_quantity

LABEL_JOB = "trainjobs.io/job-name"
LABEL_ROLE = "trainjobs.io/role"
RESERVED_LABELS = (LABEL_JOB, LABEL_ROLE)
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
SKIP_AWAIT = "pulumi.com/skipAwait"
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"
MAIN_CONTAINER = "node"
SHM_VOLUME = "dshm"


@dataclass(frozen=True)
class GeneratedSSHKey:
    """Placeholder for key material the component generates at deploy time and keeps in state.

    A plan stays a pure value; the component replaces each placeholder with an output of one
    key-pair resource per (`name`, algorithm), so the key is stable across updates.
    """

    name: str
    part: str  # "private" (OpenSSH format) or "public" (authorized_keys line)
    algorithm: str = "ECDSA-P521"


@dataclass(frozen=True)
class TrainJobPlan:
    """Everything a component registers, as plain manifests in apply order, plus its outputs."""

    name: str
    namespace: str | None
    manifests: tuple[dict[str, Any], ...]
    outputs: dict[str, Any] = field(default_factory=dict)


def job_name(train_job: str, role: str) -> str:
    """The Indexed Job of a role: `<N>-<role>-0`, as Kubeflow's JobSet names it."""
    return f"{train_job}-{role}-0"


def pod_hostname(train_job: str, role: str, index: int) -> str:
    """Kubernetes names an Indexed Job's pod hostnames `<job>-<index>`."""
    return f"{job_name(train_job, role)}-{index}"


def pod_dns_name(train_job: str, role: str, index: int) -> str:
    """The pod's name through the headless Service `N`: `<N>-<role>-0-<index>.<N>`."""
    return f"{pod_hostname(train_job, role, index)}.{train_job}"


# --- templates -------------------------------------------------------------------------------

def overlay(base: PodTemplate, top: PodTemplate) -> PodTemplate:
    """`top` over `base`: scalars and lists replace, maps merge by key, env and volumes upsert.

    Env upserts by name (a job's value replaces the runtime's in place), volumes by name,
    volume mounts by mount path, resources per key of requests and limits.
    """
    merged: dict[str, Any] = {}
    for name in PodTemplate.model_fields:
        low, high = getattr(base, name), getattr(top, name)
        if high is None:
            merged[name] = low
        elif low is None:
            merged[name] = high
        elif name == "env":
            merged[name] = tuple(_upsert(list(low), list(high), key=lambda e: e.name))
        elif name == "volumes":
            merged[name] = _upsert(low, high, key=lambda v: v.get("name"))
        elif name == "volume_mounts":
            merged[name] = _upsert(low, high, key=lambda m: m.get("mountPath"))
        elif name == "resources":
            merged[name] = Resources(requests={**low.requests, **high.requests},
                                     limits={**low.limits, **high.limits})
        elif isinstance(high, dict):
            merged[name] = {**low, **high}
        else:
            merged[name] = high
    return PodTemplate(**merged)


def _upsert(items: list, additions: list, key) -> list:
    result = list(items)
    for item in additions:
        for i, existing in enumerate(result):
            if key(existing) == key(item):
                result[i] = item
                break
        else:
            result.append(item)
    return result


def upsert_env(env: list[dict[str, Any]], additions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Env entries in Kubernetes form, later ones replacing earlier ones of the same name in place."""
    return _upsert(env, additions, key=lambda e: e["name"])


def effective_template(runtime_template: PodTemplate | None, args: TrainJobArgs) -> PodTemplate:
    return overlay(runtime_template or PodTemplate(), args.template_overrides())


def is_extended_resource(resource: str) -> bool:
    """Device-plugin resources (GPUs, MIG slices, NICs): Kubernetes needs requests == limits."""
    return "/" in resource and not resource.startswith("kubernetes.io/") and not resource.startswith("hugepages-")


def is_gpu(resource: str) -> bool:
    """A GPU: any resource name containing "gpu", and NVIDIA MIG slices."""
    return "gpu" in resource.lower() or resource.startswith("nvidia.com/mig-")


def gpu_count(resources: Resources | None) -> int:
    """GPUs per pod: the first GPU resource (sorted by name) in requests, else in limits."""
    if resources is None:
        return 0
    for side in (resources.requests, resources.limits):
        for name in sorted(side):
            if is_gpu(name):
                count = ceil_value(side[name])
                if count > 0:
                    return count
                break
    return 0


def normalized_resources(resources: Resources | None) -> Resources | None:
    """Extended resources given on one side only are set on both, so GPU limits equal requests."""
    if resources is None:
        return None
    requests, limits = dict(resources.requests), dict(resources.limits)
    for name in sorted(set(requests) | set(limits)):
        if is_extended_resource(name):
            value = limits.get(name, requests.get(name))
            requests.setdefault(name, value)
            limits.setdefault(name, value)
    return Resources(requests=requests, limits=limits)


# --- checks ----------------------------------------------------------------------------------

def check_job(issues: IssueCollector, name: str, args: TrainJobArgs, runtime: TrainingRuntime,
              hostnames: list[str]) -> None:
    """The checks every family needs: names, metadata and the derived pod hostnames."""
    problem = rfc1035_label_problem(name)
    if problem:
        issues.add("name", f"{problem}. The job name becomes the Service name and the pods' DNS subdomain.")
    elif hostnames:
        longest = max(hostnames, key=len)
        if len(longest) > 63:
            issues.add("name", f'derived pod hostname "{longest}" is {len(longest)} characters; the limit is 63. '
                               f"Shorten the job name by at least {len(longest) - 63} characters "
                               f"(or use fewer nodes).")
    if args.namespace is not None:
        problem = rfc1123_label_problem(args.namespace)
        if problem:
            issues.add("namespace", problem)
    for field_name, labels in (("labels", {**runtime.labels, **args.labels}),
                               ("pod_labels", args.pod_labels or {})):
        for key, value in labels.items():
            problem = label_key_problem(key) or label_value_problem(value)
            if problem:
                issues.add(f"{field_name}.{key}", problem)
            if key in RESERVED_LABELS:
                issues.add(f"{field_name}.{key}", f"{key} is set by the job to select its pods; remove it")
    for field_name, annotations in (("annotations", args.annotations), ("pod_annotations", args.pod_annotations or {})):
        for key in annotations:
            problem = label_key_problem(key)
            if problem:
                issues.add(f"{field_name}.{key}", problem)


def check_template(issues: IssueCollector, template: PodTemplate, role: str) -> None:
    """A role's effective template can make a pod: an image, consistent extended resources."""
    if not template.image:
        issues.add("image", f"no image for the {role} pods: set image, or give the runtime's {role} template one")
    if template.resources:
        for name, limit in template.resources.limits.items():
            request = template.resources.requests.get(name)
            if is_extended_resource(name) and request is not None and parse_quantity(request) != parse_quantity(limit):
                issues.add("resources_per_node", f'{name} request "{request}" differs from its limit "{limit}"; '
                                                  "Kubernetes needs them equal for device resources")


def check_reserved_env(issues: IssueCollector, template: PodTemplate, reserved: dict[str, str]) -> None:
    """User env must not shadow derived variables; each reserved name maps to the field to use instead."""
    clashes = sorted(e.name for e in template.env or () if e.name in reserved)
    if clashes:
        instead = "; ".join(f"{n} comes from {reserved[n]}" for n in clashes)
        issues.add("env", f"must not have reserved envs, invalid envs configured: [{', '.join(clashes)}]. {instead}")


# --- manifests -------------------------------------------------------------------------------

def object_labels(name: str, role: str, runtime: TrainingRuntime, args: TrainJobArgs) -> dict[str, str]:
    return {
        **runtime.labels,
        **args.labels,
        "app.kubernetes.io/name": runtime.name,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": role,
        "app.kubernetes.io/managed-by": "trainjobs",
        LABEL_JOB: name,
        LABEL_ROLE: role,
    }


def metadata(name: str, namespace: str | None, labels: dict, annotations: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def headless_service(name: str, runtime: TrainingRuntime, args: TrainJobArgs) -> dict[str, Any]:
    """Service `N`: DNS for every pod of the job, published before pods are ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, args.namespace, object_labels(name, "network", runtime, args),
                             {**runtime.annotations, **args.annotations}),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_JOB: name},
        },
    }


def container(template: PodTemplate, env: list[dict[str, Any]], ports: list[dict[str, Any]],
              extra_mounts: list[dict[str, Any]], name: str = MAIN_CONTAINER) -> dict[str, Any]:
    """The main container: the template's settings, the derived env after the user's, shm mount."""
    spec: dict[str, Any] = {"name": name, "image": template.image}
    if template.image_pull_policy:
        spec["imagePullPolicy"] = template.image_pull_policy
    if template.command is not None:
        spec["command"] = list(template.command)
    if template.args is not None:
        spec["args"] = list(template.args)
    if template.working_dir:
        spec["workingDir"] = template.working_dir
    if env:
        spec["env"] = env
    if template.env_from:
        spec["envFrom"] = list(template.env_from)
    if ports:
        spec["ports"] = ports
    resources = normalized_resources(template.resources)
    if resources and (resources.requests or resources.limits):
        spec["resources"] = {k: dict(sorted(v.items())) for k, v in
                             (("requests", resources.requests), ("limits", resources.limits)) if v}
    mounts = list(template.volume_mounts or [])
    mounts = _upsert(mounts, extra_mounts, key=lambda m: m.get("mountPath"))
    if _shm_enabled(template) and not any(m.get("mountPath") == "/dev/shm" for m in mounts):
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if mounts:
        spec["volumeMounts"] = mounts
    if template.container_security_context:
        spec["securityContext"] = template.container_security_context
    return spec


def _shm_enabled(template: PodTemplate) -> bool:
    return parse_quantity(template.shm_size or DEFAULT_SHM_SIZE) > 0


def template_env(template: PodTemplate) -> list[dict[str, Any]]:
    return [e.manifest() for e in template.env or ()]


def indexed_job(name: str, role: str, pods: int, template: PodTemplate, main_container: dict[str, Any],
                runtime: TrainingRuntime, args: TrainJobArgs, extra_volumes: list[dict[str, Any]] = (),
                init_containers: list[dict[str, Any]] = (), dns_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Indexed Job `<N>-<role>-0`: `pods` pods with hostnames `<job>-<i>` in subdomain `N`.

    restartPolicy Never and an explicit backoffLimit (default 0): one failed rank fails the Job
    and the Job controller stops its other pods, instead of a partial job hanging.
    """
    labels = object_labels(name, role, runtime, args)
    annotations = {**runtime.annotations, **args.annotations}
    job_annotations = dict(annotations)
    if args.wait_for_completion:
        if args.wait_timeout_seconds:
            job_annotations[TIMEOUT_SECONDS] = str(args.wait_timeout_seconds)
    else:
        job_annotations[SKIP_AWAIT] = "true"

    volumes = _upsert(list(template.volumes or []), list(extra_volumes), key=lambda v: v.get("name"))
    mounts = main_container.get("volumeMounts", [])
    if any(m.get("name") == SHM_VOLUME for m in mounts) and not any(v.get("name") == SHM_VOLUME for v in volumes):
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory",
                                                         "sizeLimit": template.shm_size or DEFAULT_SHM_SIZE}})
    pod: dict[str, Any] = {"subdomain": name, "restartPolicy": "Never", "containers": [main_container]}
    if init_containers:
        pod["initContainers"] = list(init_containers)
    if dns_config:
        pod["dnsConfig"] = dns_config
    if volumes:
        pod["volumes"] = volumes
    if template.node_selector:
        pod["nodeSelector"] = dict(template.node_selector)
    if template.tolerations:
        pod["tolerations"] = list(template.tolerations)
    if template.affinity:
        pod["affinity"] = template.affinity
    if template.service_account_name:
        pod["serviceAccountName"] = template.service_account_name
    if template.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in template.image_pull_secrets]
    if template.priority_class_name:
        pod["priorityClassName"] = template.priority_class_name
    if template.security_context:
        pod["securityContext"] = template.security_context

    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": pods,
        "parallelism": pods,
        "backoffLimit": args.backoff_limit,
    }
    if args.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = args.active_deadline_seconds
    if args.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
    spec["template"] = {
        "metadata": metadata_without_name({**labels, **(template.pod_labels or {})},
                                          {**annotations, **(template.pod_annotations or {})}),
        "spec": pod,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(job_name(name, role), args.namespace, labels, job_annotations),
        "spec": spec,
    }


def metadata_without_name(labels: dict, annotations: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
