"""Platform profiles (defaults under every job's arguments) and the TrainingNamespace component."""

import kubernetes_validate
import pytest

from trainjobs import (MpiTrainJob, PlatformProfile, TorchTrainJob, TorchTrainJobArgs, TrainingNamespace, TrainJobError)
from trainjobs.core.args import CommonArgs
from trainjobs.platform.namespace import TrainingNamespaceArgs, namespace_plan
from trainjobs.testing import attempt, run, run_program
from trainjobs.tools.provider.server import TrainJobsProvider, package_schema

GPU_POOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PROFILE = PlatformProfile(
    namespace="ml", labels={"team": "llm", "cost-center": "research"}, node_selector={"pool": "h100"},
    tolerations=[GPU_POOL], priority_class_name="training", image_pull_secrets=["registry"],
    service_account_name="trainer", shm_size="64Gi", env={"NCCL_DEBUG": "WARN", "HF_HOME": "/cache"},
    failure_policy={"fatal_exit_codes": [3]}, resources_per_node={"requests": {"cpu": "8"}})


def pod(result, job="llm-node-0"):
    return result.get("Job", job).manifest["spec"]["template"]["spec"]


def test_a_job_inherits_every_default_it_does_not_give():
    result = run(lambda: TorchTrainJob("llm", TorchTrainJobArgs(profile=PROFILE, image="img:1", num_nodes=2)))
    job = result.get("Job", "llm-node-0").manifest
    spec = pod(result)
    assert job["metadata"]["namespace"] == "ml" and job["metadata"]["labels"]["cost-center"] == "research"
    assert spec["nodeSelector"] == {"pool": "h100"} and spec["tolerations"] == [GPU_POOL]
    assert spec["priorityClassName"] == "training" and spec["serviceAccountName"] == "trainer"
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "64Gi"
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["NCCL_DEBUG"] == "WARN" and env["HF_HOME"] == "/cache"
    assert job["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == [3]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "8"}}


def test_the_jobs_own_values_win_by_the_documented_rules():
    result = run(lambda: TorchTrainJob("llm", {
        "profile": PROFILE, "image": "img:1", "rendezvous": "c10d",
        "labels": {"team": "vision"},                        # maps merge by key, the job's value wins
        "env": {"NCCL_DEBUG": "INFO"},                       # env upserts by name
        "tolerations": [{"key": "spot", "operator": "Exists"}],   # lists are replaced
        "failure_policy": {"backoff_limit_per_index": 1},    # nested models merge field by field
        "resources_per_node": {"limits": {"nvidia.com/gpu": 8}},
        "namespace": "vision"}))
    job = result.get("Job", "llm-node-0").manifest
    spec = pod(result)
    assert job["metadata"]["namespace"] == "vision"
    assert job["metadata"]["labels"]["team"] == "vision" and job["metadata"]["labels"]["cost-center"] == "research"
    env = [(e["name"], e.get("value")) for e in spec["containers"][0]["env"]]
    assert env[:2] == [("NCCL_DEBUG", "INFO"), ("HF_HOME", "/cache")]
    assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert job["spec"]["backoffLimitPerIndex"] == 1
    assert job["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == [3]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "8", "nvidia.com/gpu": "8"},
                                                  "limits": {"nvidia.com/gpu": "8"}}


def test_every_common_argument_is_a_profile_field_and_nothing_else():
    assert set(PlatformProfile.model_fields) == set(CommonArgs.model_fields)
    assert "profile" not in PlatformProfile.model_fields and "runtime" not in PlatformProfile.model_fields


def test_a_profile_from_stack_config_applies_to_every_family():
    profile = {"namespace": "hpc", "labels": {"team": "hpc"}, "tolerations": [GPU_POOL]}
    result = run(lambda: MpiTrainJob("pi", {"profile": profile, "image": "mpi:1", "command": ["mpirun", "pi"],
                                            "num_nodes": 2}))
    for job in ("pi-launcher-0", "pi-node-0"):
        manifest = result.get("Job", job).manifest
        assert manifest["metadata"]["namespace"] == "hpc" and pod(result, job)["tolerations"] == [GPU_POOL]


@pytest.mark.parametrize("profile, field, message", [
    ({"tolerations": "all"}, "profile.tolerations", "valid list"),
    ({"shm_size": "lots"}, "profile.shm_size", "not a Kubernetes quantity"),
    ({"tolerance": []}, "profile.tolerance", 'did you mean "tolerations"'),
    ({"labels": {"team": "a b"}}, "profile.labels.team", ""),
    ({"failure_policy": {"fatal_exit_codes": [0]}}, "profile.failure_policy.fatal_exit_codes", "0 is not a failure"),
])
def test_errors_name_the_profile_field(profile, field, message):
    error, stack = attempt(lambda: TorchTrainJob("llm", {"profile": profile, "image": "img:1"}))
    assert isinstance(error, TrainJobError) and stack.resources == []
    assert [i.field for i in error.issues] == [field]
    assert message in error.issues[0].message


def test_a_profiles_min_nodes_is_checked_against_each_jobs_num_nodes():
    assert PlatformProfile(min_nodes=2).min_nodes == 2
    result = run(lambda: TorchTrainJob("llm", {"profile": {"min_nodes": 2}, "image": "img:1", "rendezvous": "c10d",
                                               "num_nodes": 4}))
    assert result.get("Job", "llm-node-0").manifest["spec"]["completions"] == 4
    assert {"name": "PET_NNODES", "value": "2:4"} in pod(result)["containers"][0]["env"]
    for job, num_nodes in (({}, 1), ({"num_nodes": 2}, 2)):
        error, _ = attempt(lambda: TorchTrainJob("llm", {"profile": {"min_nodes": 2}, "image": "img:1",
                                                         "rendezvous": "c10d", **job}))
        assert [(i.field, i.message) for i in error.issues] == [(
            "profile.min_nodes", f"2 is not below the job's num_nodes {num_nodes}: give the job more nodes, "
                                 "or its own min_nodes")]


def test_a_value_the_job_gives_itself_is_named_as_its_own():
    error, _ = attempt(lambda: TorchTrainJob("llm", {"profile": {"labels": {"team": "ok"}}, "image": "img:1",
                                                     "labels": {"team": "a b"}}))
    assert [i.field for i in error.issues] == ["labels.team"]


def test_the_provider_schema_has_the_profile_and_the_namespace_component():
    schema = package_schema()
    torch = schema["resources"]["trainjobs:index:TorchTrainJob"]["inputProperties"]
    assert torch["profile"]["$ref"] == "#/types/trainjobs:index:PlatformProfile"
    assert "tolerations" in schema["types"]["trainjobs:index:PlatformProfile"]["properties"]
    assert torch["failurePolicy"]["$ref"] == "#/types/trainjobs:index:FailurePolicy"
    namespace = schema["resources"]["trainjobs:index:TrainingNamespace"]
    assert {"checkpointsSize", "kueueClusterQueue", "retainData"} <= set(namespace["inputProperties"])
    assert set(namespace["properties"]) == {"namespace", "serviceAccountName", "datasetsClaim", "checkpointsClaim",
                                            "localQueue"}


def test_a_profile_through_the_provider_is_the_python_profile():
    inputs = {"image": "img:1", "profile": {"namespace": "ml", "tolerations": [GPU_POOL],
                                            "failurePolicy": {"fatalExitCodes": [3]}}}
    through = run(lambda: TrainJobsProvider().construct("llm", "trainjobs:index:TorchTrainJob", inputs,
                                                        __import__("pulumi").ResourceOptions()))
    as_python = run(lambda: TorchTrainJob("llm", {"image": "img:1", "profile": {
        "namespace": "ml", "tolerations": [GPU_POOL], "failure_policy": {"fatal_exit_codes": [3]}}}))
    assert ([(r.type, r.name, r.manifest) for r in through.kubernetes()] ==
            [(r.type, r.name, r.manifest) for r in as_python.kubernetes()])
    assert through.get("Job", "llm-node-0").manifest["metadata"]["namespace"] == "ml"


def test_a_training_namespace_keeps_its_data_and_gives_its_jobs_a_profile():
    def program():
        team = TrainingNamespace("llm", {"labels": {"team": "llm"}, "image_pull_secrets": ["registry"],
                                         "datasets_size": "500Gi", "checkpoints_size": "2Ti",
                                         "storage_class": "fast-rwx", "kueue_cluster_queue": "gpus"})
        TorchTrainJob("pretrain", {"image": "img:1", "profile": team.profile(labels={"team": "llm"})})

    result = run(program)
    names = {(r.type.rsplit(":", 1)[-1], r.name, r.retain_on_delete) for r in result.resources if r.is_kubernetes}
    assert names >= {("Namespace", "llm", True), ("ServiceAccount", "trainer", False),
                         ("PersistentVolumeClaim", "datasets", True), ("PersistentVolumeClaim", "checkpoints", True),
                         ("LocalQueue", "default", False)}
    claim = result.get("PersistentVolumeClaim", "checkpoints").manifest
    assert claim["metadata"] == {"name": "checkpoints", "namespace": "llm",
                                 "labels": {"team": "llm", "app.kubernetes.io/managed-by": "trainjobs"}}
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "2Ti"}},
                             "storageClassName": "fast-rwx"}
    assert result.get("ServiceAccount", "trainer").manifest["imagePullSecrets"] == [{"name": "registry"}]
    assert result.get("LocalQueue", "default").manifest["spec"] == {"clusterQueue": "gpus"}
    job = result.get("Job", "pretrain-node-0")
    assert job.manifest["metadata"]["namespace"] == "llm"
    assert job.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"   # admitted as one Workload
    assert pod(result, "pretrain-node-0")["serviceAccountName"] == "trainer"
    namespace_urn = next(r.urn for r in result.resources if r.name == "llm" and r.is_kubernetes)
    assert namespace_urn in job.dependencies   # created after the Namespace
    for manifest in (r.manifest for r in result.kubernetes() if r.manifest["kind"] != "LocalQueue"):
        kubernetes_validate.validate(manifest, "1.33.0", strict=True)


