"""Checks on rendered objects that the Kubernetes JSON schemas do not make: the API server's own rules
(name formats, enum values, cross-field rules, limits), as the components apply them before anything
registers (trainjobs.kube.apivalidation), for users' own objects and rendered YAML."""

from typing import Any

from trainjobs.kube import apivalidation


def manifest_problems(objects: list[dict[str, Any]]) -> list[str]:
    """Every problem the API server would find in the objects, as `Kind/name path: what` strings."""
    return [str(problem) for problem in apivalidation.problems(objects)]
