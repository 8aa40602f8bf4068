"""The shared-cluster example stacks (Pulumi.kueue.yaml, Pulumi.volcano.yaml): the same torch, MPI and
TorchTune jobs under a platform profile, once admitted by Kueue and once gang-scheduled by Volcano. Every
object passes the Kubernetes schema (strict), the API server's checks, and the JobSet API."""

from pathlib import Path

import kubernetes_validate
import pytest

from trainjobs.backends import controller_jobs
from trainjobs.testing import run_program
from trainjobs.testing.checks import manifest_problems

from jobset_api import check_jobset

PROGRAM = Path(__file__).resolve().parent.parent / "stacks" / "__main__.py"
CORE_API_VERSIONS = ("v1", "batch/v1")


def rendered(stack):
    result = run_program(PROGRAM, stack=stack)
    return result, [r.manifest for r in result.kubernetes()]


@pytest.mark.parametrize("stack", ["kueue", "volcano"])
def test_every_object_of_the_example_stack_is_valid(stack):
    _, objects = rendered(stack)
    kinds = {obj["kind"] for obj in objects}
    assert {"Service", "Job"} <= kinds
    for obj in objects:
        if obj["apiVersion"] in CORE_API_VERSIONS:
            kubernetes_validate.validate(obj, "1.31.0", strict=True)
        elif obj["kind"] == "JobSet":
            check_jobset(obj)
            for job in controller_jobs([obj]):   # the Jobs its controller creates
                kubernetes_validate.validate(job, "1.31.0", strict=True)
        else:
            assert obj["apiVersion"] == "scheduling.volcano.sh/v1beta1" and obj["kind"] == "PodGroup", obj["kind"]
    assert manifest_problems(controller_jobs(objects)) == []


def test_the_volcano_stack_gang_schedules_each_job():
    _, objects = rendered("volcano")
    groups = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodGroup"}
    assert set(groups) == {"pretrain", "allreduce", "finetune"}
    assert groups["pretrain"]["spec"] == {"minMember": 2, "queue": "team-llm", "priorityClassName": "research",
                                          "minResources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "16"},
                                          "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    # 3 MPI hosts with 4 GPUs each, and the launcher, which requests nothing.
    assert groups["allreduce"]["spec"]["minMember"] == 4
    assert groups["allreduce"]["spec"]["minResources"] == {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "12"}
    # TorchTune: one training pod; its initializers run first, outside the gang.
    assert groups["finetune"]["spec"]["minMember"] == 1
    for group in groups.values():
        assert group["metadata"]["namespace"] == "ml" and group["metadata"]["labels"]["team"] == "llm"
    for job in (o for o in objects if o["kind"] == "Job"):
        pod = job["spec"]["template"]
        assert pod["spec"]["schedulerName"] == "volcano"
        annotations = pod["metadata"]["annotations"]
        if "initializer" in job["metadata"]["name"]:
            assert annotations["scheduling.volcano.sh/queue-name"] == "team-llm"
        else:
            assert annotations["scheduling.k8s.io/group-name"] == job["metadata"]["labels"]["trainjobs.io/job-name"]


def test_the_kueue_stack_queues_each_job_as_one_workload():
    result, objects = rendered("kueue")
    assert not any(o["kind"] == "PodGroup" for o in objects)
    queued = [o for o in objects if o["kind"] in ("Job", "JobSet")]
    assert sorted(o["metadata"]["name"] for o in queued) == [
        "allreduce", "finetune-dataset-initializer-0", "finetune-model-initializer-0", "finetune-node-0",
        "pretrain-node-0"]
    for obj in queued:
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-llm"
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "research"
        assert "suspend" not in obj["spec"]
        assert result.get(kind=obj["kind"], name=obj["metadata"]["name"]).ignore_changes == ("spec.suspend",)
    allreduce = next(o for o in queued if o["kind"] == "JobSet")
    assert [rj["name"] for rj in allreduce["spec"]["replicatedJobs"]] == ["node", "launcher"]


def test_the_jobset_check_refuses_unknown_fields_and_wrong_types():
    _, objects = rendered("kueue")
    jobset = next(o for o in objects if o["kind"] == "JobSet")
    check_jobset(jobset)
    with pytest.raises(AssertionError, match="fields the API does not know"):
        check_jobset({**jobset, "spec": {**jobset["spec"], "maxRestarts": 3}})   # belongs in failurePolicy
    with pytest.raises(ValueError):
        check_jobset({**jobset, "spec": {**jobset["spec"], "suspend": "yes"}})


def test_the_example_stacks_place_their_training_pods():
    """Kueue: the torch job's pods in one rack, the MPI job's launcher and workers grouped in one block;
    Volcano: each PodGroup's networkTopology."""
    from trainjobs.backends import pod_sets
    from trainjobs.scheduling import placement_of

    _, kueue = rendered("kueue")
    placed = {s.name: placement_of(s, kueue) for s in pod_sets(kueue)}
    assert placed["pretrain-node-0"] == "required example.com/rack (Kueue)"
    assert placed["allreduce-node-0"] == placed["allreduce-launcher-0"] == \
        "required example.com/block, group allreduce (Kueue)"
    assert placed["finetune-node-0"] is None
    volcano = {o["metadata"]["name"]: o["spec"].get("networkTopology") for o in rendered("volcano")[1]
               if o["kind"] == "PodGroup"}
    assert volcano == {"pretrain": {"mode": "hard", "highestTierAllowed": 1},
                       "allreduce": {"mode": "soft", "highestTierAllowed": 1}, "finetune": None}
