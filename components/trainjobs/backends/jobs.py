"""The `jobs` backend: the Indexed Jobs themselves, with no controller beyond Kubernetes' own.

Pulumi orders them: training Jobs are created once the initializer Jobs complete. One failed rank
fails its Job (within its backoff limit), and nothing restarts the other roles.
"""

from typing import Any, Mapping

from trainjobs.core.errors import IssueCollector
from trainjobs.core.failure import IMMUTABLE_PATHS
from . import Assembly, PodSet, Workload


class JobsBackend:
    kinds = ("Job",)
    replace_on_changes = ()   # pulumi-kubernetes itself replaces a Job whose template changes
    # What pulumi-kubernetes replaces a Job for by itself, and the failure-policy fields the API server
    # refuses to change (the component declares them).
    replaced_on = ("spec.template", "spec.completions", "spec.parallelism", "spec.completionMode", "spec.selector",
                   *IMMUTABLE_PATHS)

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        policy = workload.args.failure_policy
        if policy and policy.max_restarts:
            issues.add("failure_policy.max_restarts",
                       'whole-group restarts need backend "jobset" (its controller recreates every Job of the job); '
                       'set backend "jobset", or remove max_restarts and restart with `pulumi up --replace`')

    def assemble(self, workload: Workload) -> Assembly:
        ordering = tuple((job["metadata"]["name"], prerequisite["metadata"]["name"])
                         for job in workload.jobs for prerequisite in workload.prerequisites)
        return Assembly((*workload.prerequisites, *workload.jobs), ordering)

    def jobs_of(self, manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
        return None   # a Job is what runs

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[PodSet] | None:
        if manifest.get("apiVersion") != "batch/v1" or manifest.get("kind") != "Job":
            return None
        return [PodSet(manifest, (manifest.get("metadata") or {}).get("name", "?"), manifest)]


BACKEND = JobsBackend()
