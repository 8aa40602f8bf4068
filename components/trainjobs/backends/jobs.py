"""The `jobs` backend: one Indexed Job per pod set, with no controller beyond Kubernetes' own.

A role's Job is `<N>-<role>-0`, the name the JobSet controller gives it too, so pod hostnames and DNS
names are the same under every backend. Pulumi orders them: a pod set that starts after another's
completion (training after the initializers) is created once that Job completes. Nothing waits for
another role's pods to be ready, and one failed rank fails its Job (within its backoff limit) while
nothing restarts the other roles.
"""

from typing import Any, Iterable, Mapping

from trainjobs.core.errors import IssueCollector
from trainjobs.core.naming import job_name
from trainjobs.core.podsets import COMPLETE, PodSetSpec, Workload
from trainjobs.kube.manifests import metadata
from . import Assembly, PodSet, register

# The Job fields of a failure policy, which the API server refuses to change; pulumi-kubernetes does not
# replace a Job for them by itself.
IMMUTABLE_PATHS = ("spec.podFailurePolicy", "spec.backoffLimitPerIndex", "spec.maxFailedIndexes")


def job_spec(pod_set: PodSetSpec) -> dict[str, Any]:
    """The batch/v1 JobSpec that runs a pod set: its rules, every pod at once, its template."""
    return {**pod_set.rules, "completions": pod_set.count, "parallelism": pod_set.count, "template": pod_set.template}


def job(workload: Workload, pod_set: PodSetSpec) -> dict[str, Any]:
    """The pod set's Job as it is registered on its own, with what applies to every registered object."""
    spec = job_spec(pod_set)
    if workload.suspend is not None:
        spec["suspend"] = workload.suspend
    if workload.managed_by is not None:
        spec["managedBy"] = workload.managed_by
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(job_name(workload.name, pod_set.role), workload.args.namespace,
                                 {**pod_set.labels, **workload.labels}, pod_set.annotations),
            "spec": spec}


class JobsBackend:
    summary = "an Indexed Job per role, no controller needed"
    kinds = ("Job",)
    # pulumi-kubernetes itself replaces a Job whose template or counts change, but not for the failure policy.
    replace_on_changes = IMMUTABLE_PATHS
    # Its name is taken until the old Job is gone: pulumi-kubernetes deletes first only when it finds the
    # replacement itself, not when these paths force it.
    delete_before_replace = True
    start_order = frozenset({COMPLETE})   # Pulumi awaits a Job's completion, not its pods' readiness
    creates_service = False   # the pods' DNS names come from the job's own Service
    # What pulumi-kubernetes replaces a Job for by itself, and the failure-policy fields above: the change list's.
    replaced_on = ("spec.template", "spec.completions", "spec.parallelism", "spec.completionMode", "spec.selector",
                   *IMMUTABLE_PATHS)

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        # A profile sets max_restarts once for every job; only the jobset backend acts on it (docs/failures.md).
        policy = workload.given.failure_policy
        if policy and policy.max_restarts:
            issues.add("failure_policy.max_restarts",
                       'whole-group restarts need backend "jobset" (its controller recreates every Job of the job); '
                       'set backend "jobset", or remove max_restarts and restart with `pulumi up --replace`')

    def materialize(self, workload: Workload) -> Assembly:
        names = {p.role: job_name(workload.name, p.role) for p in workload.pod_sets}
        ordering = tuple((names[p.role], names[after.role]) for p in workload.pod_sets
                         for after in p.starts_after if after.status in self.start_order)
        return Assembly(tuple(job(workload, p) for p in workload.pod_sets), ordering)

    def holders(self, workload: Workload, pod_sets: Iterable[PodSetSpec]) -> list[str]:
        return [job_name(workload.name, p.role) for p in pod_sets]

    def place(self, issues: IssueCollector, workload: Workload, pod_sets: list[PodSetSpec]) -> bool:
        return False   # Kubernetes' Jobs have no placement of their own: pod affinity does it

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        return None   # a Job is what runs

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[PodSet] | None:
        if manifest.get("apiVersion") != "batch/v1" or manifest.get("kind") != "Job":
            return None
        return [PodSet.of_job(manifest, manifest)]


BACKEND = JobsBackend()
register("jobs", BACKEND)
