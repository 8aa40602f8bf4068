"""TorchTrainJob under Pulumi mocks: children, names, parents, options flow and outputs."""

import gc
import logging

import pulumi
import pulumi_kubernetes as k8s
import pytest

from trainjobs import TorchTrainJob, TrainJobError
from trainjobs.testing import attempt, run

TOKEN = "trainjobs:index:TorchTrainJob"


def test_children_names_types_and_parent_chain():
    result = run(lambda: TorchTrainJob("demo", {"num_nodes": 3}))
    assert [(r.type, r.name) for r in result.resources] == [
        (TOKEN, "demo"),
        ("kubernetes:core/v1:Service", "demo"),
        ("kubernetes:batch/v1:Job", "demo-node-0"),
    ]
    component = result.get(type=TOKEN)
    for child in (result.get("Service", "demo"), result.get("Job", "demo-node-0")):
        assert result.parent_chain(child) == [component]
        assert child.urn.endswith(f"::{TOKEN}$kubernetes:{child.type.split(':', 1)[1]}::{child.name}")
        assert child.manifest["metadata"]["name"] == child.name   # explicit names, never auto-names
    assert result.get("Job", "demo-node-0").manifest["spec"]["completions"] == 3


def test_job_depends_on_service():
    result = run(lambda: TorchTrainJob("demo", {}))
    assert result.get("Job").dependencies == (result.get("Service").urn,)


def test_outputs_resolve_to_derived_values():
    def program():
        job = TorchTrainJob("demo", {"num_nodes": 2, "resources_per_node": {"requests": {"cpu": "2.5"}}})
        for key in ("service_name", "job_name", "master_addr", "master_port", "num_nodes", "num_proc_per_node"):
            pulumi.export(key, getattr(job, key))

    assert run(program).outputs == {
        "service_name": "demo", "job_name": "demo-node-0", "master_addr": "demo-node-0-0.demo",
        "master_port": 29500, "num_nodes": 2, "num_proc_per_node": "3"}


def test_outputs_are_known_during_preview():
    def program():
        pulumi.export("master_addr", TorchTrainJob("demo", {}).master_addr)

    assert run(program, preview=True).outputs == {"master_addr": "demo-node-0-0.demo"}


@pytest.mark.parametrize("as_providers", [False, True])
def test_children_inherit_the_callers_provider(as_providers):
    def program():
        provider = k8s.Provider("cluster-a", namespace="ml")
        opts = pulumi.ResourceOptions(providers=[provider]) if as_providers else pulumi.ResourceOptions(provider=provider)
        TorchTrainJob("demo", {}, opts=opts)

    result = run(program)
    for child in result.kubernetes():
        assert child.provider.startswith("urn:pulumi:test::test::pulumi:providers:kubernetes::cluster-a::")


def test_protect_and_depends_on_flow_to_children():
    def program():
        first = TorchTrainJob("prep", {})
        TorchTrainJob("demo", {}, opts=pulumi.ResourceOptions(depends_on=[first], protect=True))

    result = run(program)
    prep_children = {r.urn for r in result.kubernetes() if r.name.startswith("prep")}
    job = result.get("Job", "demo-node-0")
    assert prep_children <= set(job.dependencies)
    assert all(r.protect for r in result.resources if "demo" in r.name)
    assert not any(r.protect for r in result.resources if "prep" in r.name)


def test_aliases_are_accepted_for_renamed_components():
    def program():
        TorchTrainJob("demo", {}, opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name="old-demo")]))

    assert run(program).get(type=TOKEN).name == "demo"


def test_two_jobs_with_one_name_are_refused_before_the_second_registers():
    def program():
        TorchTrainJob("demo", {})
        TorchTrainJob("demo", {"num_nodes": 2})

    error, stack = attempt(program)
    assert isinstance(error, TrainJobError)
    assert error.issues[0].field == "name"
    assert 'another job is already named "demo"' in error.issues[0].message
    assert [r.name for r in stack.resources] == ["demo", "demo", "demo-node-0"]   # the first job only
    assert stack.get("Job", "demo-node-0").manifest["spec"]["completions"] == 1


def test_a_job_whose_objects_another_job_derives_is_refused():
    # Extra role "x-node" of job "ab" is Job "ab-x-node-0", which is also the trainer Job of job "ab-x".
    def program():
        TorchTrainJob("ab", {"extra_roles": {"x-node": {"image": "tb:1"}}})
        TorchTrainJob("ab-x", {})

    error, stack = attempt(program)
    assert isinstance(error, TrainJobError)
    assert error.issues[0].message == ('Job "ab-x-node-0" would also be created by job "ab"; rename one of the '
                                       "jobs (or the extra role) so their objects differ")
    assert len(stack.find(kind="Job", name="ab-x-node-0")) == 1
    assert stack.find(type="trainjobs:index:TorchTrainJob", name="ab-x") == []


def test_the_same_names_in_another_program_run_are_fine():
    for _ in range(2):
        assert run(lambda: TorchTrainJob("demo", {})).get("Job", "demo-node-0")


def test_args_model_or_dict_give_the_same_objects():
    from trainjobs import TorchTrainJobArgs
    as_dict = run(lambda: TorchTrainJob("demo", {"num_nodes": 2, "image": "img:1"}))
    as_model = run(lambda: TorchTrainJob("demo", TorchTrainJobArgs(num_nodes=2, image="img:1")))
    assert [r.manifest for r in as_dict.kubernetes()] == [r.manifest for r in as_model.kubernetes()]
