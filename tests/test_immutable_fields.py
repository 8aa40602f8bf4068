"""A field the cluster will not change in place is replaced under Pulumi: every field a CRD declares
immutable (CEL `self == oldSelf`, tests/crd_schemas.py) of every custom resource trainjobs registers is
covered by that resource's `replaceOnChanges`, with `deleteBeforeReplace` (its name is taken until the
old object is gone). pulumi-kubernetes knows no custom resource's immutable fields, so without them a
changed field would be planned as an update that the API server refuses."""

import pytest

import trainjobs
from trainjobs import TrainingNamespace
from trainjobs.testing import run

from crd_schemas import crd_directory, immutable_paths, is_custom_resource, schemas


@pytest.fixture(autouse=True)
def _crds():
    crd_directory()


def covered(path: str, fields: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + ".") or path.startswith(f + "[") for f in fields)


def test_the_crds_immutable_fields_are_found():
    local_queue = schemas()["kueue.x-k8s.io/v1beta1", "LocalQueue"]
    assert immutable_paths(local_queue) == ["spec.clusterQueue"]
    assert immutable_paths(schemas()["jobset.x-k8s.io/v1alpha2", "JobSet"]) == [
        "spec.failurePolicy", "spec.network", "spec.replicatedJobs[].dependsOn", "spec.startupPolicy",
        "spec.successPolicy", "spec.volumeClaimPolicies"]
    assert immutable_paths(schemas()["scheduling.volcano.sh/v1beta1", "PodGroup"]) == []


def test_a_local_queue_moved_to_another_cluster_queue_is_replaced():
    result = run(lambda: TrainingNamespace("llm", {"kueue_cluster_queue": "gpus", "local_queue_name": "team-llm"}))
    queue = result.get("LocalQueue", "team-llm")
    assert queue.manifest["spec"] == {"clusterQueue": "gpus"}
    assert (queue.replace_on_changes, queue.delete_before_replace) == (("spec.clusterQueue",), True)
    # Nothing else of the namespace is replaced that way: its claims and Namespace are kept.
    others = [r for r in result.kubernetes() if r.kind != "LocalQueue"]
    assert others and all((r.replace_on_changes, r.delete_before_replace) == ((), False) for r in others)


def program():
    team = TrainingNamespace("llm", {"kueue_cluster_queue": "gpus"})
    for scheduler in ("kueue", "volcano", "coscheduling"):
        # The namespace's profile names its LocalQueue; coscheduling has no queues.
        profile = team.profile(gang_scheduler=scheduler, **({"queue": None} if scheduler == "coscheduling" else {}))
        trainjobs.MpiTrainJob(f"mpi-{scheduler}", {
            "profile": profile, "backend": "jobset", "image": "mpi:1", "command": ["mpirun", "hostname"],
            "num_nodes": 2, "failure_policy": {"fatal_exit_codes": [3]}})
        trainjobs.TorchTrainJob(f"torch-{scheduler}", {"profile": profile, "image": "t:1", "num_nodes": 2})


def test_every_immutable_field_of_every_custom_resource_replaces_it():
    custom = [r for r in run(program).kubernetes() if is_custom_resource(r.manifest)]
    assert {r.kind for r in custom} == {"LocalQueue", "JobSet", "PodGroup"}
    for resource in custom:
        obj = resource.manifest
        paths = immutable_paths(schemas()[obj["apiVersion"], obj["kind"]])
        uncovered = [p for p in paths if not covered(p, resource.replace_on_changes)]
        assert uncovered == [], f"{resource.kind} {resource.name}: {uncovered} would be updated in place"
        assert resource.delete_before_replace == bool(paths), resource.name
