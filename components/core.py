"""Framework-agnostic derivation: runtime + job args -> plain Kubernetes manifests.

Nothing here knows torch, MPI or JAX. A framework module decides the roles, counts, env and
ports of its pods and calls these builders, which own the naming, labels, pod defaults and the
checks every job needs.
"""

import difflib
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_kubernetes import _tables as k8s_tables
from pulumi_kubernetes.batch.v1 import JobSpecArgs
from pulumi_kubernetes.core.v1 import ContainerArgs, PodSpecArgs

from . import apivalidation, argpaths
from .apivalidation import is_extended_resource
from .args import DEFAULT_SHM_SIZE, Initializer, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from .deferred import concat, digest, is_plain
from .errors import IssueCollector, shown
from .naming import argument_value_problem, rfc1035_label_problem, rfc1123_label_problem
from .outputs import JobOutputs
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
class TrainJobPlan:
    """Everything a component registers, as plain manifests in apply order, plus its outputs."""

    name: str
    namespace: Any   # a string, None, or an Output
    manifests: tuple[dict[str, Any], ...]
    outputs: JobOutputs
    # (dependent, prerequisite) object names: under `pulumi up` the dependent is created only
    # after the prerequisite is ready (for a Job without skipAwait: complete).
    ordering: tuple[tuple[str, str], ...] = ()


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
    """`top` over `base` (same model type): scalars and lists replace, maps merge by key, env and
    volumes upsert.

    Env upserts by name (a job's value replaces the runtime's in place), volumes, init containers
    and sidecars by name, volume mounts by mount path, resources per key of requests and limits.
    """
    merged: dict[str, Any] = {}
    model = type(base)   # the values are validated already: merge without validating again
    for name in model.model_fields:
        low, high = getattr(base, name), getattr(top, name, None)
        if high is None:
            merged[name] = low
        elif low is None:
            merged[name] = high
        elif name == "env":
            merged[name] = tuple(_upsert(list(low), list(high), key=lambda e: e.name))
        elif name in ("volumes", "init_containers", "sidecars"):
            merged[name] = _upsert(low, high, key=lambda v: v.get("name"))
        elif name == "volume_mounts":
            merged[name] = _upsert(low, high, key=lambda m: m.get("mountPath"))
        elif name == "resources":
            merged[name] = Resources.model_construct(requests={**low.requests, **high.requests},
                                                     limits={**low.limits, **high.limits})
        elif isinstance(high, dict):
            merged[name] = {**low, **high}
        else:
            merged[name] = high
    return model.model_construct(**merged)


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
    return Resources.model_construct(requests=requests, limits=limits)


# --- checks ----------------------------------------------------------------------------------

def check_job(issues: IssueCollector, name: str, args: TrainJobArgs, runtime: TrainingRuntime) -> None:
    """The job's own rules on its name, namespace and labels; what the API server refuses in the objects
    they make (hostnames, label syntax) is checked on the manifests (see `plan`)."""
    problem = rfc1035_label_problem(name)
    if problem:
        issues.add("name", f"{problem}. The job name becomes the Service name and the pods' DNS subdomain.")
    check_plain(issues, "namespace", args.namespace)
    for field_name, labels in (("labels", {**runtime.labels, **args.labels}),
                               ("pod_labels", args.pod_labels or {})):
        for key in labels:
            if key in RESERVED_LABELS:
                issues.add(f"{field_name}.{key}", f"{key} is set by the job to select its pods; remove it")


def check_plain(issues: IssueCollector, field: str, value: Any, path: str | None = None) -> None:
    """The argument's rule (naming.argument_value_problem) on a value known now; an Output is checked
    by the component when it resolves."""
    if isinstance(value, str):
        problem = argument_value_problem(field, value)
        if problem:
            issues.add(path or field, problem)


def check_template(issues: IssueCollector, template: PodTemplate, role: str) -> None:
    """A role's effective template can make a pod: it has an image."""
    if not template.image:
        issues.add("image", f"no image for the {role} pods: set image, or give the runtime's {role} template one")


