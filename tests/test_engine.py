"""The offline engine: what a run leaves behind, what resources get back, and what a program imports."""

import gc
import subprocess
import sys

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import resource as pulumi_resource

from trainjobs import TorchTrainJob, TrainJobError
from trainjobs.testing import attempt, run


def test_a_run_restores_the_collector_and_the_call_stack_capture_even_when_the_program_fails():
    thresholds, capture = gc.get_threshold(), pulumi_resource._get_stack_trace
    seen = {}

    def program():
        seen["thresholds"] = gc.get_threshold()
        seen["capture"] = pulumi_resource._get_stack_trace
        TorchTrainJob("demo", {"num_nodes": 0})

    error, _ = attempt(program)
    assert isinstance(error, TrainJobError)
    assert seen["thresholds"] != thresholds and seen["capture"] is not capture   # tuned during the run
    assert gc.get_threshold() == thresholds and pulumi_resource._get_stack_trace is capture


def test_resources_get_their_inputs_back_as_outputs():
    def program():
        service = k8s.core.v1.Service("svc", metadata={"name": "svc", "labels": {"a": "b"}},
                                      spec={"clusterIP": "None", "ports": [{"port": 29500}]})
        pulumi.export("labels", service.metadata.labels)
        pulumi.export("port", service.spec.ports[0].port)
        pulumi.export("id", service.id)

    assert run(program).outputs == {"labels": {"a": "b"}, "port": 29500, "id": "svc-id"}


def test_during_a_preview_an_output_computed_from_an_unknown_input_stays_unknown():
    def program():
        image = pulumi.StackReference("acme/images/prod").get_output("trainerImage")
        job = TorchTrainJob("demo", {"image": image})
        pulumi.export("image", job.resources["Job/demo-node-0"].spec.template.spec.containers[0].image)
        pulumi.export("name", job.resources["Job/demo-node-0"].metadata.name)

    outputs = run(program, preview=True).outputs
    assert outputs["name"] == "demo-node-0"
    assert isinstance(outputs["image"], pulumi.output.Unknown)   # not None, not a value
    assert run(program, preview=True, stack_outputs={"acme/images/prod": {"trainerImage": "img:2"}}
               ).outputs["image"] == "img:2"


def test_an_output_attribute_is_made_on_first_read_and_unknown_attributes_are_errors():
    def program():
        job = TorchTrainJob("demo", {})
        assert "master_addr" not in vars(job)
        assert job.master_addr is job.master_addr   # one Output, kept once made
        try:
            job.master_adr
        except AttributeError as exc:
            pulumi.export("error", str(exc))
        pulumi.export("addr", job.master_addr)

    assert run(program).outputs == {"addr": "demo-node-0-0.demo",
                                    "error": "'TorchTrainJob' object has no attribute 'master_adr'"}


def imported_after(code: str, package: str = "trainjobs") -> set[str]:
    """The modules of `package` a fresh interpreter has imported after running `code`."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\n"
                           f"print(' '.join(m for m in sys.modules if m.startswith({package!r})))"],
                          capture_output=True, text=True, timeout=300, check=True)
    return set(done.stdout.split())


def test_a_family_module_is_imported_only_when_one_of_its_names_is_used():
    torch_only = imported_after("from trainjobs import TorchTrainJob")
    assert "trainjobs.families.torch" in torch_only
    assert not torch_only & {"trainjobs.families.mpi", "trainjobs.families.jax", "trainjobs.families.torchtune", "trainjobs.families.xgboost"}
    assert "trainjobs.families.mpi" in imported_after("import trainjobs\ntrainjobs.MpiRuntime")
    everything = imported_after("from trainjobs import *")
    assert {"trainjobs.families.mpi", "trainjobs.families.jax", "trainjobs.families.torchtune", "trainjobs.families.xgboost"} <= everything


def test_a_kubernetes_api_module_is_imported_only_when_a_job_registers_one_of_its_kinds():
    program = ("from trainjobs import TorchTrainJob\nfrom trainjobs.testing import run\n"
               "assert run(lambda: TorchTrainJob('demo', {'image': 'img:1'ARGS})).kubernetes()")
    plain = imported_after(program.replace("ARGS", ""), "pulumi_kubernetes.")
    assert {"pulumi_kubernetes.core.v1", "pulumi_kubernetes.batch.v1"} <= plain
    assert "pulumi_kubernetes.resource.v1" not in plain
    devices = imported_after(program.replace("ARGS", ", 'devices_per_node': [{'count': 8}]"), "pulumi_kubernetes.")
    assert "pulumi_kubernetes.resource.v1" in devices


def test_an_argument_model_is_built_when_first_used():
    """Only the models a program validates are built: not the bases that are only inherited from."""
    done = subprocess.run([sys.executable, "-c", """if True:
        from trainjobs import TorchTrainJob
        from trainjobs.core.args import CommonArgs, TrainJobArgs
        from trainjobs.testing import run
        models = (TorchTrainJob.args_type, TrainJobArgs, CommonArgs)
        print(*(model.__pydantic_complete__ for model in models))
        assert run(lambda: TorchTrainJob("demo", {"image": "img:1"})).kubernetes()
        print(*(model.__pydantic_complete__ for model in models))
        """], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.splitlines() == ["False False False", "True False False"]


def test_the_public_names_are_all_there():
    import trainjobs
    for name in trainjobs.__all__:
        assert getattr(trainjobs, name) is not None
    assert sorted(dir(trainjobs)) == sorted(trainjobs.__all__)
    with pytest.raises(AttributeError, match="TorchTrainJobb"):
        trainjobs.TorchTrainJobb
