"""The `jobset` backend: one `jobset.x-k8s.io/v1alpha2` JobSet, shaped as Kubeflow Trainer creates it.

Each pod set (but extra roles, Jobs of their own beside it) becomes a replicated job named after its
role, with one replica, whose template is the Job the `jobs` backend would register: the JobSet
controller names its Jobs `<jobset>-<replicatedJob>-<jobIndex>`, which is `<N>-<role>-0`, the name
the Indexed Job backend gives them. So pod hostnames, DNS names, env and the hostfile are the same
under both backends. The JobSet is named after the job, and its network subdomain is the job's own
headless Service `N`: the controller creates a Service only when none of that name exists, so the
job keeps its own (selecting the pods by the job's label, published before they are ready).

Start order is `dependsOn`: training after the initializers complete, a role the family starts after
another (the MPI launcher) once that one's pods are ready. `successPolicy` names the roles whose
completion completes the job. `failurePolicy.maxRestarts` restarts every child Job when one fails;
a Job failed by a fatal exit code (podFailurePolicy FailJob) fails the JobSet at once. The time to keep
a finished job (`ttlSecondsAfterFinished`) is the JobSet's alone: the controller would create again a child
Job its own TTL deleted while the JobSet runs.

The JobSet's own labels and annotations stay on it (Kueue reads its queue labels there, Pulumi its await
annotations); each replicated job's template carries its Job's, with exclusive placement on the training
jobs alone: written on the JobSet, the controller would copy it onto every Job and pod, the initializers'
too (`copies.COPIES`: what the controller copies where).

`jobs_of` expands a JobSet into the Jobs its controller creates (names, labels, subdomain), for the
API checks, per-pod views and local runs.
"""

import hashlib
from typing import Any, Iterable, Mapping

from trainjobs.core.errors import IssueCollector
from trainjobs.core.podsets import COMPLETE, READY, PodSetSpec, Workload
from trainjobs.kube.manifests import LABEL_ROLE, SKIP_AWAIT, TIMEOUT_SECONDS, WAIT_FOR, metadata
from trainjobs.kube.naming import MAX_DNS_LABEL
from trainjobs.kube.policies import POD_FAILURE_POLICY
from . import Assembly, PodSet, jobs, register
from .copies import (EXCLUSIVE_TOPOLOGY, JOB, METADATA_ANNOTATIONS, METADATA_LABELS, POD, TEMPLATE_ANNOTATIONS,
                     TEMPLATE_LABELS, copied, reaches)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
REPLICATED_JOB = PREFIX + "replicatedjob-name"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
# What Pulumi waits for when the job waits for completion (pulumi-kubernetes' generic await).
COMPLETED = "condition=Completed"
# The failure-policy rule a fatal exit code fires. The JobSet webhook takes rule names of letters, digits,
# "_", "," and ":" only (no "-"): docs/backends.md.
FATAL_RULE = "fatal_exit_code"
# Annotations that tell Pulumi how to await an object: the Jobs' leave them to the JobSet, which is awaited
# in its own way.
_AWAIT_ANNOTATIONS = (WAIT_FOR, TIMEOUT_SECONDS)
# Job fields that move to the JobSet: a child Job deleted by its own TTL while the JobSet runs (an initializer
# done before training ends) would be created again by the controller (`constructJobsFromTemplate`), and run again.
_MOVED_TO_JOBSET = ("ttlSecondsAfterFinished",)


def child_job_name(jobset: str, replicated_job: str, index: int) -> str:
    """The controller's name for a replicated job's Job (`placement.GenJobName`)."""
    return f"{jobset}-{replicated_job}-{index}"


