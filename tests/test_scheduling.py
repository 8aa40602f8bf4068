"""Gang scheduling, scheduler_name and suspend: exact objects, labels and annotations per scheduler, the
gang's size for every family, the errors for combinations no scheduler can honour, and Kueue's options
reaching the registered resources."""

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainjobs import (DeepSpeedTrainJob, JaxTrainJob, MlxTrainJob, MpiTrainJob, TorchTrainJob, TorchTuneTrainJob,
                       TrainJobError, XGBoostTrainJob)
from trainjobs.backends import controller_jobs
from trainjobs.core.args import parse_args
from trainjobs.pipeline.pipeline import derive
from trainjobs.testing import run
from trainjobs.testing.checks import manifest_problems

from jobset_api import check_jobset

MPI_COMMAND = {"command": ["mpirun", "hostname"]}


def plan(component, args, name="train"):
    return derive(component.family, name, parse_args(component.__name__, name, component.family.args_type, args))


class Objects(dict):
    """The job's derived objects by (kind, name), remembering what they were derived from."""

    source: tuple


def objects(component, args, name="train"):
    found = Objects(((m["kind"], m["metadata"]["name"]), m) for m in plan(component, args, name).manifests)
    found.source = (component, args, name)
    return found


def problems(component, args):
    with pytest.raises(TrainJobError) as caught:
        plan(component, args)
    return {issue.field: issue.message for issue in caught.value.issues}


def pod_meta(job):
    return job["spec"]["template"]["metadata"]


def core_valid(component, args, name="train"):
    """The job as registered passes the API server's checks, and its core objects the Kubernetes schema."""
    registered = [r.manifest for r in run(lambda: component(name, args)).kubernetes()]
    assert manifest_problems(controller_jobs(registered)) == []
    for obj in controller_jobs(registered):
        if obj["kind"] != "PodGroup":
            kubernetes_validate.validate(obj, "1.31.0", strict=True)
    return registered


# --- Volcano ----------------------------------------------------------------------------------------

def test_volcano_pod_group_holds_the_training_pods_with_queue_priority_and_requests():
    found = objects(TorchTrainJob, {
        "image": "train:1", "num_nodes": 4, "namespace": "ml", "labels": {"team": "llm"},
        "gang_scheduler": "volcano", "queue": "research", "priority_class": "high",
        "resources_per_node": {"requests": {"cpu": "1500m", "memory": "3Gi"}, "limits": {"nvidia.com/gpu": "2"}}})
    group = found[("PodGroup", "train")]
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["metadata"]["namespace"] == "ml"
    assert group["metadata"]["labels"]["team"] == "llm"
    assert group["metadata"]["labels"]["trainjobs.io/job-name"] == "train"
    assert group["spec"] == {"minMember": 4, "queue": "research", "priorityClassName": "high",
                             "minResources": {"cpu": "6", "memory": "12Gi", "nvidia.com/gpu": "8"}}
    job = found[("Job", "train-node-0")]
    assert job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    assert pod_meta(job)["annotations"]["scheduling.k8s.io/group-name"] == "train"
    assert "scheduling.volcano.sh/queue-name" not in pod_meta(job)["annotations"]   # the PodGroup has the queue
    core_valid(*found.source)


def test_volcano_queues_initializers_and_extra_roles_outside_the_gang():
    found = objects(TorchTrainJob, {
        "image": "train:1", "num_nodes": 2, "gang_scheduler": "volcano", "queue": "research",
        "dataset_initializer": {"storage_uri": "hf://org/data"},
        "extra_roles": {"tensorboard": {"image": "tb:1"}}})
    assert found[("PodGroup", "train")]["spec"]["minMember"] == 2
    for name in ("train-dataset-initializer-0", "train-tensorboard-0"):
        meta = pod_meta(found[("Job", name)])
        assert found[("Job", name)]["spec"]["template"]["spec"]["schedulerName"] == "volcano"
        assert meta["annotations"]["scheduling.volcano.sh/queue-name"] == "research"
        assert "scheduling.k8s.io/group-name" not in meta["annotations"]
    # Registered after the Service, before the Jobs whose pods join it.
    kinds = [kind for kind, _ in found]
    assert kinds.index("PodGroup") < kinds.index("Job")
    core_valid(*found.source)


