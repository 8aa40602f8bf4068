"""The jobset backend: the JobSet's shape, and pods identical to the Indexed Job backend's."""

import pytest

from trainjobs import (DeepSpeedTrainJob, JaxTrainJob, MlxTrainJob, MpiTrainJob, TorchTrainJob, TorchTuneTrainJob,
                       TrainJobError, XGBoostTrainJob)
from trainjobs.backends.jobset import child_jobs
from trainjobs.testing import run
from trainjobs.tools.podview import ObjectIndex, pod_view
from trainjobs.tools.cli.render import kubernetes_objects

INITIALIZERS = {"dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"},
                "model_initializer": {"storage_uri": "hf://meta-llama/Llama-3.2-1B-Instruct"}}
# One job of every family and variant: what differs between them is env, hosts and hostfiles.
CASES = {
    "torch-static": (TorchTrainJob, {"image": "t:1", "num_nodes": 2, "num_proc_per_node": 2}),
    "torch-c10d": (TorchTrainJob, {"image": "t:1", "num_nodes": 3, "rendezvous": "c10d", "namespace": "ml"}),
    "torch-initializers-extra-roles": (TorchTrainJob, {
        "image": "t:1", "num_nodes": 2, **INITIALIZERS,
        "extra_roles": {"tensorboard": {"image": "tb:1", "ports": [{"containerPort": 6006}]}}}),
    "torchtune": (TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b"}),
    "jax": (JaxTrainJob, {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 4}),
    "xgboost": (XGBoostTrainJob, {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 3}),
    "openmpi": (MpiTrainJob, {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 3}),
    "intelmpi-launcher-node": (MpiTrainJob, {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 2,
                                             "mpi_implementation": "IntelMPI", "run_launcher_as_node": True, "namespace": "hpc"}),
    "mpich-one-host": (MpiTrainJob, {"image": "mpi:1", "command": ["mpiexec", "hostname"],
                                     "mpi_implementation": "MPICH", "run_launcher_as_node": True, "namespace": "hpc"}),
    "deepspeed": (DeepSpeedTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 4}),
    "mlx": (MlxTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 2}),
}


def objects(case: str, backend: str) -> list[dict]:
    component, args = CASES[case]
    return kubernetes_objects(run(lambda: component("job", {**args, "backend": backend})), redact=False)


def pods(objs: list[dict]) -> dict[str, dict]:
    """What each pod gets, by pod hostname: env and commands of every container, DNS names, files."""
    index = ObjectIndex(objs)
    seen = {}
    for pod_set in index.pod_sets:
        for i in range(pod_set.count):
            view = pod_view(pod_set, i, index, reveal=True)
            seen[view.hostname] = {
                "job": view.job, "subdomain": view.subdomain, "dns": view.dns_names,
                "dns_config": pod_set.pod_spec.get("dnsConfig"),
                "containers": [(c.name, c.image, c.command, c.args, c.env, c.mounts)
                               for c in view.init_containers + view.containers],
                "files": {path: (f.mode, f.content) for path, f in view.files.items()},
            }
    return seen


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_pod_is_the_same_under_both_backends(case):
    jobs, jobset = objects(case, "jobs"), objects(case, "jobset")
    assert [o["kind"] for o in jobset].count("JobSet") == 1
    expected, got = pods(jobs), pods(jobset)
    assert sorted(got) == sorted(expected)
    assert len(expected) >= 1
    for hostname in expected:
        assert got[hostname] == expected[hostname], hostname
    # The objects beside the workload (Service, hostfile ConfigMap, SSH Secret, workspace claim) are the same.
    def others(objs):
        return [o for o in objs if o["kind"] not in ("Job", "JobSet") or o["metadata"]["labels"].get(
            "trainjobs.io/role") in CASES[case][1].get("extra_roles", {})]
    assert others(jobset) == others(jobs)


def test_hostfile_is_byte_identical():
    jobs, jobset = objects("openmpi", "jobs"), objects("openmpi", "jobset")
    for objs in (jobs, jobset):
        (hostfile,) = [o["data"] for o in objs if o["kind"] == "ConfigMap"]
        assert hostfile["hostfile"] == "job-node-0-0.job slots=1\njob-node-0-1.job slots=1\njob-node-0-2.job slots=1\n"
    launcher = pods(jobset)["job-launcher-0-0"]["files"]
    assert launcher == pods(jobs)["job-launcher-0-0"]["files"]
    assert launcher["/etc/mpi/hostfile"][1] == hostfile["hostfile"].encode()


def jobset_of(case: str, **extra) -> dict:
    component, args = CASES[case]
    objs = kubernetes_objects(run(lambda: component("job", {**args, **extra, "backend": "jobset"})), redact=False)
    return next(o for o in objs if o["kind"] == "JobSet")


