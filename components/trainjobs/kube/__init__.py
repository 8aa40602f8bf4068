"""Kubernetes objects as plain dicts: Job and Service manifests, pod-template merging, resources and
quantities, and the API server's own checks applied before anything is sent."""
