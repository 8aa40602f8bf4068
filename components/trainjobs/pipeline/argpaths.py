"""Which argument put a value where: a problem in a derived manifest, named by the argument behind it.

The pipeline (`trainjobs.pipeline.pipeline`) describes, for each object of a job, whose settings it carries (`Sources`); `issues()`
turns apivalidation problems into Issues on argument paths as the user wrote them: the node Job's
`spec.template.spec.serviceAccountName` is `service_account_name`, a container's env entry is
`env.<NAME>`, an initializer Job's fields are `dataset_initializer.<field>`, a value the job left
to its runtime is `runtime.<role>.<field>`. A problem no argument explains names its object and path.
"""

from dataclasses import dataclass, field
from typing import Any, Mapping

from trainjobs.kube.apivalidation import Path, Problem, format_path
from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import Issue
from trainjobs.kube.naming import rfc1123_label_problem


@dataclass(frozen=True)
class PodSource:
    """The arguments behind one Job's pods."""

    prefix: str                       # "" (training pods), "dataset_initializer.", "extra_roles.tb."
    given: Any                        # what the user filled in: the job's args, an Initializer, an ExtraRole, None
    template: PodTemplate             # the effective template: tells the user's containers, volumes, ports
    count: str                        # the argument behind the Job's completions
    runtime_prefix: str | None = None  # where a setting the user left unset comes from, e.g. "runtime.node."
    runtime_template: Any = None      # the runtime's template at runtime_prefix, if it has one
    renamed: Mapping[str, str] = field(default_factory=dict)   # template field -> argument name
    env_arguments: Mapping[str, str] = field(default_factory=dict)  # derived env var -> argument
    role_argument: str | None = None  # the argument naming the role (an extra role's key)
    role: str = ""                    # the role it names
    template_in_init: bool = False    # the template runs as the first init container (initializers)

    def from_runtime(self, name: str, given: Any, has: Any = lambda value: value is not None) -> bool:
        """Whether the runtime, not the user, gave this setting (a setting neither gave is the user's)."""
        return self.runtime_prefix is not None and not has(given) and has(getattr(self.runtime_template, name, None))

    def field(self, name: str) -> str:
        argument = self.renamed.get(name, name)
        if self.from_runtime(name, getattr(self.given, argument, None)):
            return self.runtime_prefix + name
        return self.prefix + argument

    def mapping_field(self, name: str, key: str) -> str:
        """A key of a map setting (pod_labels, node_selector): the user's, else the runtime's."""
        argument = self.renamed.get(name, name)
        if self.from_runtime(name, getattr(self.given, argument, None), lambda m: isinstance(m, dict) and key in m):
            return f"{self.runtime_prefix}{name}.{key}"
        return f"{self.prefix}{argument}.{key}"


@dataclass(frozen=True)
class Sources:
    """What produced each object of one job."""

    args: TrainJobArgs
    runtime: TrainingRuntime
    jobs: Mapping[str, PodSource]                 # Job name -> its pods' source
    labels: Mapping[str, str]                     # label key the job derives -> the argument behind its value
    role_labels: tuple[str, ...] = ()             # label keys whose value is the role
    objects: Mapping[str, Mapping[Path, str]] = field(default_factory=dict)  # name -> path prefix -> argument
    volumes: Mapping[str, str] = field(default_factory=dict)  # volume the job adds -> the argument behind it


def issues(problems: list[Problem], manifests: list[dict[str, Any]], sources: Sources) -> list[Issue]:
    """One Issue per argument (its first problem), each saying where the API server would refuse it."""
    by_object = {f"{m.get('kind')}/{(m.get('metadata') or {}).get('name')}": m for m in manifests}
    found: dict[str, Issue] = {}
    for problem in problems:
        where = f"{problem.object} {format_path(problem.path)}".rstrip()
        argument = _argument(problem, by_object.get(problem.object, {}), sources, set(by_object))
        if argument is None:
            found.setdefault(where, Issue(where, problem.message))
        else:
            found.setdefault(argument, Issue(argument, f"{problem.message} (in {where})"))
    return list(found.values())


