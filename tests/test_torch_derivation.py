"""Torch derivation, checked value by value against Kubeflow Trainer v2.3 and our deviations."""

import pytest

from trainjobs import PodTemplate, Resources, TorchRuntime, TorchTrainJob, TorchTrainJobArgs
from trainjobs.pipeline.pipeline import derive
from trainjobs.core.objects import gpu_count
from trainjobs.families.torch import TORCH, resolve_num_proc_per_node
from trainjobs.testing import run

COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def resources(requests=None, limits=None):
    """A pod template with these resources: what the GPU count and num_proc_per_node are read from."""
    return PodTemplate(resources=Resources(requests=requests or {}, limits=limits or {}))


@pytest.mark.parametrize("requests, limits, expected", [
    ({"cpu": "4"}, None, "4"),
    ({"cpu": "2.5"}, None, "3"),
    ({"cpu": "2500m"}, None, "3"),
    ({"cpu": "0.7"}, None, "1"),
    ({"cpu": "100m"}, None, "1"),
    (None, None, "1"),
    ({"memory": "8Gi"}, {"memory": "8Gi"}, "1"),
    (None, {"cpu": "6"}, "6"),
    ({"cpu": "2"}, {"cpu": "8"}, "2"),          # request wins over limit
    ({"cpu": "0"}, {"cpu": "5"}, "5"),          # a zero request falls back to the limit
    ({"nvidia.com/gpu": "8", "cpu": "32"}, None, "auto"),
    (None, {"nvidia.com/gpu": "2", "cpu": "16"}, "auto"),
    (None, {"amd.com/gpu": "1"}, "auto"),
    ({"nvidia.com/mig-1g.5gb": "1", "cpu": "4"}, None, "auto"),   # deviation: MIG is a GPU
    ({"google.com/tpu": "4", "cpu": "3"}, None, "3"),            # TPUs are not GPUs for torchrun
    ({"nvidia.com/gpu": "0", "cpu": "3"}, None, "3"),
])
def test_auto_num_proc_per_node(requests, limits, expected):
    assert resolve_num_proc_per_node("auto", resources(requests, limits)) == expected


def test_auto_without_any_resources_is_one():
    assert resolve_num_proc_per_node("auto", PodTemplate()) == "1"


@pytest.mark.parametrize("devices, expected", [
    ([{"count": 8}], "auto"),                                              # gpu.nvidia.com, as nvidia.com/gpu
    ([{"device_class": "mig.nvidia.com", "count": 2}], "auto"),
    ([{"device_class": "nic.example.com", "count": 2}], "3"),             # not GPUs: the CPUs decide
])
def test_auto_num_proc_per_node_counts_devices_claimed_through_dra(devices, expected):
    template = PodTemplate(resources={"requests": {"cpu": "3"}}, devices=devices)
    assert resolve_num_proc_per_node("auto", template) == expected


def test_gpu_count_adds_up_the_gpu_requests_of_a_dra_claim():
    assert gpu_count(PodTemplate(devices=[{"name": "a", "count": 4}, {"name": "b", "count": 2},
                                          {"name": "nic", "device_class": "nic.example.com", "count": 1}])) == 6


@pytest.mark.parametrize("given", [1, 3, 16])
def test_int_num_proc_per_node_is_kept(given):
    assert resolve_num_proc_per_node(given, resources({"nvidia.com/gpu": "8"})) == str(given)


def test_gpu_names_are_scanned_in_sorted_order():
    # Two GPU-named resources: deterministic choice of the first by name, not map order.
    assert gpu_count(resources({"nvidia.com/gpu": "4", "amd.com/gpu": "2"})) == 2


def job_container(plan):
    job = next(m for m in plan.manifests if m["kind"] == "Job")
    return job, job["spec"]["template"]["spec"]["containers"][0]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_pet_env_and_job_shape_match_kubeflow():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(num_nodes=2, resources_per_node={"requests": {"cpu": "2.5"}}))
    job, node = job_container(plan)
    assert [e["name"] for e in node["env"]] == [
        "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]
    assert env_of(node) == {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "3",
        "PET_NODE_RANK": {"fieldRef": {"fieldPath": COMPLETION_INDEX}},
        "PET_MASTER_ADDR": "demo-node-0-0.demo",
        "PET_MASTER_PORT": "29500",
    }
    assert node["name"] == "node"
    assert node["ports"] == [{"containerPort": 29500}]
    assert job["metadata"]["name"] == "demo-node-0"
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["template"]["spec"]["subdomain"] == "demo"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["backoffLimit"] == 0


def test_user_env_comes_first_then_derived_env():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(env={"NCCL_DEBUG": "INFO", "SEED": 7}))
    _, node = job_container(plan)
    assert [e["name"] for e in node["env"]][:2] == ["NCCL_DEBUG", "SEED"]
    assert env_of(node)["SEED"] == "7"


def test_runtime_env_is_upserted_by_job_env_in_place():
    runtime = TorchRuntime(name="rt", node=PodTemplate(image="img:1", env={"A": "runtime", "B": "runtime"}))
    plan = derive(TORCH, "demo", TorchTrainJobArgs(runtime=runtime, env={"B": "job", "C": "job"}))
    _, node = job_container(plan)
    assert [(e["name"], e.get("value")) for e in node["env"][:3]] == [("A", "runtime"), ("B", "job"), ("C", "job")]


