"""The provider as another language's program meets it: over gRPC, with inputs encoded as the engine encodes them.

`provider/__main__.py` runs as the engine runs a plugin (a process given the engine's address, printing
the port it serves on); a stand-in engine and resource monitor on loopback, built on the grpc that
Pulumi's SDK brings, record what the provider registers. Each `Construct` request carries a
google.protobuf Struct: numbers as doubles, secrets and unknowns marked with the engine's signatures.
"""

import json
import queue
import re
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import (engine_pb2, engine_pb2_grpc, provider_pb2, provider_pb2_grpc, resource_pb2,
                                  resource_pb2_grpc)

ROOT = Path(__file__).resolve().parent.parent
SIG = "4dabf18193072939515e22adb298388d"
SECRET = "1b47061264138c4ac30d75fd1eb44270"
OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
TOKEN = "hf_s3cr3t_t0ken"
STACK_URN = "urn:pulumi:dev::ml::pulumi:pulumi:Stack::ml-dev"
NAMESPACE_URN = "urn:pulumi:dev::ml::kubernetes:core/v1:Namespace::team"
# Features the monitor reports, as Pulumi's engine does (with alias specs, the SDK never needs the name of
# the parent it knows only by URN).
FEATURES = [resource_pb2.RESOURCE_MONITOR_FEATURE_SECRETS, resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES,
            resource_pb2.RESOURCE_MONITOR_FEATURE_OUTPUT_VALUES, resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS,
            resource_pb2.RESOURCE_MONITOR_FEATURE_DELETED_WITH]
PLAIN_ONLY = ("must be a plain value, not an Output: it decides which objects, pods or env the job derives, and "
              "that has to be known at preview. Pass a plain value (e.g. from pulumi.Config().require_int) instead")
TIMEOUT = 180   # seconds for any one call: generous, the machine may be busy


def secret(value: Any) -> dict:
    return {SIG: SECRET, "value": value}


class Recorder(engine_pb2_grpc.EngineServicer, resource_pb2_grpc.ResourceMonitorServicer):
    """The engine and resource monitor: registers whatever the provider asks, and remembers it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.registered: list[resource_pb2.RegisterResourceRequest] = []
        self.outputs: dict[str, struct_pb2.Struct] = {}
        self.logs: list[str] = []
        self.preview = False

    # Engine
    def Log(self, request, context):
        with self.lock:
            self.logs.append(f"{request.severity}: {request.message}")
        return empty_pb2.Empty()

    def GetRootResource(self, request, context):
        return engine_pb2.GetRootResourceResponse(urn=STACK_URN)

    def SetRootResource(self, request, context):
        return engine_pb2.SetRootResourceResponse()

    # Resource monitor
    def GetDeploymentInfo(self, request, context):
        return resource_pb2.DeploymentInfo(supportedFeatures=FEATURES)

    def RegisterResource(self, request, context):
        parent_type = f"{request.parent.split('::')[2]}$" if request.parent not in ("", STACK_URN) else ""
        urn = f"urn:pulumi:dev::ml::{parent_type}{request.type}::{request.name}"
        with self.lock:
            self.registered.append(request)
        if not request.custom:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        state = json_format.MessageToDict(request.object)
        if request.type == "tls:index/privateKey:PrivateKey" and not self.preview:
            state.update(privateKeyOpenssh="-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n", publicKeyOpenssh="ssh-ed25519 AAAA\n")
        response = struct_pb2.Struct()
        response.update(state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id="" if self.preview else f"{request.name}-id",
                                                     object=response)

    def RegisterResourceOutputs(self, request, context):
        with self.lock:
            self.outputs[request.urn] = request.outputs
        return empty_pb2.Empty()


@pytest.fixture(scope="module")
def engine():
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    engine_pb2_grpc.add_EngineServicer_to_server(recorder, server)
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield recorder, f"127.0.0.1:{port}"
    server.stop(grace=None).wait(TIMEOUT)


@pytest.fixture(scope="module")
def provider(engine, tmp_path_factory):
    """The plugin process, started as the engine starts it: the engine's address as its argument."""
    _, address = engine
    stderr_path = tmp_path_factory.mktemp("provider") / "stderr"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen([sys.executable, str(ROOT / "provider" / "__main__.py"), address],
                                   cwd=ROOT / "provider", stdout=subprocess.PIPE, stderr=stderr)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        port = int(lines.get(timeout=TIMEOUT))
    except (queue.Empty, ValueError):
        process.kill()
        process.wait(TIMEOUT)
        pytest.fail(f"the provider printed no port: {stderr_path.read_text()}")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield provider_pb2_grpc.ResourceProviderStub(channel), stderr_path
    finally:
        channel.close()
        process.terminate()
        try:
            process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(TIMEOUT)
        process.stdout.close()


