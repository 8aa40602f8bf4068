"""host_network (with its DNS and port consequences), topology_spread_constraints, per-role deadlines."""

import kubernetes_validate

from trainjobs import MpiTrainJob, TorchTrainJob, TrainJobError
from trainjobs.testing import attempt, run
from trainjobs.testing.checks import manifest_problems

SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
           "labelSelector": {"matchLabels": {"trainjobs.io/job-name": "llm"}}}]


def pod(result, job):
    return result.get("Job", job).manifest["spec"]["template"]["spec"]


def test_host_network_resolves_cluster_names_and_declares_host_ports():
    result = run(lambda: TorchTrainJob("llm", {
        "image": "img:1", "num_nodes": 2, "host_network": True, "ports": [{"containerPort": 8080, "name": "metrics"}],
        "sidecars": [{"name": "exporter", "image": "exp:1", "ports": [{"containerPort": 9400}]}],
        "extra_roles": {"tensorboard": {"image": "tb:1"}}}))
    spec = pod(result, "llm-node-0")
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["containers"][0]["ports"] == [{"containerPort": 8080, "name": "metrics", "hostPort": 8080},
                                              {"containerPort": 29500, "hostPort": 29500}]
    exporter = next(c for c in spec["initContainers"] if c["name"] == "exporter")
    assert exporter["ports"] == [{"containerPort": 9400, "hostPort": 9400}]
    # The env still names peers by their DNS names, which the host-network pods now resolve.
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["PET_MASTER_ADDR"] == "llm-node-0-0.llm"
    # An extra role is not on the host network unless it asks.
    assert "hostNetwork" not in pod(result, "llm-tensorboard-0")
    objects = [r.manifest for r in result.kubernetes()]
    assert manifest_problems(objects) == []
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33.0", strict=True)


def test_host_network_reaches_launcher_and_workers_of_an_mpi_job_whose_sshd_leaves_the_nodes_port_22():
    args = {"image": "mpi:1", "command": ["mpirun", "pi"], "num_nodes": 2, "host_network": True}
    error, stack = attempt(lambda: MpiTrainJob("pi", args))
    assert isinstance(error, TrainJobError) and stack.resources == []
    assert [i.field for i in error.issues] == ["host_network"] and "port 22" in error.issues[0].message
    result = run(lambda: MpiTrainJob("pi", {**args, "runtime": {"name": "mpi-distributed", "ssh_port": 2222}}))
    for job in ("pi-launcher-0", "pi-node-0"):
        assert pod(result, job)["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod(result, "pi-node-0")["containers"][0]["ports"] == [
        {"containerPort": 2222, "name": "ssh", "hostPort": 2222}]


def test_topology_spread_and_deadlines_per_role():
    result = run(lambda: TorchTrainJob("llm", {
        "image": "img:1", "topology_spread_constraints": SPREAD, "active_deadline_seconds": 86400,
        "dataset_initializer": {"storage_uri": "hf://a/b", "active_deadline_seconds": 3600},
        "extra_roles": {"tensorboard": {"image": "tb:1", "active_deadline_seconds": 90000},
                        "evaluator": {"image": "ev:1"}}}))
    assert pod(result, "llm-node-0")["topologySpreadConstraints"] == SPREAD
    deadlines = {job.name: job.manifest["spec"].get("activeDeadlineSeconds") for job in result.kubernetes()
                 if job.manifest["kind"] == "Job"}
    assert deadlines == {"llm-node-0": 86400, "llm-dataset-initializer-0": 3600, "llm-tensorboard-0": 90000,
                         "llm-evaluator-0": 86400}
