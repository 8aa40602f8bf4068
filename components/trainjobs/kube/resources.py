"""Container resources: which are GPUs or other devices, how many GPUs a pod has, device limits."""

from trainjobs.core.args import Resources
from trainjobs.kube.quantity import ceil_value


def is_extended_resource(name: str) -> bool:
    """Device-plugin resources (GPUs, MIG slices, NICs): Kubernetes needs requests == limits."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("hugepages-")


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
