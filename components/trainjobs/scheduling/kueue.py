"""Kueue: the job's Workload waits in a LocalQueue and is admitted whole, or not at all.

Kueue admits one Workload per batch/v1 Job (or per JobSet, with one pod set per replicated job), all
its pods at once. A job whose training pods are one Job (torch, TorchTune, JAX, XGBoost, MPI with the
launcher as the only host) is therefore admitted as one unit. A job whose training pods span Jobs (an
MPI launcher Job and its node Job) would be two Workloads, admitted independently; it needs the JobSet
backend, whose one JobSet is one Workload. Kueue's pod groups cannot join them either: Kueue leaves
pods owned by a Job to the Job integration. docs/scheduling.md explains the choice. Which objects hold
the gang's pods is the backend's answer (`Backend.holders`), so a new backend needs no change here.

A job with a node range (min_nodes) opts into what Kueue offers for a batch Job that can run with fewer
pods (`elastic_admission`): partial admission (`job-min-parallelism`, with completions rewritten to the
admitted count, as an Indexed torchrun Job needs), or an elastic Job resized through workload slices
(`elastic-job`). Kueue accepts neither on a JobSet, nor both on one Job.

Kueue suspends the Jobs it manages and resumes them on admission; the job never sets `suspend`, and
Pulumi is told to ignore it, so a `pulumi up` after admission or re-queueing changes nothing.

A placement becomes Kueue's topology-aware scheduling annotations on the training pod templates (one
pod set of the Workload each). Two training pod sets, an MPI launcher of one pod and its nodes, are
grouped (`podset-group-name`) so they share one domain; Kueue groups exactly two, one of them of one pod.

With `multikueue`, the JobSet is dispatched to a worker cluster: it carries `spec.managedBy` explicitly
(Kueue's webhook would default it, and the field is immutable), and the job registers no Service, since
the JobSet controller on the worker creates it. What MultiKueue would leave behind is refused: the
objects beside the JobSet that the pods read (the MPI Secret and ConfigMap, the workspace PVC, the
ResourceClaimTemplates of device claims).
"""

from typing import Any, Iterable, Mapping

from trainjobs.core.args import ElasticAdmission, TrainJobArgs
from trainjobs.core.errors import IssueCollector, shown
from trainjobs.core.podsets import INITIALIZER_ARGUMENTS, PodSetSpec
from trainjobs.kube.naming import labelled_name_problem
from trainjobs.scheduling import Gang, GangScheduler, Reads, register, set_labels

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
# Input paths of a Kueue-managed Job or JobSet that Kueue owns after creation (docs/scheduling.md).
KUEUE_OWNED_PATHS = ("spec.suspend",)
# Topology-aware scheduling, on each pod template (Kueue apis/kueue/v1beta2/topology_types.go).
TAS_PREFIX = "kueue.x-k8s.io/podset-"
REQUIRED_TOPOLOGY = TAS_PREFIX + "required-topology"
PREFERRED_TOPOLOGY = TAS_PREFIX + "preferred-topology"
SLICE_TOPOLOGY = TAS_PREFIX + "slice-required-topology"
SLICE_SIZE = TAS_PREFIX + "slice-size"
GROUP_NAME = TAS_PREFIX + "group-name"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
"""`spec.managedBy` of a Job or JobSet MultiKueue dispatches."""
# What changes on the live Job of an elastic job that Kueue admits in part or that is resized.
RESIZED_PATHS = ("spec.parallelism", "spec.completions")