def test_volcano_counts_the_mpi_launcher_and_its_requests():
    found = objects(MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 3, "gang_scheduler": "volcano",
                                  "resources_per_node": {"requests": {"cpu": "2"}}})
    group = found[("PodGroup", "train")]
    assert group["spec"]["minMember"] == 4   # 3 workers + the launcher
    launcher, nodes = found[("Job", "train-launcher-0")], found[("Job", "train-node-0")]
    for job in (launcher, nodes):
        assert pod_meta(job)["annotations"]["scheduling.k8s.io/group-name"] == "train"
    per_pod = {job["metadata"]["name"]: sum(
        float(c.get("resources", {}).get("requests", {}).get("cpu", 0)) for c in job["spec"]["template"]["spec"]["containers"])
        for job in (launcher, nodes)}
    assert group["spec"]["minResources"]["cpu"] == str(int(per_pod["train-launcher-0"] + 3 * per_pod["train-node-0"]))
    core_valid(*found.source)


def test_scheduler_name_overrides_volcanos_name():
    found = objects(TorchTrainJob, {"image": "t:1", "gang_scheduler": "volcano", "scheduler_name": "volcano-gpu"})
    assert found[("Job", "train-node-0")]["spec"]["template"]["spec"]["schedulerName"] == "volcano-gpu"


# --- the gang's size, for every family ----------------------------------------------------------------

