"""GPUs through Dynamic Resource Allocation (devices_per_node, a template's devices): the ResourceClaimTemplate
per role and the pods' claims, exactly; Kubernetes' schema for resource.k8s.io/v1; the one reading of "GPUs a
pod asks for" that requests, the render tree, explain, Volcano's minResources, num_proc_per_node auto and MPI
slots share; and the refusals, each naming its argument."""

import kubernetes_validate
import pytest

from trainjobs import (DeviceRequest, MpiTrainJob, TorchTrainJob, TorchTrainJobArgs, TrainJobError,
                       XGBoostTrainJob)
from trainjobs.backends import controller_jobs, total_requests
from trainjobs.core.args import parse_args
from trainjobs.pipeline.pipeline import derive
from trainjobs.kube import apivalidation
from trainjobs.kube.requests import ClaimTemplates, pod_requests
from trainjobs.testing import run
from trainjobs.tools.cli.render import kubernetes_objects, ranks_text, tree

# The newest Kubernetes schema kubernetes-validate bundles: resource.k8s.io/v1 is GA since 1.34.
SCHEMA_VERSION = kubernetes_validate.latest_version()
EIGHT_GPUS = {"image": "ghcr.io/acme/train:1.4", "namespace": "ml", "num_nodes": 2,
              "devices_per_node": [{"count": 8}],
              "resources_per_node": {"requests": {"cpu": "16", "memory": "64Gi"}, "limits": {"memory": "64Gi"}}}
PI = {"image": "mpioperator/mpi-pi:openmpi", "command": ["mpirun", "/home/mpiuser/pi"], "namespace": "ml"}


def plan(component, args, name="llm"):
    return derive(component.family, name, parse_args(component.__name__, name, component.family.args_type, args))


def by_name(manifests):
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def pod_spec(job):
    return job["spec"]["template"]["spec"]


def problems(component, args):
    with pytest.raises(TrainJobError) as caught:
        plan(component, args)
    return {issue.field: issue.message for issue in caught.value.issues}


def test_a_role_claiming_gpus_gets_a_claim_template_and_its_pods_claim_from_it():
    found = by_name(plan(TorchTrainJob, EIGHT_GPUS).manifests)
    template = found[("ResourceClaimTemplate", "llm-node-devices")]
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert template["metadata"]["namespace"] == "ml"
    assert template["metadata"]["labels"]["trainjobs.io/job-name"] == "llm"
    assert template["metadata"]["labels"]["trainjobs.io/role"] == "node"
    assert template["spec"] == {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 8}}]}}}
    pod = pod_spec(found[("Job", "llm-node-0")])
    assert pod["resourceClaims"] == [{"name": "devices", "resourceClaimTemplateName": "llm-node-devices"}]
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "16", "memory": "64Gi"},
                                                 "limits": {"memory": "64Gi"}, "claims": [{"name": "devices"}]}
    # The template is registered before the pods that claim from it.
    kinds = [m["kind"] for m in plan(TorchTrainJob, EIGHT_GPUS).manifests]
    assert kinds.index("ResourceClaimTemplate") < kinds.index("Job")


def test_typed_device_requests_render_as_the_dict_form():
    typed = TorchTrainJobArgs(**{**EIGHT_GPUS, "devices_per_node": [DeviceRequest(count=8)]})
    assert derive(TorchTrainJob.family, "llm", typed).manifests == plan(TorchTrainJob, EIGHT_GPUS).manifests
    with pytest.raises(TrainJobError) as caught:
        DeviceRequest(count=0)
    assert [issue.field for issue in caught.value.issues] == ["count"]


def test_several_device_requests_share_one_claim_per_pod():
    devices = [{"name": "gpu", "count": 4}, {"name": "nic", "device_class": "rdma.example.com", "count": 2}]
    found = by_name(plan(TorchTrainJob, {**EIGHT_GPUS, "devices_per_node": devices}).manifests)
    requests = found[("ResourceClaimTemplate", "llm-node-devices")]["spec"]["spec"]["devices"]["requests"]
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests] == [
        ("gpu", "gpu.nvidia.com", 4), ("nic", "rdma.example.com", 2)]
    assert plan(TorchTrainJob, {**EIGHT_GPUS, "devices_per_node": devices}).outputs.requests == {
        "cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8", "rdma.example.com": "4"}


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_every_object_passes_the_kubernetes_schema_and_the_api_servers_rules(backend):
    registered = kubernetes_objects(run(lambda: TorchTrainJob("llm", {
        **EIGHT_GPUS, "backend": backend, "extra_roles": {"eval": {"image": "ev:1", "devices": [{"count": 1}]}},
        "dataset_initializer": {"image": "init:1", "storage_uri": "hf://org/data"}})))
    assert {"ResourceClaimTemplate"} <= {o["kind"] for o in registered}
    running = controller_jobs(registered)
    assert apivalidation.problems(running) == []
    for obj in running:
        if obj["kind"] != "JobSet":
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def test_the_schema_refuses_what_the_claim_template_must_not_hold():
    """The shapes are Kubernetes' own: the schema knows `exactly` and refuses a field it does not have."""
    template = by_name(plan(TorchTrainJob, EIGHT_GPUS).manifests)[("ResourceClaimTemplate", "llm-node-devices")]
    wrong = {**template, "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClass": "gpu.nvidia.com"}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, SCHEMA_VERSION, strict=True)


