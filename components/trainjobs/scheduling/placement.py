"""Placement without a gang scheduler: the backend's own (JobSet's exclusive placement), else pod affinity.

A placement is a property of the training pod sets (trainjobs.core.podsets.PodSetSpec.placement). A gang
scheduler renders it in its `decorate` (Kueue's topology annotations, Volcano's networkTopology); with
none, the backend may place the pod sets itself (`Backend.place`), and otherwise every training pod gets a
pod affinity to the job's other training pods over the level's node label: the first pod lands anywhere,
and every later one in the domain of those already placed. Pod affinity has no slices and no HyperNode
tiers, so those are refused.
"""

from typing import TYPE_CHECKING, Any

from trainjobs.backends.copies import EXCLUSIVE_TOPOLOGY
from trainjobs.kube.manifests import LABEL_JOB, LABEL_ROLE

if TYPE_CHECKING:
    from trainjobs.backends import Backend, PodSet
    from trainjobs.core.errors import IssueCollector
    from trainjobs.core.podsets import PodSetSpec, Workload

__all__ = ["place_unscheduled", "placed_unscheduled"]

# Kubernetes' highest weight: among the nodes that fit, the domain of the job's other pods wins.
PREFERRED_WEIGHT = 100


def place_unscheduled(workload: "Workload", backend: "Backend", issues: "IssueCollector") -> None:
    placed = [p for p in workload.gang() if p.placement is not None]
    if not placed:
        return
    placement = placed[0].placement
    if placement.tier is not None or placement.tier_name is not None:
        field = "placement.tier" if placement.tier is not None else "placement.tier_name"
        issues.add(field, "HyperNode tiers are Volcano's: set gang_scheduler \"volcano\", or give placement.topology "
                          "(a node label key) instead")
    if placement.slice_topology is not None:
        issues.add("placement.slice_topology", "slices are Kueue's topology-aware scheduling: set gang_scheduler "
                                               "\"kueue\", or remove slice_topology and slice_size")
    if placement.topology is None:
        if placement.tier is None and placement.tier_name is None and placement.slice_topology is None:
            return
        issues.add("placement.topology", "without a gang scheduler the pods are placed by a node label: set "
                                         "placement.topology (e.g. example.com/rack)")
        return
    if not backend.place(issues, workload, placed):
        for pod_set in placed:
            _pod_affinity(pod_set, workload.name, [p.role for p in placed])


def _pod_affinity(pod_set: "PodSetSpec", name: str, roles: list[str]) -> None:
    """A pod affinity term to the job's training pods (its job label, and its training roles: initializers
    and extra roles carry the job label too, and must not pull training into their domain)."""
    placement = pod_set.placement
    term = {"labelSelector": {"matchLabels": {LABEL_JOB: name},
                              "matchExpressions": [{"key": LABEL_ROLE, "operator": "In", "values": list(roles)}]},
            "topologyKey": placement.topology}
    spec = pod_set.template["spec"]
    affinity = dict(spec.get("affinity") or {})
    pod_affinity = dict(affinity.get("podAffinity") or {})
    if placement.mode == "preferred":
        key, entry = "preferredDuringSchedulingIgnoredDuringExecution", {"weight": PREFERRED_WEIGHT,
                                                                          "podAffinityTerm": term}
    else:
        key, entry = "requiredDuringSchedulingIgnoredDuringExecution", term
    pod_affinity[key] = [*(pod_affinity.get(key) or []), entry]
    affinity["podAffinity"] = pod_affinity
    spec["affinity"] = affinity


def placed_unscheduled(pod_set: "PodSet") -> str | None:
    """JobSet's exclusive placement or the job's pod affinity, read from the pods' template."""
    annotations = (pod_set.template.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXCLUSIVE_TOPOLOGY):
        return f"exclusive {annotations[EXCLUSIVE_TOPOLOGY]} (JobSet)"
    affinity = (pod_set.pod_spec.get("affinity") or {}).get("podAffinity") or {}
    job = pod_set.job_name
    for mode, key in (("required", "requiredDuringSchedulingIgnoredDuringExecution"),
                      ("preferred", "preferredDuringSchedulingIgnoredDuringExecution")):
        for entry in affinity.get(key) or ():
            term: dict[str, Any] = entry.get("podAffinityTerm", entry)
            if job and ((term.get("labelSelector") or {}).get("matchLabels") or {}).get(LABEL_JOB) == job:
                return f"{mode} {term.get('topologyKey')} (pod affinity)"
    return None