def construct(engine, provider, component: str, name: str, inputs: dict, *, preview: bool = False,
              dependencies: dict[str, list[str]] | None = None):
    """One Construct request as the engine sends it; the registrations it caused, and the response."""
    recorder, address = engine
    stub, _ = provider
    with recorder.lock:
        recorder.registered.clear()
        recorder.outputs.clear()
        recorder.logs.clear()
        recorder.preview = preview
    encoded = struct_pb2.Struct()
    encoded.update(inputs)
    request = provider_pb2.ConstructRequest(
        project="ml", stack="dev", organization="acme", dryRun=preview, parallel=4, monitorEndpoint=address,
        type=f"trainjobs:index:{component}", name=name, parent=STACK_URN, inputs=encoded,
        inputDependencies={key: provider_pb2.ConstructRequest.PropertyDependencies(urns=urns)
                           for key, urns in (dependencies or {}).items()})
    response = stub.Construct(request, timeout=TIMEOUT)
    return Registered(list(recorder.registered), dict(recorder.outputs), list(recorder.logs)), response


class Registered:
    def __init__(self, requests, outputs, logs):
        self.requests, self.outputs, self.logs = requests, outputs, logs

    def component(self) -> resource_pb2.RegisterResourceRequest:
        (component,) = [r for r in self.requests if not r.custom]
        return component

    def children(self) -> list[resource_pb2.RegisterResourceRequest]:
        return [r for r in self.requests if r.custom]

    def kinds(self) -> list[tuple[str, str]]:
        return sorted((r.type, r.name) for r in self.children())

    def get(self, kind: str, name: str) -> resource_pb2.RegisterResourceRequest:
        (found,) = [r for r in self.children() if r.type.endswith(f":{kind}") and r.name == name]
        return found


def plain_strings(value: Any) -> list[str]:
    """Every string in a registered object that is not inside a secret."""
    if isinstance(value, dict):
        if value.get(SIG) == SECRET:
            return []
        return [s for v in value.values() for s in plain_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in plain_strings(v)]
    return [value] if isinstance(value, str) else []


def as_dict(struct: struct_pb2.Struct) -> dict:
    return json_format.MessageToDict(struct)


def container_env(job: resource_pb2.RegisterResourceRequest, init_container: int | None = None) -> dict[str, Any]:
    """A container's env as registered (the main one, or an init container): a secret value as the secret
    marker around it."""
    pod = as_dict(job.object)["spec"]["template"]["spec"]
    container = pod["containers"][0] if init_container is None else pod["initContainers"][init_container]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_the_provider_says_it_takes_secrets_and_output_values(provider):
    stub, _ = provider
    response = stub.Configure(provider_pb2.ConfigureRequest(acceptSecrets=True, acceptResources=True),
                              timeout=TIMEOUT)
    assert response.acceptSecrets and response.acceptOutputs
    schema = json.loads(stub.GetSchema(provider_pb2.GetSchemaRequest(), timeout=TIMEOUT).schema)
    assert "trainjobs:index:MpiTrainJob" in schema["resources"]


