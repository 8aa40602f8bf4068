"""The objects every job is made of, built from its arguments: the job's labels, the headless Service,
the main container from a pod template, a role's pod set (trainjobs.core.podsets), device limits. Nothing here knows a
framework; the plain Kubernetes parts they share are in trainjobs.kube."""

from typing import Any

from trainjobs.core.args import DEFAULT_SHM_SIZE, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from trainjobs.core.naming import claim_template_name
from trainjobs.core.podsets import PodSetSpec
from trainjobs.kube.manifests import (EXISTS, LABEL_JOB, LABEL_ROLE, LABEL_RUN, SERVICE_ROLE, SHM_VOLUME,
                                      TIMEOUT_SECONDS, WAIT_FOR, MAIN_CONTAINER, host_network, metadata,
                                      metadata_without_name)
from trainjobs.kube.quantity import ceil_value, parse_quantity
from trainjobs.kube.resources import DEVICE_CLAIM, claim_template, device_resource, is_extended_resource, is_gpu
from trainjobs.kube.templates import overlay, upsert


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
        **({LABEL_RUN: args.run} if args.run else {}),
    }


def headless_service(name: str, runtime: TrainingRuntime, args: TrainJobArgs) -> dict[str, Any]:
    """Service `N`: DNS for every pod of the job, published before pods are ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, args.namespace, object_labels(name, SERVICE_ROLE, runtime, args),
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
    ports = upsert(list(template.ports or []), list(ports), key=lambda p: p.get("containerPort"))
    if ports:
        spec["ports"] = ports
    resources = normalized_resources(template.resources)
    if resources and (resources.requests or resources.limits):
        spec["resources"] = {k: dict(sorted(v.items())) for k, v in
                             (("requests", resources.requests), ("limits", resources.limits)) if v}
    if template.devices:   # the pod's device claim (see pod_set), for this container
        spec.setdefault("resources", {})["claims"] = [{"name": DEVICE_CLAIM}]
    mounts = list(template.volume_mounts or [])
    mounts = upsert(mounts, extra_mounts, key=lambda m: m.get("mountPath"))
    if _shm_enabled(template) and not any(m.get("mountPath") == "/dev/shm" for m in mounts):
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if mounts:
        spec["volumeMounts"] = mounts
    if template.container_security_context:
        spec["securityContext"] = template.container_security_context
    return spec


def _shm_enabled(template: PodTemplate) -> bool:
    return parse_quantity(template.shm_size or DEFAULT_SHM_SIZE) > 0



def pod_set(name: str, role: str, pods: int, template: PodTemplate, main_container: dict[str, Any],
            runtime: TrainingRuntime, args: TrainJobArgs, extra_volumes: list[dict[str, Any]] = (),
            init_containers: list[dict[str, Any]] = (), dns_config: dict[str, Any] | None = None,
            **role_facts: Any) -> PodSetSpec:
    """The pod set of role `role`: `pods` indexed pods in subdomain `N` (hostnames `<job>-<i>`), with
    `role_facts` (start order, gang, completes_job, separate: see PodSetSpec).

    restartPolicy Never and an explicit backoffLimit (default 0): one failed rank fails the role's pods
    and the Job controller stops the others, instead of a partial job hanging.
    """
    labels = object_labels(name, role, runtime, args)
    annotations = {**runtime.annotations, **args.annotations}
    job_annotations = dict(annotations)
    if args.wait_for_completion:
        if args.wait_timeout_seconds:
            job_annotations[TIMEOUT_SECONDS] = str(args.wait_timeout_seconds)
    else:
        job_annotations[WAIT_FOR] = EXISTS

    volumes = upsert(list(template.volumes or []), list(extra_volumes), key=lambda v: v.get("name"))
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
    if template.topology_spread_constraints:
        pod["topologySpreadConstraints"] = list(template.topology_spread_constraints)
    if template.host_network:
        host_network(pod)
    if template.service_account_name:
        pod["serviceAccountName"] = template.service_account_name
    if template.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in template.image_pull_secrets]
    if template.priority_class_name:
        pod["priorityClassName"] = template.priority_class_name
    if template.security_context:
        pod["securityContext"] = template.security_context
    devices = None
    if template.devices:   # each pod gets its own claim, made from the role's template
        pod["resourceClaims"] = [{"name": DEVICE_CLAIM, "resourceClaimTemplateName": claim_template_name(name, role)}]
        devices = claim_template(claim_template_name(name, role), args.namespace, labels, annotations,
                                 [(d.name, d.device_class, d.count) for d in template.devices])

    rules: dict[str, Any] = {"completionMode": "Indexed", "backoffLimit": args.backoff_limit}
    if args.active_deadline_seconds is not None:
        rules["activeDeadlineSeconds"] = args.active_deadline_seconds
    if args.ttl_seconds_after_finished is not None:
        rules["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
    pod_template = {"metadata": metadata_without_name({**labels, **(template.pod_labels or {})},
                                                      {**annotations, **(template.pod_annotations or {})}),
                    "spec": pod}
    return PodSetSpec(role, pods, pod_template, rules, labels, job_annotations, claim_template=devices, **role_facts)


def effective_template(runtime_template: PodTemplate | None, args: TrainJobArgs) -> PodTemplate:
    return overlay(runtime_template or PodTemplate(), args.template_overrides())


def template_env(template: PodTemplate) -> list[dict[str, Any]]:
    """The template's env entries in Kubernetes form."""
    return [e.manifest() for e in template.env or ()]


def gpu_count(template: PodTemplate) -> int:
    """GPUs per pod: the first GPU resource (sorted by name) in requests, else in limits; else the GPUs the pod
    claims through Dynamic Resource Allocation (devices of a GPU class)."""
    return _resource_gpus(template.resources) or sum(
        d.count for d in template.devices or () if is_gpu(device_resource(d.device_class)))


def gpus_asked_twice(template: PodTemplate) -> bool:
    """Whether the pods ask for GPUs both as a device resource and through a claim: a node's GPUs are handed
    out by NVIDIA's device plugin or by its DRA driver, not both, and where DRA serves the extended resource
    too (DRAExtendedResource) the pod gets both counts."""
    return _resource_gpus(template.resources) > 0 and any(is_gpu(device_resource(d.device_class))
                                                          for d in template.devices or ())


def _resource_gpus(resources: Resources | None) -> int:
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
