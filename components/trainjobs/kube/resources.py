"""Container resources and devices: which are GPUs, and the devices a pod claims through Dynamic Resource
Allocation (`resource.k8s.io/v1`, GA in Kubernetes 1.34)."""

from decimal import Decimal
from typing import Any, Mapping

from trainjobs.kube.manifests import metadata

RESOURCE_API = "resource.k8s.io/v1"
CLAIM_TEMPLATE_KIND = "ResourceClaimTemplate"
DEVICE_CLAIM = "devices"
"""The name a pod gives its claim (`spec.resourceClaims[].name`) and its main container refers to."""
DEFAULT_DEVICE_CLASS = "gpu.nvidia.com"
"""NVIDIA's DRA driver's class of whole GPUs."""
DEVICE_CLASS_RESOURCES = {"gpu.nvidia.com": "nvidia.com/gpu"}
"""The extended resource a device class stands for, where its DeviceClass sets `extendedResourceName` (NVIDIA's
chart does for `gpu.nvidia.com`): what a claim's devices are counted as, so they add up with device-plugin GPUs.
Other classes are counted under their own name."""


def is_extended_resource(name: str) -> bool:
    """Device-plugin resources (GPUs, MIG slices, NICs): Kubernetes needs requests == limits."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("hugepages-")


def is_gpu(resource: str) -> bool:
    """A GPU: any resource name or device class containing "gpu", and NVIDIA MIG slices."""
    return "gpu" in resource.lower() or resource.startswith("nvidia.com/mig-") or resource == "mig.nvidia.com"


def device_resource(device_class: str) -> str:
    """What a device of `device_class` is counted as: its extended resource where known, else the class's name."""
    return DEVICE_CLASS_RESOURCES.get(device_class, device_class)


def claim_template(name: str, namespace: Any, labels: Mapping[str, Any], annotations: Mapping[str, Any],
                   requests: list[tuple[str, str, int]]) -> dict[str, Any]:
    """A ResourceClaimTemplate giving each pod its own claim of `requests` (request name, device class, count),
    each an exact count of devices of its class."""
    return {"apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND,
            "metadata": metadata(name, namespace, labels, annotations),
            "spec": {"spec": {"devices": {"requests": [
                {"name": request, "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                              "count": count}}
                for request, device_class, count in requests]}}}}


def is_claim_template(manifest: Mapping[str, Any]) -> bool:
    return manifest.get("kind") == CLAIM_TEMPLATE_KIND and str(manifest.get("apiVersion", "")).startswith(
        "resource.k8s.io/")


def claimed_devices(manifest: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one claim made from a ResourceClaimTemplate gets, as resource name -> devices: each request's exact
    count (v1's `exactly`, or the beta APIs' fields on the request itself) under `device_resource` of its class.
    A request for all devices of a class, or for the first available of several, has no count known before
    allocation and is left out."""
    found: dict[str, Decimal] = {}
    devices = (((manifest.get("spec") or {}).get("spec") or {}).get("devices") or {})
    for request in devices.get("requests") or []:
        exact = (request.get("exactly") or request) if isinstance(request, dict) else {}
        device_class, mode = exact.get("deviceClassName"), exact.get("allocationMode", "ExactCount")
        count = exact.get("count", 1)
        if (isinstance(device_class, str) and mode == "ExactCount" and isinstance(count, (int, float))
                and not isinstance(count, bool)):
            resource = device_resource(device_class)
            found[resource] = found.get(resource, Decimal(0)) + Decimal(int(count))
    return found
