"""The API server's rules on derived manifests, and the argument each refused value is named by."""

import base64
import copy

import pytest

from trainjobs import TorchRuntime, TorchTrainJob, TorchTuneTrainJob, TrainJobError
from trainjobs.kube.apivalidation import format_path, problems
from trainjobs.core.deferred import GeneratedSSHKey
from trainjobs.testing import attempt, run


class Opaque:
    """Stands for a Pulumi output: not plain JSON data, so never inspected."""


def job(**pod):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j-node-0", "labels": {"a": "b"}},
            "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"restartPolicy": "Never", "subdomain": "j",
                                           "containers": [{"name": "node", "image": "i:1"}], **pod}}}}


def found(manifest):
    return [(format_path(p.path), p.message) for p in problems([manifest])]


def container(manifest):
    return manifest["spec"]["template"]["spec"]["containers"][0]


def test_a_valid_job_has_no_problems():
    assert found(job()) == []


# Each rule on a change to job(): the path and a fragment of the message (tests/cluster/test_api_verdict.py
# sends the same objects to a real API server).
RULES = [
    (lambda m: m["spec"].update(backoffLimit=2**31), "spec.backoffLimit", "between 0 and 2147483647"),
    (lambda m: m["spec"].update(completions=100_001, parallelism=100_001), "spec.parallelism",
     "at most 100000 pods at once (got 100001)"),
    (lambda m: m["metadata"].update(name="x" * 62), "metadata.name", 'derived pod hostname "' + "x" * 62 + '-1"'),
    (lambda m: container(m).update(env=[{"name": "X", "value": "v",
                                          "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
     "spec.template.spec.containers[0].env[0].valueFrom", "together with a non-empty value"),
    (lambda m: container(m).update(env=[{"name": "1BAD", "value": "v"}]),
     "spec.template.spec.containers[0].env[0].name", 'env name "1BAD" is invalid'),
    (lambda m: container(m).update(resources={"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}),
     'spec.template.spec.containers[0].resources.requests.cpu', '"3" must be less than or equal to the cpu limit "2"'),
    (lambda m: container(m).update(resources={"requests": {"example.com/dev": "1"}}),
     'spec.template.spec.containers[0].resources.limits["example.com/dev"]', "needs a limit equal to its request"),
    (lambda m: container(m).update(image="i:1 "), "spec.template.spec.containers[0].image", "trailing whitespace"),
    (lambda m: container(m).update(ports=[{"containerPort": 80, "name": "http--x"}]),
     "spec.template.spec.containers[0].ports[0].name", 'port name "http--x" is invalid'),
    (lambda m: m["spec"]["template"]["spec"].update(initContainers=[{"name": "node", "image": "s:1"}]),
     "spec.template.spec.initContainers[0].name", 'a second container named "node"'),
    (lambda m: m["spec"]["template"]["spec"].update(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
     "spec.template.spec.tolerations[0].operator", 'with "Exists" the value must be empty'),
    (lambda m: m["spec"]["template"]["spec"].update(dnsConfig={"searches": ["j.ns.svc.bad_domain"]}),
     "spec.template.spec.dnsConfig.searches[0]", 'search domain "j.ns.svc.bad_domain"'),
    (lambda m: m["metadata"].update(annotations={"k": "x" * 262_144}), "metadata.annotations",
     "annotations total 262145 bytes; the limit is 262144"),
    (lambda m: container(m).update(args=["x" * 1_600_000]), "", "the API server cannot store objects over 1572864"),
    (lambda m: container(m).update(env=[{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "..data"}}}]),
     "spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef.key", 'neither "." nor start with ".."'),
    (lambda m: m["spec"]["template"]["spec"].update(dnsConfig={"searches": ["a" * 61 + ".bc"] * 32}),
     "spec.template.spec.dnsConfig.searches", "total 2079 characters with the spaces between them"),
]

# Changes to job() that the API server accepts (tests/cluster/test_api_verdict.py asks it), each once refused here.
ACCEPTED = [
    lambda m: m["spec"].update(activeDeadlineSeconds=0),
    lambda m: m["spec"].update(completions=100_001, parallelism=100_000),   # only the pods at once are limited
    lambda m: m["metadata"].update(annotations={"Example.COM/Owner": "llm"}),   # annotation keys ignore case
]


def accepted_objects():
    """Data of 1 MiB: the server counts the values' bytes, not the keys nor the base64 text."""
    mib = 1_048_576
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j-code"}, "data": {"train.py": "x" * mib}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "j-key"},
             "data": {"key": base64.b64encode(b"x" * mib).decode()}}]


@pytest.mark.parametrize("change, path, fragment", RULES)
def test_each_rule_names_the_path_the_api_server_would(change, path, fragment):
    manifest = job()
    change(manifest)
    assert any(p == path and fragment in message for p, message in found(manifest)), found(manifest)


def objects_of_every_kind():
    """A refused PersistentVolumeClaim, two ConfigMaps and a Service."""
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "j-initializer"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "Fast SSD",
                      "resources": {"requests": {"storage": "0"}}}}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j-mpi-hostfile"},
                  "data": {"hostfile": "x" * 1_048_577}}
    code = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j-code"}, "data": {"..data": "x"}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1j"}, "spec": {"clusterIP": "None"}}
    return [claim, config_map, code, service]


