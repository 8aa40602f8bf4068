"""Container resources: which are GPUs or other devices."""

def is_extended_resource(name: str) -> bool:
    """Device-plugin resources (GPUs, MIG slices, NICs): Kubernetes needs requests == limits."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("hugepages-")


def is_gpu(resource: str) -> bool:
    """A GPU: any resource name containing "gpu", and NVIDIA MIG slices."""
    return "gpu" in resource.lower() or resource.startswith("nvidia.com/mig-")
