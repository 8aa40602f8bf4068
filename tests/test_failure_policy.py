"""Failure policies: disruptions that do not count, fatal and retriable exit codes, per-index retries."""

import kubernetes_validate
import pytest

from trainjobs import (JaxTrainJob, MpiTrainJob, TorchTrainJob, TorchTuneTrainJob, TrainJobError, XGBoostTrainJob)
from trainjobs.core.args import FailurePolicy
from trainjobs.testing import attempt, run
from trainjobs.testing.checks import manifest_problems

DISRUPTION_IGNORED = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
INIT = {"dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"}}


def job_spec(result, name):
    return result.get("Job", name).manifest["spec"]


def test_by_default_every_job_ignores_disruptions_and_keeps_its_backoff_limit():
    result = run(lambda: TorchTrainJob("llm", {"image": "img:1", "num_nodes": 2, **INIT,
                                               "extra_roles": {"tensorboard": {"image": "tb:1"}}}))
    for name in ("llm-node-0", "llm-dataset-initializer-0", "llm-tensorboard-0"):
        spec = job_spec(result, name)
        assert spec["podFailurePolicy"] == {"rules": [DISRUPTION_IGNORED]}, name
        assert spec["backoffLimit"] == 0 and "backoffLimitPerIndex" not in spec


def test_counting_disruptions_leaves_no_policy():
    result = run(lambda: TorchTrainJob("llm", {"image": "img:1", "failure_policy": {"count_disruptions": True}}))
    assert "podFailurePolicy" not in job_spec(result, "llm-node-0")


def test_fatal_exit_codes_fail_the_job_and_name_the_main_container_of_training_jobs_only():
    result = run(lambda: MpiTrainJob("pi", {"image": "mpi:1", "command": ["mpirun", "pi"], "num_nodes": 2,
                                            "failure_policy": {"fatal_exit_codes": [42, 3]}}))
    for name in ("pi-launcher-0", "pi-node-0"):
        spec = job_spec(result, name)
        main = spec["template"]["spec"]["containers"][0]["name"]
        assert spec["podFailurePolicy"]["rules"] == [DISRUPTION_IGNORED, {
            "action": "FailJob", "onExitCodes": {"containerName": main, "operator": "In", "values": [3, 42]}}]
    assert job_spec(result, "pi-launcher-0")["template"]["spec"]["containers"][0]["name"] == "node"


def test_retriable_exit_codes_count_and_every_other_code_is_fatal():
    result = run(lambda: TorchTrainJob("llm", {"image": "img:1", "backoff_limit": 3, **INIT, "failure_policy": {
        "retriable_exit_codes": [137, 1], "fatal_exit_codes": [2]}}))
    spec = job_spec(result, "llm-node-0")
    assert spec["backoffLimit"] == 3
    assert spec["podFailurePolicy"]["rules"] == [
        DISRUPTION_IGNORED,
        {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "In", "values": [2]}},
        {"action": "Count", "onExitCodes": {"containerName": "node", "operator": "In", "values": [1, 137]}},
        {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "NotIn", "values": [1, 137]}},
    ]
    # The initializer runs another program: its exit codes mean something else.
    assert job_spec(result, "llm-dataset-initializer-0")["podFailurePolicy"] == {"rules": [DISRUPTION_IGNORED]}
    objects = [r.manifest for r in result.kubernetes()]
    assert manifest_problems(objects) == []
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33.0", strict=True)


def test_per_index_retries_for_torch_with_c10d():
    result = run(lambda: TorchTrainJob("llm", {"image": "img:1", "num_nodes": 4, "rendezvous": "c10d", "failure_policy": {
        "backoff_limit_per_index": 2, "max_failed_indexes": 1}}))
    spec = job_spec(result, "llm-node-0")
    assert spec["backoffLimitPerIndex"] == 2 and spec["maxFailedIndexes"] == 1
    assert "backoffLimit" not in spec   # Kubernetes' default with per-index limits: the int32 maximum
    for obj in (r.manifest for r in result.kubernetes()):
        kubernetes_validate.validate(obj, "1.33.0", strict=True)
    capped = run(lambda: TorchTrainJob("llm", {"image": "img:1", "rendezvous": "c10d", "backoff_limit": 10,
                                               "failure_policy": {"backoff_limit_per_index": 2}}))
    assert job_spec(capped, "llm-node-0")["backoffLimit"] == 10


