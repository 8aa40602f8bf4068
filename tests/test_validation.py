"""Bad arguments raise TrainJobError naming the field, before anything registers."""

import pytest

from trainjobs import TorchRuntime, TorchTrainJob, TrainJobError
from trainjobs.testing import attempt, run


def rejected(args, name="demo"):
    with pytest.raises(TrainJobError) as info:
        run(lambda: TorchTrainJob(name, args))
    return info.value


def messages(error):
    return {issue.field: issue.message for issue in error.issues}


def test_reserved_env_is_rejected_with_kubeflow_message_and_the_field_to_use():
    error = rejected({"env": {"PET_NNODES": "3", "PET_MASTER_ADDR": "x", "OK": "1"}})
    assert messages(error)["env"].startswith(
        "must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR, PET_NNODES]")
    assert "PET_NNODES comes from num_nodes" in messages(error)["env"]


def test_reserved_env_in_list_form_and_in_runtime():
    error = rejected({"env": [{"name": "PET_NODE_RANK", "value": "0"}]})
    assert "[PET_NODE_RANK]" in messages(error)["env"]
    runtime = TorchRuntime(name="rt", node={"image": "i", "env": {"PET_MASTER_PORT": "1"}})
    assert "[PET_MASTER_PORT]" in messages(rejected({"runtime": runtime}))["env"]


def test_too_long_name_names_the_limit_and_the_longest_hostname():
    name = "a" * 55
    error = rejected({"num_nodes": 10}, name=name)
    message = messages(error)["name"]
    assert f'"{name}-node-0-9" is over the 63-character limit by 1' in message


def test_name_that_fits_exactly():
    run(lambda: TorchTrainJob("a" * 54, {"num_nodes": 10}))   # "<54>-node-0-9" is 63 characters


@pytest.mark.parametrize("name", ["Demo", "1job", "job_x", "job-", "-job", "a.b"])
def test_name_must_be_rfc1035_label(name):
    assert "RFC 1035" in messages(rejected({}, name=name))["name"]


@pytest.mark.parametrize("args, field, fragment", [
    ({"num_nodes": 0}, "num_nodes", "greater than or equal to 1 (got 0)"),
    ({"num_nodes": "two"}, "num_nodes", "is neither a number of nodes nor a node range MIN:MAX"),
    ({"num_proc_per_node": 0}, "num_proc_per_node", 'must be a whole number >= 1 or "auto"'),
    ({"num_proc_per_node": "gpu"}, "num_proc_per_node", 'must be a whole number >= 1 or "auto"'),
    ({"num_node": 2}, "num_node", 'unknown argument "num_node"; did you mean "num_nodes"?'),
    ({"imag": "x"}, "imag", 'did you mean "image"?'),
    ({"resources_per_node": {"requsts": {"cpu": 1}}}, "resources_per_node.requsts", 'did you mean "requests"?'),
    ({"resources_per_node": {"requests": {"cpu": "two"}}}, "resources_per_node.requests.cpu",
     '"two" is not a Kubernetes quantity'),
    ({"resources_per_node": {"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 4}}},
     "resources_per_node.requests.nvidia.com/gpu", 'must equal the nvidia.com/gpu limit "4"'),
    ({"shm_size": "lots"}, "shm_size", "not a Kubernetes quantity"),
    ({"namespace": "ML_Team"}, "namespace", "not a valid namespace name"),
    ({"labels": {"team": "a b"}}, "labels.team", "invalid"),
    ({"labels": {"trainjobs.io/role": "x"}}, "labels.trainjobs.io/role", "set by the job"),
    ({"rendezvous": "etcd"}, "rendezvous", "'static' or 'c10d'"),
    ({"runtime": "torch-distribute"}, "runtime", 'unknown runtime "torch-distribute"'),
    ({"runtime": {"name": "bare"}}, "image", "no image for the node pods"),
    ({"backoff_limit": -1}, "backoff_limit", "greater than or equal to 0"),
])
def test_invalid_argument_messages(args, field, fragment):
    error = rejected(args)
    assert field in messages(error), error
    assert fragment in messages(error)[field]


def test_all_problems_are_reported_at_once():
    error = rejected({"env": {"PET_NNODES": "1"}, "namespace": "Bad"}, name="Bad")
    assert set(messages(error)) == {"env", "namespace", "name"}
    assert str(error).startswith('TorchTrainJob "Bad": invalid arguments\n  - ')


def test_invalid_job_registers_nothing():
    error, result = attempt(lambda: TorchTrainJob("bad", {"num_nodes": 0, "env": {"PET_NNODES": "1"}}))
    assert isinstance(error, TrainJobError)
    assert result.resources == []


def test_an_invalid_job_after_a_valid_one_leaves_only_the_valid_one():
    def program():
        TorchTrainJob("good", {})
        TorchTrainJob("bad", {"num_nodes": 0})

    error, result = attempt(program)
    assert isinstance(error, TrainJobError) and error.name == "bad"
    assert sorted(r.name for r in result.resources) == ["good", "good", "good-node-0"]


@pytest.mark.parametrize("field, value, message", [
    ("multikueue", "yes", 'expected true or false, got "yes" (YAML reads yes/no/on/off as words, as Pulumi reads '
                          "stack files): write true or false"),
    ("wait_for_completion", "true", 'expected true or false, got "true": write true or false'),
    ("suspend", 1, "expected true or false, got the number 1: write true or false"),
    ("num_nodes", True, "expected an integer, got the boolean true: write a number"),
])
def test_a_boolean_is_only_true_or_false_and_never_a_number(field, value, message):
    error, stack = attempt(lambda: TorchTrainJob("demo", {"image": "img:1", field: value}))
    assert [(i.field, i.message) for i in error.issues] == [(field, message)]
    assert stack.resources == []