class Kueue(GangScheduler):
    summary = "admitted whole from a Kueue LocalQueue"
    reads = {"queue": Reads("a Kueue LocalQueue", "Kueue admits the job from a LocalQueue"),
             "priority_class": Reads("a Kueue WorkloadPriorityClass",
                                     "Kueue orders its queue by WorkloadPriorityClass"),
             "elastic_admission": Reads("how Kueue admits an elastic job", "only Kueue admits a job with fewer pods "
                                                                            "or resizes it")}

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        if not args.queue:
            issues.add("queue", 'Kueue admits a job from a LocalQueue: set queue to its name (e.g. "default" where '
                                "the namespace has a default LocalQueue)")
        # Kueue's webhook refuses a queue label that is not a DNS subdomain; both labels name objects
        # (a LocalQueue, a WorkloadPriorityClass), so they must also be valid names and label values.
        for field_name, label, names in (("queue", QUEUE_LABEL, "the namespace's LocalQueue"),
                                         ("priority_class", PRIORITY_LABEL, "a WorkloadPriorityClass")):
            value = getattr(args, field_name)
            problem = labelled_name_problem(value) if value else None
            if problem:
                issues.add(field_name, f"{problem}; Kueue reads it from the label {label}, which must name "
                                       f"{names}: use that object's name")
        if args.suspend is not None:
            issues.add("suspend", "Kueue suspends and resumes the Jobs it admits: remove suspend (the job waits "
                                  "in its queue until admitted)")
        placement = args.placement
        if placement is not None:
            for field_name in ("tier", "tier_name"):
                if getattr(placement, field_name) is not None:
                    issues.add(f"placement.{field_name}", "HyperNode tiers are Volcano's; Kueue places by the levels "
                                                          "of its Topology (node label keys): set placement.topology "
                                                          f"(e.g. example.com/rack) and remove {field_name}")
            if placement.topology is None and placement.slice_topology is None:
                issues.add("placement.topology", "Kueue places by a level of its Topology: set placement.topology "
                                                 "(a node label key such as example.com/rack)")
        for key in (MIN_PARALLELISM, COMPLETIONS_EQUAL_PARALLELISM, ELASTIC_JOB):
            if key in (args.annotations or {}):
                issues.add(f"annotations.{key}", "is how the job opts into Kueue's partial admission or elastic "
                                                 "Jobs, which follows from num_nodes and elastic_admission: give "
                                                 'num_nodes a range (e.g. "2:4") and set elastic_admission, and '
                                                 "remove this annotation")
        if args.elastic_admission is not None and args.min_nodes is None:
            issues.add("elastic_admission", "applies to an elastic job: give num_nodes a range (e.g. \"2:4\") or "
                                            "min_nodes, or remove elastic_admission")

    def decorate(self, gang: Gang) -> None:
        args = gang.args
        holders = gang.holders()
        if len(holders) > 1:
            names = ", ".join(holders)
            gang.issues.add("gang_scheduler", f"Kueue admits each object of backend {shown(args.backend)} on its own, "
                                              f"so {names}, whose pods must run together, would be admitted "
                                              'separately: set backend "jobset" (one JobSet, admitted as one Workload)')
            if args.placement is not None:
                gang.issues.add("placement", f"Kueue places together only pod sets of one Workload, and {names} "
                                             "would be Workloads of their own, each placed apart: set backend "
                                             '"jobset" (its launcher and nodes are then grouped in one domain)')
        refused = {issue.field for issue in gang.issues.issues}
        if not args.queue or "queue" in refused:
            return   # reported by check
        labels = {QUEUE_LABEL: args.queue}
        if args.priority_class and "priority_class" not in refused:
            labels[PRIORITY_LABEL] = args.priority_class
        gang.workload.labels.update(labels)   # on every object that runs pods, not on the pods
        gang.workload.ignore_changes = KUEUE_OWNED_PATHS
        if len(holders) <= 1:
            _place(gang)
        if args.multikueue:
            _dispatch(gang)
        if args.min_nodes is not None and "elastic_admission" not in refused:
            self._elastic(gang)

    @staticmethod
    def _elastic(gang: Gang) -> None:
        """The opt-in annotations of an elastic job on the batch Job that holds its training pods."""
        args = gang.args
        batch_job = tuple(gang.backend.kinds) == ("Job",)
        mode = args.elastic_admission or (ElasticAdmission.PARTIAL.value if batch_job else None)
        if mode is None:
            return   # admitted whole, at num_nodes (docs/scheduling.md)
        if not batch_job:
            gang.issues.add("elastic_admission", f"Kueue {'admits part of' if mode == 'partial' else 'resizes'} a "
                                                 f"batch Job only, not a {'/'.join(gang.backend.kinds)} (backend "
                                                 f'{shown(args.backend)}): set backend "jobs", or remove '
                                                 "elastic_admission (Kueue then admits the job whole)")
            return
        if mode == ElasticAdmission.SLICES.value and args.placement is not None:
            gang.issues.add("placement", "Kueue refuses a required or preferred topology on an elastic Job (only an "
                                         "unconstrained one, behind its alpha gate ElasticJobsViaWorkloadSlicesWithTAS): "
                                         'remove placement, or set elastic_admission "partial"')
            return
        # Kueue (partial admission) or whoever resizes the elastic Job changes both on the live Job; a diff on
        # them would replace it, restarting training.
        gang.workload.ignore_changes = (*gang.workload.ignore_changes, *RESIZED_PATHS)
        opt_in = ({MIN_PARALLELISM: str(args.min_nodes), COMPLETIONS_EQUAL_PARALLELISM: "true"}
                  if mode == ElasticAdmission.PARTIAL.value else {ELASTIC_JOB: "true"})
        for member in gang.members():   # one Job: decorate refuses a gang spread over several
            member.annotations.update(opt_in)

    def placed(self, pod_set: Any, manifests: Iterable[Mapping[str, Any]]) -> str | None:
        annotations = (pod_set.template.get("metadata") or {}).get("annotations") or {}
        parts = [f"{mode} {annotations[key]}" for mode, key in (("required", REQUIRED_TOPOLOGY),
                                                                ("preferred", PREFERRED_TOPOLOGY)) if key in annotations]
        if SLICE_TOPOLOGY in annotations:
            parts.append(f"slices of {annotations.get(SLICE_SIZE, '?')} in {annotations[SLICE_TOPOLOGY]}")
        if GROUP_NAME in annotations:
            parts.append(f"group {annotations[GROUP_NAME]}")
        return f"{', '.join(parts)} (Kueue)" if parts else None