class JobSetBackend:
    summary = ("one `jobset.x-k8s.io/v1alpha2` JobSet shaped as Kubeflow Trainer creates it, for clusters running "
               "the JobSet controller; adds start order and whole-group restarts")
    kinds = (KIND,)
    # The JobSet webhook refuses changes to a JobSet's replicated jobs; pulumi-kubernetes knows nothing
    # of a custom resource's fields, so a changed spec must be declared a replacement.
    replace_on_changes = ("spec",)
    replaced_on = replace_on_changes
    delete_before_replace = True   # its name is taken until the old one is gone
    start_order = frozenset({READY, COMPLETE})   # dependsOn
    creates_service = True   # createHeadlessSvcIfNecessary: a Service named after network.subdomain

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        """The JobSet webhook's rule beyond the Jobs': its longest pod name, with the 5-character suffix
        Kubernetes adds, must be a DNS label of at most 63 characters (the Job allows 6 more)."""
        for pod_set in _held(workload):
            longest = f"{child_job_name(workload.name, pod_set.role, 0)}-{pod_set.count - 1}-abcde"
            if len(longest) > MAX_DNS_LABEL:
                issues.add("name", f'with backend "jobset", pod names such as {longest} ({len(longest)} characters, '
                                   f"the last 5 random) exceed {MAX_DNS_LABEL}, which the JobSet webhook refuses: "
                                   "shorten the job name")
                return

    def materialize(self, workload: Workload) -> Assembly:
        name, args = workload.name, workload.args
        held = _in_start_order(_held(workload))
        first = workload.gang()[0]
        # The job's own annotations, without those the controller would copy from the JobSet onto every child
        # Job and pod (exclusive placement): they stay on the replicated jobs whose pods they are for.
        annotations = {k: v for k, v in first.annotations.items()
                       if k != WAIT_FOR and not {JOB, POD} & set(reaches(KIND, METADATA_ANNOTATIONS, k))}
        # skipAwait is enough for a custom resource: pulumi-kubernetes still awaits its deletion.
        if args.wait_for_completion:
            annotations[WAIT_FOR] = COMPLETED
        else:
            annotations[SKIP_AWAIT] = "true"
        labels = {k: v for k, v in first.labels.items() if k not in (LABEL_ROLE, "app.kubernetes.io/component")}
        spec: dict[str, Any] = {
            "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
            "replicatedJobs": [_replicated(p) for p in held],
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [p.role for p in held if p.completes_job]},
            "failurePolicy": _failure_policy(workload, held),
        }
        if args.ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
        if workload.suspend is not None:
            spec["suspend"] = workload.suspend
        if workload.managed_by is not None:
            spec["managedBy"] = workload.managed_by
        jobset = {"apiVersion": API_VERSION, "kind": KIND,
                  "metadata": metadata(name, args.namespace, {**labels, **workload.labels}, annotations), "spec": spec}
        # Pods beside the job (extra roles) are no part of it: Jobs of their own, as under the jobs backend.
        return Assembly((jobset, *(jobs.job(workload, p) for p in workload.pod_sets if p.separate)))

    def holders(self, workload: Workload, pod_sets: Iterable[PodSetSpec]) -> list[str]:
        """The JobSet holds every pod set but those beside the job, each a Job of its own."""
        return list(dict.fromkeys(jobs.BACKEND.holders(workload, [p])[0] if p.separate else workload.name
                                  for p in pod_sets))

    def place(self, issues: IssueCollector, workload: Workload, pod_sets: list[PodSetSpec]) -> bool:
        """Exclusive placement of each replicated job's child Job: its pods in one domain of the level, which
        no other JobSet's pods share. Required only, and per Job: pod sets of several Jobs (an MPI launcher
        and its nodes) would each get a domain of their own, apart."""
        placement = workload.args.placement
        if placement.mode == "preferred":
            issues.add("placement.mode", 'with backend "jobset" and no gang scheduler, the placement is JobSet\'s '
                                         "exclusive placement, which is required only: remove mode, or set "
                                         'gang_scheduler "kueue" (preferred topology)')
        if len(pod_sets) > 1:
            roles = " and ".join(p.role for p in pod_sets)
            issues.add("placement", f"JobSet's exclusive placement gives each child Job a domain of its own, so the "
                                    f"{roles} pods would be kept apart: set gang_scheduler \"kueue\" (its "
                                    'topology-aware scheduling places them in one domain together), or backend "jobs" '
                                    "(pod affinity among the job's pods)")
        for pod_set in pod_sets:
            pod_set.annotations[EXCLUSIVE_TOPOLOGY] = placement.topology
        return True

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        if manifest.get("apiVersion") != API_VERSION or manifest.get("kind") != KIND:
            return None
        return child_jobs(manifest)

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[PodSet] | None:
        if manifest.get("apiVersion") != API_VERSION or manifest.get("kind") != KIND:
            return None
        name = manifest["metadata"]["name"]
        after = {rj["name"]: tuple(child_job_name(name, d["name"], 0) for d in rj.get("dependsOn") or ())
                 for rj in manifest["spec"].get("replicatedJobs") or ()}
        return [PodSet.of_job(manifest, job, after[job["metadata"]["labels"][REPLICATED_JOB]])
                for job in child_jobs(dict(manifest))]


