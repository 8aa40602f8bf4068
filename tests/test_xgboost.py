"""XGBoostTrainJob: DMLC_* env as Kubeflow Trainer's XGBoost plugin, reserved with Kubeflow's message."""

import kubernetes_validate
import pulumi
import pytest

from trainjobs import (PodTemplate, Resources, TrainJobError, XGBOOST_DISTRIBUTED, XGBoostRuntime, XGBoostTrainJob,
                       XGBoostTrainJobArgs)
from trainjobs.tools.provider.server import TrainJobsProvider
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.testing import run
from trainjobs.testing.checks import manifest_problems

COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
IMAGE = "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"


def node_container(result, job="xgb-node-0"):
    return result.get("Job", job).manifest["spec"]["template"]["spec"]["containers"][0]


def dmlc_env(count: str, name: str = "xgb") -> list[dict]:
    return [
        {"name": "DMLC_TRACKER_URI", "value": f"{name}-node-0-0.{name}"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
        {"name": "DMLC_NUM_WORKER", "value": count},
    ]


def test_objects_env_and_port_of_a_cpu_job():
    result = run(lambda: XGBoostTrainJob("xgb", {"image": "xgb:1", "command": ["python", "train.py"],
                                                 "num_nodes": 2, "env": {"OMP_NUM_THREADS": "1"}}))
    assert [(r.kind, r.name) for r in result.kubernetes()] == [("Service", "xgb"), ("Job", "xgb-node-0")]
    assert result.get("Service", "xgb").manifest["spec"]["clusterIP"] == "None"
    job = result.get("Job", "xgb-node-0").manifest
    assert (job["spec"]["completionMode"], job["spec"]["completions"], job["spec"]["parallelism"]) == ("Indexed", 2, 2)
    assert job["spec"]["template"]["spec"]["subdomain"] == "xgb"
    node = node_container(result)
    assert (node["name"], node["image"], node["command"]) == ("node", "xgb:1", ["python", "train.py"])
    assert node["env"] == [{"name": "OMP_NUM_THREADS", "value": "1"}, *dmlc_env("2")]
    assert node["ports"] == [{"containerPort": 29500}]


@pytest.mark.parametrize("resources, workers", [
    ({"limits": {"nvidia.com/gpu": 4}}, "8"),               # 2 nodes x 4 GPUs: one worker per GPU
    ({"requests": {"nvidia.com/gpu": "1"}}, "2"),
    ({"requests": {"cpu": "16"}, "limits": {"cpu": "16"}}, "2"),   # CPU pods: one worker each, whatever the cores
    ({"limits": {"nvidia.com/gpu": 0, "cpu": "4"}}, "2"),    # no GPU counts as one worker
])
def test_num_worker_is_nodes_times_gpus_per_pod(resources, workers):
    result = run(lambda: XGBoostTrainJob("xgb", {"num_nodes": 2, "resources_per_node": resources}))
    assert node_container(result)["env"] == dmlc_env(workers)


def test_num_worker_counts_the_gpus_of_the_merged_runtime_and_job_resources():
    runtime = XGBoostRuntime(name="xgb-gpu", node=PodTemplate(image="acme/xgb:1",
                                                              resources={"limits": {"nvidia.com/gpu": 4}}))
    args = XGBoostTrainJobArgs(num_nodes=3, runtime=runtime, resources_per_node=Resources(requests={"cpu": "8"}))
    result = run(lambda: XGBoostTrainJob("xgb", args))
    node = node_container(result)
    assert node["resources"] == {"requests": {"cpu": "8", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
    assert node["env"] == dmlc_env("12")
    assert node["image"] == "acme/xgb:1"


def test_default_and_named_runtime_is_kubeflows_xgboost_distributed():
    for args in ({}, {"runtime": "xgboost-distributed"}, XGBoostTrainJobArgs()):
        result = run(lambda: XGBoostTrainJob("xgb", args))
        node = node_container(result)
        assert node["image"] == IMAGE and "command" not in node
        assert result.get("Job", "xgb-node-0").manifest["metadata"]["labels"]["app.kubernetes.io/name"] == (
            "xgboost-distributed")
    assert XGBoostTrainJobArgs().runtime == XGBOOST_DISTRIBUTED


def test_an_unknown_runtime_name_lists_the_built_in_ones():
    with pytest.raises(TrainJobError) as info:
        run(lambda: XGBoostTrainJob("xgb", {"runtime": "xgboost"}))
    assert str(info.value) == ('XGBoostTrainJob "xgb": invalid arguments\n  - runtime: unknown runtime "xgboost"; '
                               'built-in XGBoost runtimes: xgboost-distributed')


@pytest.mark.parametrize("name, source", [
    ("DMLC_TRACKER_URI", "the job name (pod 0 of the node Job)"),
    ("DMLC_TRACKER_PORT", "the tracker port 29500"),
    ("DMLC_TASK_ID", "each pod's completion index"),
    ("DMLC_NUM_WORKER", "num_nodes × the GPUs of each pod (at least 1)"),
])
def test_each_derived_variable_is_reserved_with_kubeflows_message(name, source):
    with pytest.raises(TrainJobError) as info:
        run(lambda: XGBoostTrainJob("xgb", {"env": {name: "1"}}))
    assert str(info.value) == (f'XGBoostTrainJob "xgb": invalid arguments\n'
                               f'  - env: {name} is reserved for the XGBoost runtime (it comes from {source})')
    assert [issue.field for issue in info.value.issues] == ["env"]


def test_reserved_names_from_the_job_and_its_runtime_are_reported_together():
    runtime = XGBoostRuntime(name="own", node=PodTemplate(image="x:1", env={"DMLC_TASK_ID": "0"}))
    with pytest.raises(TrainJobError) as info:
        run(lambda: XGBoostTrainJob("xgb", {"runtime": runtime, "env": {"DMLC_NUM_WORKER": "4", "SEED": "1"}}))
    assert [(i.field, i.message) for i in info.value.issues] == [(
        "env", "DMLC_NUM_WORKER is reserved for the XGBoost runtime (it comes from num_nodes × the GPUs of each "
               "pod (at least 1)); DMLC_TASK_ID is reserved for the XGBoost runtime (it comes from each pod's "
               "completion index)")]


def test_outputs_resolve_to_the_derived_values():
    def program():
        job = XGBoostTrainJob("xgb", {"num_nodes": 2, "namespace": "ml",
                                      "resources_per_node": {"limits": {"nvidia.com/gpu": 4}}})
        for key in ("service_name", "job_name", "namespace", "tracker_uri", "tracker_port", "num_workers"):
            pulumi.export(key, getattr(job, key))

    assert run(program).outputs == {"service_name": "xgb", "job_name": "xgb-node-0", "namespace": "ml",
                                    "tracker_uri": "xgb-node-0-0.xgb", "tracker_port": 29500, "num_workers": 8}


def test_construction_through_the_provider_is_the_python_class():
    inputs = {"image": "xgb:1", "numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}
    states = []
    through_provider = run(lambda: states.append(TrainJobsProvider().construct(
        "xgb", "trainjobs:index:XGBoostTrainJob", inputs, pulumi.ResourceOptions())))
    as_python = run(lambda: XGBoostTrainJob("xgb", {"image": "xgb:1", "num_nodes": 2,
                                                    "resources_per_node": {"limits": {"nvidia.com/gpu": 2}}}))
    assert ([(r.type, r.name, r.manifest) for r in through_provider.kubernetes()] ==
            [(r.type, r.name, r.manifest) for r in as_python.kubernetes()])
    assert set(states[0].state) == {"serviceName", "jobName", "namespace", "trackerUri", "trackerPort", "numWorkers",
                                    "requests"}


@pytest.mark.parametrize("args", [
    {},
    {"num_nodes": 4, "namespace": "ml", "env": {"OMP_NUM_THREADS": "1"},
     "resources_per_node": {"limits": {"nvidia.com/gpu": 8, "cpu": "32", "memory": "128Gi"}},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
], ids=["minimal", "gpus"])
@pytest.mark.parametrize("version", ["1.31.0", kubernetes_validate.latest_version()])
def test_manifests_are_schema_valid_and_pass_the_checks_the_schema_misses(args, version):
    objects = kubernetes_objects(run(lambda: XGBoostTrainJob("job", args)))
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    assert manifest_problems(objects) == []