def test_plain_values_register_the_job_under_the_component_with_integers_as_integers(engine, provider):
    registered, response = construct(engine, provider, "TorchTrainJob", "llm", {
        "image": "ghcr.io/acme/llm:1", "numNodes": 2, "numProcPerNode": "4", "namespace": "ml",
        "env": [{"name": "LR", "value": "0.1"}, {"name": "STEPS", "value": 100}], "labels": {"team": "llm"}})
    component = registered.component()
    assert (component.type, component.name, component.parent) == ("trainjobs:index:TorchTrainJob", "llm", STACK_URN)
    assert response.urn == "urn:pulumi:dev::ml::trainjobs:index:TorchTrainJob::llm"
    assert registered.kinds() == [("kubernetes:batch/v1:Job", "llm-node-0"), ("kubernetes:core/v1:Service", "llm")]
    assert {child.parent for child in registered.children()} == {response.urn}
    job = as_dict(registered.get("Job", "llm-node-0").object)
    assert job["metadata"]["namespace"] == "ml" and job["metadata"]["labels"]["team"] == "llm"
    assert job["spec"]["completions"] == 2 and job["spec"]["parallelism"] == 2
    env = container_env(registered.get("Job", "llm-node-0"))
    assert env["LR"] == "0.1" and env["STEPS"] == "100"   # a number sent as 100.0 is the string "100"
    assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "4"
    state = as_dict(response.state)
    assert state["numNodes"] == 2 and state["jobName"] == "llm-node-0" and state["namespace"] == "ml"
    assert state["masterAddr"] == "llm-node-0-0.llm" and state["numProcPerNode"] == "4"
    registered_outputs = as_dict(registered.outputs[response.urn])   # the component's own register_outputs
    assert {key: registered_outputs[key] for key in ("job_name", "master_addr", "master_port", "service_name")} == {
        "job_name": "llm-node-0", "master_addr": "llm-node-0-0.llm", "master_port": 29500, "service_name": "llm"}


def test_a_secret_token_in_env_registers_every_mpi_object_and_stays_secret_in_each(engine, provider):
    registered, response = construct(engine, provider, "MpiTrainJob", "pi", {
        "image": "mpi:1", "command": ["mpirun", "pi"], "numNodes": 2, "namespace": "hpc",
        "env": [{"name": "HF_TOKEN", "value": secret(TOKEN)}, {"name": "MODE", "value": "fast"}]})
    assert registered.kinds() == [
        ("kubernetes:batch/v1:Job", "pi-launcher-0"), ("kubernetes:batch/v1:Job", "pi-node-0"),
        ("kubernetes:core/v1:ConfigMap", "pi-mpi-hostfile"), ("kubernetes:core/v1:Secret", "pi-mpi-ssh-auth"),
        ("kubernetes:core/v1:Service", "pi"), ("tls:index/privateKey:PrivateKey", "pi-ssh-key")]
    assert {child.parent for child in registered.children()} == {response.urn}
    hostfile = as_dict(registered.get("ConfigMap", "pi-mpi-hostfile").object)["data"]["hostfile"]
    assert hostfile == "pi-node-0-0.pi slots=1\npi-node-0-1.pi slots=1\n"
    ssh = as_dict(registered.get("Secret", "pi-mpi-ssh-auth").object)
    assert ssh["stringData"][SIG] == SECRET   # pulumi-kubernetes keeps a Secret's data secret as a whole
    assert ssh["stringData"]["value"]["ssh-privatekey"] == "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n"
    for job in ("pi-launcher-0", "pi-node-0"):
        env = container_env(registered.get("Job", job))
        assert env["HF_TOKEN"] == secret(TOKEN) and env["MODE"] == "fast"
    for request in registered.requests:
        assert not [s for s in plain_strings(as_dict(request.object)) if TOKEN in s], request.type
    for outputs in registered.outputs.values():
        assert TOKEN not in json.dumps(as_dict(outputs))
    assert TOKEN not in response.SerializeToString().decode("latin-1")
    assert not [log for log in registered.logs if TOKEN in log]
    assert as_dict(response.state)["hosts"] == ["pi-node-0-0.pi", "pi-node-0-1.pi"]


def test_a_whole_env_entry_arriving_secret_keeps_its_name_checkable_and_its_value_secret(engine, provider):
    """A host that lost which leaf was secret marks the whole entry: the name is structure, the value secret."""
    registered, _ = construct(engine, provider, "TorchTrainJob", "ft", {
        "image": "img:1", "env": [secret({"name": "HF_TOKEN", "value": TOKEN})],
        "labels": secret({"team": "llm"})})
    job = registered.get("Job", "ft-node-0")
    assert container_env(job)["HF_TOKEN"] == secret(TOKEN)
    assert as_dict(job.object)["metadata"]["labels"]["team"] == secret("llm")   # the label's value is kept secret
    for request in registered.requests:
        assert not [s for s in plain_strings(as_dict(request.object)) if TOKEN in s or s == "llm"], request.type


