"""What a job costs: total requests of every pod, as the scheduler reserves them."""

from decimal import Decimal

import pytest

from trainjobs import MpiTrainJob, TorchTrainJob
from trainjobs.backends import pod_count, total_requests
from trainjobs.kube import requests
from trainjobs.kube.requests import format_quantity, pod_requests
from trainjobs.testing import run


def job(parallelism, containers, init=(), completions=None):
    spec = {"parallelism": parallelism, "template": {"spec": {"containers": list(containers),
                                                               "initContainers": list(init)}}}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}


def c(requests=None, limits=None, **extra):
    return {"name": "c", "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v}, **extra}


def test_pods_times_requests_with_limits_standing_in_for_missing_requests():
    manifests = [
        job(4, [c({"cpu": "2500m", "memory": "16Gi"}, {"nvidia.com/gpu": "8", "memory": "20Gi"})]),
        job(1, [c({"cpu": "500m", "memory": "512Mi"})]),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}, "spec": {}},
    ]
    assert total_requests(manifests) == {"cpu": "10500m", "memory": "66048Mi", "nvidia.com/gpu": "32"}   # 64Gi + 512Mi
    assert pod_count(manifests) == 5


def test_kube_totals_take_pod_specs_with_their_counts():
    """kube/ knows pods, not the objects that make them: the backends feed it pod sets."""
    gpu, cpu = {"containers": [c(limits={"nvidia.com/gpu": "4"})]}, {"containers": [c({"cpu": "250m"})]}
    assert requests.total_requests([(3, gpu, None), (2, cpu, None), (0, gpu, None)]) == {"cpu": "500m",
                                                                                         "nvidia.com/gpu": "12"}
    assert requests.total_requests([]) == {}


def test_effective_pod_request_counts_sidecars_and_the_largest_init_container():
    spec = {"containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "1"})],
            "initContainers": [c({"cpu": "4"}), c({"cpu": "500m", "memory": "2Gi"}, restartPolicy="Always"),
                               c({"memory": "3Gi"})]}
    # running: 2 CPUs + 0.5 sidecar; init peak: 4 CPUs; memory: 1Gi + 2Gi sidecar vs 3Gi + 2Gi at the last init.
    assert pod_requests(spec) == {"cpu": Decimal("4"), "memory": Decimal(5 * 2**30)}


def test_jobsets_count_replicas_and_completions_cap_parallelism():
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "s"}, "spec": {
        "replicatedJobs": [{"name": "node", "replicas": 2, "template": {"spec": job(3, [c({"amd.com/gpu": "1"})])["spec"]}}]}}
    assert total_requests([jobset]) == {"amd.com/gpu": "6"}
    assert total_requests([job(8, [c({"cpu": "1"})], completions=2)]) == {"cpu": "2"}


@pytest.mark.parametrize("resource, amount, shown", [
    ("memory", Decimal(3 * 2**30), "3Gi"), ("memory", Decimal(1536 * 2**20), "1536Mi"), ("memory", Decimal(1000), "1000"),
    ("cpu", Decimal("2.5"), "2500m"), ("cpu", Decimal(12), "12"), ("nvidia.com/gpu", Decimal(16), "16"),
    ("hugepages-2Mi", Decimal(4 * 2**20), "4Mi"),
])
def test_totals_are_kubernetes_quantities(resource, amount, shown):
    assert format_quantity(resource, amount) == shown


def test_a_job_with_launcher_and_initializers_reports_every_pod():
    result = run(lambda: MpiTrainJob("pi", {
        "image": "mpi:1", "command": ["mpirun", "pi"], "num_nodes": 3, "resources_per_node": {"limits": {
            "nvidia.com/gpu": 4, "cpu": "8", "memory": "64Gi"}},
        "dataset_initializer": {"storage_uri": "hf://a/b", "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}}))
    # 3 nodes x (8 CPUs, 64Gi, 4 GPUs) + the launcher (nothing requested) + the initializer (2 CPUs, 8Gi).
    assert total_requests(r.manifest for r in result.kubernetes()) == {
        "cpu": "26", "memory": "200Gi", "nvidia.com/gpu": "12"}
    assert pod_count(r.manifest for r in result.kubernetes()) == 5


def test_the_requests_output_is_the_jobs_total():
    jobs = []
    run(lambda: jobs.append(TorchTrainJob("llm", {"image": "img:1", "num_nodes": 2, "resources_per_node": {
        "requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 8}}})))
    assert jobs[0].plan.outputs.requests == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "16"}


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 64), millicores=st.integers(1, 64000), mebibytes=st.integers(1, 2**20),
       gpus=st.integers(0, 8))
def test_a_jobs_total_is_its_pods_times_each_pods_request(nodes, millicores, mebibytes, gpus):
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    jobs = []
    run(lambda: jobs.append(TorchTrainJob("t", {"image": "img:1", "num_nodes": nodes, "resources_per_node": {
        "requests": {"cpu": f"{millicores}m", "memory": f"{mebibytes}Mi"}, "limits": limits}})))
    totals = {name: Decimal(0) for name in ("cpu", "memory")}
    totals["cpu"] = Decimal(nodes * millicores) / 1000
    totals["memory"] = Decimal(nodes * mebibytes * 2**20)
    expected = {name: format_quantity(name, amount) for name, amount in totals.items()}
    if gpus:
        expected["nvidia.com/gpu"] = str(nodes * gpus)
    assert jobs[0].plan.outputs.requests == expected


def test_a_request_known_only_at_deployment_is_left_out():
    import pulumi
    sidecar = {"name": "s", "image": "s:1", "resources": {"requests": {"cpu": pulumi.Output.from_input("2")}}}
    jobs = []
    run(lambda: jobs.append(TorchTrainJob("t", {"image": "img:1", "sidecars": [sidecar],
                                                 "resources_per_node": {"requests": {"cpu": "1"}}})))
    assert jobs[0].plan.outputs.requests == {"cpu": "1"}
