"""The Pulumi YAML example (stacks/yaml/Pulumi.yaml) constructs its jobs through the component provider.

No Pulumi CLI runs here, so a small evaluator plays the YAML runtime's part: each resource in order,
`${resource.path}` and `${config}` references as Outputs, trainjobs resources through the provider
(which is what the engine calls for them), Kubernetes ones through pulumi-kubernetes. Property names
are checked against the package schema, as the YAML runtime checks them.
"""

import json
import re
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import yaml

from trainjobs.tools.provider.server import TrainJobsProvider
from trainjobs.testing import run

PROGRAM = Path(__file__).resolve().parents[1] / "stacks" / "yaml" / "Pulumi.yaml"
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "provider" / "schema.json").read_text())
REFERENCE = re.compile(r"^\$\{([A-Za-z][\w-]*)((?:\.\w+)*)\}$")


def evaluate(document: dict, config: dict[str, str]) -> dict:
    provider = TrainJobsProvider()
    values: dict = {}
    cfg = pulumi.Config()
    for key, spec in document.get("config", {}).items():
        values[key] = cfg.require_secret(key) if spec.get("secret") else cfg.require(key)

    def resolve(value):
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str) and (match := REFERENCE.match(value)):
            if match.group(1) not in values:   # a variable, evaluated when first used, as the YAML runtime does
                values[match.group(1)] = resolve(document["variables"][match.group(1)])
            target = values[match.group(1)]
            for attribute in filter(None, match.group(2).split(".")):
                target = getattr(target, re.sub(r"(?<!^)(?=[A-Z])", "_", attribute).lower())
            return target
        return value

    for name, resource in document["resources"].items():
        token, properties = resource["type"], resolve(resource.get("properties", {}))
        if token.startswith("trainjobs:"):
            unknown = set(properties) - set(SCHEMA["resources"][token]["inputProperties"])
            assert not unknown, f"{name}: properties not in the schema of {token}: {unknown}"
            result = provider.construct(name, token, properties, pulumi.ResourceOptions())
            values[name] = type("State", (), {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v
                                             for k, v in result.state.items()})
        else:
            _, module, kind = token.split(":")
            group, version = module.split("/")
            cls = getattr(getattr(getattr(k8s, group), version), kind)
            values[name] = cls(name, **properties)
    return {key: resolve(value) for key, value in document.get("outputs", {}).items()}


def test_the_yaml_program_constructs_its_jobs_through_the_provider():
    document = yaml.safe_load(PROGRAM.read_text())
    outputs = {}
    key = (PROGRAM.parents[2] / "tests" / "mpi_keys" / "ed25519").read_text()
    stack = run(lambda: outputs.update(evaluate(document, {})), project=document["name"],
                config={"hfToken": "hf_yaml_s3cret", "mpiSshKey": key}, secret_keys=["hfToken", "mpiSshKey"])
    assert set(outputs) == {"masterAddr", "hosts"}
    namespace = stack.get("Namespace", "llm")
    kinds = sorted((r.kind, r.name) for r in stack.kubernetes())
    assert kinds == [("ConfigMap", "allreduce-mpi-hostfile"), ("Job", "allreduce-launcher-0"),
                     ("Job", "allreduce-node-0"), ("Job", "pretrain-node-0"), ("Namespace", "llm"),
                     ("PersistentVolumeClaim", "checkpoints"), ("Secret", "allreduce-mpi-ssh-auth"),
                     ("Service", "allreduce"), ("Service", "pretrain"), ("ServiceAccount", "trainer")]
    for obj in stack.kubernetes():
        if obj.kind != "Namespace":
            assert obj.manifest["metadata"]["namespace"] == "llm"
            assert namespace.urn in obj.dependencies
    for job in ("pretrain-node-0", "allreduce-launcher-0", "allreduce-node-0"):
        pod = stack.get("Job", job).manifest["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "trainer" and pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    job = stack.get("Job", "pretrain-node-0")
    env = {e["name"]: e.get("value") for e in job.manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"] == "hf_yaml_s3cret" and env["PET_NNODES"] == "2"
    redacted = job.redacted_manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "value": "[secret]"} in redacted
    auth = stack.get("Secret", "allreduce-mpi-ssh-auth")
    assert auth.manifest["stringData"]["ssh-privatekey"] == key
    assert not [r for r in stack.resources if r.type.startswith("tls:")]   # the stack's key: no pulumi-tls plugin
    assert stack.get("ConfigMap", "allreduce-mpi-hostfile").manifest["data"]["hostfile"] == (
        "allreduce-node-0-0.allreduce slots=8\nallreduce-node-0-1.allreduce slots=8\n")
