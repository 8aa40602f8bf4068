"""What a set of objects asks the cluster for: total resource requests of every pod they create.

A pod's request per resource is what the scheduler reserves for it (Kubernetes' effective request):
the larger of its running containers together (regular containers plus native sidecars) and each init
container with the sidecars started before it. A container that gives only a limit requests its limit.
Every pod counts, whether it runs at the same time as the others or not (an initializer runs before
training): the totals are what a queue or a PodGroup admits the job for.
"""

from decimal import Decimal
from typing import Any, Iterable

from trainjobs.kube.pods import pod_templates
from trainjobs.kube.quantity import parse_quantity
from trainjobs.kube.resources import is_gpu

__all__ = ["counted_requests", "format_quantity", "pod_count", "pod_requests", "summary", "total_requests"]

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_BYTES = ("memory", "ephemeral-storage")


def total_requests(manifests: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Resource name -> total requested by every pod the manifests create (pods x each pod's request),
    as Kubernetes quantities, sorted by name: e.g. `{"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "32"}`.

    Jobs count `parallelism` pods (1 if unset, at most `completions`), JobSets `replicas` x `parallelism` of each replicated
    Job, Pods one; other objects create no pods. Resources no pod requests are left out.
    """
    return counted_requests(_pod_specs(manifests))


def counted_requests(pods: Iterable[tuple[int, dict[str, Any]]]) -> dict[str, str]:
    """As total_requests, of (pods, pod spec) pairs: the pods of a pod set before any object holds them."""
    totals: dict[str, Decimal] = {}
    for count, spec in pods:
        for resource, amount in pod_requests(spec).items():
            totals[resource] = totals.get(resource, Decimal(0)) + count * amount
    return {resource: format_quantity(resource, totals[resource]) for resource in sorted(totals) if totals[resource]}


def pod_count(manifests: Iterable[dict[str, Any]]) -> int:
    """How many pods the manifests create, counted as total_requests counts them."""
    return sum(pods for pods, _ in _pod_specs(manifests))


def _pod_specs(manifests: Iterable[dict[str, Any]]) -> Iterable[tuple[int, dict[str, Any]]]:
    """(pods running at once, pod spec) of every pod template in the manifests."""
    for manifest in manifests:
        for _, pods, template in pod_templates(manifest):
            yield pods, template.get("spec") or {}


def pod_requests(spec: dict[str, Any]) -> dict[str, Decimal]:
    """A pod's effective request per resource, as the scheduler computes it (pod overhead aside)."""
    running: dict[str, Decimal] = {}
    for container in spec.get("containers", []):
        _add(running, _container_requests(container))
    init_peak: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    for container in spec.get("initContainers", []):
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":   # a native sidecar keeps running
            _add(sidecars, requests)
            _raise_to(init_peak, sidecars)
        else:
            starting = dict(sidecars)
            _add(starting, requests)
            _raise_to(init_peak, starting)
    _add(running, sidecars)
    _raise_to(running, init_peak)
    return running


def _container_requests(container: dict[str, Any]) -> dict[str, Decimal]:
    """A value known only at deployment (an Output in a sidecar's resources) is left out."""
    resources = container.get("resources") or {}
    given = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(value) for name, value in given.items()
            if isinstance(value, (str, int, float)) and not isinstance(value, bool)}


def _add(into: dict[str, Decimal], amounts: dict[str, Decimal]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, Decimal(0)) + amount


def _raise_to(into: dict[str, Decimal], amounts: dict[str, Decimal]) -> None:
    for name, amount in amounts.items():
        into[name] = max(into.get(name, Decimal(0)), amount)


def summary(totals: dict[str, str]) -> str:
    """Totals for a reader: GPUs first, then CPU and memory, then the rest (`8 nvidia.com/gpu, 64 cpu, 512Gi
    memory`); "nothing" for none."""
    order = sorted(totals, key=lambda name: (not is_gpu(name), name not in ("cpu", "memory"), name))
    return ", ".join(f"{totals[name]} {name}" for name in order) or "nothing"


def format_quantity(resource: str, amount: Decimal) -> str:
    """A total as a Kubernetes quantity: bytes in the largest binary unit that divides them, CPUs whole
    or in millicores, counts (GPUs, devices) as whole numbers."""
    if resource in _BYTES or resource.startswith("hugepages-"):
        for suffix, size in _BINARY_SUFFIXES:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
        return str(int(amount)) if amount == amount.to_integral_value() else f"{amount.normalize():f}"
    if amount == amount.to_integral_value():
        return str(int(amount))
    millis = amount * 1000
    if millis == millis.to_integral_value():
        return f"{int(millis)}m"
    return f"{amount.normalize():f}"