def test_secrets_deep_in_node_selector_volumes_and_initializer_env_stay_secret_in_every_object(engine, provider):
    registered, _ = construct(engine, provider, "TorchTrainJob", "p", {
        "image": "img:1", "nodeSelector": {"pool": secret("gpu-pool-x")},
        "volumes": [{"name": "data", "nfs": {"server": secret("10.1.2.3"), "path": "/data"}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "datasetInitializer": {"storageUri": "hf://org/ds", "env": [{"name": "HF_TOKEN", "value": secret(TOKEN)}]}})
    assert registered.kinds() == [
        ("kubernetes:batch/v1:Job", "p-dataset-initializer-0"), ("kubernetes:batch/v1:Job", "p-node-0"),
        ("kubernetes:core/v1:PersistentVolumeClaim", "p-initializer"), ("kubernetes:core/v1:Service", "p")]
    pod = as_dict(registered.get("Job", "p-node-0").object)["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["pool"] == secret("gpu-pool-x")
    assert pod["volumes"][0] == {"name": "data", "nfs": {"server": secret("10.1.2.3"), "path": "/data"}}
    initializer = container_env(registered.get("Job", "p-dataset-initializer-0"), init_container=0)
    assert initializer["HF_TOKEN"] == secret(TOKEN) and initializer["STORAGE_URI"] == "hf://org/ds"
    for request in registered.requests:
        leaked = [s for s in plain_strings(as_dict(request.object)) if s in (TOKEN, "10.1.2.3", "gpu-pool-x")]
        assert not leaked, (request.type, request.name, leaked)


def test_an_output_value_secret_inside_env_is_kept_secret_with_its_dependency(engine, provider):
    vault = "urn:pulumi:dev::ml::vault:index:Secret::hf"
    registered, _ = construct(engine, provider, "TorchTrainJob", "ov", {
        "image": "img:1", "env": [{"name": "HF_TOKEN", "value": {SIG: OUTPUT, "value": TOKEN, "secret": True,
                                                                 "dependencies": [vault]}}]})
    job = registered.get("Job", "ov-node-0")
    assert container_env(job)["HF_TOKEN"] == secret(TOKEN)
    assert vault in job.dependencies
    assert vault not in registered.get("Service", "ov").dependencies


def test_an_unknown_env_value_in_a_preview_still_registers_the_job(engine, provider):
    run = "urn:pulumi:dev::ml::random:index/randomId:RandomId::run"
    registered, response = construct(engine, provider, "TorchTrainJob", "llm", {
        "image": "img:1", "numNodes": 2, "env": [{"name": "RUN_ID", "value": UNKNOWN}, {"name": "A", "value": "b"}]},
        preview=True, dependencies={"env": [run]})
    assert registered.kinds() == [("kubernetes:batch/v1:Job", "llm-node-0"), ("kubernetes:core/v1:Service", "llm")]
    job = registered.get("Job", "llm-node-0")
    env = container_env(job)
    assert env["RUN_ID"] == UNKNOWN and env["A"] == "b" and env["PET_NNODES"] == "2"
    assert run in job.dependencies
    assert as_dict(response.state)["jobName"] == "llm-node-0"


def test_a_namespace_from_another_resource_orders_every_object_after_it(engine, provider):
    registered, response = construct(engine, provider, "TorchTrainJob", "llm", {
        "image": "img:1", "namespace": "team-a"}, dependencies={"namespace": [NAMESPACE_URN]})
    for child in registered.children():
        assert as_dict(child.object)["metadata"]["namespace"] == "team-a"
        assert NAMESPACE_URN in child.dependencies, child.name
    assert as_dict(response.state)["namespace"] == "team-a"
    assert list(response.stateDependencies["namespace"].urns) == [NAMESPACE_URN]


def test_an_unknown_namespace_in_a_preview_registers_every_object(engine, provider):
    registered, response = construct(engine, provider, "TorchTrainJob", "llm", {
        "image": "img:1", "namespace": UNKNOWN}, preview=True, dependencies={"namespace": [NAMESPACE_URN]})
    assert registered.kinds() == [("kubernetes:batch/v1:Job", "llm-node-0"), ("kubernetes:core/v1:Service", "llm")]
    for child in registered.children():
        assert as_dict(child.object)["metadata"]["namespace"] == UNKNOWN
        assert NAMESPACE_URN in child.dependencies
    assert as_dict(response.state)["namespace"] == UNKNOWN


def test_a_count_with_a_dependency_is_plain_and_the_job_waits_for_it(engine, provider):
    sizer = "urn:pulumi:dev::ml::pulumi:pulumi:StackReference::sizes"
    registered, _ = construct(engine, provider, "TorchTrainJob", "llm", {"image": "img:1", "numNodes": 3},
                              dependencies={"numNodes": [sizer]})
    assert as_dict(registered.get("Job", "llm-node-0").object)["spec"]["completions"] == 3
    assert sizer in registered.component().dependencies
    assert all(sizer in child.dependencies for child in registered.children())


def yaml_programs() -> dict[str, dict]:
    """The YAML example program, and the one docs/languages.md shows."""
    docs = (ROOT / "docs" / "languages.md").read_text()
    return {"stacks/yaml/Pulumi.yaml": yaml.safe_load((ROOT / "stacks" / "yaml" / "Pulumi.yaml").read_text()),
            "docs/languages.md": yaml.safe_load(re.search(r"```yaml[^\n]*\n(.*?)```", docs, re.S)[1])}


@pytest.mark.parametrize("program", yaml_programs())
def test_the_yaml_programs_jobs_register_with_the_secret_token_and_the_namespace_dependency(engine, provider, program):
    """Each job as the engine sends it: `${hfToken}` and `${mpiSshKey}` secret config, `${team...}` the
    Namespace's name with a dependency on it."""
    document = yaml_programs()[program]
    ssh_key = (ROOT / "tests" / "mpi_keys" / "ed25519").read_text()
    references = {"${hfToken}": secret(TOKEN), "${mpiSshKey}": secret(ssh_key), "${team.metadata.name}": "llm",
                  "${team.namespace}": "llm", "${team.serviceAccountName}": "trainer"}
    variables = document.get("variables", {})

    def encode(value: Any, dependencies: set[str]) -> Any:
        if isinstance(value, dict):
            return {key: encode(v, dependencies) for key, v in value.items()}
        if isinstance(value, list):
            return [encode(v, dependencies) for v in value]
        if isinstance(value, str) and value[2:-1] in variables:   # a variable, as YAML substitutes it
            return encode(variables[value[2:-1]], dependencies)
        if isinstance(value, str) and value.startswith("${team."):
            dependencies.add(NAMESPACE_URN)
        return references.get(value, value) if isinstance(value, str) else value

    for name, resource in document["resources"].items():
        if not resource["type"].endswith("TrainJob"):   # the team's namespace is the dependency stood in for
            continue
        inputs, dependencies = {}, {}
        for key, value in resource["properties"].items():
            urns: set[str] = set()
            inputs[key] = encode(value, urns)
            if urns:
                dependencies[key] = sorted(urns)
        registered, response = construct(engine, provider, resource["type"].rsplit(":", 1)[1], name, inputs,
                                         dependencies=dependencies)
        assert response.urn.endswith(f"::{name}") and registered.children()
        for child in registered.children():
            if child.type.startswith("kubernetes:"):   # (the SSH key pair is no Kubernetes object)
                assert as_dict(child.object)["metadata"]["namespace"] == "llm"
                assert NAMESPACE_URN in child.dependencies, child.name
            secret_texts = (TOKEN, ssh_key.splitlines()[1])
            assert not [s for s in plain_strings(as_dict(child.object)) if any(t in s for t in secret_texts)], \
                child.name
        if name == "pretrain":
            assert container_env(registered.get("Job", "pretrain-node-0"))["HF_TOKEN"] == secret(TOKEN)


def bad(engine, provider, inputs: dict, *, preview: bool = False, component: str = "TorchTrainJob"):
    with pytest.raises(grpc.RpcError) as raised:
        construct(engine, provider, component, "bad", inputs, preview=preview)
    recorder, _ = engine
    assert recorder.registered == []
    _, stderr_path = provider
    assert "Traceback" not in stderr_path.read_text()   # reported as a message, not logged as a crash
    return raised.value


@pytest.mark.parametrize("encoded", [0, 0.0])
def test_a_bad_count_is_the_clean_message_without_a_traceback(engine, provider, encoded):
    error = bad(engine, provider, {"image": "img:1", "numNodes": encoded})
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == ('TorchTrainJob "bad": invalid arguments\n'
                               "  - num_nodes: Input should be greater than or equal to 1 (got 0)")


def test_a_device_request_is_named_by_its_argument_path(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "devicesPerNode": [{"count": 8}, {"count": 0}]})
    assert error.details() == ('TorchTrainJob "bad": invalid arguments\n'
                               "  - devices_per_node[1].count: Input should be greater than or equal to 1 (got 0)")


def test_gpus_claimed_through_dra_register_a_resource_claim_template(engine, provider):
    registered, _ = construct(engine, provider, "TorchTrainJob", "dra", {
        "image": "img:1", "devicesPerNode": [{"count": 8, "deviceClass": "gpu.nvidia.com"}]})
    assert registered.kinds() == [("kubernetes:batch/v1:Job", "dra-node-0"), ("kubernetes:core/v1:Service", "dra"),
                                  ("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "dra-node-devices")]
    template = as_dict(registered.get("ResourceClaimTemplate", "dra-node-devices").object)
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 8}}]


def test_a_fractional_count_is_refused(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "numNodes": 1.5})
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == ('TorchTrainJob "bad": invalid arguments\n  - num_nodes: Input should be a valid '
                               "integer, got a number with a fractional part (got 1.5)")