FAMILIES = {
    "torch": (TorchTrainJob, {"image": "t:1"}),
    "jax": (JaxTrainJob, {}),
    "xgboost": (XGBoostTrainJob, {}),
    "torchtune": (TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b"}),
    "mpi": (MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1"}),
    "deepspeed": (DeepSpeedTrainJob, MPI_COMMAND),
    "mlx": (MlxTrainJob, MPI_COMMAND),
}


def training_pods(family, nodes, launcher_node):
    """Every training pod: MPI's num_nodes counts hosts, and a launcher that is not a host is one more pod."""
    if family == "torchtune":
        return 1   # the built-in 1B runtime is single-node
    mpi = family in ("mpi", "deepspeed", "mlx")
    return nodes + 1 if mpi and not launcher_node else nodes


def pods_created_first(family, nodes, launcher_node, backend):
    """The training pods created at once: under a JobSet the MPI launcher is created once its nodes are ready."""
    everyone = training_pods(family, nodes, launcher_node)
    if backend == "jobset" and family in ("mpi", "deepspeed", "mlx") and everyone > 1:
        return everyone - 1
    return everyone


def pod_sets_of(manifests):
    """(pod template metadata, pods) of every Job and every replicated job of a JobSet."""
    for m in manifests:
        if m["kind"] == "Job":
            yield pod_meta(m), m["spec"]["parallelism"]
        elif m["kind"] == "JobSet":
            for rj in m["spec"]["replicatedJobs"]:
                yield rj["template"]["spec"]["template"]["metadata"], rj["replicas"] * rj["template"]["spec"]["parallelism"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(FAMILIES)), nodes=st.integers(1, 6), launcher_node=st.booleans(),
       initializers=st.booleans(), extra_role=st.booleans(), scheduler=st.sampled_from(["volcano", "coscheduling"]),
       backend=st.sampled_from(["jobs", "jobset"]))
def test_min_member_is_every_pod_that_must_run_together(family, nodes, launcher_node, initializers, extra_role,
                                                        scheduler, backend):
    component, base = FAMILIES[family]
    args = {**base, "gang_scheduler": scheduler, "backend": backend}
    if family != "torchtune":
        args["num_nodes"] = nodes
    if family in ("mpi", "deepspeed", "mlx"):
        args["run_launcher_as_node"] = launcher_node
    if initializers:
        args["model_initializer"] = {"storage_uri": "hf://org/model"}
    if extra_role:
        args["extra_roles"] = {"evaluator": {"image": "eval:1", "num_pods": 2}}
    found = plan(component, args).manifests
    groups = [m for m in found if m["kind"] == "PodGroup"]
    assert len(groups) == 1
    assert groups[0]["spec"]["minMember"] == pods_created_first(family, nodes, launcher_node, backend)
    # Every training pod joins the group, and no other pod does.
    join = "scheduling.k8s.io/group-name" if scheduler == "volcano" else "scheduling.x-k8s.io/pod-group"
    joined = sum(pods for meta, pods in pod_sets_of(found)
                 if meta.get("annotations", {}).get(join, meta["labels"].get(join)) == "train")
    assert joined == training_pods(family, nodes, launcher_node)
    assert manifest_problems(found) == []


# --- coscheduling -----------------------------------------------------------------------------------

def test_coscheduling_pod_group_label_timeout_and_scheduler_name():
    found = objects(TorchTrainJob, {"image": "t:1", "num_nodes": 3, "gang_scheduler": "coscheduling",
                                    "schedule_timeout_seconds": 120, "scheduler_name": "scheduler-plugins-scheduler",
                                    "resources_per_node": {"limits": {"nvidia.com/gpu": "1"}}})
    group = found[("PodGroup", "train")]
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 3, "minResources": {"nvidia.com/gpu": "3"}, "scheduleTimeoutSeconds": 120}
    job = found[("Job", "train-node-0")]
    assert pod_meta(job)["labels"]["scheduling.x-k8s.io/pod-group"] == "train"
    assert job["spec"]["template"]["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert "pod-group" not in str(job["metadata"].get("labels"))   # the pods join, not the Job
    core_valid(*found.source)


def test_coscheduling_leaves_the_scheduler_to_the_cluster_unless_named():
    found = objects(TorchTrainJob, {"image": "t:1", "gang_scheduler": "coscheduling"})
    assert "schedulerName" not in found[("Job", "train-node-0")]["spec"]["template"]["spec"]


# --- Kueue --------------------------------------------------------------------------------------------

def test_kueue_labels_the_jobs_not_their_pods():
    found = objects(TorchTrainJob, {"image": "t:1", "num_nodes": 4, "gang_scheduler": "kueue", "queue": "team-a",
                                    "priority_class": "prod", "dataset_initializer": {"storage_uri": "hf://o/d"}})
    for name in ("train-node-0", "train-dataset-initializer-0"):
        job = found[("Job", name)]
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "prod"
        assert not any(k.startswith("kueue.x-k8s.io/") for k in pod_meta(job)["labels"])
        assert "suspend" not in job["spec"]   # Kueue's webhook suspends it
    assert not any(kind == "PodGroup" for kind, _ in found)
    core_valid(*found.source)


def test_kueue_plan_leaves_suspend_to_kueue():
    kueue_plan = plan(TorchTrainJob, {"image": "t:1", "gang_scheduler": "kueue", "queue": "q",
                                      "model_initializer": {"storage_uri": "hf://o/m"}})
    assert dict(kueue_plan.ignore_changes) == {"train-node-0": ("spec.suspend",),
                                               "train-model-initializer-0": ("spec.suspend",)}
    assert plan(TorchTrainJob, {"image": "t:1", "gang_scheduler": "volcano"}).ignore_changes == ()


def test_kueue_ignore_changes_reach_the_registered_jobs():
    result = run(lambda: TorchTrainJob("train", {"image": "t:1", "num_nodes": 2, "gang_scheduler": "kueue",
                                                 "queue": "q"}))
    assert result.get(kind="Job", name="train-node-0").ignore_changes == ("spec.suspend",)
    assert result.get(kind="Service", name="train").ignore_changes == ()


def test_kueue_refuses_a_gang_spread_over_separate_jobs():
    found = problems(MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 2, "gang_scheduler": "kueue",
                                   "queue": "q"})
    assert "train-launcher-0, train-node-0" in found["gang_scheduler"]
    assert 'backend "jobset"' in found["gang_scheduler"]


def test_kueue_admits_an_mpi_job_whose_launcher_is_its_only_host():
    found = objects(MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 1, "run_launcher_as_node": True,
                                  "gang_scheduler": "kueue", "queue": "q"})
    assert found[("Job", "train-launcher-0")]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"


def test_podgroups_register_as_custom_resources():
    result = run(lambda: TorchTrainJob("train", {"image": "t:1", "num_nodes": 2, "gang_scheduler": "volcano"}))
    group = result.get(kind="PodGroup")
    assert group.type == "kubernetes:scheduling.volcano.sh/v1beta1:PodGroup"
    assert group.manifest["spec"]["minMember"] == 2
    assert group.parent_urn == result.get(type="trainjobs:index:TorchTrainJob").urn
    # The Job is created after its PodGroup, so Volcano never sees its pods without their group.
    assert group.urn in result.get(kind="Job", name="train-node-0").dependencies