def test_a_namespace_without_retained_data_and_its_errors():
    result = run(lambda: TrainingNamespace("scratch", {"retain_data": False, "service_account_name": "",
                                                       "checkpoints_size": "10Gi"}))
    assert sorted((r.name, r.retain_on_delete) for r in result.resources if r.is_kubernetes) == [
        ("checkpoints", False), ("scratch", False)]
    error, stack = attempt(lambda: TrainingNamespace("Team_A", {"checkpoints_size": "big", "service_account_name": "",
                                                                "image_pull_secrets": ["r"]}))
    assert isinstance(error, TrainJobError) and stack.resources == []
    assert [i.field for i in error.issues] == ["checkpoints_size"]
    error = pytest.raises(TrainJobError, namespace_plan, "Team_A", TrainingNamespaceArgs(
        service_account_name="", image_pull_secrets=["r"])).value
    assert [i.field for i in error.issues] == ["name", "image_pull_secrets"]


PROGRAM = __import__("pathlib").Path(__file__).resolve().parents[1] / "stacks" / "__main__.py"
# Where the program builds its profile: typed arguments name the line that wrote them.
PROFILE_LINE = PROGRAM.read_text().splitlines().index("    return trainjobs.PlatformProfile(**profile)") + 1


def test_the_example_stacks_profile_reaches_every_job_and_a_job_may_bring_its_own():
    jobs = [{"kind": "TorchTrainJob", "name": "a", "image": "img:1"},
            {"kind": "XGBoostTrainJob", "name": "b", "image": "xgb:1", "profile": {"labels": {"team": "other"}}}]
    stack = run_program(PROGRAM, config={"trainjobs-examples:profile": {"labels": {"team": "llm"}, "namespace": "ml"},
                                         "trainjobs-examples:jobs": jobs}, preview=True)
    assert stack.get("Job", "a-node-0").manifest["metadata"]["labels"]["team"] == "llm"
    assert stack.get("Job", "a-node-0").manifest["metadata"]["namespace"] == "ml"
    assert stack.get("Job", "b-node-0").manifest["metadata"]["labels"]["team"] == "other"
    assert "namespace" not in stack.get("Job", "b-node-0").manifest["metadata"]


@pytest.mark.parametrize("profile, message", [
    ({"tolerations": "all"}, f"PlatformProfile ({PROGRAM}:{PROFILE_LINE}): invalid arguments\n  - tolerations: Input "
                             "should be a valid list"),
    (["gpu"], "trainjobs-examples:profile: must be a mapping of job arguments every job inherits; got a list"),
])
def test_a_bad_stack_profile_is_reported_once_before_any_job(profile, message):
    jobs = [{"kind": "TorchTrainJob", "name": "a", "image": "img:1"}]
    with pytest.raises(Exception) as caught:
        run_program(PROGRAM, config={"trainjobs-examples:profile": profile, "trainjobs-examples:jobs": jobs},
                    preview=True)
    assert message in str(caught.value)