def _place(gang: Gang) -> None:
    """The placement as topology-aware scheduling annotations on each training pod template, within the rules
    Kueue's webhook enforces (tas_validation.go): one mode, slice size at most the pod count, groups of two."""
    placed = [p for p in gang.members() if p.placement is not None]
    if not placed:
        return
    placement = placed[0].placement
    if placement.topology is None and placement.slice_topology is None:
        return   # reported by check
    grouped = len(placed) == 2
    if len(placed) > 2:
        gang.issues.add("placement", f"Kueue places at most two pod sets together, and the job's training pods are "
                                     f"{len(placed)} ({', '.join(p.role for p in placed)}): remove placement")
    if grouped and placement.slice_topology is not None:
        gang.issues.add("placement.slice_topology",
                        f"Kueue does not slice pod sets it places together (the {placed[0].role} and {placed[1].role} "
                        "pods): remove slice_topology and slice_size, or keep topology alone")
    if grouped and placement.topology is None:
        gang.issues.add("placement.topology", f"Kueue places the {placed[0].role} and {placed[1].role} pods together "
                                              "in a domain of one level: set placement.topology")
    if grouped and min(p.count for p in placed) != 1:
        gang.issues.add("placement", "Kueue places two pod sets together only when one of them is a single pod: "
                                     f"the {placed[0].role} and {placed[1].role} pods are "
                                     f"{placed[0].count} and {placed[1].count}")
    for pod_set in placed:
        if not _requests(pod_set):
            resources = "runtime.launcher.resources" if pod_set.role == "launcher" else "resources_per_node"
            gang.issues.add(resources, f"Kueue places a pod set by the flavors of the resources it requests, and the "
                                       f"{pod_set.role} pods request none: Kueue would admit them without placing "
                                       f'them. Give them resources (e.g. {{"requests": {{"cpu": "1"}}}}), or remove '
                                       "placement")
        annotations: dict[str, str] = {}
        if placement.topology is not None:
            key = PREFERRED_TOPOLOGY if placement.mode == "preferred" else REQUIRED_TOPOLOGY
            annotations[key] = placement.topology
        if placement.slice_topology is not None:
            if placement.slice_size > pod_set.count:
                gang.issues.add("placement.slice_size", f"{placement.slice_size} pods per slice, and the "
                                                        f"{pod_set.role} pods are {pod_set.count}: Kueue takes at "
                                                        "most the pod count")
            annotations[SLICE_TOPOLOGY] = placement.slice_topology
            annotations[SLICE_SIZE] = str(placement.slice_size)
        if grouped:
            annotations[GROUP_NAME] = gang.name   # an RFC 1035 label: never a number, as Kueue requires
        set_labels(pod_set.template["metadata"], annotations, key="annotations")