def test_nproc_uses_merged_runtime_and_job_resources():
    # Deviation from Kubeflow #3974: the runtime's GPUs still count when the job only adds memory.
    runtime = TorchRuntime(name="gpu", node=PodTemplate(image="img:1", resources={"limits": {"nvidia.com/gpu": 4}}))
    plan = derive(TORCH, "demo", TorchTrainJobArgs(runtime=runtime, resources_per_node={"limits": {"memory": "64Gi"}}))
    _, node = job_container(plan)
    assert env_of(node)["PET_NPROC_PER_NODE"] == "auto"
    assert node["resources"] == {"requests": {"nvidia.com/gpu": "4"},
                                 "limits": {"memory": "64Gi", "nvidia.com/gpu": "4"}}
    assert plan.outputs.num_proc_per_node == "auto"


def test_job_resources_override_runtime_per_key():
    runtime = TorchRuntime(name="cpu", node=PodTemplate(image="img:1", resources={"requests": {"cpu": "8", "memory": "1Gi"}}))
    plan = derive(TORCH, "demo", TorchTrainJobArgs(runtime=runtime, resources_per_node={"requests": {"cpu": "2"}}))
    _, node = job_container(plan)
    assert node["resources"]["requests"] == {"cpu": "2", "memory": "1Gi"}
    assert env_of(node)["PET_NPROC_PER_NODE"] == "2"


def test_gpu_limits_equal_requests():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(resources_per_node={"requests": {"nvidia.com/gpu": 2, "cpu": 8}}))
    _, node = job_container(plan)
    assert node["resources"] == {"requests": {"cpu": "8", "nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}


def test_c10d_rendezvous_env():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(num_nodes=3, rendezvous="c10d"))
    _, node = job_container(plan)
    assert env_of(node) == {
        "PET_NNODES": "3", "PET_NPROC_PER_NODE": "1",
        "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "demo-node-0-0.demo:29500", "PET_RDZV_ID": "demo",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def test_pod_defaults_and_pass_through_settings():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(
        namespace="ml", shm_size="16Gi", node_selector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists"}], service_account_name="trainer",
        image_pull_secrets=["regcred"], priority_class_name="high", security_context={"runAsUser": 1000},
        active_deadline_seconds=3600, ttl_seconds_after_finished=600, backoff_limit=2,
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
        labels={"team": "a"}, annotations={"owner": "a@example.com"}, pod_labels={"kueue": "x"}))
    service, job = plan.manifests
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                              {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"},
                                                    {"name": "dshm", "mountPath": "/dev/shm"}]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert pod["serviceAccountName"] == "trainer"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "high"
    assert pod["securityContext"] == {"runAsUser": 1000}
    assert (job["spec"]["activeDeadlineSeconds"], job["spec"]["ttlSecondsAfterFinished"], job["spec"]["backoffLimit"]) == (3600, 600, 2)
    for obj in (service, job):
        assert obj["metadata"]["namespace"] == "ml"
        assert obj["metadata"]["labels"]["team"] == "a"
        assert obj["metadata"]["annotations"]["owner"] == "a@example.com"
    assert job["spec"]["template"]["metadata"]["labels"]["kueue"] == "x"
    assert job["spec"]["template"]["metadata"]["labels"]["trainjobs.io/job-name"] == "demo"


def test_shm_can_be_turned_off():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(shm_size="0"))
    _, node = job_container(plan)
    assert "volumeMounts" not in node


def test_a_job_is_awaited_until_it_exists_by_default_and_wait_knob():
    _, job = derive(TORCH, "demo", TorchTrainJobArgs()).manifests
    # Not skipAwait: pulumi-kubernetes would then not await the Job's deletion when replacing it.
    assert job["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}
    _, job = derive(TORCH, "demo", TorchTrainJobArgs(wait_for_completion=True, wait_timeout_seconds=7200)).manifests
    assert job["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "7200"}


def test_headless_service_selects_every_pod_of_the_job():
    service, job = derive(TORCH, "demo", TorchTrainJobArgs()).manifests
    assert service["metadata"]["name"] == "demo"
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                               "selector": {"trainjobs.io/job-name": "demo"}}
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in service["spec"]["selector"].items())


def test_outputs():
    plan = derive(TORCH, "demo", TorchTrainJobArgs(num_nodes=4, num_proc_per_node=8, namespace="ml", resources_per_node={
        "requests": {"cpu": "2500m", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 8, "memory": "20Gi"}}))
    assert plan.outputs.model_dump() == {"service_name": "demo", "job_name": "demo-node-0", "master_addr": "demo-node-0-0.demo",
                            "master_port": 29500, "num_nodes": 4, "num_proc_per_node": "8", "namespace": "ml",
                            "requests": {"cpu": "10", "memory": "64Gi", "nvidia.com/gpu": "32"}}


@pytest.mark.parametrize("nproc, gpus, warned", [(16, 8, True), (8, 8, False), ("auto", 8, False), (4, 0, False)])
def test_more_processes_than_gpus_renders_with_a_warning_on_the_argument(nproc, gpus, warned):
    """Allowed (processes may share a GPU on purpose), but rarely meant: the render says so, as `pulumi up` would."""
    resources = {"resources_per_node": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
    result = run(lambda: TorchTrainJob("t", {"num_proc_per_node": nproc, **resources}))
    expected = [f'TorchTrainJob "t": num_proc_per_node: {nproc} processes per pod on {gpus} GPUs: each process '
                f"usually takes one GPU (its LOCAL_RANK), so ranks {gpus} to {nproc - 1} of each pod would share or "
                f'find none; set {gpus}, or "auto"'] if warned else []
    assert result.warnings == expected
    assert result.get("Job", "t-node-0").manifest is not None   # rendered all the same