def test_mpi_jobset_is_shaped_as_kubeflow_creates_it():
    js = jobset_of("openmpi", failure_policy={"max_restarts": 3})
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["metadata"]["name"] == "job"
    spec = js["spec"]
    assert spec["network"] == {"enableDNSHostnames": True, "subdomain": "job", "publishNotReadyAddresses": True}
    assert [(r["name"], r["replicas"], r.get("dependsOn")) for r in spec["replicatedJobs"]] == [
        ("node", 1, None), ("launcher", 1, [{"name": "node", "status": "Ready"}])]
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert spec["failurePolicy"] == {"maxRestarts": 3}
    assert [j["metadata"]["name"] for j in child_jobs(js)] == ["job-node-0", "job-launcher-0"]
    # Pulumi's await annotations sit on the JobSet, not on the Jobs its controller makes.
    assert js["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert all(not {"pulumi.com/skipAwait", "pulumi.com/waitFor"} & set(r["template"]["metadata"].get("annotations") or {})
               for r in spec["replicatedJobs"])


def test_a_launcher_that_is_the_only_node_waits_for_nothing_that_does_not_exist():
    js = jobset_of("openmpi", num_nodes=1, run_launcher_as_node=True)
    assert [(r["name"], r.get("dependsOn")) for r in js["spec"]["replicatedJobs"]] == [("launcher", None)]


def test_a_fatal_exit_code_fails_the_jobset_instead_of_restarting_it():
    js = jobset_of("torch-c10d", failure_policy={"max_restarts": 2, "fatal_exit_codes": [42]})
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2, "rules": [
        {"name": "fatal_exit_code", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}
    (node,) = js["spec"]["replicatedJobs"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "In", "values": [42]}} in \
        node["template"]["spec"]["podFailurePolicy"]["rules"]


def test_whole_group_restarts_need_the_jobset_backend():
    with pytest.raises(TrainJobError) as caught:
        run(lambda: TorchTrainJob("job", {"image": "t:1", "failure_policy": {"max_restarts": 2}}))
    assert [i.field for i in caught.value.issues] == ["failure_policy.max_restarts"]
    assert 'backend "jobset"' in caught.value.issues[0].message


def test_initializers_complete_before_training():
    js = jobset_of("torch-initializers-extra-roles", wait_for_completion=True, wait_timeout_seconds=7200)
    spec = js["spec"]
    assert [(r["name"], r.get("dependsOn")) for r in spec["replicatedJobs"]] == [
        ("dataset-initializer", None), ("model-initializer", None),
        ("node", [{"name": "dataset-initializer", "status": "Complete"},
                  {"name": "model-initializer", "status": "Complete"}])]
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["node"]}
    assert spec["failurePolicy"] == {"maxRestarts": 0}
    assert js["metadata"]["annotations"] == {"pulumi.com/waitFor": "condition=Completed",
                                             "pulumi.com/timeoutSeconds": "7200"}