def test_an_unknown_count_in_a_preview_must_be_known(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "numNodes": UNKNOWN}, preview=True)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith('TorchTrainJob "bad": invalid arguments\n  - num_nodes: must be a plain '
                                      "value, not an Output")
    assert "has to be known at preview" in error.details()


@pytest.mark.parametrize(("inputs", "field"), [
    ({"env": [{"name": UNKNOWN, "value": "x"}]}, "env[0].name"), ({"env": UNKNOWN}, "env"),
    ({"resourcesPerNode": {"limits": {"cpu": UNKNOWN}}}, "resources_per_node.limits.cpu"),
    ({"resourcesPerNode": UNKNOWN}, "resources_per_node"), ({"imagePullPolicy": UNKNOWN}, "image_pull_policy"),
    ({"runtime": {"name": UNKNOWN}}, "runtime.name"), ({"nodeSelector": UNKNOWN}, "node_selector"),
    ({"extraRoles": {"tb": {"numPods": UNKNOWN, "image": "x"}}}, "extra_roles.tb.num_pods"),
    ({"devicesPerNode": [{"count": UNKNOWN}]}, "devices_per_node[0].count")])
def test_an_unknown_where_the_job_needs_a_plain_value_is_named_with_the_same_message(engine, provider, inputs, field):
    error = bad(engine, provider, dict(inputs, image="img:1"), preview=True)
    assert error.details() == f'TorchTrainJob "bad": invalid arguments\n  - {field}: {PLAIN_ONLY}'


