"""Queue and priority names are checked on the argument that gives them, as the cluster would check the
objects that carry them, under both backends (the corpus, tests/corpus/queues.yaml, feeds more of them as
dicts, typed Args and stack config)."""

import pytest

from trainjobs import TorchTrainJob, TorchTrainJobArgs, TrainingNamespace, TrainingNamespaceArgs, TrainJobError
from trainjobs.testing import attempt, run

BACKENDS = ["jobs", "jobset"]


def refused(args) -> dict[str, str]:
    error, result = attempt(lambda: TorchTrainJob("x", args))
    assert isinstance(error, TrainJobError), error
    assert result.resources == []
    return {issue.field: issue.message for issue in error.issues}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("typed", [False, True], ids=["dict", "typed"])
def test_a_kueue_queue_and_priority_that_are_not_label_subdomains_are_refused_on_their_arguments(backend, typed):
    args = {"image": "t:1", "backend": backend, "gang_scheduler": "kueue", "queue": "Team_LLM",
            "priority_class": "Research_X"}
    issues = refused(TorchTrainJobArgs(**args) if typed else args)
    assert issues == {
        "queue": '"Team_LLM" is not a valid name: at most 63 lowercase letters, digits, "-" and ".", starting and '
                 "ending with a letter or digit; Kueue reads it from the label kueue.x-k8s.io/queue-name, which must "
                 "name the namespace's LocalQueue: use that object's name",
        "priority_class": '"Research_X" is not a valid name: at most 63 lowercase letters, digits, "-" and ".", '
                          "starting and ending with a letter or digit; Kueue reads it from the label "
                          "kueue.x-k8s.io/priority-class, which must name a WorkloadPriorityClass: use that "
                          "object's name"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("typed", [False, True], ids=["dict", "typed"])
def test_a_volcano_queue_and_priority_that_are_not_dns_subdomains_are_refused_on_their_arguments(backend, typed):
    args = {"image": "t:1", "backend": backend, "gang_scheduler": "volcano", "queue": "Team_LLM",
            "priority_class": "Research_X"}
    issues = refused(TorchTrainJobArgs(**args) if typed else args)
    assert issues == {
        "queue": '"Team_LLM" is not a valid name: at most 253 lowercase letters, digits, "-" and ".", starting and '
                 "ending with a letter or digit; it names a Volcano Queue (the PodGroup's spec.queue): use that "
                 "object's name",
        "priority_class": '"Research_X" is not a valid name: at most 253 lowercase letters, digits, "-" and ".", '
                          "starting and ending with a letter or digit; it names a PriorityClass (the PodGroup's "
                          "spec.priorityClassName): use that object's name"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_queue_that_is_no_label_value_is_refused_once_on_queue_not_on_the_objects_label(backend):
    issues = refused({"image": "t:1", "backend": backend, "gang_scheduler": "kueue", "queue": "team llm",
                      "priority_class": "p" * 64})
    assert list(issues) == ["queue", "priority_class"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_kueue_labels_are_at_most_63_characters_where_volcano_takes_a_longer_queue(backend):
    long = "q" * 64
    assert set(refused({"image": "t:1", "backend": backend, "gang_scheduler": "kueue", "queue": long})) == {"queue"}
    result = run(lambda: TorchTrainJob("x", {"image": "t:1", "backend": backend, "gang_scheduler": "volcano",
                                             "queue": "q" * 253}))
    assert result.get("PodGroup", "x").manifest["spec"]["queue"] == "q" * 253


@pytest.mark.parametrize("scheduler", ["kueue", "volcano"])
def test_a_queue_from_a_profile_is_refused_on_the_profile(scheduler):
    issues = refused({"image": "t:1", "backend": "jobset",
                      "profile": {"gang_scheduler": scheduler, "queue": "Team_LLM"}})
    assert list(issues) == ["profile.queue"]


@pytest.mark.parametrize("typed", [False, True], ids=["dict", "typed"])
def test_a_training_namespace_refuses_queue_names_kueue_cannot_use(typed):
    def issues(**args):
        given = TrainingNamespaceArgs(**args) if typed else args
        error, result = attempt(lambda: TrainingNamespace("llm", given))
        assert isinstance(error, TrainJobError) and result.resources == []
        return {issue.field: issue.message for issue in error.issues}

    assert issues(kueue_cluster_queue="Team_GPUs", local_queue_name="Team_LLM") == {
        "local_queue_name": '"Team_LLM" is not a valid name: at most 63 lowercase letters, digits, "-" and ".", '
                            "starting and ending with a letter or digit; jobs name the LocalQueue in their "
                            "kueue.x-k8s.io/queue-name label",
        "kueue_cluster_queue": '"Team_GPUs" is not a valid name: at most 253 lowercase letters, digits, "-" and ".", '
                               "starting and ending with a letter or digit; it is the name of a Kueue ClusterQueue"}
    assert list(issues(kueue_cluster_queue="gpus", local_queue_name="l" * 64)) == ["local_queue_name"]