def _held(workload: Workload) -> list[PodSetSpec]:
    """The pod sets the JobSet holds: all but those beside the job."""
    return [p for p in workload.pod_sets if not p.separate]


def _in_start_order(pod_sets: list[PodSetSpec]) -> list[PodSetSpec]:
    """The pod sets, each after those it starts after (dependsOn names only earlier replicated jobs),
    otherwise in their order."""
    ordered: list[PodSetSpec] = []
    waiting = list(pod_sets)
    while waiting:
        pending = {p.role for p in waiting}
        ready = [p for p in waiting if not any(a.role in pending for a in p.starts_after)] or waiting   # no cycle, but never stuck
        ordered += ready
        waiting = [p for p in waiting if all(p is not r for r in ready)]
    return ordered


def _depends_on(pod_set: PodSetSpec) -> list[dict[str, str]]:
    """A pod set started after another's readiness waits for that alone (which itself waited for the
    initializers); any other waits for every completion it starts after."""
    ready = [{"name": a.role, "status": READY} for a in pod_set.starts_after if a.status == READY]
    return ready or [{"name": a.role, "status": COMPLETE} for a in pod_set.starts_after]


def _replicated(pod_set: PodSetSpec) -> dict[str, Any]:
    template_meta: dict[str, Any] = {"labels": dict(pod_set.labels)}
    annotations = {k: v for k, v in pod_set.annotations.items() if k not in _AWAIT_ANNOTATIONS}
    if annotations:
        template_meta["annotations"] = annotations
    spec = {k: v for k, v in jobs.job_spec(pod_set).items() if k not in _MOVED_TO_JOBSET}
    entry: dict[str, Any] = {"name": pod_set.role, "replicas": 1,
                             "template": {"metadata": template_meta, "spec": spec}}
    depends = _depends_on(pod_set)
    if depends:
        entry["dependsOn"] = depends
    return entry


def _failure_policy(workload: Workload, held: list[PodSetSpec]) -> dict[str, Any]:
    """Restart every child Job when one fails, up to max_restarts; a fatal exit code fails at once."""
    policy = workload.args.failure_policy
    result: dict[str, Any] = {"maxRestarts": policy.max_restarts if policy else 0}
    fatal = any(rule.get("action") == "FailJob"
                for p in held for rule in (p.rules.get("podFailurePolicy") or {}).get("rules", []))
    if fatal:
        result["rules"] = [{"name": FATAL_RULE, "action": "FailJobSet", "onJobFailureReasons": [POD_FAILURE_POLICY]}]
    return result