@pytest.mark.parametrize("inputs", [{"labels": {"team": UNKNOWN}}, {"tolerations": [{"key": UNKNOWN}]},
                                    {"image": UNKNOWN}, {"command": ["python", UNKNOWN]}])
def test_an_unknown_where_the_job_passes_the_value_through_registers_every_object(engine, provider, inputs):
    registered, _ = construct(engine, provider, "TorchTrainJob", "ok", dict({"image": "img:1"}, **inputs),
                              preview=True)
    assert registered.kinds() == [("kubernetes:batch/v1:Job", "ok-node-0"), ("kubernetes:core/v1:Service", "ok")]
    assert UNKNOWN in json.dumps(as_dict(registered.get("Job", "ok-node-0").object))


def test_a_secret_count_is_refused_rather_than_written_in_plain_text(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "numNodes": secret(2)})
    assert "num_nodes: must be a plain value" in error.details()


def test_several_problems_and_unknown_names_come_in_one_message(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "numNodes": 0, "numNode": 2, "env": [{"value": "x"}]})
    details = error.details()
    assert details.splitlines()[0] == 'TorchTrainJob "bad": invalid arguments'
    assert "num_nodes: Input should be greater than or equal to 1 (got 0)" in details
    assert 'unknown argument "numNode"' in details and "env[0].name" in details


