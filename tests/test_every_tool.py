"""Every tool over every family on both backends: the render tree and its requests, the change list,
explain's selection and per-pod views, the summary, the policy rules, runs and run-local's planning.

Each tool reads a job's pods through the backends' pod sets, so what a tool says of a job is the same
whichever backend registered it; only how an object is named differs (`Job j-node-0`, `JobSet j`).
"""

import pytest

import trainjobs
from trainjobs.backends import pod_sets
from trainjobs.localrun import PlanError, select
from trainjobs.policy import violations
from trainjobs.testing import run
from trainjobs.tools.cli.render import changes, kubernetes_objects, pod_sets_named, ranks_text, tree
from trainjobs.tools.cli.runs import run_changes
from trainjobs.tools.cli.summary import summary

BACKENDS = ("jobs", "jobset")
RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
TENSORBOARD = {"tb": {"image": "tensorflow/tensorflow:2.16.1", "command": ["tensorboard", "--logdir", "/logs"]}}
MPI_LAUNCHER = ("container node has no requests.cpu, requests.memory, limits.memory; set them "
                "(runtime.launcher.resources, or resources_per_node if the launcher is also an MPI host "
                "(run_launcher_as_node)) so the pods land on nodes that fit them")


def _no_gpu_here(*names: str) -> str:
    node = "j-node-0: needs nvidia.com/gpu: 2, which this machine does not offer"
    return "nothing to run here: " + "; ".join(
        node if name == "j-node-0" else f"{name}: runs together with Job j-node-0, which needs nvidia.com/gpu: 2, "
                                        "which this machine does not offer" for name in names)


# family -> (its arguments, its pod sets: Job -> pods, the Jobs resources_per_node sizes, what run-local
# plans: Job -> pods, or the reason it plans nothing, the violations of each Job's pods).
FAMILIES = {
    "TorchTrainJob": (
        {"image": "pytorch/pytorch:2.13.0", "num_nodes": 2, "command": ["torchrun", "train.py"],
         "dataset_initializer": {"storage_uri": "hf://datasets/ylecun/mnist"}},
        {"j-dataset-initializer-0": 1, "j-node-0": 2, "j-tb-0": 1}, {"j-node-0"},
        'Job j-dataset-initializer-0 container "dataset-initializer" has no command: without its image, the '
        "image's entrypoint cannot run here; give the container a command", {}),
    "TorchTuneTrainJob": (
        {"runtime": "torchtune-llama3.2-1b"},
        {"j-dataset-initializer-0": 1, "j-model-initializer-0": 1, "j-node-0": 1, "j-tb-0": 1}, {"j-node-0"},
        _no_gpu_here, {}),
    "JaxTrainJob": (
        {"image": "python:3.11", "num_nodes": 2, "command": ["python", "train.py"]},
        {"j-node-0": 2, "j-tb-0": 1}, {"j-node-0"}, {"j-node-0": 2, "j-tb-0": 1}, {}),
    "XGBoostTrainJob": (
        {"image": "python:3.11", "num_nodes": 2, "command": ["python", "train.py"]},
        {"j-node-0": 2, "j-tb-0": 1}, {"j-node-0"}, {"j-node-0": 2, "j-tb-0": 1}, {}),
    "MpiTrainJob": (
        {"image": "mpioperator/mpi-pi:openmpi", "num_nodes": 2, "command": ["mpirun", "/home/mpiuser/pi"]},
        {"j-launcher-0": 1, "j-node-0": 2, "j-tb-0": 1}, {"j-node-0"},
        {"j-launcher-0": 1, "j-node-0": 2, "j-tb-0": 1}, {"j-launcher-0": [MPI_LAUNCHER]}),
    # The launcher is also an MPI host here (run_launcher_as_node): resources_per_node sizes it too.
    "DeepSpeedTrainJob": (
        {"num_nodes": 2, "command": ["mpirun", "python", "train.py"]},
        {"j-launcher-0": 1, "j-node-0": 1, "j-tb-0": 1}, {"j-launcher-0", "j-node-0"},
        {"j-launcher-0": 1, "j-node-0": 1, "j-tb-0": 1}, {}),
    "MlxTrainJob": (
        {"num_nodes": 2, "command": ["mpirun", "python", "train.py"]},
        {"j-launcher-0": 1, "j-node-0": 1, "j-tb-0": 1}, {"j-launcher-0", "j-node-0"},
        {"j-launcher-0": 1, "j-node-0": 1, "j-tb-0": 1}, {}),
}
EVERY = [(family, backend) for family in FAMILIES for backend in BACKENDS]


def rendered(family: str, backend: str, **changed):
    args = {**FAMILIES[family][0], "backend": backend, "namespace": "ml", "resources_per_node": RESOURCES,
            "extra_roles": TENSORBOARD, **changed}
    return run(lambda: getattr(trainjobs, family)("j", args))


def objects_of(family: str, backend: str, **changed) -> list[dict]:
    return kubernetes_objects(rendered(family, backend, **changed), redact=False)