# --- scheduler_name and suspend without a gang scheduler ------------------------------------------

def test_scheduler_name_and_suspend_reach_every_job():
    found = objects(MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 2, "scheduler_name": "gpu-packer",
                                  "suspend": True, "dataset_initializer": {"storage_uri": "hf://o/d"}})
    jobs = [m for m in found.values() if m["kind"] == "Job"]
    assert len(jobs) == 3
    for job in jobs:
        assert job["spec"]["suspend"] is True
        assert job["spec"]["template"]["spec"]["schedulerName"] == "gpu-packer"
    core_valid(*found.source)


def test_unset_scheduling_arguments_change_nothing():
    job = objects(TorchTrainJob, {"image": "t:1"})[("Job", "train-node-0")]
    assert "suspend" not in job["spec"] and "schedulerName" not in job["spec"]["template"]["spec"]
    assert objects(TorchTrainJob, {"image": "t:1", "suspend": False})[("Job", "train-node-0")]["spec"]["suspend"] is False


# --- combinations no scheduler honours ------------------------------------------------------------

@pytest.mark.parametrize("args, field, words", [
    ({"queue": "q"}, "queue", "no gang scheduler reads it: set gang_scheduler, or remove queue"),
    ({"priority_class": "p"}, "priority_class", "priority_class_name"),
    ({"schedule_timeout_seconds": 30}, "schedule_timeout_seconds", "set gang_scheduler"),
    ({"gang_scheduler": "volcano", "schedule_timeout_seconds": 30}, "schedule_timeout_seconds",
     "only the coscheduling PodGroup has a schedule timeout"),
    ({"gang_scheduler": "kueue"}, "queue", "set queue to its name"),
    ({"gang_scheduler": "kueue", "queue": "q", "suspend": True}, "suspend", "remove suspend"),
    ({"gang_scheduler": "coscheduling", "queue": "q"}, "queue", "coscheduling has no queues"),
    ({"gang_scheduler": "coscheduling", "priority_class": "p"}, "priority_class", "priority_class_name"),
    ({"gang_scheduler": "slurm"}, "gang_scheduler", "use one of kueue, volcano, coscheduling"),
])
def test_combinations_without_meaning_name_the_field_and_the_fix(args, field, words):
    found = problems(TorchTrainJob, {"image": "t:1", **args})
    assert words in found[field], found


def test_a_bad_combination_registers_nothing():
    from trainjobs.testing import attempt
    error, result = attempt(lambda: TorchTrainJob("train", {"image": "t:1", "queue": "q"}))
    assert isinstance(error, TrainJobError)
    assert result.resources == []


# --- the JobSet backend ---------------------------------------------------------------------------

def replicated(jobset, role):
    return next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == role)


