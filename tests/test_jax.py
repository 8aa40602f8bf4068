"""JaxTrainJob: JAX_* env as Kubeflow Trainer's JAX plugin, reserved against user override."""

import pytest

from trainjobs import JaxTrainJob, TrainJobError
from trainjobs.testing import run


def test_jax_env_and_objects():
    result = run(lambda: JaxTrainJob("jx", {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2,
                                            "env": {"XLA_FLAGS": "--xla_force_host_platform_device_count=1"}}))
    job = result.get("Job", "jx-node-0").manifest
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (2, 2)
    node = job["spec"]["template"]["spec"]["containers"][0]
    assert node["env"] == [
        {"name": "XLA_FLAGS", "value": "--xla_force_host_platform_device_count=1"},
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
        {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "jx-node-0-0.jx:29500"},
    ]
    assert node["ports"] == [{"containerPort": 29500}]
    assert result.get("Service", "jx").manifest["spec"]["clusterIP"] == "None"


def test_jax_reserved_env_deviation_from_kubeflow():
    with pytest.raises(TrainJobError) as info:
        run(lambda: JaxTrainJob("jx", {"env": {"JAX_PROCESS_ID": "0"}}))
    assert "env: must not have reserved envs, invalid envs configured: [JAX_PROCESS_ID]" in str(info.value)


def test_jax_default_runtime_image():
    result = run(lambda: JaxTrainJob("jx", {}))
    node = result.get("Job", "jx-node-0").manifest["spec"]["template"]["spec"]["containers"][0]
    assert node["image"] == "nvcr.io/nvidia/jax:25.10-py3"