@pytest.mark.parametrize("component, args, reason", [
    (TorchTrainJob, {"image": "img:1"}, "with the static rendezvous each pod's rank and the world are fixed"),
    (TorchTrainJob, {"image": "img:1", "torchrun": False}, "with torchrun: false"),
    (MpiTrainJob, {"image": "mpi:1", "command": ["mpirun", "pi"]}, "mpirun on the launcher starts every rank once"),
    (JaxTrainJob, {"image": "jax:1"}, "jax.distributed.initialize fixes the number of processes"),
    (XGBoostTrainJob, {"image": "xgb:1"}, "the tracker on rank 0 assigns every worker its rank once"),
    (TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b"}, "TorchTune's recipes run with the static rendezvous"),
])
def test_per_index_retries_are_refused_where_a_replaced_pod_cannot_rejoin(component, args, reason):
    error, stack = attempt(lambda: component("job", {**args, "failure_policy": {"backoff_limit_per_index": 1}}))
    assert isinstance(error, TrainJobError) and stack.resources == []
    [issue] = error.issues
    assert issue.field == "failure_policy.backoff_limit_per_index"
    assert reason in issue.message and "max_restarts with the jobset backend" in issue.message


def test_retriable_codes_without_retries_are_refused():
    error, _ = attempt(lambda: TorchTrainJob("llm", {"image": "img:1", "failure_policy": {"retriable_exit_codes": [1]}}))
    assert [i.field for i in error.issues] == ["failure_policy.retriable_exit_codes"]
    assert "backoff_limit is 0" in error.issues[0].message


@pytest.mark.parametrize("policy, field, message", [
    ({"fatal_exit_codes": [0]}, "failure_policy.fatal_exit_codes", "0 is not a failure exit code"),
    ({"retriable_exit_codes": [256]}, "failure_policy.retriable_exit_codes", "256 is not a failure exit code"),
    ({"fatal_exit_codes": [3, 3]}, "failure_policy.fatal_exit_codes", "3 is listed twice"),
    ({"fatal_exit_codes": [3, 4], "retriable_exit_codes": [4]}, "failure_policy.retriable_exit_codes",
     "4 also in fatal_exit_codes"),
    ({"max_failed_indexes": 1}, "failure_policy.max_failed_indexes", "set backoff_limit_per_index too"),
    ({"backoff_limit_per_index": -1}, "failure_policy.backoff_limit_per_index", "greater than or equal to 0"),
    ({"count_disruption": True}, "failure_policy.count_disruption", 'did you mean "count_disruptions"'),
])
def test_bad_policies_name_the_field(policy, field, message):
    error, stack = attempt(lambda: TorchTrainJob("llm", {"image": "img:1", "rendezvous": "c10d",
                                                         "failure_policy": policy}))
    assert isinstance(error, TrainJobError) and stack.resources == []
    assert [i.field for i in error.issues] == [field]
    assert message in error.issues[0].message


def test_the_typed_model_sorts_codes_and_keeps_whole_group_restarts():
    policy = FailurePolicy(fatal_exit_codes=[9, 3], max_restarts=2)
    assert policy.fatal_exit_codes == [3, 9] and policy.max_restarts == 2 and policy.count_disruptions is False


def test_a_changed_policy_replaces_the_job_instead_of_failing_as_immutable():
    result = run(lambda: TorchTrainJob("llm", {"image": "img:1"}))
    job = next(r for r in result.resources if r.is_kubernetes and r.name == "llm-node-0")
    assert job.replace_on_changes == ("spec.podFailurePolicy", "spec.backoffLimitPerIndex", "spec.maxFailedIndexes")
    # The old Job goes first: the new one has its name (the provider, finding no replacement itself, would not say so).
    assert job.delete_before_replace
    service = next(r for r in result.resources if r.is_kubernetes and r.name == "llm")
    assert service.replace_on_changes == () and not service.delete_before_replace
    from trainjobs.tools.cli.render import changes
    before = [r.manifest for r in result.kubernetes()]
    after = [r.manifest for r in run(lambda: TorchTrainJob("llm", {"image": "img:1", "failure_policy": {
        "fatal_exit_codes": [3]}})).kubernetes()]
    assert changes(before, after) == [
        "! Job llm-node-0: replaced, TRAINING RESTARTS (spec.podFailurePolicy.rules)"]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

codes = st.lists(st.integers(-1, 300), max_size=6)
policies = st.fixed_dictionaries({}, optional={
    "count_disruptions": st.booleans(), "fatal_exit_codes": codes, "retriable_exit_codes": codes,
    "backoff_limit_per_index": st.integers(-1, 5), "max_failed_indexes": st.integers(-1, 5)})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=policies, backoff=st.integers(0, 3), rendezvous=st.sampled_from(["static", "c10d"]))
def test_accepted_policies_give_valid_jobs_with_the_rules_asked_for(policy, backoff, rendezvous):
    error, result = attempt(lambda: TorchTrainJob("p", {"image": "img:1", "num_nodes": 3, "backoff_limit": backoff,
                                                        "rendezvous": rendezvous, "failure_policy": policy}))
    if error is not None:
        assert isinstance(error, TrainJobError) and result.resources == []
        assert all(i.field.startswith("failure_policy") for i in error.issues)
        return
    spec = job_spec(result, "p-node-0")
    rules = spec.get("podFailurePolicy", {}).get("rules", [])
    assert (DISRUPTION_IGNORED in rules) is not policy.get("count_disruptions", False)
    fatal = [r["onExitCodes"]["values"] for r in rules if r["action"] == "FailJob" and r["onExitCodes"]["operator"] == "In"]
    assert fatal == ([sorted(policy["fatal_exit_codes"])] if policy.get("fatal_exit_codes") else [])
    assert spec.get("backoffLimitPerIndex") == policy.get("backoff_limit_per_index")
    assert policy.get("backoff_limit_per_index") is None or rendezvous == "c10d"
    for obj in (r.manifest for r in result.kubernetes()):
        kubernetes_validate.validate(obj, "1.33.0", strict=True)


def test_a_profiles_max_restarts_is_acted_on_by_the_jobset_backend_and_left_by_jobs():
    """A profile sets max_restarts once for every job (docs/failures.md): the jobset backend restarts the group,
    the jobs backend has nothing that could, and neither refuses the job for it; a job's own max_restarts
    under `jobs` is still refused."""
    profile = {"failure_policy": {"max_restarts": 2}}
    on_jobset = run(lambda: TorchTrainJob("a", {"image": "img:1", "backend": "jobset", "profile": profile}))
    assert on_jobset.get("JobSet", "a").manifest["spec"]["failurePolicy"] == {"maxRestarts": 2}
    on_jobs = run(lambda: TorchTrainJob("a", {"image": "img:1", "profile": profile}))
    assert [r.kind for r in on_jobs.kubernetes()] == ["Service", "Job"]
    error, result = attempt(lambda: TorchTrainJob("a", {"image": "img:1", "profile": profile,
                                                        "failure_policy": {"max_restarts": 1}}))
    assert [i.field for i in error.issues] == ["failure_policy.max_restarts"] and result.resources == []