def check_reserved_env(issues: IssueCollector, reserved: dict[str, str], *templates: PodTemplate) -> None:
    """User env must not shadow derived variables; each reserved name maps to the field to use instead.

    One issue for the job, listing every reserved name any of its templates sets, as Kubeflow reports it.
    """
    clashes = sorted({e.name for template in templates for e in template.env or () if e.name in reserved})
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
    ports = _upsert(list(template.ports or []), list(ports), key=lambda p: p.get("containerPort"))
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
    # Sidecars are native sidecars (init containers that keep running): they end with the main
    # container, so a Job still completes.
    init = [*init_containers, *(template.init_containers or []),
            *({**sidecar, "restartPolicy": "Always"} for sidecar in template.sidecars or [])]
    if init:
        pod["initContainers"] = init
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


# --- fields the arguments do not model ------------------------------------------------------------

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
        "securityContext": "security_context"}),
    "container_overrides": (_field_kinds(ContainerArgs), {
        "name": None, "image": "image", "command": "command", "args": "args", "env": "env", "envFrom": "env_from",
        "ports": "ports", "resources": "resources_per_node", "volumeMounts": "volume_mounts",
        "workingDir": "working_dir", "imagePullPolicy": "image_pull_policy",
        "securityContext": "container_security_context"}),
    "job_spec_overrides": (_field_kinds(JobSpecArgs), {
        "template": None, "completions": None, "parallelism": None, "completionMode": None, "selector": None,
        "manualSelector": None, "backoffLimit": "backoff_limit", "activeDeadlineSeconds": "active_deadline_seconds",
        "ttlSecondsAfterFinished": "ttl_seconds_after_finished"}),
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


def apply_overrides(job: dict[str, Any], args: TrainJobArgs) -> dict[str, Any]:
    """A training Job with the job's override fields set; a refused field (see check_overrides) is left
    out, so the objects' own checks do not report its consequences as well."""
    pod = job["spec"]["template"]["spec"]
    for field, target in (("pod_spec_overrides", pod), ("container_overrides", pod["containers"][0]),
                          ("job_spec_overrides", job["spec"])):
        kinds, taken = _OVERRIDES[field]
        target.update({key: value for key, value in (getattr(args, field) or {}).items()
                       if key in kinds and key not in taken})
    return job


# --- initializers and extra roles ---------------------------------------------------------------

WORKSPACE = "/workspace"
WORKSPACE_VOLUME = "initializer"
MARKER_DIR = f"{WORKSPACE}/.trainjobs"
INITIALIZER_ROLES = ("dataset-initializer", "model-initializer")
# Role names the library gives Jobs and objects in any family (trainer `node`, MPI `launcher`, the
# Service's `network`, the MPI objects' `mpi`, initializers). Reserved for every job, so a role name
# means the same thing whichever component made it.
RESERVED_ROLES = ("node", "launcher", "network", "mpi", "workspace", *INITIALIZER_ROLES)
# Kubeflow Trainer's initializer images, used when neither the runtime nor the job gives one.
INITIALIZER_IMAGES = {"dataset-initializer": "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0",
                      "model-initializer": "ghcr.io/kubeflow/trainer/model-initializer:v2.3.0"}
# The URI schemes Kubeflow's initializer images fetch (pkg/initializers/{dataset,model}/__main__.py).
INITIALIZER_SCHEMES = {"dataset-initializer": ("hf", "cache", "s3"), "model-initializer": ("hf", "s3")}

_WAIT_FOR_MARKERS = r"""
deadline=$(( $(date +%s) + $1 )); shift
for marker in "$@"; do
  until [ -f "$marker" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "initializer did not finish before the deadline: $marker is missing" >&2; exit 1
    fi
    sleep 2
  done
done
echo "initializers finished"
""".strip()


