"""Arguments that pass values into the objects take pulumi.Input: plain values, Outputs, secrets, unknowns."""

import json

import pulumi
import pulumi_kubernetes as k8s
import pytest

from trainjobs import (MpiTrainJob, MpiTrainJobArgs, TorchTrainJob, TorchTrainJobArgs, TrainJobError)
from trainjobs.tools.cli.render import kubernetes_objects, ranks_text
from trainjobs.testing import attempt, run


def platform(image):
    """A namespace from the program, an image from elsewhere, a token from secret config."""
    ns = k8s.core.v1.Namespace("ml", metadata={"name": "ml"})
    job = TorchTrainJob("llm", {"namespace": ns.metadata.name, "image": image, "num_nodes": 2,
                                "env": {"HF_TOKEN": pulumi.Output.secret("hf_s3cr3t"), "STEPS": "10"}})
    return ns, job


def test_output_namespace_image_and_secret_token_reach_every_object_with_their_dependencies():
    stack = run(lambda: platform(pulumi.Output.from_input("ghcr.io/acme/llm:1.2")))
    ns = stack.get("Namespace", "ml")
    objects = [stack.get("Service", "llm"), stack.get("Job", "llm-node-0")]
    for obj in objects:
        assert obj.manifest["metadata"]["namespace"] == "ml"
        assert ns.urn in obj.dependencies, f"{obj.kind} does not depend on the Namespace"
    job = stack.get("Job", "llm-node-0")
    container = job.manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/acme/llm:1.2"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HF_TOKEN"] == "hf_s3cr3t" and env["STEPS"] == "10" and env["PET_NNODES"] == "2"
    redacted = {e["name"]: e.get("value") for e in
                job.redacted_manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert redacted["HF_TOKEN"] == "[secret]" and redacted["STEPS"] == "10"
    text = ranks_text(kubernetes_objects(stack))
    assert "HF_TOKEN=[secret]" in text and "hf_s3cr3t" not in text


def test_during_preview_an_unknown_image_hides_nothing():
    def program():
        built = k8s.core.v1.Namespace("build", metadata={"name": "build"})
        # A value the provider computes: unknown during preview, as an image from a build would be.
        platform(built.status.apply(lambda status: f"registry.example/llm:{status['phase'].lower()}"))

    stack = run(program, preview=True)
    assert sorted((r.kind, r.name) for r in stack.kubernetes()) == [
        ("Job", "llm-node-0"), ("Namespace", "build"), ("Namespace", "ml"), ("Service", "llm")]
    container = stack.get("Job", "llm-node-0").redacted_manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "[unknown]"
    assert {e["name"]: e.get("value") for e in container["env"]}["PET_MASTER_ADDR"] == "llm-node-0-0.llm"
    assert "container node: [unknown]" in ranks_text(kubernetes_objects(stack))


@pytest.mark.parametrize("field, value", [("num_nodes", 2), ("num_proc_per_node", 4), ("rendezvous", "c10d"),
                                          ("torchrun", False), ("resources_per_node", {"limits": {"cpu": "2"}})])
def test_what_decides_pods_or_env_must_be_plain(field, value):
    error, stack = attempt(lambda: TorchTrainJob("llm", {field: pulumi.Output.from_input(value)}))
    assert isinstance(error, TrainJobError)
    assert [issue.field for issue in error.issues] == [field]
    assert "must be a plain value, not an Output" in error.issues[0].message
    assert "known at preview" in error.issues[0].message
    assert stack.resources == []


@pytest.mark.parametrize("args, field", [
    ({"resources_per_node": {"limits": {"cpu": pulumi.Output.from_input("2")}}}, "resources_per_node.limits.cpu"),
    ({"node_selector": pulumi.Output.from_input({"pool": "gpu"})}, "node_selector"),
    ({"runtime": {"name": "r", "labels": {"team": pulumi.Output.from_input("llm")}}}, "runtime.labels.team"),
    ({"command": pulumi.Output.from_input(["python"])}, "command")])
def test_an_output_inside_or_around_a_plain_mapping_or_list_is_named_where_it_is(args, field):
    """A mapping whose values may be Outputs is itself plain; a plain mapping's values are plain."""
    error, stack = attempt(lambda: TorchTrainJob("llm", args))
    assert [issue.field for issue in error.issues] == [field]
    assert error.issues[0].message.startswith("must be a plain value, not an Output")
    assert stack.resources == []


def test_a_bad_image_that_arrives_as_an_output_fails_when_it_resolves_naming_the_field():
    error, _ = attempt(lambda: TorchTrainJob("llm", {"image": pulumi.Output.from_input(" ghcr.io/acme/llm:1 ")}))
    assert isinstance(error, TrainJobError), error
    assert error.issues[0].field == "image"
    assert "leading or trailing whitespace" in error.issues[0].message
    assert "arrived as an Output" in error.issues[0].message


def test_a_bad_namespace_that_arrives_as_an_output_fails_when_it_resolves():
    error, _ = attempt(lambda: TorchTrainJob("llm", {"namespace": pulumi.Output.from_input("ML_Team")}))
    assert isinstance(error, TrainJobError) and error.issues[0].field == "namespace"


def test_intel_mpi_pods_get_their_dns_search_domain_from_an_output_namespace():
    stack = run(lambda: MpiTrainJob("pi", {"image": "mpi:1", "command": ["mpirun", "hello"], "num_nodes": 2,
                                          "mpi_implementation": "IntelMPI",
                                          "namespace": pulumi.Output.from_input("hpc")}))
    for job in ("pi-launcher-0", "pi-node-0"):
        pod = stack.get("Job", job).manifest["spec"]["template"]["spec"]
        assert pod["dnsConfig"] == {"searches": ["pi.hpc.svc.cluster.local"]}


def test_typed_args_mistakes_give_the_dict_forms_message():
    with pytest.raises(TrainJobError) as typed:
        TorchTrainJobArgs(image="x:1", num_node=2)
    error, _ = attempt(lambda: TorchTrainJob("llm", {"image": "x:1", "num_node": 2}))
    assert typed.value.issues == error.issues
    assert str(typed.value.issues[0]) == 'num_node: unknown argument "num_node"; did you mean "num_nodes"?'
    # An Args object has no job name yet: the error names where the program wrote it.
    assert str(typed.value).startswith(f"TorchTrainJobArgs ({__file__}:104): invalid arguments")
    with pytest.raises(TrainJobError) as typed:
        MpiTrainJobArgs(num_nodes=0)
    error, _ = attempt(lambda: MpiTrainJob("pi", {"num_nodes": 0}))
    assert typed.value.issues == error.issues
    assert typed.value.issues[0].field == "num_nodes"


@pytest.mark.parametrize("value", [True, "yes"])
def test_a_boolean_is_not_a_count(value):
    with pytest.raises(TrainJobError) as info:
        TorchTrainJobArgs(num_nodes=value)
    assert info.value.issues[0].field == "num_nodes"


def test_typed_args_and_outputs_compose():
    args = TorchTrainJobArgs(image=pulumi.Output.from_input("img:2"), num_nodes=2,
                             labels={"team": pulumi.Output.from_input("llm")})
    stack = run(lambda: TorchTrainJob("llm", args))
    job = stack.get("Job", "llm-node-0").manifest
    assert job["metadata"]["labels"]["team"] == "llm"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"


def test_a_bad_output_deep_inside_typed_args_is_found_and_checked_when_it_resolves():
    from trainjobs import Initializer
    args = TorchTrainJobArgs(image="img:1", dataset_initializer=Initializer(
        storage_uri="hf://org/data", image=pulumi.Output.from_input("Bad Image")))
    error, _ = attempt(lambda: TorchTrainJob("llm", args))
    assert isinstance(error, TrainJobError), error
    assert error.issues[0].field == "dataset_initializer.image"
    assert "arrived as an Output" in error.issues[0].message


def test_an_initializer_env_from_output_is_accepted_and_keeps_its_marker_stable():
    def program(secret):
        TorchTrainJob("llm", {"image": "img:1", "dataset_initializer": {
            "storage_uri": "hf://org/data", "env_from": [{"secretRef": {"name": secret}}]}})

    plain = run(lambda: program("hf-token"))
    deferred = run(lambda: program(pulumi.Output.from_input("hf-token")))
    def objects(stack):   # registration order follows when Outputs resolve
        return sorted((r.kind, r.name, json.dumps(r.manifest, sort_keys=True)) for r in stack.kubernetes())

    assert objects(plain) == objects(deferred)
    assert [kind for kind, _, _ in objects(plain)] == ["Job", "Job", "PersistentVolumeClaim", "Service"]
