"""Initializers, extra roles, sidecars with env injection, and one-process-per-pod torch."""

import pytest

from trainjobs import JaxTrainJob, MpiTrainJob, TorchTrainJob, TrainJobError
from trainjobs.testing import attempt, run
from trainjobs.testing.checks import manifest_problems

TRAINING_VARS = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                 "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                 "JAX_COORDINATOR_ADDRESS"}
INIT = {"dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"},
        "model_initializer": {"storage_uri": "hf://meta-llama/Llama-3.2-1B-Instruct", "secret_name": "hf-token"}}


def pod(result, job):
    return result.get("Job", job).manifest["spec"]["template"]["spec"]


def env_names(container):
    return {e["name"] for e in container.get("env", [])}


def all_containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def test_volcano_scenario_world_size_counts_training_pods_only():
    """1 master + 3 workers + 4 extras: WORLD_SIZE=4 on the training pods, nothing on the extras."""
    result = run(lambda: TorchTrainJob("vc", {
        "image": "train:1", "command": ["python", "train.py"], "num_nodes": 4, "torchrun": False,
        "extra_roles": {"extras": {"image": "svc:1", "command": ["serve"], "num_pods": 4}}}))
    trainer = pod(result, "vc-node-0")["containers"][0]
    assert {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer["env"]} == {
        "MASTER_ADDR": "vc-node-0-0.vc", "MASTER_PORT": "29500", "WORLD_SIZE": "4",
        "RANK": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    extras_job = result.get("Job", "vc-extras-0").manifest
    assert extras_job["spec"]["completions"] == 4
    extras = extras_job["spec"]["template"]["spec"]
    for container in all_containers(extras):
        assert not env_names(container) & TRAINING_VARS
        assert "ports" not in container
    assert extras["subdomain"] == "vc"   # reachable by DNS like every pod of the job
    assert "volumes" not in extras       # no shm, no SSH, no hostfile
    assert extras_job["metadata"]["labels"]["trainjobs.io/role"] == "extras"


def test_one_process_per_pod_rejects_several_processes():
    with pytest.raises(TrainJobError, match="num_proc_per_node: with torchrun: false each pod runs one process"):
        run(lambda: TorchTrainJob("vc", {"torchrun": False, "num_proc_per_node": 4}))


def test_extra_roles_on_mpi_get_no_ssh_and_are_not_hosts():
    result = run(lambda: MpiTrainJob("pi", {"image": "mpi:1", "command": ["mpirun", "x"], "num_nodes": 2,
                                            "extra_roles": {"tensorboard": {"image": "tb:1", "ports": [{"containerPort": 6006}]}}}))
    tb = pod(result, "pi-tensorboard-0")
    assert tb["containers"][0]["ports"] == [{"containerPort": 6006}]
    assert not env_names(tb["containers"][0])
    assert "volumes" not in tb
    assert "tensorboard" not in result.get("ConfigMap", "pi-mpi-hostfile").manifest["data"]["hostfile"]


@pytest.mark.parametrize("component, role, message", [
    (TorchTrainJob, "node", '"node" is a role the job itself uses'),
    (TorchTrainJob, "network", '"network" is a role the job itself uses'),        # the Service's
    (TorchTrainJob, "dataset-initializer", '"dataset-initializer" is a role the job itself uses'),
    (MpiTrainJob, "launcher", '"launcher" is a role the job itself uses'),
    (MpiTrainJob, "mpi", '"mpi" is a role the job itself uses'),                # the hostfile's and key's
    (TorchTrainJob, "Tensor_Board", "role names must be DNS labels"),
])
def test_extra_role_names(component, role, message):
    error, stack = attempt(lambda: component("t", {"image": "x:1", "command": ["mpirun", "x"],
                                                  "extra_roles": {role: {"image": "x:1"}}}))
    assert isinstance(error, TrainJobError) and stack.resources == []
    assert f"extra_roles.{role}: {message}" in str(error)


@pytest.mark.parametrize("component", [TorchTrainJob, JaxTrainJob])
def test_a_job_without_a_launcher_may_name_an_extra_role_launcher(component):
    """Only the roles a job itself uses are reserved (docs/components.md, Extra roles)."""
    stack = run(lambda: component("t", {"image": "x:1", "extra_roles": {"launcher": {"image": "tb:1"}}}))
    launcher = stack.get("Job", "t-launcher-0").manifest["spec"]["template"]["spec"]
    assert [c["name"] for c in launcher["containers"]] == ["launcher"]
    assert not env_names(launcher["containers"][0])


def test_extra_role_hostnames_must_fit():
    with pytest.raises(TrainJobError, match='derived pod hostname "t{50}-evaluator-0-9"'):
        run(lambda: TorchTrainJob("t" * 50, {"extra_roles": {"evaluator": {"image": "x:1", "num_pods": 10}}}))


def test_env_injection_gives_training_env_to_named_sidecars_and_init_containers_only():
    result = run(lambda: TorchTrainJob("t", {
        "num_nodes": 2,
        "sidecars": [{"name": "metrics", "image": "m:1"}, {"name": "logs", "image": "l:1"}],
        "init_containers": [{"name": "warmup", "image": "w:1", "env": [{"name": "A", "value": "1"}]}],
        "env_injection": ["metrics", "warmup"]}))
    spec = pod(result, "t-node-0")
    by_name = {c["name"]: c for c in all_containers(spec)}
    assert [c["name"] for c in spec["initContainers"]] == ["warmup", "metrics", "logs"]
    assert by_name["metrics"]["restartPolicy"] == "Always"   # native sidecar: ends with the trainer
    assert "restartPolicy" not in by_name["warmup"]
    assert env_names(by_name["metrics"]) == {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                                             "PET_MASTER_ADDR", "PET_MASTER_PORT"}
    assert [e["name"] for e in by_name["warmup"]["env"]][0] == "A"
    assert "env" not in by_name["logs"]


def test_env_injection_target_must_exist():
    with pytest.raises(TrainJobError) as info:
        run(lambda: TorchTrainJob("t", {"env_injection": ["nope"]}))
    assert 'env_injection: envInjection target podSet "node" container "nope" not found' in str(info.value)


def test_initializers_objects_env_and_ordering():
    result = run(lambda: TorchTrainJob("ft", {"num_nodes": 2, **INIT}))
    pvc = result.get("PersistentVolumeClaim", "ft-initializer").manifest
    # Two training pods, on different nodes, mount it at once.
    assert pvc["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "20Gi"}}}
    markers = []
    for role, uri in (("dataset-initializer", "hf://tatsu-lab/alpaca"),
                      ("model-initializer", "hf://meta-llama/Llama-3.2-1B-Instruct")):
        job = result.get("Job", f"ft-{role}-0").manifest
        assert job["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "3600"}   # pulumi up waits for it
        spec = job["spec"]["template"]["spec"]
        work = spec["initContainers"][0]
        assert work["name"] == role
        assert work["image"] == f"ghcr.io/kubeflow/trainer/{role}:v2.3.0"
        assert {"name": "STORAGE_URI", "value": uri} in work["env"]
        assert {"name": "initializer", "mountPath": "/workspace"} in work["volumeMounts"]
        assert spec["volumes"] == [{"name": "initializer", "persistentVolumeClaim": {"claimName": "ft-initializer"}}]
        marker = spec["containers"][0]["command"][-1]
        assert marker.startswith(f"/workspace/.trainjobs/{role}-") and marker.endswith(".done")
        markers.append(marker)
    assert result.get("Job", "ft-model-initializer-0").manifest["spec"]["template"]["spec"]["initContainers"][0][
        "envFrom"] == [{"secretRef": {"name": "hf-token"}}]

    trainer = pod(result, "ft-node-0")
    wait = trainer["initContainers"][0]
    assert wait["name"] == "wait-for-initializers"
    assert wait["command"][3:] == ["wait-for-initializers", "3600", *markers]
    assert {"name": "initializer", "mountPath": "/workspace"} in trainer["containers"][0]["volumeMounts"]
    job = result.get("Job", "ft-node-0")
    assert {result.get("Job", "ft-dataset-initializer-0").urn,
            result.get("Job", "ft-model-initializer-0").urn} <= set(job.dependencies)
    assert manifest_problems([r.manifest for r in result.kubernetes()]) == []


def test_changed_initializer_changes_its_marker():
    def marker(uri):
        result = run(lambda: TorchTrainJob("ft", {"dataset_initializer": {"storage_uri": uri}}))
        return pod(result, "ft-node-0")["initContainers"][0]["command"][-1]

    assert marker("hf://a/b") == marker("hf://a/b")
    assert marker("hf://a/b") != marker("hf://a/c")


def test_workspace_volume_can_be_given():
    result = run(lambda: JaxTrainJob("jx", {"image": "jax:1", "workspace_volume": {"nfs": {"server": "nfs", "path": "/x"}},
                                            "dataset_initializer": {"storage_uri": "s3://bucket/data"}}))
    assert result.find(kind="PersistentVolumeClaim") == []
    assert {"name": "initializer", "nfs": {"server": "nfs", "path": "/x"}} in pod(result, "jx-node-0")["volumes"]


@pytest.mark.parametrize("initializer, field, message", [
    ({"storage_uri": "alpaca"}, "dataset_initializer.storage_uri", '"alpaca" is not a URI'),
    ({}, "dataset_initializer.storage_uri", "set the URI to download from"),
])
def test_initializer_validation(initializer, field, message):
    with pytest.raises(TrainJobError) as info:
        run(lambda: TorchTrainJob("ft", {"dataset_initializer": initializer}))
    assert f"{field}: {message}" in str(info.value)


def test_every_training_job_waits_for_the_initializers_and_extra_roles_do_not():
    """Under `pulumi up`: workspace, then initializer, then every training Job (MPI has two); an
    extra role neither waits for the initializers nor mounts their workspace."""
    result = run(lambda: MpiTrainJob("pi", {"image": "mpi:1", "command": ["mpirun", "x"], "num_nodes": 2,
                                            "dataset_initializer": {"command": ["sh", "-c", "fetch-data"]},
                                            "extra_roles": {"tensorboard": {"image": "tb:1"}}}))
    initializer = result.get("Job", "pi-dataset-initializer-0")
    assert result.get("PersistentVolumeClaim", "pi-initializer").urn in initializer.dependencies
    work = pod(result, "pi-dataset-initializer-0")["initContainers"][0]
    assert work["command"] == ["sh", "-c", "fetch-data"] and "env" not in work   # custom: no STORAGE_URI
    for job in ("pi-launcher-0", "pi-node-0"):
        assert initializer.urn in result.get("Job", job).dependencies
        assert pod(result, job)["initContainers"][0]["name"] == "wait-for-initializers"
    assert initializer.urn not in result.get("Job", "pi-tensorboard-0").dependencies
    tensorboard = pod(result, "pi-tensorboard-0")
    assert "initContainers" not in tensorboard and "volumes" not in tensorboard


@pytest.mark.parametrize("args, mode", [({"num_nodes": 1}, "ReadWriteOnce"), ({"num_nodes": 3}, "ReadWriteMany"),
                                        ({"num_nodes": 3, "workspace_access_mode": "ReadWriteOnce"}, "ReadWriteOnce")])
def test_the_workspace_is_shared_across_nodes_when_several_pods_train(args, mode):
    result = run(lambda: TorchTrainJob("ft", {**args, **INIT}))
    assert result.get("PersistentVolumeClaim", "ft-initializer").manifest["spec"]["accessModes"] == [mode]