def test_kueue_admits_an_mpi_jobset_as_one_workload():
    args = {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 3, "backend": "jobset", "gang_scheduler": "kueue",
            "queue": "team-a", "priority_class": "prod"}
    kueue_plan = plan(MpiTrainJob, args)
    jobset = next(m for m in kueue_plan.manifests if m["kind"] == "JobSet")
    assert {k: v for k, v in jobset["metadata"]["labels"].items() if k.startswith("kueue.x-k8s.io/")} == {
        "kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "prod"}
    for role in ("node", "launcher"):
        template_meta = replicated(jobset, role)["template"]["spec"]["template"]["metadata"]
        assert not any(k.startswith("kueue.x-k8s.io/") for k in template_meta["labels"])
    assert dict(kueue_plan.ignore_changes) == {"train": ("spec.suspend",)}
    assert "suspend" not in jobset["spec"]
    result = run(lambda: MpiTrainJob("train", args))
    assert result.get(kind="JobSet", name="train").ignore_changes == ("spec.suspend",)
    check_jobset(result.get(kind="JobSet", name="train").manifest)


def test_volcano_under_a_jobset_waits_for_the_nodes_and_lets_the_launcher_join():
    found = objects(MpiTrainJob, {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 3, "backend": "jobset",
                                  "gang_scheduler": "volcano", "queue": "hpc",
                                  "resources_per_node": {"requests": {"cpu": "4", "memory": "8Gi"}},
                                  "dataset_initializer": {"storage_uri": "hf://o/d"}})
    jobset = found[("JobSet", "train")]
    # The launcher is created once the 3 node pods are ready, so only they can be waited for.
    assert replicated(jobset, "launcher")["dependsOn"] == [{"name": "node", "status": "Ready"}]
    group = found[("PodGroup", "train")]
    node_pod = replicated(jobset, "node")["template"]["spec"]["template"]["spec"]
    cpu_per_node = sum(int(c.get("resources", {}).get("requests", {}).get("cpu", 0)) for c in node_pod["containers"])
    assert group["spec"] == {"minMember": 3, "queue": "hpc",
                             "minResources": {"cpu": str(3 * cpu_per_node), "memory": "24Gi"}}
    for role in ("node", "launcher"):
        pod = replicated(jobset, role)["template"]["spec"]["template"]
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "train"
        assert pod["spec"]["schedulerName"] == "volcano"
    initializer = replicated(jobset, "dataset-initializer")["template"]["spec"]["template"]
    assert initializer["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "hpc"
    assert "scheduling.k8s.io/group-name" not in initializer["metadata"]["annotations"]
    registered = core_valid(*found.source)
    check_jobset(next(o for o in registered if o["kind"] == "JobSet"))


def test_suspend_and_scheduler_name_on_a_jobset():
    found = objects(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "backend": "jobset", "suspend": True,
                                    "scheduler_name": "gpu-packer"})
    jobset = found[("JobSet", "train")]
    assert jobset["spec"]["suspend"] is True
    assert replicated(jobset, "node")["template"]["spec"]["template"]["spec"]["schedulerName"] == "gpu-packer"


def test_a_profile_gives_the_scheduling_defaults_and_is_named_when_wrong():
    profile = {"gang_scheduler": "volcano", "queue": "team-a", "priority_class": "batch"}
    found = objects(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "profile": profile})
    assert found[("PodGroup", "train")]["spec"]["queue"] == "team-a"
    # The job's own argument wins over the profile's.
    found = objects(TorchTrainJob, {"image": "t:1", "profile": profile, "queue": "urgent"})
    assert found[("PodGroup", "train")]["spec"]["queue"] == "urgent"
    assert problems(TorchTrainJob, {"image": "t:1", "profile": {"queue": "team-a"}}) == {
        "profile.queue": "is a Kueue LocalQueue or a Volcano queue, and no gang scheduler reads it: set "
                         "gang_scheduler, or remove queue"}


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_derivation_stays_pure_with_a_gang_scheduler(backend):
    """Scheduling decorates the objects built for one derivation: deriving again gives the same objects."""
    args = parse_args("MpiTrainJob", "train", MpiTrainJob.family.args_type, {
        **MPI_COMMAND, "image": "mpi:1", "num_nodes": 2, "backend": backend, "gang_scheduler": "volcano",
        "queue": "q", "scheduler_name": "volcano-gpu", "suspend": True, "pod_annotations": {"a": "b"},
        "node_selector": {"pool": "gpu"}})
    first = derive(MpiTrainJob.family, "train", args).manifests
    second = derive(MpiTrainJob.family, "train", args).manifests
    assert first == second
    assert args.pod_annotations == {"a": "b"} and args.node_selector == {"pool": "gpu"}
    assert [m["kind"] for m in second].count("PodGroup") == 1


@pytest.mark.parametrize("scheduler", ["volcano", "coscheduling", "kueue"])
def test_run_local_runs_a_gang_scheduled_job_as_it_is(scheduler):
    """run-local places every pod itself: the scheduler's objects and labels change nothing it runs."""
    from trainjobs.localrun.plan import select
    args = {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 2, "backend": "jobset", "gang_scheduler": scheduler}
    if scheduler != "coscheduling":
        args["queue"] = "q"
    objects = [r.manifest for r in run(lambda: MpiTrainJob("train", args)).kubernetes()]
    plain = [r.manifest for r in run(lambda: MpiTrainJob("train", {**MPI_COMMAND, "image": "mpi:1", "num_nodes": 2,
                                                                   "backend": "jobset"})).kubernetes()]
    chosen, alone = select(objects), select(plain)
    assert [j.name for j in chosen.jobs] == [j.name for j in alone.jobs] == ["train-node-0", "train-launcher-0"]
    assert [s.hostname for j in chosen.jobs for s in j.slots] == [s.hostname for j in alone.jobs for s in j.slots]
