"""Fields the arguments do not model: pod_spec_overrides, container_overrides, job_spec_overrides."""

import pytest

from trainjobs import MpiTrainJob, TorchTrainJob, TorchTrainJobArgs, TrainJobError
from trainjobs.testing import attempt, run

SPREAD = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"trainjobs.io/job-name": "llm"}}}]


def test_overrides_reach_every_training_pod_and_job_and_nothing_else():
    stack = run(lambda: TorchTrainJob("llm", TorchTrainJobArgs(
        image="img:1", num_nodes=2,
        pod_spec_overrides={"hostIPC": True, "dnsPolicy": "Default", "runtimeClassName": "nvidia",
                            "shareProcessNamespace": True},
        container_overrides={"startupProbe": {"tcpSocket": {"port": 29500}, "failureThreshold": 30}},
        job_spec_overrides={"podReplacementPolicy": "Failed"},
        extra_roles={"tensorboard": {"image": "tb:1"}})))
    job = stack.get("Job", "llm-node-0").manifest
    pod = job["spec"]["template"]["spec"]
    assert pod["hostIPC"] is True and pod["dnsPolicy"] == "Default" and pod["runtimeClassName"] == "nvidia"
    assert pod["shareProcessNamespace"] is True
    assert pod["containers"][0]["startupProbe"] == {"tcpSocket": {"port": 29500}, "failureThreshold": 30}
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    # Derived values are untouched.
    assert pod["subdomain"] == "llm" and job["spec"]["completions"] == 2
    assert {e["name"] for e in pod["containers"][0]["env"]} >= {"PET_NNODES", "PET_NODE_RANK"}
    tensorboard = stack.get("Job", "llm-tensorboard-0").manifest["spec"]["template"]["spec"]
    assert "hostIPC" not in tensorboard and "podReplacementPolicy" not in stack.get(
        "Job", "llm-tensorboard-0").manifest["spec"]


def test_mpi_overrides_reach_launcher_and_workers():
    stack = run(lambda: MpiTrainJob("pi", {"image": "mpi:1", "command": ["mpirun", "hello"], "num_nodes": 2,
                                          "pod_spec_overrides": {"hostIPC": True}}))
    for job in ("pi-launcher-0", "pi-node-0"):
        assert stack.get("Job", job).manifest["spec"]["template"]["spec"]["hostIPC"] is True


@pytest.mark.parametrize("field, key, value, message", [
    ("pod_spec_overrides", "subdomain", "other", "subdomain is derived by the job"),
    ("pod_spec_overrides", "containers", [], "containers is derived by the job"),
    ("pod_spec_overrides", "volumes", [], "use the volumes argument instead"),
    ("pod_spec_overrides", "hostNetwrk", True, 'not a field of PodSpec; did you mean "hostNetwork"?'),
    ("pod_spec_overrides", "hostIPC", "yes", "PodSpec.hostIPC takes a boolean, got str"),
    ("pod_spec_overrides", "hostNetwork", True, "use the host_network argument instead"),
    ("pod_spec_overrides", "topologySpreadConstraints", SPREAD, "use the topology_spread_constraints argument"),
    ("pod_spec_overrides", "terminationGracePeriodSeconds", True, "takes a integer, got bool"),
    ("container_overrides", "env", [], "use the env argument instead"),
    ("container_overrides", "name", "x", "name is derived by the job"),
    ("container_overrides", "lifecycle", [], "Container.lifecycle takes a mapping, got list"),
    ("job_spec_overrides", "completions", 3, "completions is derived by the job"),
    ("job_spec_overrides", "backoffLimit", 3, "use the backoff_limit argument instead"),
    ("job_spec_overrides", "podFailurePolicy", {"rules": []}, "use the failure_policy argument instead"),
    ("job_spec_overrides", "backoffLimitPerIndex", 1, "use the failure_policy.backoff_limit_per_index argument"),
    ("job_spec_overrides", "suspendd", True, 'did you mean "suspend"?'),
    ("job_spec_overrides", "suspend", True, "use the suspend argument instead"),
    ("pod_spec_overrides", "schedulerName", "volcano", "use the scheduler_name argument instead"),
])
def test_overrides_cannot_replace_what_the_job_derives_or_models(field, key, value, message):
    error, stack = attempt(lambda: TorchTrainJob("llm", {"image": "img:1", field: {key: value}}))
    assert isinstance(error, TrainJobError)
    assert [issue.field for issue in error.issues] == [f"{field}.{key}"]
    assert message in error.issues[0].message
    assert stack.resources == []