def test_initializers_and_extra_roles_claim_for_the_container_that_runs_their_template():
    found = by_name(plan(TorchTrainJob, {
        "image": "t:1", "dataset_initializer": {"image": "init:1", "storage_uri": "hf://org/data", "devices": [{"count": 1}]},
        "extra_roles": {"eval": {"image": "ev:1", "devices": [{"device_class": "mig.nvidia.com", "count": 2}]}}}).manifests)
    initializer = pod_spec(found[("Job", "llm-dataset-initializer-0")])
    assert initializer["resourceClaims"] == [{"name": "devices",
                                              "resourceClaimTemplateName": "llm-dataset-initializer-devices"}]
    assert initializer["initContainers"][0]["resources"]["claims"] == [{"name": "devices"}]
    assert "resources" not in initializer["containers"][0]   # the marker container claims nothing
    evaluator = pod_spec(found[("Job", "llm-eval-0")])
    assert evaluator["containers"][0]["resources"]["claims"] == [{"name": "devices"}]
    assert "resourceClaims" not in pod_spec(found[("Job", "llm-node-0")])
    assert found[("ResourceClaimTemplate", "llm-eval-devices")]["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 2}


def test_a_job_asking_for_8_gpus_through_dra_shows_8_gpus_per_pod_in_requests_and_explain():
    assert plan(TorchTrainJob, EIGHT_GPUS).outputs.requests == {"cpu": "32", "memory": "128Gi",
                                                                "nvidia.com/gpu": "16"}
    for backend in ("jobs", "jobset"):
        result = run(lambda: TorchTrainJob("llm", {**EIGHT_GPUS, "backend": backend}))
        objects = kubernetes_objects(result)
        assert ranks_text(objects).splitlines()[0] == (
            "Job llm-node-0: 2 pods, each requests 8 nvidia.com/gpu, 16 cpu, 64Gi memory; in all 16 nvidia.com/gpu, "
            "32 cpu, 128Gi memory")
        lines = tree(result).splitlines()
        assert lines[1] == "└─ TorchTrainJob llm  (requests 16 nvidia.com/gpu, 32 cpu, 128Gi memory)"
        assert lines[-1] == "Stack requests: 16 nvidia.com/gpu, 32 cpu, 128Gi memory in 2 pods"
        assert total_requests(objects) == {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "16"}


def test_a_claim_is_resolved_in_its_pods_namespace_and_counted_once_per_pod():
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpus", "namespace": "a"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}},
                    {"name": "all", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}}}
    shared = {"name": "d", "resourceClaimTemplateName": "gpus"}
    spec = {"resourceClaims": [shared], "containers": [
        {"name": "a", "resources": {"claims": [{"name": "d"}]}}, {"name": "b", "resources": {"claims": [{"name": "d"}]}}]}
    claims = ClaimTemplates([template])
    assert pod_requests(spec, claims, "a") == {"nvidia.com/gpu": 4}   # All has no count known before allocation
    assert pod_requests(spec, claims, "b") == {}                      # no such template in namespace b
    assert pod_requests(spec) == {}


def test_volcano_min_resources_count_the_claimed_gpus_and_kueue_needs_nothing_more():
    group = by_name(plan(TorchTrainJob, {**EIGHT_GPUS, "gang_scheduler": "volcano"}).manifests)[("PodGroup", "llm")]
    assert group["spec"]["minResources"] == {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "16"}
    queued = by_name(plan(TorchTrainJob, {**EIGHT_GPUS, "gang_scheduler": "kueue", "queue": "team"}).manifests)
    # Kueue reads the claims itself, by its deviceClassMappings: the Job carries only the queue label.
    assert pod_spec(queued[("Job", "llm-node-0")])["resourceClaims"] == [
        {"name": "devices", "resourceClaimTemplateName": "llm-node-devices"}]