def _suffix(path: Path) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _argument(problem: Problem, manifest: dict[str, Any], sources: Sources, objects: set[str]) -> str | None:
    kind, _, name = problem.object.partition("/")
    source = sources.jobs.get(name) if kind == "Job" else None
    match problem.path:
        case ("metadata", "name") if source is not None and source.role_argument and rfc1123_label_problem(source.role):
            return source.role_argument   # a role name that is no DNS label makes no Job name either
        case ("metadata", "name") | ("spec", "template", "spec", "subdomain") | ("spec", "selector", _):
            return "name"
        case ("metadata", "namespace"):
            return "namespace"
        case ("metadata", "labels", key):
            return _label(sources, source, key, pod=False)
        case ("metadata", "annotations", *key):
            return _annotation(sources, source, key, pod=False)
    if source is None:
        for prefix, argument in sorted((sources.objects.get(name) or {}).items(), key=lambda item: -len(item[0])):
            if problem.path[:len(prefix)] == prefix:
                return argument
        return None
    match problem.path:
        case ("spec", "backoffLimit"):
            return "backoff_limit"
        case ("spec", "activeDeadlineSeconds"):
            return "active_deadline_seconds"
        case ("spec", "ttlSecondsAfterFinished"):
            return "ttl_seconds_after_finished"
        case ("spec", "maxFailedIndexes"):
            return "failure_policy.max_failed_indexes"
        case ("spec", "completions" | "parallelism"):
            return source.count
        case ("spec", "template", "metadata", "labels", key):
            return _label(sources, source, key, pod=True)
        case ("spec", "template", "metadata", "annotations", *key):
            return _annotation(sources, source, key, pod=True)
        case ("spec", "template", "spec", *rest):
            pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
            return _pod_argument(tuple(rest), pod, source, sources, objects)
    return None


def _label(sources: Sources, source: PodSource | None, key: str, pod: bool) -> str | None:
    if pod and source is not None and key in (source.template.pod_labels or {}):
        return source.mapping_field("pod_labels", key)
    if key in sources.role_labels:
        return source.role_argument if source is not None else None
    if key in sources.labels:
        return sources.labels[key]
    if key in sources.args.labels:
        return f"labels.{key}"
    if key in sources.runtime.labels:
        return f"runtime.labels.{key}"
    return None


def _annotation(sources: Sources, source: PodSource | None, key: list[str], pod: bool) -> str | None:
    own = (source.template.pod_annotations or {}) if pod and source is not None else {}
    if not key:   # the total size
        return source.field("pod_annotations") if own else "annotations"
    if key[0] in own:
        return source.mapping_field("pod_annotations", key[0])
    if key[0] in sources.args.annotations:
        return f"annotations.{key[0]}"
    if key[0] in sources.runtime.annotations:
        return f"runtime.annotations.{key[0]}"
    return None


def _pod_argument(rest: Path, pod: dict[str, Any], source: PodSource, sources: Sources,
                  objects: set[str]) -> str | None:
    template = source.template
    match rest:
        case ("serviceAccountName",):
            return source.field("service_account_name")
        case ("priorityClassName",):
            return source.field("priority_class_name")
        case ("nodeSelector", key):
            return source.mapping_field("node_selector", key)
        case ("tolerations" | "securityContext" | "affinity" as name, *more):
            setting = {"tolerations": "tolerations", "securityContext": "security_context", "affinity": "affinity"}
            return source.field(setting[name]) + _suffix(tuple(more))
        case ("dnsConfig", *_):
            # The search domain is <job>.<namespace>.svc.<cluster_domain>; a bad namespace is reported as such.
            namespace = sources.args.namespace
            return "namespace" if namespace and rfc1123_label_problem(namespace) else "cluster_domain"
        case ("volumes", int(i), *more):
            volumes = pod.get("volumes") or []
            volume = volumes[i] if i < len(volumes) and isinstance(volumes[i], dict) else {}
            if volume.get("name") in sources.volumes:
                return sources.volumes[volume["name"]]
            if i < len(template.volumes or []):
                return source.field("volumes") + _suffix((i, *more))
            if _mounts_an_object_of_the_job(volume, objects):
                return "name"   # the job's own objects are named after it
            return None
        case ("resourceClaims", *_):
            return source.field("devices")
        case ("containers", 0, *more):
            containers = pod.get("containers") or [{}]
            if source.template_in_init:
                return _derived_container_argument(tuple(more), source)
            return _container_argument(tuple(more), containers[0], source)
        case ("initContainers", int(k), *more):
            init = pod.get("initContainers") or []
            users, sidecars = len(template.init_containers or []), len(template.sidecars or [])
            derived = len(init) - users - sidecars
            if k < derived:
                if source.template_in_init and k == 0:
                    return _container_argument(tuple(more), init[0], source)
                return _derived_container_argument(tuple(more), source)
            if k < derived + users:
                return source.field("init_containers") + _suffix((k - derived, *more))
            return source.field("sidecars") + _suffix((k - derived - users, *more))
    return None