def in_own_object(objects: list[dict]) -> dict[str, bool]:
    """Pod set -> whether its Job is registered itself (every Job under `jobs`; under `jobset`, the roles
    outside the JobSet, such as extra roles)."""
    return {s.name: s.owner is s.job for s in pod_sets(objects)}


@pytest.mark.parametrize("family, backend", EVERY)
def test_the_tree_shows_every_pod_set_and_the_stacks_pods(family, backend):
    result = rendered(family, backend)
    expected = FAMILIES[family][1]
    objects = kubernetes_objects(result)
    assert {s.name: s.count for s in pod_sets(objects)} == expected
    text = tree(result)
    own = in_own_object(objects)
    for name, count in expected.items():
        pods = f"{count} pod" if count == 1 else f"{count} pods"
        shown = f"Job {name}  ({pods}, requests " if own[name] else f"{name}: {pods}"
        assert text.count(shown) == 1, (shown, text)
    assert text.splitlines()[-1].endswith(f" in {sum(expected.values())} pods")
    assert text.count("JobSet j  (") == (backend == "jobset")
    assert all(own.values()) == (backend == "jobs")


@pytest.mark.parametrize("family, backend", EVERY)
def test_the_change_list_flags_each_replacement_that_restarts_training(family, backend):
    resized = {**RESOURCES, "requests": {"cpu": "3", "memory": "4Gi"}}
    lines = changes(objects_of(family, backend), objects_of(family, backend, resources_per_node=resized))
    restarting = sorted(line.split(":")[0] for line in lines if line.startswith("! "))
    expected = (sorted(f"! Job {name}" for name in FAMILIES[family][2]) if backend == "jobs" else ["! JobSet j"])
    assert restarting == expected
    assert all("replaced, TRAINING RESTARTS (" in line for line in lines if line.startswith("! "))


@pytest.mark.parametrize("family, backend", EVERY)
def test_explain_selects_a_job_or_one_roles_pods(family, backend):
    objects = objects_of(family, backend)
    expected = FAMILIES[family][1]
    assert sorted(pod_sets_named(objects, "j")) == sorted(expected)
    assert pod_sets_named(objects, "j-node-0") == ["j-node-0"]
    assert pod_sets_named(objects, "k") == []
    pods = [line for line in ranks_text(objects, jobs=["j-node-0"]).splitlines() if line.startswith("pod ")]
    assert pods == [f"pod j-node-0-{i}  (Job j-node-0, index {i})" for i in range(expected["j-node-0"])]
    every = [line for line in ranks_text(objects).splitlines() if line.startswith("pod ")]
    assert len(every) == sum(expected.values())


@pytest.mark.parametrize("family, backend", EVERY)
def test_the_summary_counts_every_pod(family, backend):
    result = rendered(family, backend)
    expected = FAMILIES[family][1]
    text = summary(result)
    total = sum(expected.values())
    assert f"\n\n1 job: {total} pods · " in text
    own = in_own_object(kubernetes_objects(result))
    for name, count in expected.items():
        assert (f'["Job {name}<br/>{count} pod{"s" if count > 1 else ""}"]' in text) == own[name]
    in_jobset = sum(count for name, count in expected.items() if not own[name])
    assert (f'["JobSet j<br/>{in_jobset} pods"]' in text) == (backend == "jobset")


@pytest.mark.parametrize("family, backend", EVERY)
def test_the_policy_rules_name_each_roles_fix(family, backend):
    objects = objects_of(family, backend)
    own = in_own_object(objects)
    found = [(v.rule, v.object, v.message) for v in violations(objects)]
    expected = [("trainjobs-requests-and-limits", f"Job {job}" if own[job] else "JobSet j",
                 f"{f'Job {job}' if own[job] else f'JobSet j job {job}'}: {message}")
                for job, messages in FAMILIES[family][4].items() for message in messages]
    assert found == expected


@pytest.mark.parametrize("family, backend", EVERY)
def test_a_new_run_replaces_the_old_one(family, backend):
    before, after = objects_of(family, backend, run="r1"), objects_of(family, backend, run="r2")
    assert run_changes(before, after) == [
        "! job j: run r2 replaces run r1, deleted with its objects (a run still training stops)"]
    assert run_changes(before, before + after) == ["+ job j: run r2 starts beside run r1, left as it is"]


@pytest.mark.parametrize("family, backend", EVERY)
def test_run_local_plans_every_pod_set_it_can_run(family, backend):
    objects = objects_of(family, backend)
    planned = FAMILIES[family][3]
    if callable(planned):   # the reason depends on the order of the pod sets, the objects' own
        planned = planned(*(s.name for s in pod_sets(objects)))
    if isinstance(planned, str):
        with pytest.raises(PlanError) as refused:
            select(objects)
        assert str(refused.value) == planned
        return
    selection = select(objects)
    assert {job.name: job.completions for job in selection.jobs} == planned
    assert selection.skipped == []
    own = in_own_object(objects)
    assert {job.name: job.owner for job in selection.jobs} == {name: None if own[name] else "j" for name in planned}
    for job in selection.jobs:
        assert [slot.hostname for slot in job.slots] == [f"{job.name}-{i}" for i in range(job.completions)]