@pytest.mark.parametrize("change", ACCEPTED)
def test_what_the_api_server_accepts_is_accepted(change):
    manifest = job()
    change(manifest)
    assert found(manifest) == []


def test_data_is_measured_as_the_api_server_measures_it():
    assert problems(accepted_objects()) == []


def test_objects_of_every_kind_the_jobs_emit():
    assert [(p.object, format_path(p.path)) for p in problems(objects_of_every_kind())] == [
        ("PersistentVolumeClaim/j-initializer", "spec.storageClassName"),
        ("PersistentVolumeClaim/j-initializer", "spec.resources.requests.storage"),
        ("ConfigMap/j-mpi-hostfile", "data"),
        ("ConfigMap/j-code", 'data["..data"]'),
        ("Service/1j", "metadata.name"),
    ]


def test_the_checks_the_api_server_does_not_make_are_marked_later():
    manifest = job(initContainers=[{"name": "init", "image": " i:1"}],
                   volumes=[{"name": "v", "configMap": {"name": "Bad_Name"}}, {"name": "w", "emptyDir": {"medium": "Disk"}}],
                   dnsConfig={"searches": ["svc.my_domain", "bad domain"]})
    container(manifest).update(image="Not/An Image", args=["a\0b"],
                               env=[{"name": "X", "value": "x" * 131_072}, {"name": "1X", "value": "v"},
                                    {"name": "X=Y", "value": "v"}])
    assert [(format_path(p.path), p.later) for p in problems([manifest])] == [
        ("spec.template.spec.dnsConfig.searches[0]", True),    # older servers refuse "_"
        ("spec.template.spec.dnsConfig.searches[1]", False),
        ("spec.template.spec.volumes[0].configMap.name", True),
        ("spec.template.spec.volumes[1].emptyDir.medium", True),
        ("spec.template.spec.containers[0].image", True),
        ("spec.template.spec.containers[0].args[0]", True),
        ("spec.template.spec.containers[0].env[0].value", True),
        ("spec.template.spec.containers[0].env[1].name", True),   # older servers refuse a leading digit
        ("spec.template.spec.containers[0].env[2].name", False),
        ("spec.template.spec.initContainers[0].image", False),   # the server refuses the pods
    ]
    assert [p.later for p in problems([job(subdomain="Bad_Subdomain")])] == [False]
    services = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}} for name in ("1j", "j_1")]
    assert [p.later for p in problems(services)] == [True, False]   # older servers refuse a leading digit


def test_values_that_are_not_plain_data_are_skipped():
    manifest = job(serviceAccountName=Opaque(), nodeSelector={"k": Opaque()})
    manifest["metadata"]["labels"]["team"] = Opaque()
    container(manifest).update(image=Opaque(), env=[{"name": "X", "value": Opaque()}],
                               resources={"limits": {"cpu": Opaque()}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "j-mpi-ssh-auth"},
              "stringData": {"ssh-privatekey": GeneratedSSHKey("k", "private")}}
    assert problems([manifest, secret]) == []