def test_child_jobs_carry_the_controllers_labels_and_the_subdomain():
    js = jobset_of("torch-c10d")
    (job,) = child_jobs(js, restarts=2)
    pod = job["spec"]["template"]
    assert job["metadata"]["name"] == "job-node-0" and job["metadata"]["namespace"] == "ml"
    for meta in (job["metadata"], pod["metadata"]):
        for store in ("labels", "annotations"):
            assert meta[store]["jobset.sigs.k8s.io/jobset-name"] == "job"
            assert meta[store]["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
            assert meta[store]["jobset.sigs.k8s.io/restart-attempt"] == "2"
            assert meta[store]["jobset.sigs.k8s.io/job-index"] == "0"
    assert pod["spec"]["subdomain"] == "job"
    assert job["spec"]["suspend"] is False


def test_child_jobs_carry_the_controllers_global_and_group_indexes():
    """JobSet v0.12's keys, as its controller writes them on each Job and pod (tests/cluster compares them)."""
    js = jobset_of("openmpi")
    found = {job["metadata"]["name"]: {k.removeprefix("jobset.sigs.k8s.io/"): v for k, v in meta[store].items()
                                       if k.removeprefix("jobset.sigs.k8s.io/") in (
                                           "global-replicas", "job-global-index", "group-name", "group-replicas",
                                           "job-group-index")}
             for job in child_jobs(js) for meta in (job["metadata"], job["spec"]["template"]["metadata"])
             for store in ("labels", "annotations")}
    assert found == {
        "job-node-0": {"global-replicas": "2", "job-global-index": "0", "group-name": "default", "group-replicas": "2",
                       "job-group-index": "0"},
        "job-launcher-0": {"global-replicas": "2", "job-global-index": "1", "group-name": "default",
                           "group-replicas": "2", "job-group-index": "1"}}


def test_an_unknown_backend_is_refused_before_anything_registers():
    with pytest.raises(TrainJobError) as caught:
        run(lambda: TorchTrainJob("job", {"image": "t:1", "backend": "jobsets"}))
    assert [(i.field, i.message) for i in caught.value.issues] == [
        ("backend", 'unknown backend "jobsets": use one of jobs, jobset')]


@pytest.mark.parametrize("case", ["openmpi", "torch-initializers-extra-roles"])
def test_explain_and_the_tree_show_the_same_pods(case):
    from trainjobs.tools.cli.render import ranks_text, tree
    component, args = CASES[case]
    jobs, jobset = (kubernetes_objects(run(lambda: component("job", {**args, "backend": b}))) for b in ("jobs", "jobset"))
    # explain shows every pod the JobSet's controller will create.
    text = ranks_text(jobset)
    assert ranks_text(jobs).count("\npod ") == text.count("\npod ") == len(pods(jobset))
    assert all(f"pod {hostname}" in text for hostname in pods(jobset))
    lines = tree(run(lambda: component("job", {**args, "backend": "jobset"}))).splitlines()
    (line,) = [line for line in lines if "JobSet job" in line]
    expected = {"openmpi": "(job-node-0: 3 pods, job-launcher-0: 1 pod, requests nothing)",
                "torch-initializers-extra-roles": "(job-dataset-initializer-0: 1 pod, job-model-initializer-0: 1 pod, "
                                                  "job-node-0: 2 pods, requests nothing)"}[case]
    assert line.endswith(expected), line


def test_what_a_job_requests_is_the_same_under_both_backends():
    from trainjobs.tools.cli.render import tree
    args = {"image": "t:1", "num_nodes": 3, "resources_per_node": {"requests": {"cpu": "2", "memory": "1Gi"},
                                                                  "limits": {"nvidia.com/gpu": 1}}}
    stacks = {b: run(lambda: TorchTrainJob("job", {**args, "backend": b})) for b in ("jobs", "jobset")}
    totals = {b: [line for line in tree(s).splitlines() if line.startswith("Stack requests")]
              for b, s in stacks.items()}
    assert totals["jobset"] == totals["jobs"] and len(totals["jobs"]) == 1 and "in 3 pods" in totals["jobs"][0]
    from trainjobs.core.args import parse_args
    from trainjobs.pipeline.pipeline import derive
    family = TorchTrainJob.family
    outputs = {b: derive(family, "job", parse_args(family.component, "job", family.args_type, {**args, "backend": b}))
               .outputs for b in ("jobs", "jobset")}
    assert outputs["jobset"].requests == outputs["jobs"].requests
    assert outputs["jobs"].requests == {"cpu": "6", "memory": "3Gi", "nvidia.com/gpu": "3"}


def test_under_pulumi_the_jobset_is_a_custom_resource_registered_after_the_jobs_objects():
    component, args = CASES["openmpi"]
    stack = run(lambda: component("job", {**args, "backend": "jobset"}))
    jobset = stack.get("JobSet", "job")
    assert jobset.type == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    assert jobset.replace_on_changes == ("spec",) and jobset.delete_before_replace
    others = {r.urn: f"{r.kind}/{r.name}" for r in stack.kubernetes() if r.kind != "JobSet"}
    assert sorted(others[u] for u in jobset.dependencies if u in others) == [
        "ConfigMap/job-mpi-hostfile", "Secret/job-mpi-ssh-auth", "Service/job"]
    assert not stack.find(kind="Job")
    service = stack.get("Service", "job")
    assert not service.replace_on_changes and not service.delete_before_replace


def test_the_jobset_webhooks_pod_name_limit_is_checked():
    name = "a" * 49   # <name>-node-0-9 is 58 characters: a Job takes it, the JobSet webhook (plus "-abcde") does not
    run(lambda: TorchTrainJob(name, {"image": "t:1", "num_nodes": 10}))
    with pytest.raises(TrainJobError) as caught:
        run(lambda: TorchTrainJob(name, {"image": "t:1", "num_nodes": 10, "backend": "jobset"}))
    assert [(i.field, i.message) for i in caught.value.issues] == [
        ("name", f'with backend "jobset", pod names such as {name}-node-0-9-abcde (64 characters, the last 5 random) '
                 "exceed 63, which the JobSet webhook refuses: shorten the job name")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_jobset_passes_the_jobset_api_and_its_jobs_the_kubernetes_schema(case):
    import kubernetes_validate
    from jobset_api import check_jobset
    component, args = CASES[case]
    objs = objects(case, "jobset")
    jobset = jobset_of(case, failure_policy={"max_restarts": 2, "fatal_exit_codes": [42]},
                       wait_for_completion=True, ttl_seconds_after_finished=60)
    for js in (next(o for o in objs if o["kind"] == "JobSet"), jobset):
        check_jobset(js)
        for job in child_jobs(js):
            kubernetes_validate.validate(job, "1.31.0", strict=True)