def _requests(pod_set: PodSetSpec) -> bool:
    """Whether the pods request a resource (limits imply requests) or claim devices, which Kueue assigns a flavor,
    and so a place: a pod set that requests nothing gets no flavor, and Kueue admits it unplaced
    (flavorassigner.go; unless its ClusterQueue covers `pods`)."""
    spec = pod_set.template["spec"]
    return bool(spec.get("resourceClaims")) or any(
        (c.get("resources") or {}).get(side) for c in (*spec.get("initContainers", ()), *spec["containers"])
        for side in ("requests", "limits"))


def _dispatch(gang: Gang) -> None:
    """managedBy for MultiKueue, the Service left to the JobSet controller on the worker, and a refusal of
    every object MultiKueue would leave behind on the manager cluster (it copies only the workload object)."""
    workload, issues = gang.workload, gang.issues
    if not gang.backend.creates_service:
        issues.add("backend", f"MultiKueue copies only the job's Job to a worker cluster; its headless Service "
                              f"{gang.name}, which gives the pods their DNS names, would stay behind: set backend "
                              "\"jobset\" (the JobSet controller on the worker creates that Service itself)")
        return
    for pod_set in workload.pod_sets:
        if pod_set.separate:
            issues.add(f"extra_roles.{pod_set.role}", f"the {pod_set.role} pods are a Job beside the JobSet, a "
                                                      "Workload of its own that MultiKueue may dispatch to another "
                                                      "worker cluster than training: remove the extra role")
    left = [f"{o['kind']} {o['metadata']['name']}" for o in workload.needs if o.get("kind") != "PersistentVolumeClaim"]
    if left:
        issues.add("multikueue", f"the pods need {' and '.join(left)}, which MultiKueue does not copy to the worker "
                                 "cluster (it copies only the JobSet): run the job on its cluster without multikueue "
                                 "(docs/scheduling.md#multikueue)")
    for pod_set in (p for p in workload.pod_sets if p.claim_template and not p.separate):
        devices, resources = _device_arguments(pod_set)
        issues.add(devices, f"the {pod_set.role} pods claim devices from the ResourceClaimTemplate "
                            f"{pod_set.claim_template['metadata']['name']}, which MultiKueue does not copy to the "
                            "worker cluster (it copies only the JobSet), so they would never start there: ask for "
                            f"them as a device resource in {resources} (limits such as nvidia.com/gpu) instead of "
                            f"{devices} (set it to [] to drop a runtime's), or remove multikueue")
    for claim in (o for o in workload.needs if o.get("kind") == "PersistentVolumeClaim"):
        issues.add("workspace_volume", f"the initializers' workspace is the PVC {claim['metadata']['name']}, which "
                                       "MultiKueue does not copy to the worker cluster: set workspace_volume to storage "
                                       "every worker cluster mounts alike (e.g. {nfs: {server, path}})")
    workload.managed_by = MULTIKUEUE
    workload.service = False   # the JobSet controller's, named after network.subdomain, on the worker


def _device_arguments(pod_set: PodSetSpec) -> tuple[str, str]:
    """The arguments behind a pod set's devices and its device resources: the training pods' or an initializer's."""
    if pod_set.gang:
        return "devices_per_node", "resources_per_node"
    argument = INITIALIZER_ARGUMENTS[pod_set.role]
    return f"{argument}.devices", f"{argument}.resources"


register("kueue", Kueue())