def _mounts_an_object_of_the_job(volume: dict[str, Any], objects: set[str]) -> bool:
    refs = {"Secret": (volume.get("secret") or {}).get("secretName"),
            "ConfigMap": (volume.get("configMap") or {}).get("name"),
            "PersistentVolumeClaim": (volume.get("persistentVolumeClaim") or {}).get("claimName")}
    return any(f"{kind}/{name}" in objects for kind, name in refs.items() if name)


def _derived_container_argument(more: Path, source: PodSource) -> str | None:
    """A container the job adds (waits, markers) takes its image and security context from the role's."""
    match more:
        case ("image",):
            return source.field("image")
        case ("securityContext", *rest):
            return source.field("container_security_context") + _suffix(tuple(rest))
    return None


_CONTAINER_SETTINGS = {"image": "image", "imagePullPolicy": "image_pull_policy", "workingDir": "working_dir",
                       "command": "command", "args": "args", "securityContext": "container_security_context"}


def _container_argument(more: Path, container: dict[str, Any], source: PodSource) -> str | None:
    template = source.template
    match more:
        case ("name",):
            return source.role_argument
        case (str(name), *rest) if name in _CONTAINER_SETTINGS:
            return source.field(_CONTAINER_SETTINGS[name]) + (_suffix(tuple(rest)) if name == "securityContext" else "")
        case ("env", int(i), *_):
            env = container.get("env") or []
            name = env[i].get("name") if i < len(env) and isinstance(env[i], dict) else None
            if name in source.env_arguments:
                return source.prefix + source.env_arguments[name]
            if name in {var.name for var in getattr(source.given, "env", None) or ()}:
                return f"{source.prefix}env.{name}"
            if source.runtime_prefix is not None and name in {var.name for var in
                                                              getattr(source.runtime_template, "env", None) or ()}:
                return f"{source.runtime_prefix}env.{name}"
            return source.field("env")
        case ("envFrom", int(i), *rest):
            secret = getattr(template, "secret_name", None)
            refs = container.get("envFrom") or []
            ref = refs[i] if i < len(refs) and isinstance(refs[i], dict) else {}
            if secret is not None and i >= len(template.env_from or []) and ref.get("secretRef", {}).get("name") == secret:
                return source.field("secret_name")
            return source.field("env_from") + _suffix((i, *rest))
        case ("ports", int(i), *rest) if i < len(template.ports or []):
            return source.field("ports") + _suffix((i, *rest))
        case ("volumeMounts", int(i), *rest) if i < len(template.volume_mounts or []):
            return source.field("volume_mounts") + _suffix((i, *rest))
        case ("resources", "requests" | "limits" as side, str(resource), *_):
            return _resource_argument(source, side, resource)
        case ("resources", "claims", *_):
            return source.field("devices")
    return None


def device_arguments(source: PodSource) -> dict[Path, str]:
    """Where each value of a role's ResourceClaimTemplate comes from: its device requests, in order, from the
    role's `devices` (`devices_per_node` for training pods), each field named."""
    argument = source.field("devices")
    at = ("spec", "spec", "devices", "requests")
    found: dict[Path, str] = {at: argument}
    for i, _ in enumerate(source.template.devices or ()):
        found[(*at, i)] = f"{argument}[{i}]"
        found[(*at, i, "name")] = f"{argument}[{i}].name"
        found[(*at, i, "exactly", "deviceClassName")] = f"{argument}[{i}].device_class"
        found[(*at, i, "exactly", "count")] = f"{argument}[{i}].count"
    return found


def _resource_argument(source: PodSource, side: str, resource: str) -> str:
    """A resource the job normalised onto both sides is named on the side the user gave it."""
    resources = source.template.resources
    other = "limits" if side == "requests" else "requests"
    if resources is not None and resource not in getattr(resources, side) and resource in getattr(resources, other):
        side = other
    argument = source.renamed.get("resources", "resources")
    if source.from_runtime("resources", getattr(source.given, argument, None),
                            lambda r: r is not None and resource in getattr(r, side)):
        return f"{source.runtime_prefix}resources.{side}.{resource}"
    return f"{source.prefix}{argument}.{side}.{resource}"
