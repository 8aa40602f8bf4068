"""Every rendered manifest passes the Kubernetes schemas (strict) and the checks they miss."""

from pathlib import Path

import kubernetes_validate
import pytest

from trainjobs import DeepSpeedTrainJob, JaxTrainJob, MlxTrainJob, MpiTrainJob, TorchTrainJob
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.testing import run, run_program
from trainjobs.testing.checks import manifest_problems

VERSIONS = ["1.31.0", kubernetes_validate.latest_version()]
EXAMPLE = Path(__file__).resolve().parent.parent / "stacks" / "__main__.py"

JOBS = {
    "example-stack": None,
    "minimal": {},
    "gpu-everything": {
        "namespace": "ml", "num_nodes": 8, "num_proc_per_node": 8, "image_pull_policy": "IfNotPresent",
        "resources_per_node": {"limits": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti"}},
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        "env_from": [{"configMapRef": {"name": "nccl-env"}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        "volume_mounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}},
        "security_context": {"runAsUser": 1000, "fsGroup": 1000},
        "container_security_context": {"allowPrivilegeEscalation": False},
        "service_account_name": "trainer", "image_pull_secrets": ["regcred"], "priority_class_name": "high",
        "active_deadline_seconds": 3600, "ttl_seconds_after_finished": 60, "working_dir": "/app",
        "pod_annotations": {"sidecar.istio.io/inject": "false"}, "labels": {"team": "llm"},
        "wait_for_completion": True, "wait_timeout_seconds": 3600,
    },
    "c10d": {"num_nodes": 3, "rendezvous": "c10d", "shm_size": "0"},
    "mpi-openmpi": (MpiTrainJob, {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 3}),
    "mpi-intel-launcher-node": (MpiTrainJob, {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 2,
                                              "mpi_implementation": "IntelMPI", "namespace": "hpc",
                                              "run_launcher_as_node": True}),
    "mpi-mpich-one-host": (MpiTrainJob, {"image": "mpi:1", "command": ["mpiexec", "hostname"],
                                         "mpi_implementation": "MPICH", "namespace": "hpc", "run_launcher_as_node": True}),
    "deepspeed": (DeepSpeedTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 4,
                                      "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}}),
    "mlx": (MlxTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 2}),
    "jax": (JaxTrainJob, {"num_nodes": 4}),
    "roles-and-initializers": {
        "num_nodes": 4, "torchrun": False,
        "dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"},
        "model_initializer": {"storage_uri": "hf://meta-llama/Llama-3.2-1B-Instruct", "secret_name": "hf"},
        "workspace_storage_class": "fast", "workspace_access_mode": "ReadWriteMany",
        "sidecars": [{"name": "metrics", "image": "m:1"}], "env_injection": ["metrics"],
        "extra_roles": {"tensorboard": {"image": "tb:1", "ports": [{"containerPort": 6006}]},
                        "extras": {"image": "svc:1", "num_pods": 4}},
    },
}


def objects_for(case):
    if JOBS[case] is None:
        return kubernetes_objects(run_program(EXAMPLE, stack="dev"))
    component, args = JOBS[case] if isinstance(JOBS[case], tuple) else (TorchTrainJob, JOBS[case])
    return kubernetes_objects(run(lambda: component("job", args)))


@pytest.mark.parametrize("case", sorted(JOBS))
@pytest.mark.parametrize("version", VERSIONS)
def test_manifests_are_schema_valid_strict(case, version):
    for obj in objects_for(case):
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("case", sorted(JOBS))
def test_manifests_pass_the_checks_the_schema_misses(case):
    assert manifest_problems(objects_for(case)) == []


@pytest.mark.parametrize("mutate, expected", [
    (lambda job: job["spec"].update(completionMode="Sometimes"), 'completionMode: "Sometimes" is not NonIndexed or Indexed'),
    (lambda job: job["spec"]["template"]["spec"].update(restartPolicy="Always"),
     'restartPolicy: a Job\'s pods restart Never or OnFailure, not "Always"'),
    (lambda job: job["spec"].update(completions=100001, parallelism=100001), "an Indexed Job runs at most 100000 pods"),
    (lambda job: job["metadata"].update(name="x" * 62), "derived pod hostname"),
    (lambda job: job["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "1BAD", "value": "1"}),
     "env[5].name"),
    (lambda job: job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].append({"name": "x", "mountPath": "/x"}),
     'no volume named "x" in the pod'),
])
def test_checks_catch_what_the_schema_misses(mutate, expected):
    objects = objects_for("minimal")
    job = next(o for o in objects if o["kind"] == "Job")
    mutate(job)
    kubernetes_validate.validate(job, VERSIONS[0], strict=True)   # the schema alone accepts it
    assert any(expected in p for p in manifest_problems(objects)), manifest_problems(objects)
