"""A backend defined outside the package, in this one file: every pod of every pod set as a bare Pod.

It is what a contributor writes to add a backend (docs/contributing.md, "Adding a backend"): it
materializes the core's pod sets as the objects it registers, says what replaces them, and reads them
back into the pod sets every tool reads. Nothing else in the package names it. Each Pod is named and
addressed as an Indexed Job's pod would be (`<N>-<role>-0-<index>` in the Service `N`'s subdomain) and
carries its completion index, so the env the families derive (PET_NODE_RANK, JAX_PROCESS_ID, ...) and
the MPI hostfile hold unchanged. Bare Pods have no controller: no Job-level rules (backoff limits, a
failure policy's Job fields), no start order, and nothing restarts them.
"""

from typing import Any, Iterable, Mapping

from trainjobs import backends
from trainjobs.core.errors import IssueCollector
from trainjobs.core.naming import pod_hostname
from trainjobs.core.podsets import PodSetSpec, Workload
from trainjobs.kube.manifests import metadata
from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION

NAME = "pods"


class PodsBackend:
    """Each pod of each pod set as a Pod of its own, named and addressed as an Indexed Job's pod."""

    summary = "a bare Pod per pod"
    kinds = ("Pod",)
    # A Pod's spec cannot change once created (but a few fields): any change replaces the Pod.
    replace_on_changes = ("spec",)
    replaced_on = replace_on_changes
    delete_before_replace = True   # the Pod's name is taken until it is gone
    start_order = frozenset()      # every Pod is created at once (training pods wait for initializers themselves)
    creates_service = False        # no controller: the job registers its headless Service itself

    def check(self, issues: IssueCollector, workload: Workload) -> None:
        policy = workload.given.failure_policy
        if policy and policy.max_restarts:
            issues.add("failure_policy.max_restarts", "bare Pods are never restarted: remove max_restarts, or use "
                                                      'backend "jobset"')

    def place(self, issues: IssueCollector, workload: Workload, pod_sets: list[PodSetSpec]) -> bool:
        return False   # a placement is pod affinity, as for Indexed Jobs

    def materialize(self, workload: Workload) -> backends.Assembly:
        return backends.Assembly(tuple(self._pod(workload, p, i) for p in workload.pod_sets for i in range(p.count)))

    def holders(self, workload: Workload, pod_sets: Iterable[PodSetSpec]) -> list[str]:
        return [pod_hostname(workload.name, p.role, i) for p in pod_sets for i in range(p.count)]

    def jobs_of(self, manifest: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        return None   # no Job runs these pods

    def pod_sets(self, manifest: Mapping[str, Any]) -> list[backends.PodSet] | None:
        if manifest.get("apiVersion") != "v1" or manifest.get("kind") != "Pod":
            return None
        template = {"metadata": {k: v for k, v in manifest["metadata"].items() if k in ("labels", "annotations")},
                    "spec": manifest["spec"]}
        return [backends.PodSet(manifest, manifest["metadata"]["name"], template)]

    @staticmethod
    def _pod(workload: Workload, pod_set: PodSetSpec, index: int) -> dict[str, Any]:
        name = pod_hostname(workload.name, pod_set.role, index)
        meta = pod_set.template["metadata"]
        annotations = {**(meta.get("annotations") or {}), COMPLETION_INDEX_ANNOTATION: str(index)}
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": metadata(name, workload.args.namespace, {**meta["labels"], **workload.labels}, annotations),
                "spec": {**pod_set.template["spec"], "hostname": name}}
