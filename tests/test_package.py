"""The multi-language package: its schema snapshot, and construction through the component provider."""

import difflib
import json
from pathlib import Path

import pulumi
import pytest

from trainjobs import MpiTrainJob, TorchTrainJob, TrainJobError
from trainjobs.tools.provider.server import TrainJobsProvider, package_schema, schema_text
from trainjobs.testing import attempt, run

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "provider" / "schema.json"
REGENERATE = "python -m trainjobs.tools.provider.server > provider/schema.json"


def schema_changes(before: dict, after: dict, path: str = "") -> list[str]:
    """Every path where two schemas differ, as `+ added`, `- removed`, `~ changed`."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes = []
        for key in sorted(set(before) | set(after)):
            where = f"{path}.{key}" if path else key
            if key not in after:
                changes.append(f"- {where}")
            elif key not in before:
                changes.append(f"+ {where}")
            else:
                changes += schema_changes(before[key], after[key], where)
        return changes
    return [] if before == after else [f"~ {path}"]


def test_the_schema_matches_the_reviewed_snapshot():
    changes = schema_changes(json.loads(SNAPSHOT.read_text()), package_schema())
    assert not changes, (f"the package schema changed ({len(changes)} paths); review it and regenerate the "
                         f"snapshot with `{REGENERATE}`:\n" + "\n".join(changes[:40]))
    assert SNAPSHOT.read_text() == schema_text()


def test_a_renamed_argument_changes_the_schema(monkeypatch):
    from trainjobs.families.torch import TorchTrainJobArgs
    renamed = dict(TorchTrainJobArgs.__annotations__)
    renamed["rendezvouz"] = renamed.pop("rendezvous")
    monkeypatch.setattr(TorchTrainJobArgs, "__annotations__", renamed)
    changes = schema_changes(json.loads(SNAPSHOT.read_text()), package_schema())
    assert "- resources.trainjobs:index:TorchTrainJob.inputProperties.rendezvous" in changes
    assert "+ resources.trainjobs:index:TorchTrainJob.inputProperties.rendezvouz" in changes


def test_the_schema_holds_every_component_input_and_output_with_types_plainness_and_descriptions():
    schema = json.loads(SNAPSHOT.read_text())
    torch = schema["resources"]["trainjobs:index:TorchTrainJob"]
    assert torch["isComponent"] is True
    inputs = torch["inputProperties"]
    # Values that pass into objects take Outputs; what decides counts and env is plain.
    assert inputs["image"] == {"type": "string", "description": "Container image. Default: the runtime's."}
    assert inputs["namespace"]["type"] == "string" and "plain" not in inputs["namespace"]
    assert inputs["numNodes"]["plain"] is True and inputs["numNodes"]["type"] == "integer"
    assert inputs["numNodes"]["description"].endswith('(e.g. `"2:4"`: num_nodes 4, min_nodes 2). Default: 1.')
    # A node range reaches other languages as two integers: no union in the schema.
    assert inputs["minNodes"]["plain"] is True and inputs["minNodes"]["type"] == "integer"
    assert inputs["elasticAdmission"]["$ref"] == "#/types/trainjobs:index:ElasticAdmission"
    assert "plain" not in inputs["labels"]["additionalProperties"]
    assert inputs["rendezvous"]["$ref"] == "#/types/trainjobs:index:Rendezvous"
    assert [e["value"] for e in schema["types"]["trainjobs:index:Rendezvous"]["enum"]] == ["static", "c10d"]
    env_var = schema["types"]["trainjobs:index:EnvVar"]["properties"]
    assert "plain" not in env_var["value"] and env_var["valueFrom"]["type"] == "object"
    assert set(torch["properties"]) == {"serviceName", "jobName", "namespace", "masterAddr", "masterPort",
                                        "numNodes", "numProcPerNode", "requests"}
    assert torch["properties"]["masterAddr"]["description"] == "DNS name of rank 0: `<N>-node-0-0.<N>`."
    mpi = schema["resources"]["trainjobs:index:MpiTrainJob"]
    assert mpi["properties"]["hosts"]["type"] == "array"
    assert mpi["properties"]["hosts"]["items"]["type"] == "string"
    assert set(schema["resources"]) == {f"trainjobs:index:{c}" for c in (
        "TorchTrainJob", "TorchTuneTrainJob", "JaxTrainJob", "MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob",
        "XGBoostTrainJob", "TrainingNamespace")}
    # Every input and output of every component is described.
    for token, resource in schema["resources"].items():
        for kind in ("inputProperties", "properties"):
            undocumented = [p for p, spec in resource[kind].items() if not spec.get("description")]
            assert not undocumented, f"{token} {kind} without a description: {undocumented}"


def construct(token: str, name: str, inputs: dict, opts: pulumi.ResourceOptions | None = None):
    """What another language's program does: the engine hands the provider schema-named inputs."""
    return TrainJobsProvider().construct(name, token, inputs, opts or pulumi.ResourceOptions())


def test_construction_through_the_provider_registers_what_the_python_class_does():
    inputs = {"image": "ghcr.io/acme/train:1", "numNodes": 3, "numProcPerNode": "2",
              "resourcesPerNode": {"requests": {"cpu": "4"}}, "env": [{"name": "LR", "value": "0.1"}],
              "labels": {"team": "llm"}, "namespace": "ml"}
    states = []
    through_provider = run(lambda: states.append(construct("trainjobs:index:TorchTrainJob", "llm", inputs)))
    as_python = run(lambda: TorchTrainJob("llm", {
        "image": "ghcr.io/acme/train:1", "num_nodes": 3, "num_proc_per_node": 2,
        "resources_per_node": {"requests": {"cpu": "4"}}, "env": {"LR": "0.1"}, "labels": {"team": "llm"},
        "namespace": "ml"}))
    assert ([(r.type, r.name, r.manifest) for r in through_provider.kubernetes()] ==
            [(r.type, r.name, r.manifest) for r in as_python.kubernetes()])
    assert len(through_provider.kubernetes()) == 2
    assert through_provider.get("Job", "llm-node-0").manifest["spec"]["completions"] == 3
    assert set(states[0].state) == {"serviceName", "jobName", "namespace", "masterAddr", "masterPort", "numNodes",
                                    "numProcPerNode", "requests"}


def test_mpi_through_the_provider_registers_its_key_and_enum_arguments():
    inputs = {"image": "mpi:1", "command": ["mpirun", "hello"], "numNodes": 2, "mpiImplementation": "IntelMPI",
              "namespace": "hpc", "sshKeyAlgorithm": "ED25519"}
    stack = run(lambda: construct("trainjobs:index:MpiTrainJob", "pi", inputs))
    assert stack.get(type="tls:index/privateKey:PrivateKey").inputs["algorithm"] == "ED25519"
    assert stack.get("ConfigMap", "pi-mpi-hostfile").manifest["data"]["hostfile"] == (
        "pi-node-0-0.pi:1\npi-node-0-1.pi:1\n")


def test_bad_inputs_through_the_provider_are_the_same_clean_error():
    error, stack = attempt(lambda: construct("trainjobs:index:TorchTrainJob", "llm", {"numNodes": 0}))
    assert isinstance(error, TrainJobError), error   # found behind the provider's ComponentInitError
    assert str(error) == 'TorchTrainJob "llm": invalid arguments\n  - num_nodes: Input should be greater than or equal to 1 (got 0)'
    assert error.issues[0].field == "num_nodes"
    assert stack.resources == []
