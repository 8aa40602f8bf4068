"""Volcano: one PodGroup holds the job's training pods, so Volcano binds all of them or none.

Pods join by the `scheduling.k8s.io/group-name` annotation and `schedulerName: volcano`; Volcano's
PodGroup controller then leaves them to the explicit group. Pods outside the gang (initializers,
extra roles) keep Volcano as their scheduler and name the queue, so Volcano gives each of their Jobs
a group of its own in that queue.

A placement is the PodGroup's `networkTopology`: hard (required) or soft (preferred), up to a HyperNode
tier given by number or by name. Volcano places by its HyperNode tree, not by node labels.
"""

from typing import Any, Iterable, Mapping

from trainjobs.core.args import TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.kube.naming import dns_subdomain_problem
from trainjobs.scheduling import Gang, GangScheduler, Reads, register, set_labels
from trainjobs.scheduling._podgroup import pod_group

API_VERSION = "scheduling.volcano.sh/v1beta1"
SCHEDULER_NAME = "volcano"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


class Volcano(GangScheduler):
    summary = "a Volcano PodGroup"
    reads = {"queue": Reads("a Volcano queue", "Volcano places the job in a queue"),
             "priority_class": Reads("a Volcano PodGroup's priority (the pods' own priority is priority_class_name)",
                                     "a Volcano PodGroup has a priority (the pods' own priority is priority_class_name)")}

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        # The PodGroup CRD's pattern on spec.queue, and the name of a PriorityClass: DNS subdomains.
        for field_name, names in (("queue", "a Volcano Queue (the PodGroup's spec.queue)"),
                                  ("priority_class", "a PriorityClass (the PodGroup's spec.priorityClassName)")):
            value = getattr(args, field_name)
            problem = dns_subdomain_problem(value) if value else None
            if problem:
                issues.add(field_name, f"{problem}; it names {names}: use that object's name")
        placement = args.placement
        if placement is not None:
            if placement.tier is None and placement.tier_name is None:
                issues.add("placement.tier", "Volcano places by HyperNode tier: set placement.tier (the highest tier "
                                             "the pods may span, e.g. 1) or placement.tier_name")
            for field_name in ("topology", "slice_topology"):
                if getattr(placement, field_name) is not None:
                    issues.add(f"placement.{field_name}", "Volcano places by HyperNode tiers, not node labels: remove "
                                                          f"{field_name} (and slice_size), and give tier or tier_name")

    def decorate(self, gang: Gang) -> None:
        args = gang.args
        spec: dict = {"minMember": gang.min_member()}
        requests = gang.min_resources()
        if requests:
            spec["minResources"] = requests
        if args.queue:
            spec["queue"] = args.queue
        if args.priority_class:
            spec["priorityClassName"] = args.priority_class
        placement = next((p.placement for p in gang.members() if p.placement is not None), None)
        if placement is not None:
            topology = {"mode": "soft" if placement.mode == "preferred" else "hard"}
            if placement.tier is not None:
                topology["highestTierAllowed"] = placement.tier
            elif placement.tier_name is not None:
                topology["highestTierName"] = placement.tier_name
            spec["networkTopology"] = topology
        for pod_set in gang.workload.pod_sets:
            pod_set.template["spec"].setdefault("schedulerName", SCHEDULER_NAME)
        for pod_set in gang.members():
            set_labels(pod_set.template["metadata"], {GROUP_ANNOTATION: gang.name}, key="annotations")
        if args.queue:
            for pod_set in gang.others():
                set_labels(pod_set.template["metadata"], {QUEUE_ANNOTATION: args.queue}, key="annotations")
        gang.workload.objects_before.append(pod_group(gang, API_VERSION, spec))

    def placed(self, pod_set: Any, manifests: Iterable[Mapping[str, Any]]) -> str | None:
        group = ((pod_set.template.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)
        for manifest in manifests if group else ():
            if (manifest.get("apiVersion"), manifest.get("kind")) == (API_VERSION, "PodGroup") and \
                    manifest["metadata"]["name"] == group and manifest["metadata"].get("namespace") == pod_set.namespace:
                topology = manifest["spec"].get("networkTopology")
                if topology:
                    tier = topology.get("highestTierName", topology.get("highestTierAllowed"))
                    return f"{topology.get('mode', 'hard')}, highest tier {tier} (Volcano)"
        return None


register("volcano", Volcano())