def child_jobs(jobset: dict[str, Any], restarts: int = 0) -> list[dict[str, Any]]:
    """The Jobs the JobSet controller creates, as it labels and annotates them and their pods
    (`constructJob`, `labelAndAnnotateObject`: what it copies is `copies.COPIES`), with every key of its own
    but the JobSet's UID, unknown before it exists (tests/cluster/test_jobset_controller.py compares them with
    the real controller's)."""
    name = jobset["metadata"]["name"]
    namespace = jobset["metadata"].get("namespace")
    spec = jobset["spec"]
    network = spec.get("network") or {}
    replicated = spec.get("replicatedJobs") or []
    total = sum(int(r.get("replicas", 1)) for r in replicated)
    group_totals: dict[str, int] = {}
    for rj in replicated:
        group_totals[_group(rj)] = group_totals.get(_group(rj), 0) + int(rj.get("replicas", 1))
    jobs, global_index, group_index = [], 0, dict.fromkeys(group_totals, 0)
    for rj in replicated:
        replicas, group = int(rj.get("replicas", 1)), _group(rj)
        for index in range(replicas):
            job_name = child_job_name(name, rj["name"], index)
            stamp = {
                JOBSET_NAME: name, REPLICATED_JOB: rj["name"], RESTART_ATTEMPT: str(restarts),
                PREFIX + "replicatedjob-replicas": str(replicas), PREFIX + "global-replicas": str(total),
                PREFIX + "job-index": str(index),
                PREFIX + "job-key": hashlib.sha1(f"{namespace or 'default'}/{job_name}".encode()).hexdigest(),
                PREFIX + "job-global-index": str(global_index),
                PREFIX + "group-name": group, PREFIX + "group-replicas": str(group_totals[group]),
                PREFIX + "job-group-index": str(group_index[group]),
            }
            global_index += 1
            group_index[group] += 1
            template = rj["template"]
            meta = template.get("metadata") or {}
            job_spec = dict(template["spec"])
            pod_template = dict(job_spec["template"])
            pod_meta = pod_template.get("metadata") or {}
            pod_template["metadata"] = {**pod_meta, **{field: {**(pod_meta.get(field) or {}), **stamp,
                                                               **_copied_onto(POD, field, jobset, meta)}
                                                       for field in ("labels", "annotations")}}
            pod_spec = dict(pod_template["spec"])
            if network.get("enableDNSHostnames", True):
                pod_spec["subdomain"] = network.get("subdomain") or name
            pod_template["spec"] = pod_spec
            job_spec["template"] = pod_template
            job_spec["completionMode"] = job_spec.get("completionMode", "Indexed")
            job_spec["suspend"] = bool(spec.get("suspend", False))
            job = {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": metadata(job_name, namespace, {**_copied_onto(JOB, "labels", jobset, meta), **stamp},
                                        {**_copied_onto(JOB, "annotations", jobset, meta), **stamp}),
                   "spec": job_spec}
            jobs.append(job)
    return jobs


def _group(replicated_job: Mapping[str, Any]) -> str:
    """A replicated job's group (the CRD's default: "default"), which the controller indexes Jobs within."""
    return replicated_job.get("groupName") or "default"


def _copied_onto(child: str, field: str, jobset: Mapping[str, Any], template_meta: Mapping[str, Any]) -> dict[str, str]:
    """The `field` ("labels" or "annotations") the controller copies onto a child Job or its pods from the JobSet's
    metadata and the replicated job's template metadata (which wins)."""
    where = {"labels": (METADATA_LABELS, TEMPLATE_LABELS), "annotations": (METADATA_ANNOTATIONS, TEMPLATE_ANNOTATIONS)}
    own, template = where[field]
    return {**copied(KIND, own, jobset["metadata"].get(field), child),
            **copied(KIND, template, template_meta.get(field), child)}


def controller_service(jobset: Mapping[str, Any]) -> dict[str, Any] | None:
    """The headless Service the controller creates for a JobSet with DNS hostnames when none named after its
    subdomain exists (`createHeadlessSvcIfNecessary`): what publishes the pods of a JobSet that comes with
    no Service of the job's (one MultiKueue dispatched to a worker cluster)."""
    network = jobset["spec"].get("network") or {}
    if not network.get("enableDNSHostnames", True):
        return None
    name = jobset["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(network.get("subdomain") or name, jobset["metadata"].get("namespace"), {}, {}),
            "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: name},
                     "publishNotReadyAddresses": bool(network.get("publishNotReadyAddresses", False))}}


def jobset_of(job: dict[str, Any]) -> str | None:
    """The JobSet that created a Job, from the controller's label."""
    return (job["metadata"].get("labels") or {}).get(JOBSET_NAME)


BACKEND = JobSetBackend()
register("jobset", BACKEND)
__all__ = ["API_VERSION", "BACKEND", "KIND", "child_jobs", "controller_service", "jobset_of"]
