"""How `make test-cluster` spreads the real-engine suite over pytest-xdist workers (tests/cluster/conftest.py): the
tests of a group on one worker, and the node agent's groups first. Checked with xdist's scheduler and
stand-in workers, without a cluster."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

spec = importlib.util.spec_from_file_location(
    "cluster_conftest", Path(__file__).resolve().parent / "cluster" / "conftest.py")
cluster_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cluster_conftest)

T = "tests/cluster/"
COLLECTION = [
    f"{T}test_node_agent.py::test_torch_static_2x2_completes_under_the_job_controller",
    f"{T}test_changes.py::test_up_makes_the_change[jobs-image]",
    f"{T}test_changes.py::test_up_makes_the_change[jobset-image]",
    f"{T}test_changes.py::test_the_engine_lists_what_the_render_lists[jobs-env]",
    f"{T}test_stacks.py::test_dev_stack_preview_up_no_changes_destroy",
    f"{T}test_kueue_controller.py::test_the_kueue_example_stacks_jobs_are_admitted_from_the_clusters_queues",
    f"{T}test_kueue_controller.py::test_a_placed_jobs_pods_land_in_one_rack",
    f"{T}test_cluster.py::test_a_jobs_pods_succeed",
    f"{T}test_status_node_agent.py::test_a_rank_killed_like_the_oom_killer_does",
]


class Worker:
    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[str] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += [COLLECTION[i] for i in indexes]

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler(workers: list[Worker]):
    config = SimpleNamespace(getvalue=lambda name: {"tx": [f"{len(workers)}*popen"]}[name],
                             option=SimpleNamespace(loadscopereorder=True))
    sched = cluster_conftest.GroupsNodeAgentFirst(config)
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, COLLECTION)
    sched.schedule()
    return sched


def finish(sched, worker: Worker) -> None:
    """The worker reports the tests it was sent as done."""
    for nodeid in [n for n in worker.sent if not sched.assigned_work[worker][sched._split_scope(n)][n]]:
        sched.mark_test_complete(worker, COLLECTION.index(nodeid))


def test_the_groups():
    assert [cluster_conftest.group_of(n) for n in COLLECTION] == [
        "node-agent", "changes-jobs", "changes-jobset", "changes-jobs", "example-stacks", "example-stacks",
        "kueue-tests", None, "node-agent-status"]
    assert cluster_conftest.group_of("tests/test_changes.py::test_x[jobs-image]") is None
    # In namespaces, flavors and kwok Nodes of their own: beside everything else.
    assert cluster_conftest.group_of(f"{T}test_api_verdict.py::test_the_project_and_the_api_server_agree[stacks]") \
        is None
    assert cluster_conftest.group_of(
        f"{T}test_status_on_cluster.py::test_a_job_waits_for_quota_then_is_admitted_and_runs") is None
    assert cluster_conftest.group_of(
        f"{T}test_jobset_controller.py::test_the_example_stacks_jobset_passes_the_webhooks") == "jobset-admission"


def test_a_group_runs_on_one_worker_and_the_node_agents_first_beside_the_others():
    workers = [Worker("gw0"), Worker("gw1"), Worker("gw2")]
    sched = scheduler(workers)
    # The first two workers start on the node agent's groups (two of them here), the longest, however few tests they
    # have; the others start on the other groups at the same time.
    assert [cluster_conftest.group_of(w.sent[0]) for w in workers[:2]] == ["node-agent", "node-agent-status"]
    assert all(not any("node_agent" in n for n in w.sent) for w in workers[2:]) and workers[2].sent
    while sched.workqueue:
        for worker in workers:
            finish(sched, worker)
    for group in ("node-agent", "node-agent-status", "changes-jobs", "changes-jobset", "example-stacks"):
        (holder,) = [w for w in workers if any(cluster_conftest.group_of(n) == group for n in w.sent)]
        assert [n for n in holder.sent if cluster_conftest.group_of(n) == group] == [
            n for n in COLLECTION if cluster_conftest.group_of(n) == group]
    assert sorted(n for w in workers for n in w.sent) == sorted(COLLECTION)
