"""The policy rules: plain functions over rendered Kubernetes objects.

Each rule takes one object (a manifest dict, camelCase, as pulumi-kubernetes receives it) and, where it
needs them, the stack's other objects, and returns its violations as messages that say what is wrong
and what to do. They read only the objects, never a job's arguments, so they hold for anything a stack
registers: jobs of this library, hand-written Jobs, and objects another tool added. An object's pods are
read through its backend's pod sets (`trainjobs.backends.pod_sets`), so no rule knows which backend made
them; a message on the pods of a role names the argument of that role that fixes it.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

from trainjobs.backends import PodSet, is_workload, pod_sets
from trainjobs.backends.jobset import API_VERSION as JOBSET_API, controller_service
from trainjobs.core.args import DEFAULT_SHM_SIZE
from trainjobs.core.podsets import INITIALIZER_ROLES
from trainjobs.core.naming import (MAX_DNS_LABEL, is_dns_subdomain, is_rfc1035_label, label_value_problem,
                                   rfc1035_label_problem)
from trainjobs.families.mpi import LAUNCHER, NODE
from trainjobs.kube.manifests import LABEL_JOB
from trainjobs.kube.quantity import QuantityError, parse_quantity
from trainjobs.kube.requests import ClaimTemplates
from trainjobs.kube.resources import CLAIM_TEMPLATE_KIND, is_gpu
from trainjobs.scheduling.coscheduling import POD_GROUP_LABEL as COSCHEDULING_GROUP_LABEL
from trainjobs.scheduling.kueue import QUEUE_LABEL as KUEUE_QUEUE_LABEL
from trainjobs.scheduling.volcano import GROUP_ANNOTATION as VOLCANO_GROUP_ANNOTATION
from trainjobs.scheduling.volcano import QUEUE_ANNOTATION as VOLCANO_QUEUE_ANNOTATION

# Roles whose pods train; initializers and extra roles (TensorBoard, an evaluator) do not.
TRAINING_ROLES = (NODE, LAUNCHER)
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
# Env names that hold credentials, and values that are credentials whatever their name.
_SECRET_NAME = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
                          r"|AUTH_?KEY)($|_)", re.I)
_SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
                           r"|xox[abpr]-[A-Za-z0-9-]{10,})$|-----BEGIN [A-Z ]*PRIVATE KEY-----")


# --- reading objects --------------------------------------------------------------------------------

def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def kind(obj: Mapping[str, Any]) -> str:
    return obj.get("kind", "")


def describe(obj: Mapping[str, Any]) -> str:
    """`Kind name`, as messages name an object."""
    return f"{kind(obj)} {_meta(obj).get('name', '?')}"


def is_training(pods: PodSet) -> bool:
    """Pods of a training role, or of a Job that does not say its role (a hand-written Job)."""
    return pods.role is None or pods.role in TRAINING_ROLES


def argument(pods: PodSet, setting: str) -> str:
    """The argument that sets `setting` (a field of a pod template: resources, shm_size, image, env) for the
    pods' role: `resources_per_node` for training nodes, `runtime.launcher.resources` for a separate MPI
    launcher (the job's other settings reach it), `dataset_initializer.resources`,
    `extra_roles.<role>.resources`. Pods no trainjobs job made are named by the Kubernetes field."""
    role = pods.role
    if role is None:
        return {"shm_size": "a memory-backed emptyDir at /dev/shm",
                "devices": "the pod's resourceClaims"}.get(setting, f"the container's {setting}")
    if role == NODE:
        return {"resources": "resources_per_node", "devices": "devices_per_node"}.get(setting, setting)
    if role == LAUNCHER:   # the job's settings reach it, but resources_per_node sizes MPI hosts only
        return (f"runtime.launcher.{setting}, or {setting}_per_node if the launcher is also an MPI host "
                "(run_launcher_as_node)") if setting in ("resources", "devices") else setting
    if role in INITIALIZER_ROLES:
        return f"{role.replace('-', '_')}.{setting}"
    return f"extra_roles.{role}.{setting}"


def _containers(pods: PodSet, init: bool = True) -> list[Mapping[str, Any]]:
    spec = pods.pod_spec
    main = list(spec.get("containers") or [])
    return main + list(spec.get("initContainers") or []) if init else main


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return None


# --- rules on one object ---------------------------------------------------------------------------

def requests_and_limits(obj: Mapping[str, Any]) -> list[str]:
    """Training containers request CPU and memory (a limit alone requests as much) and limit memory, so the
    scheduler places them on nodes that fit and a leak kills the pod rather than its neighbours. A CPU limit
    is not required: it only throttles."""
    found = []
    for pods in pod_sets([obj]):
        if not is_training(pods):
            continue
        for container in _containers(pods, init=False):
            resources = container.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            # A resource with a limit and no request is requested at its limit by the API server.
            missing = [f"requests.{r}" for r in ("cpu", "memory") if r not in requests and r not in limits]
            missing += ["limits.memory"] if "memory" not in limits else []
            if missing:
                found.append(f"{pods.what}: container {container.get('name')} has no {', '.join(missing)}; set them "
                             f"({argument(pods, 'resources')}) so the pods land on nodes that fit them")
    return found


def gpu_limit_equals_request(obj: Mapping[str, Any]) -> list[str]:
    """A GPU request equals its limit: Kubernetes refuses anything else for device resources, and a
    container with neither sees every GPU of its node."""
    found = []
    for pods in pod_sets([obj]):
        for container in _containers(pods):
            resources = container.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            for name in sorted({*requests, *limits}):
                if is_gpu(name) and _quantity(requests.get(name, limits.get(name))) != _quantity(limits.get(name)):
                    found.append(f"{pods.what}: container {container.get('name')} requests {name} "
                                 f"{requests.get(name, 'nothing')} but limits it to {limits.get(name, 'nothing')}; "
                                 f"give the same count on both sides ({argument(pods, 'resources')})")
    return found


def shm_large_enough(obj: Mapping[str, Any], minimum: str = DEFAULT_SHM_SIZE) -> list[str]:
    """Training pods mount a memory-backed /dev/shm of at least `minimum`: the container runtime's
    64 MiB makes PyTorch data loader workers die with a bus error, and NCCL fail."""
    floor = parse_quantity(minimum)
    found = []
    for pods in pod_sets([obj]):
        if not is_training(pods):
            continue
        what, fix = pods.what, argument(pods, "shm_size")
        volumes = {v.get("name"): v for v in pods.pod_spec.get("volumes") or []}
        for container in _containers(pods, init=False):
            mount = next((m for m in container.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"), None)
            source = (volumes.get(mount.get("name")) or {}).get("emptyDir") if mount else None
            size = (source or {}).get("sizeLimit")
            if source is None or source.get("medium") != "Memory":
                found.append(f"{what}: container {container.get('name')} has no memory-backed /dev/shm, so it gets "
                             f"the runtime's 64Mi; mount an emptyDir with medium Memory ({fix}, at least {minimum})")
            elif size is not None and (_quantity(size) is None or _quantity(size) < floor):
                found.append(f"{what}: container {container.get('name')} has a /dev/shm of {size}; data loader "
                             f"workers need at least {minimum}: raise {fix}")
    return found


def pinned_images(obj: Mapping[str, Any]) -> list[str]:
    """Every image names a tag other than `latest`, or a digest: otherwise two pods of one job can run
    different code, and a rerun is not the run it claims to be."""
    found = []
    for pods in pod_sets([obj]):
        for container in _containers(pods):
            image = container.get("image")
            if not isinstance(image, str):
                continue   # unknown during preview
            if "@" in image:
                continue
            name = image.rsplit("/", 1)[-1]
            tag = name.partition(":")[2]
            if not tag or tag == "latest":
                found.append(f"{pods.what}: container {container.get('name')} runs {image!r}, "
                             f"{'latest' if tag else 'untagged'}; name a version tag or a digest "
                             f"({argument(pods, 'image')})")
    return found


def no_secret_literals(obj: Mapping[str, Any]) -> list[str]:
    """No credential as a literal env value: anyone who can read the Job reads it. Use a Secret and
    `valueFrom.secretKeyRef` (or `env_from`)."""
    found = []
    for pods in pod_sets([obj]):
        for container in _containers(pods):
            for env in container.get("env") or []:
                value, name = env.get("value"), str(env.get("name", ""))
                if value in (None, ""):
                    continue
                if _SECRET_NAME.search(name) or (isinstance(value, str) and _SECRET_VALUE.search(value)):
                    found.append(f"{pods.what}: container {container.get('name')} sets {name} as a literal value, "
                                 "readable by anyone who can read the Job; put it in a Secret and use "
                                 f"valueFrom.secretKeyRef in {argument(pods, 'env')}, or {argument(pods, 'env_from')}")
    return found


def names_fit(obj: Mapping[str, Any]) -> list[str]:
    """Names the API server and DNS accept: a Service name is an RFC 1035 label, a Job's name fits its
    pods' `job-name` label, an Indexed Job's pod hostnames (`<job>-<index>`) fit 63 characters, and label
    values are valid. Kubernetes accepts some of these and fails later, at pod creation."""
    name = _meta(obj).get("name")
    if not isinstance(name, str):
        return []
    found = []
    if kind(obj) == "Service" and not is_rfc1035_label(name):
        found.append(f"Service {name}: {rfc1035_label_problem(name)}; pods find each other through it by DNS")
    elif is_workload(obj) and not is_dns_subdomain(name):
        found.append(f"{kind(obj)} {name}: not a valid object name (lowercase letters, digits, '-' and '.'); "
                     "rename the job (name)")
    for pods in pod_sets([obj]):
        if len(pods.name) > MAX_DNS_LABEL:
            found.append(f"{pods.what}: {len(pods.name)} characters; its pods' job-name label allows "
                         f"{MAX_DNS_LABEL} (shorten the job name)")
        if pods.indexed:
            hostname = pods.hostname(pods.count - 1)
            if len(hostname) > MAX_DNS_LABEL:
                found.append(f"{pods.what}: pod hostname {hostname} is {len(hostname)} characters; the limit is "
                             f"{MAX_DNS_LABEL} (shorten the job name by {len(hostname) - MAX_DNS_LABEL})")
    for key, value in (_meta(obj).get("labels") or {}).items():
        problem = label_value_problem(value) if isinstance(value, str) else None
        if problem:
            found.append(f"{describe(obj)}: label {key}: {problem}")
    return found


def not_in_default_namespace(obj: Mapping[str, Any], provider_namespace: str | None = None) -> list[str]:
    """Training objects live in a namespace of their own, where quotas, queues and access are set for
    them, not in `default` (an object with no namespace lands in the provider's, usually `default`)."""
    if kind(obj) not in ("Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "PodGroup",
                         CLAIM_TEMPLATE_KIND) and not is_workload(obj):
        return []
    namespace = _meta(obj).get("namespace") or provider_namespace
    if namespace is None or namespace == "default":
        where = ("is in namespace default" if namespace else
                 "has no namespace, so it lands in the provider's (default unless the provider sets one)")
        return [f"{describe(obj)} {where}; give the job a namespace of its own (namespace argument)"]
    return []


# --- rules that read the whole stack -----------------------------------------------------------------

def _group(obj: Mapping[str, Any]) -> tuple[Any, str]:
    """The training job an object belongs to: its trainjobs job label, else its own name."""
    labels = _meta(obj).get("labels") or {}
    return _meta(obj).get("namespace"), labels.get(LABEL_JOB) or _meta(obj).get("name", "")


def _members(obj: Mapping[str, Any], stack: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    group = _group(obj)
    return [o for o in stack if is_workload(o) and _group(o) == group]


def _running(objects: Sequence[Mapping[str, Any]]) -> int:
    """Pods the objects run at once."""
    return sum(pods.running for pods in pod_sets(objects))


def headless_service(obj: Mapping[str, Any], stack: Sequence[Mapping[str, Any]]) -> list[str]:
    """A job of several pods has a headless Service, named as its pods' subdomain, that selects them and
    publishes them before they are ready: otherwise rank 0's name does not resolve and workers fail."""
    if not is_workload(obj) or _running(_members(obj, stack)) <= 1:
        return []
    found = []
    services = {(_meta(s).get("namespace"), _meta(s).get("name")): s for s in stack if kind(s) == "Service"}
    for pods in pod_sets([obj]):
        what, spec = pods.what, pods.pod_spec
        labels = (pods.template.get("metadata") or {}).get("labels") or {}
        subdomain = spec.get("subdomain")
        if not subdomain:
            found.append(f"{what}: its pods have no subdomain, so they get no DNS names; set subdomain to the name "
                         "of a headless Service that selects them")
            continue
        service = services.get((_meta(obj).get("namespace"), subdomain))
        if service is None and (obj.get("apiVersion"), kind(obj)) == (JOBSET_API, "JobSet"):
            service = controller_service(obj)   # the JobSet controller makes it (a job MultiKueue dispatches)
            service = service if service and _meta(service)["name"] == subdomain else None
        if service is None:
            found.append(f"{what}: no Service {subdomain} in the stack for its pods' subdomain; add a headless "
                         "Service of that name selecting them")
            continue
        service_spec = service.get("spec") or {}
        selector = service_spec.get("selector") or {}
        if service_spec.get("clusterIP") != "None":
            found.append(f"{what}: Service {subdomain} is not headless (clusterIP: None), so pods get no DNS names")
        elif not selector or any(labels.get(k) != v for k, v in selector.items()):
            found.append(f"{what}: Service {subdomain} does not select its pods (selector {dict(selector)})")
        elif service_spec.get("publishNotReadyAddresses") is not True:
            found.append(f"{what}: Service {subdomain} publishes only ready pods, so rank 0's name may not resolve "
                         "when workers start; set publishNotReadyAddresses: true")
    return found


def _queue(obj: Mapping[str, Any], template: Mapping[str, Any]) -> str | None:
    for meta in (_meta(obj), template.get("metadata") or {}):
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        queue = labels.get(KUEUE_QUEUE_LABEL) or annotations.get(VOLCANO_QUEUE_ANNOTATION)
        if queue:
            return queue
    return None


def device_claims(obj: Mapping[str, Any], stack: Sequence[Mapping[str, Any]]) -> list[str]:
    """GPUs claimed through Dynamic Resource Allocation reach the pods: each claim's ResourceClaimTemplate is in
    the stack, a container uses the claim, and no pod asks for GPUs both as a device resource and through a
    claim (it would get both, or wait for a device plugin that DRA nodes do not run)."""
    claims = ClaimTemplates(stack)
    templates = {(_meta(o).get("namespace"), _meta(o).get("name")) for o in stack if kind(o) == CLAIM_TEMPLATE_KIND}
    found = []
    for pods in pod_sets([obj]):
        spec, fix = pods.pod_spec, argument(pods, "devices")
        used = {claim.get("name") for container in _containers(pods)
                for claim in (container.get("resources") or {}).get("claims") or []}
        for claim in spec.get("resourceClaims") or []:
            template = claim.get("resourceClaimTemplateName")
            if template and (pods.namespace, template) not in templates:
                found.append(f"{pods.what}: its pods claim devices from ResourceClaimTemplate {template}, which the "
                             "stack does not create; without it they are never scheduled")
            if claim.get("name") not in used:
                found.append(f"{pods.what}: no container uses the pod's resource claim {claim.get('name')}, so its "
                             "devices are allocated and no container sees them; list it in the main container's "
                             f"resources.claims, or remove it ({fix})")
        claimed = [name for name in claims.devices(spec, pods.namespace) if is_gpu(name)]
        as_resource = sorted({name for container in _containers(pods) for side in ("requests", "limits")
                              for name, value in ((container.get("resources") or {}).get(side) or {}).items()
                              if is_gpu(name) and (_quantity(value) or 0) > 0})
        if claimed and as_resource:
            found.append(f"{pods.what}: its pods ask for GPUs both as {', '.join(as_resource)} and through a "
                         f"resource claim; ask one way ({fix}, or {argument(pods, 'resources')})")
    return found


def gang_scheduled(obj: Mapping[str, Any], stack: Sequence[Mapping[str, Any]]) -> list[str]:
    """A job that waits in a queue is admitted as one gang: all its pods or none. Otherwise a queue
    can start part of a job, whose pods then hold GPUs while they wait for the rest.

    The pods that must run at once are the training pods of all the job's Jobs; an initializer or an
    extra role runs on its own. A gang is: a single pod, one Job or JobSet queued whole by Kueue, pods in
    one Kueue pod group, or pods that name a PodGroup of the stack (Volcano's group annotation,
    coscheduling's label)."""
    own = pod_sets([obj])
    if not own:
        return []
    if any(is_training(pods) for pods in own):
        members = [m for m in _members(obj, stack) if any(is_training(pods) for pods in pod_sets([m]))]
    else:
        members = [obj]
    alone = _running(members) <= 1
    groups = {_meta(g).get("name") for g in stack if kind(g) == "PodGroup"
              and _meta(g).get("namespace") == _meta(obj).get("namespace")}
    found = []
    for pods in own:
        what, template = pods.what, pods.template
        meta = template.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        group = annotations.get(VOLCANO_GROUP_ANNOTATION) or labels.get(COSCHEDULING_GROUP_LABEL)
        if group:
            if group not in groups:
                found.append(f"{what}: its pods name PodGroup {group}, which the stack does not create; "
                             "without it they are never scheduled")
            continue
        queue = _queue(obj, template)
        if queue is None or alone or labels.get(KUEUE_POD_GROUP_LABEL):
            continue
        if len(members) == 1 and (_meta(obj).get("labels") or {}).get(KUEUE_QUEUE_LABEL):
            continue   # Kueue admits one workload (the object that holds all the job's training pods) whole
        others = sorted(describe(m) for m in members if m is not obj)
        found.append(f"{what}: waits in queue {queue} with no gang: "
                     + (f"it is admitted apart from {', '.join(others)}, " if others else "its pods are admitted one "
                        "by one, ")
                     + "so part of the job can hold resources while the rest waits; set gang_scheduler "
                     "(kueue, volcano or coscheduling)")
    return found