def test_problems_leave_the_manifests_unchanged():
    manifest = job(tolerations=[{"key": "k", "operator": "Maybe"}])
    before = copy.deepcopy(manifest)
    assert problems([manifest]) and manifest == before


def issues(component, name, args):
    error, result = attempt(lambda: component(name, args))
    assert isinstance(error, TrainJobError) and result.resources == []
    return {issue.field: issue.message for issue in error.issues}


@pytest.mark.parametrize("initializer, field", [
    ({"dataset_initializer": {"storage_uri": "ftp://host/x"}}, "dataset_initializer.storage_uri"),
    ({"model_initializer": {"storage_uri": "cache://schema/table"}}, "model_initializer.storage_uri"),
    ({"dataset_initializer": {"storage_uri": "gs://b/x",
                              "image": "ghcr.io/kubeflow/trainer/dataset-initializer:v2.2.0"}},
     "dataset_initializer.storage_uri"),
])
def test_kubeflows_initializers_fetch_only_their_schemes(initializer, field):
    assert "Unsupported" in issues(TorchTrainJob, "t", initializer)[field]


@pytest.mark.parametrize("initializer", [
    {"dataset_initializer": {"storage_uri": "cache://schema/table"}},
    {"dataset_initializer": {"storage_uri": "S3://bucket/x"}, "model_initializer": {"storage_uri": "hf://org/m"}},
    {"dataset_initializer": {"storage_uri": "gs://bucket/x", "image": "my/initializer:1"}},
])
def test_supported_schemes_and_initializers_of_ones_own_are_accepted(initializer):
    run(lambda: TorchTrainJob("t", initializer))


def test_a_value_the_runtime_set_is_named_in_the_runtime_and_one_the_job_set_in_the_job():
    runtime = TorchRuntime(name="rt", node={"image": "t:1", "service_account_name": "Bad_SA",
                                            "node_selector": {"pool": "a b"}})
    assert set(issues(TorchTrainJob, "t", {"runtime": runtime})) == {"runtime.node.service_account_name",
                                                                     "runtime.node.node_selector.pool"}
    assert set(issues(TorchTrainJob, "t", {"runtime": runtime, "service_account_name": "Also_Bad",
                                           "node_selector": {"pool": "c d"}})) == {"service_account_name",
                                                                                   "node_selector.pool"}


def test_one_issue_per_argument_though_every_object_carries_it():
    found = issues(TorchTuneTrainJob, "t", {"runtime": "torchtune-llama3.2-1b", "labels": {"team": "a b"}})
    assert list(found) == ["labels.team"]
    assert found["labels.team"].endswith('(in Service/t metadata.labels.team)')


def test_torchtune_names_are_limited_by_the_initializer_hostnames():
    run(lambda: TorchTuneTrainJob("a" * 39, {"runtime": "torchtune-llama3.2-1b"}))
    found = issues(TorchTuneTrainJob, "a" * 40, {"runtime": "torchtune-llama3.2-1b"})
    assert found["name"].startswith(f'derived pod hostname "{"a" * 40}-dataset-initializer-0-0" is over the '
                                    '63-character limit by 1: shorten the name by at least 1 character')


def test_a_long_hostname_is_shown_whole_and_its_length_said_once():
    name = "n" * 63
    found = issues(TorchTrainJob, name, {"num_nodes": 2})
    hostname = f"{name}-node-0-1"
    assert len(hostname) == 72
    assert found["name"].startswith(f'derived pod hostname "{hostname}" is over the 63-character limit by 9: '
                                    'shorten the name by at least 9 characters or use fewer pods')
    assert "72" not in found["name"] and "..." not in found["name"] and found["name"].count(hostname) == 1


def test_a_bad_extra_role_name_is_reported_on_the_role_alone():
    assert list(issues(TorchTrainJob, "t", {"extra_roles": {"Bad_Role": {"image": "x:1"}}})) == ["extra_roles.Bad_Role"]