@dataclass(frozen=True)
class InitializerSetup:
    """What initializers add to a job: their objects, and what training pods need to wait for them."""

    manifests: tuple[dict[str, Any], ...] = ()
    job_names: tuple[str, ...] = ()
    volume: dict[str, Any] | None = None
    mount: dict[str, Any] | None = None
    markers: tuple[str, ...] = ()
    timeout_seconds: int = 0
    specs: tuple[tuple[str, str, Initializer], ...] = ()   # (role, argument, effective spec) per initializer

    def wait_container(self, template: PodTemplate) -> list[dict[str, Any]]:
        """Init container for training pods: waits (bounded) for every initializer's completion marker.

        The markers make the order hold when the rendered YAML is applied all at once (GitOps);
        under `pulumi up` the training Jobs are also created only after the initializers complete.
        """
        if not self.markers:
            return []
        wait: dict[str, Any] = {"name": "wait-for-initializers", "image": template.image,
                                "command": ["/bin/sh", "-c", _WAIT_FOR_MARKERS, "wait-for-initializers",
                                            str(self.timeout_seconds), *self.markers],
                                "volumeMounts": [self.mount]}
        if template.container_security_context:
            wait["securityContext"] = template.container_security_context
        return [wait]


def initializers(name: str, args: TrainJobArgs, runtime: TrainingRuntime, issues: IssueCollector) -> InitializerSetup:
    """Dataset and model initializer Jobs, the shared workspace volume, and their completion markers.

    Each initializer's own command runs in an init container named after its role (the image's
    entrypoint is kept when no command is given); the Job's main container then writes a marker
    file named after a hash of the initializer's spec, so a changed initializer is waited for again
    and an unchanged one is not re-awaited.
    """
    configured = {}
    for role, field_name in zip(INITIALIZER_ROLES, ("dataset_initializer", "model_initializer")):
        base, top = getattr(runtime, field_name), getattr(args, field_name)
        if base is None and top is None:
            continue
        spec = overlay(base, top) if base is not None and top is not None else (top or base)
        if spec.image is None:
            spec = spec.model_copy(update={"image": INITIALIZER_IMAGES[role]})
        if spec.storage_uri is None and spec.command is None:
            issues.add(f"{field_name}.storage_uri", "set the URI to download from (e.g. hf://org/name), "
                                                    "or a command for a custom initializer")
        elif isinstance(spec.storage_uri, str) and (problem := argument_value_problem("storage_uri", spec.storage_uri)):
            issues.add(f"{field_name}.storage_uri", problem)
        elif isinstance(spec.storage_uri, str) and _kubeflow_initializer(spec.image, role):
            scheme = spec.storage_uri.partition("://")[0].lower()
            if scheme not in INITIALIZER_SCHEMES[role]:
                kind = role.split("-")[0]
                issues.add(f"{field_name}.storage_uri",
                           f"Unsupported {kind} storage URI scheme {shown(scheme)}: expected one of "
                           f"{', '.join(INITIALIZER_SCHEMES[role])} (Kubeflow's {role} image); or give the "
                           "initializer an image of your own that fetches it")
        configured[role] = spec
    if not configured:
        return InitializerSetup()

    manifests: list[dict[str, Any]] = []
    if args.workspace_volume is not None:
        volume = {"name": WORKSPACE_VOLUME, **args.workspace_volume}
    else:
        claim = workspace_claim(name)
        pvc_spec: dict[str, Any] = {"accessModes": [args.workspace_access_mode],
                                    "resources": {"requests": {"storage": args.workspace_size}}}
        if args.workspace_storage_class is not None:
            check_plain(issues, "workspace_storage_class", args.workspace_storage_class)
            pvc_spec["storageClassName"] = args.workspace_storage_class
        manifests.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": metadata(claim, args.namespace, object_labels(name, "workspace", runtime, args),
                                               {**runtime.annotations, **args.annotations}),
                          "spec": pvc_spec})
        volume = {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
    mount = {"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE}

    markers, job_names = [], []
    lifecycle = args.model_copy(update={"wait_for_completion": True,
                                        "wait_timeout_seconds": args.initializer_timeout_seconds})
    for role, spec in configured.items():
        marker = concat(f"{MARKER_DIR}/{role}-", digest(spec.model_dump(by_alias=True)), ".done")
        env = template_env(spec)
        if spec.storage_uri is not None:
            env = upsert_env(env, [{"name": "STORAGE_URI", "value": spec.storage_uri}])
        work = container(spec.model_copy(update={"shm_size": "0"}), env, ports=[], extra_mounts=[mount], name=role)
        if spec.secret_name:
            work["envFrom"] = [*work.get("envFrom", []), {"secretRef": {"name": spec.secret_name}}]
        done = {"name": "complete", "image": spec.image,
                "command": ["/bin/sh", "-c", f'mkdir -p {MARKER_DIR} && touch "$1"', "complete", marker],
                "volumeMounts": [mount]}
        if spec.container_security_context:
            done["securityContext"] = spec.container_security_context
        job = indexed_job(name, role, 1, spec.model_copy(update={"shm_size": "0"}), done, runtime, lifecycle,
                          extra_volumes=[volume], init_containers=[work])
        manifests.append(job)
        markers.append(marker)
        job_names.append(job["metadata"]["name"])
    specs = tuple((role, field_name, configured[role]) for role, field_name
                  in zip(INITIALIZER_ROLES, ("dataset_initializer", "model_initializer")) if role in configured)
    return InitializerSetup(tuple(manifests), tuple(job_names), volume, mount, tuple(markers),
                            args.initializer_timeout_seconds, specs)


def _kubeflow_initializer(image: str, role: str) -> bool:
    """Whether `image` is Kubeflow's initializer for `role`, at any tag or digest."""
    return _repository(image) == _repository(INITIALIZER_IMAGES[role])


def _repository(image: str) -> str:
    image = image.partition("@")[0]
    head, colon, tag = image.rpartition(":")
    return head if colon and "/" not in tag else image


def workspace_claim(name: str) -> str:
    return f"{name}-initializer"


def check_extra_roles(issues: IssueCollector, args: TrainJobArgs) -> None:
    """Role names are DNS labels that no training role uses."""
    for role, spec in args.extra_roles.items():
        if role in RESERVED_ROLES:
            issues.add(f"extra_roles.{role}", f'"{role}" is a role the job itself uses; choose another name')
        elif rfc1123_label_problem(role):
            issues.add(f"extra_roles.{role}", "role names must be DNS labels (lowercase letters, digits, '-')")
        if not spec.image:
            issues.add(f"extra_roles.{role}.image", "an extra role needs an image")


def extra_role_jobs(name: str, args: TrainJobArgs, runtime: TrainingRuntime) -> list[dict[str, Any]]:
    """One Indexed Job per extra role, in the job's DNS subdomain, with only the role's own env."""
    jobs = []
    lifecycle = args.model_copy(update={"wait_for_completion": False})
    for role, spec in sorted(args.extra_roles.items()):
        template = overlay(PodTemplate(shm_size="0"), PodTemplate(**{k: getattr(spec, k) for k in PodTemplate.model_fields}))
        main = container(template, template_env(template), ports=[], extra_mounts=[], name=role)
        jobs.append(indexed_job(name, role, spec.num_pods, template, main, runtime, lifecycle))
    return jobs


@dataclass(frozen=True)
class TrainingRole:
    """One Indexed Job of training pods, as a family built it: template, main container, extras."""

    role: str
    pods: int
    template: PodTemplate
    container: dict[str, Any]
    extra_volumes: tuple[dict[str, Any], ...] = ()
    init_containers: tuple[dict[str, Any], ...] = ()
    dns_config: dict[str, Any] | None = None


def plan(component: str, name: str, args: TrainJobArgs, runtime: TrainingRuntime, issues: IssueCollector,
         roles: list[TrainingRole], outputs: JobOutputs, objects: list[dict[str, Any]] = (),
         object_arguments: dict[str, dict[tuple, str]] | None = None) -> TrainJobPlan:
    """A family's training roles plus what every job has: checks, Service, initializers, extra roles.

    Raises TrainJobError with every problem before returning: the family's, the common ones, and
    what the API server would refuse in the manifests, named by the argument behind it.
    `object_arguments` names the argument behind the content of the family's `objects`, per
    object name and path prefix. Training pods mount the initializers' workspace and wait for
    them; extra roles get nothing from training.
    """
    check_extra_roles(issues, args)
    setup = initializers(name, args, runtime, issues)
    check_job(issues, name, args, runtime)
    check_overrides(issues, args)

    jobs = []
    for r in roles:
        if r.pods == 0:
            continue
        main, volumes, waits = dict(r.container), list(r.extra_volumes), list(r.init_containers)
        if setup.markers:
            main["volumeMounts"] = _upsert(list(main.get("volumeMounts", [])), [setup.mount],
                                           key=lambda m: m.get("mountPath"))
            volumes.append(setup.volume)
            waits = setup.wait_container(r.template) + waits
        jobs.append(apply_overrides(indexed_job(name, r.role, r.pods, r.template, main, runtime, args,
                                                extra_volumes=volumes, init_containers=waits,
                                                dns_config=r.dns_config), args))
    ordering = tuple((job["metadata"]["name"], init) for job in jobs for init in setup.job_names)
    manifests = (headless_service(name, runtime, args), *objects, *setup.manifests, *jobs,
                 *extra_role_jobs(name, args, runtime))
    reported = {issue.field for issue in issues.issues}
    sources = _sources(name, args, runtime, roles, setup, object_arguments or {})
    for issue in argpaths.issues(apivalidation.problems(manifests), list(manifests), sources):
        if issue.field not in reported:   # an argument's own check says it better
            issues.add(issue.field, issue.message)
    issues.raise_if_any(component, name)
    return TrainJobPlan(name=name, namespace=args.namespace, manifests=tuple(manifests), outputs=outputs,
                        ordering=ordering)


def _sources(name: str, args: TrainJobArgs, runtime: TrainingRuntime, roles: list[TrainingRole],
             setup: InitializerSetup, object_arguments: dict[str, dict[tuple, str]]) -> argpaths.Sources:
    """Whose settings each object of the job carries, to name the argument behind a refused value."""
    # A runtime holds each role's template under the role's name (TorchRuntime.node, MpiRuntime.launcher).
    jobs = {job_name(name, r.role): argpaths.PodSource("", args, r.template, "num_nodes", f"runtime.{r.role}.",
                                                       getattr(runtime, r.role, None),
                                                       renamed={"resources": "resources_per_node"})
            for r in roles}
    for role, field_name, spec in setup.specs:
        jobs[job_name(name, role)] = argpaths.PodSource(
            f"{field_name}.", getattr(args, field_name), spec, field_name, f"runtime.{field_name}.",
            getattr(runtime, field_name), env_arguments={"STORAGE_URI": "storage_uri"}, template_in_init=True)
    for role, spec in args.extra_roles.items():
        jobs[job_name(name, role)] = argpaths.PodSource(f"extra_roles.{role}.", spec, spec,
                                                        f"extra_roles.{role}.num_pods",
                                                        role_argument=f"extra_roles.{role}", role=role)
    claim = {("spec", "resources", "requests", "storage"): "workspace_size",
             ("spec", "storageClassName"): "workspace_storage_class", ("spec", "accessModes"): "workspace_access_mode"}
    return argpaths.Sources(
        args, runtime, jobs,
        labels={"app.kubernetes.io/name": "runtime.name", "app.kubernetes.io/instance": "name", LABEL_JOB: "name"},
        role_labels=("app.kubernetes.io/component", LABEL_ROLE),
        objects={workspace_claim(name): claim, **object_arguments},
        volumes={WORKSPACE_VOLUME: "workspace_volume"})