def test_a_bad_value_found_when_an_output_resolves_is_the_same_clean_message(engine, provider):
    """Checked when it resolves, after the objects before it registered (as from Python): the update fails."""
    with pytest.raises(grpc.RpcError) as raised:
        construct(engine, provider, "TorchTrainJob", "late", {"image": secret("Bad Image")})
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        'TorchTrainJob "late": invalid arguments\n  - image: "Bad Image" is not an image reference: use '
        "[registry[:port]/]name[:tag][@sha256:digest] with a lowercase name (the value arrived as an Output)")
    assert "Traceback" not in provider[1].read_text()


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
@pytest.mark.parametrize("scheduler", ["kueue", "volcano"])
def test_a_queue_name_the_cluster_refuses_is_refused_on_queue(engine, provider, scheduler, backend):
    error = bad(engine, provider, {"image": "img:1", "backend": backend, "gangScheduler": scheduler,
                                   "queue": "Team_LLM"})
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [line.split(":")[0] for line in error.details().splitlines()[1:]] == ["  - queue"]


def test_a_placement_and_multikueue_through_the_provider(engine, provider):
    registered, _ = construct(engine, provider, "TorchTrainJob", "llm", {
        "image": "img:1", "numNodes": 4, "gangScheduler": "kueue", "queue": "team-llm",
        "resourcesPerNode": {"requests": {"nvidia.com/gpu": "8"}},
        "placement": {"topology": "example.com/block", "sliceTopology": "example.com/rack", "sliceSize": 2}})
    template = as_dict(registered.get("Job", "llm-node-0").object)["spec"]["template"]
    assert {k: v for k, v in template["metadata"]["annotations"].items() if k.startswith("kueue.")} == {
        "kueue.x-k8s.io/podset-required-topology": "example.com/block",
        "kueue.x-k8s.io/podset-slice-required-topology": "example.com/rack", "kueue.x-k8s.io/podset-slice-size": "2"}
    registered, _ = construct(engine, provider, "TorchTrainJob", "mk", {
        "image": "img:1", "numNodes": 2, "backend": "jobset", "multikueue": True, "queue": "team-llm"})
    assert registered.kinds() == [("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "mk")]
    assert as_dict(registered.get("JobSet", "mk").object)["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_a_refused_placement_through_the_provider_names_the_argument(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "gangScheduler": "kueue", "queue": "q", "placement": {"tier": 1}})
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "  - placement.tier: HyperNode tiers are Volcano's" in error.details()


def test_an_elastic_job_from_another_language_is_num_nodes_with_min_nodes(engine, provider):
    registered, _ = construct(engine, provider, "TorchTrainJob", "ela", {
        "image": "img:1", "numNodes": 4, "minNodes": 2, "rendezvous": "c10d", "gangScheduler": "kueue",
        "queue": "team", "elasticAdmission": "slices"})
    job = as_dict(registered.get("Job", "ela-node-0").object)
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    env = container_env(registered.get("Job", "ela-node-0"))
    assert (env["PET_NNODES"], env["PET_MAX_RESTARTS"]) == ("2:4", "7")


def test_a_node_range_on_the_static_rendezvous_is_refused_naming_num_nodes(engine, provider):
    error = bad(engine, provider, {"image": "img:1", "numNodes": 4, "minNodes": 2})
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        'TorchTrainJob "bad": invalid arguments\n  - num_nodes: a node range (2:4) makes the job elastic, and '
        "TorchTrainJob cannot be: the static rendezvous fixes PET_NNODES and each pod's rank: set rendezvous: "
        "c10d, whose rendezvous admits pods joining and leaving, or give num_nodes as a number")
