"""What a set of pods asks the cluster for: total resource requests, from each pod spec and how many pods run it.

A pod's request per resource is what the scheduler reserves for it (Kubernetes' effective request):
the larger of its running containers together (regular containers plus native sidecars) and each init
container with the sidecars started before it. A container that gives only a limit requests its limit.
Every pod counts, whether it runs at the same time as the others or not (an initializer runs before
training): the totals are what a queue or a PodGroup admits the job for. Which objects make which pods
is the backends' knowledge (`trainjobs.backends.total_requests` feeds their pod sets here).

Devices a pod claims through Dynamic Resource Allocation count as the pod's requests too: a claim made from a
ResourceClaimTemplate gets that template's devices, per pod, counted by device class
(`trainjobs.kube.resources.claimed_devices`: `gpu.nvidia.com` as `nvidia.com/gpu`). A template is an object of
its own, so the requests of pods are read with the templates among the objects (`ClaimTemplates`).
"""

from decimal import Decimal
from typing import Any, Iterable, Mapping

from trainjobs.kube.quantity import parse_quantity
from trainjobs.kube.resources import claimed_devices, is_claim_template, is_gpu

__all__ = ["ClaimTemplates", "Pods", "format_quantity", "pod_requests", "summary", "total_requests"]

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_BYTES = ("memory", "ephemeral-storage")


class ClaimTemplates:
    """The ResourceClaimTemplates among some objects, by namespace and name, as the devices each claim made
    from them gets: what resolves a pod's `resourceClaims`."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()):
        self._devices = {(_namespace(o), (o.get("metadata") or {}).get("name")): claimed_devices(o)
                         for o in objects if is_claim_template(o)}

    def devices(self, spec: Mapping[str, Any], namespace: Any = None) -> dict[str, Decimal]:
        """The devices a pod of `spec` in `namespace` gets from its claims' templates (a claim of a template not
        among the objects, or a shared ResourceClaim, adds nothing)."""
        found: dict[str, Decimal] = {}
        for claim in spec.get("resourceClaims") or []:
            template = claim.get("resourceClaimTemplateName") if isinstance(claim, Mapping) else None
            _add(found, self._devices.get((namespace, template), {}) if isinstance(template, str) else {})
        return found


def _namespace(manifest: Mapping[str, Any]) -> Any:
    return (manifest.get("metadata") or {}).get("namespace")


Pods = tuple[int, Mapping[str, Any], Any]
"""How many pods, their pod spec, and their namespace (which their claims' templates are in)."""


def total_requests(pods: Iterable[Pods], claims: ClaimTemplates | None = None) -> dict[str, str]:
    """Resource name -> total requested by `pods` (each count x that pod's request, with the devices its
    claims get from `claims`), as Kubernetes quantities, sorted by name: e.g. `{"cpu": "64", "memory":
    "512Gi", "nvidia.com/gpu": "32"}`. Resources no pod requests are left out."""
    totals: dict[str, Decimal] = {}
    for count, spec, namespace in pods:
        for resource, amount in pod_requests(spec, claims, namespace).items():
            totals[resource] = totals.get(resource, Decimal(0)) + count * amount
    return {resource: format_quantity(resource, totals[resource]) for resource in sorted(totals) if totals[resource]}


def pod_requests(spec: Mapping[str, Any], claims: ClaimTemplates | None = None,
                 namespace: Any = None) -> dict[str, Decimal]:
    """A pod's effective request per resource, as the scheduler computes it (pod overhead aside), and the
    devices its claims get (once per pod, however many containers refer to them)."""
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
    if claims is not None:
        _add(running, claims.devices(spec, namespace))
    return running


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
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