def test_num_proc_per_node_auto_and_xgboost_workers_count_claimed_gpus():
    env = {e["name"]: e.get("value") for e in pod_spec(by_name(plan(TorchTrainJob, {
        **EIGHT_GPUS, "resources_per_node": {"requests": {"cpu": "6"}}}).manifests)[("Job", "llm-node-0")])[
        "containers"][0]["env"]}
    assert env["PET_NPROC_PER_NODE"] == "auto"
    assert plan(XGBoostTrainJob, {"image": "x:1", "num_nodes": 2, "devices_per_node": [{"count": 4}]}
                ).outputs.num_workers == 8


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_mpi_slots_come_from_the_claimed_gpus_and_the_launcher_claims_none(backend):
    found = by_name(plan(MpiTrainJob, {**PI, "num_nodes": 2, "devices_per_node": [{"count": 4}],
                                       "backend": backend}, name="pi").manifests)
    assert found[("ConfigMap", "pi-mpi-hostfile")]["data"]["hostfile"] == (
        "pi-node-0-0.pi slots=4\npi-node-0-1.pi slots=4\n")
    assert ("ResourceClaimTemplate", "pi-launcher-devices") not in found
    assert ("ResourceClaimTemplate", "pi-node-devices") in found
    jobs = {j["metadata"]["name"]: j for j in controller_jobs(list(found.values())) if j["kind"] == "Job"}
    assert "resourceClaims" not in pod_spec(jobs["pi-launcher-0"])


# --- refusals, each naming its argument -------------------------------------------------------------

@pytest.mark.parametrize("devices, field, message", [
    ([{"name": "GPU", "count": 8}], "devices_per_node[0].name", 'request name "GPU" must be a DNS label'),
    ([{"count": 4}, {"count": 4}], "devices_per_node[1].name", 'a second request named "gpu" in the claim'),
    ([{"device_class": "gpu_nvidia"}], "devices_per_node[0].device_class",
     'device class "gpu_nvidia" must be a DNS subdomain'),
    ([{"count": 0}], "devices_per_node[0].count", "greater than or equal to 1"),
    ([{"cout": 8}], "devices_per_node[0].cout", 'unknown argument "cout"; did you mean "count"?'),
    ([{"name": f"r{i}"} for i in range(33)], "devices_per_node", "33 requests; a claim holds at most 32"),
])
def test_a_device_request_the_api_server_refuses_is_refused_naming_it(devices, field, message):
    found = problems(TorchTrainJob, {**EIGHT_GPUS, "devices_per_node": devices})
    assert message in found[field], found


def test_gpus_asked_both_as_a_resource_and_through_a_claim_are_refused():
    found = problems(TorchTrainJob, {**EIGHT_GPUS, "resources_per_node": {"limits": {"nvidia.com/gpu": "8"}}})
    assert found == {"devices_per_node": 'the pods of llm-node-0 would get GPUs twice: as the device resource in '
                                         'resources_per_node and through this claim. Ask one way: remove these GPU '
                                         'devices, or set the GPU resource to "0" (a runtime\'s stays otherwise)'}
    # Devices of a class that is no GPU go beside GPU resources.
    plan(TorchTrainJob, {**EIGHT_GPUS, "resources_per_node": {"limits": {"nvidia.com/gpu": "8"}},
                         "devices_per_node": [{"name": "nic", "device_class": "rdma.example.com"}]})


def test_an_extra_roles_bad_request_is_named_under_the_role():
    found = problems(TorchTrainJob, {"image": "t:1", "extra_roles": {"eval": {
        "image": "e:1", "devices": [{"name": "a"}, {"name": "a"}]}}})
    assert 'a second request named "a"' in found["extra_roles.eval.devices[1].name"]


def test_resource_claims_are_not_an_override_field():
    found = problems(TorchTrainJob, {"image": "t:1", "pod_spec_overrides": {"resourceClaims": []}})
    assert "devices_per_node" in found["pod_spec_overrides.resourceClaims"]


def test_the_api_servers_claim_rules_on_hand_written_objects():
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All",
                                              "count": 2}},
                    {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}},
                    {"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 0}},
                    {"name": "d"}]}}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never",
        "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t", "resourceClaimName": "shared"},
                           {"name": "g", "resourceClaimTemplateName": "t"}],
        "containers": [{"name": "c", "image": "i:1", "resources": {"claims": [{"name": "h"}]}}]}}}}
    found = [(p.object, apivalidation.format_path(p.path), p.message) for p in apivalidation.problems([template, job])]
    requests, pod = "spec.spec.devices.requests", "spec.template.spec"
    assert found == [
        ("ResourceClaimTemplate/t", f"{requests}[0].exactly.count", "a request for all devices gives no count"),
        ("ResourceClaimTemplate/t", f"{requests}[1].exactly.allocationMode", '"Some" is not ExactCount or All'),
        ("ResourceClaimTemplate/t", f"{requests}[2].exactly.count", "must be between 1 and 9223372036854775807 (got 0)"),
        ("ResourceClaimTemplate/t", f"{requests}[3].exactly",
         "required: a request gives exactly one of exactly or firstAvailable"),
        ("Job/j", f"{pod}.resourceClaims[0]", "gives exactly one of resourceClaimName and resourceClaimTemplateName"),
        ("Job/j", f"{pod}.resourceClaims[1].name", 'a second resource claim named "g" in the pod'),
        ("Job/j", f"{pod}.containers[0].resources.claims[0].name", 'no resource claim named "h" in the pod\'s '
                                                                   "resourceClaims")]
