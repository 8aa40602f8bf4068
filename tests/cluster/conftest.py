"""The real-engine suite: the Pulumi CLI and the Kubernetes provider built from source, against the local control
plane of `make cluster` (scripts/engine/cluster.sh). `make test-cluster` runs it; `make test` does not: these tests
are collected only when named (`pytest tests/cluster`) or when TRAINJOBS_CLUSTER_TESTS=1 (which `make test-cluster`
sets). They use the cluster whose state is in $TRAINJOBS_CLUSTER_DIR (from its `env` file), by default .cluster/.
Without a running cluster they skip, except in CI (CI=true), where they fail.

The suite mostly waits (for the engine, the controllers, kwok), so `make test-cluster` runs it on several
pytest-xdist workers against the one cluster (`--dist loadgroup`). Most tests work in a namespace of their own;
those that share something cluster-wide run in one xdist group, one after another: see `GROUPS`."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def pytest_ignore_collect(collection_path, config):
    if os.environ.get("TRAINJOBS_CLUSTER_TESTS") == "1":
        return None
    named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if any(path == HERE or HERE in path.parents for path in named):
        return None
    return True


# What tests share on the cluster, by test file (and, for test_changes.py, by its backend): the tests of a group run
# on one worker, one after another. The node agent's tests each run on Nodes and in a namespace of their own, beside
# every other test, but train for real on this machine's few cores: a group per file, started first as they are the
# longest (GroupsNodeAgentFirst).
EXAMPLE_STACKS = "example-stacks"   # namespaces ml, llm and default, the Kueue queues and GPUs of the examples
# The node agent's groups, longest first: its fault tests (about 440 s), its Job controller tests (400 s), status (160 s).
NODE_AGENT = ("node-agent-faults", "node-agent", "node-agent-status")
GROUPS = {
    "test_stacks.py": EXAMPLE_STACKS,
    # The platform stack's namespace llm, and whole-Node pods on the shared kwok Nodes, which Kueue's placement of
    # the kueue stack's jobs counts (as below).
    "test_yaml_program.py": EXAMPLE_STACKS,
    # The kueue stack's jobs in namespace ml, from the fixtures' queue team-llm on the shared kwok Nodes.
    "test_kueue_controller.py::test_the_kueue_example_stacks_jobs_are_admitted_from_the_clusters_queues":
        EXAMPLE_STACKS,
    # Kueue's tests share their pool of kwok Nodes (cluster.sh test_pool_nodes): Kueue's placement (TAS) counts the
    # GPUs of pods it does not manage and does not try a pending job again when they finish, so one test at a time.
    "test_kueue_controller.py": "kueue-tests",
    # The admission dry runs share the namespace `admission`, which their module's ApiServer creates and deletes.
    "test_jobset_controller.py::test_every_jobset_of_every_gang_scheduler_and_variant_passes_the_webhooks":
        "jobset-admission",
    "test_jobset_controller.py::test_the_webhooks_refuse_what_they_refuse": "jobset-admission",
    "test_jobset_controller.py::test_the_example_stacks_jobset_passes_the_webhooks": "jobset-admission",
    "test_node_agent.py": NODE_AGENT[1],
    "test_status_node_agent.py": NODE_AGENT[2],
    "test_node_agent_faults.py": NODE_AGENT[0],
}


def group_of(nodeid: str) -> str | None:
    """The group of a test of this folder by its id (tests/cluster/test_changes.py::test_x[jobs-image]), or None."""
    path, _, test = nodeid.partition("::")
    folder, _, name = path.rpartition("/")
    if not folder.endswith("tests/cluster"):
        return None
    function, _, params = test.partition("[")
    if name == "test_changes.py":   # one stack and namespace per backend (its first parameter), set up once
        return f"changes-{params.split('-')[0]}"
    return GROUPS.get(f"{name}::{function}") or GROUPS.get(name)


class GroupsNodeAgentFirst(LoadScopeScheduling):
    """xdist's load scheduling by scope, a test's scope being its group (else the test itself); the node agent's
    groups first. (xdist's own xdist_group markers do not group under pytest 9, which no longer lets xdist rename a
    test.)"""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or nodeid

    def _assign_work_unit(self, node) -> None:
        for group in reversed(NODE_AGENT):
            if group in self.workqueue:
                self.workqueue.move_to_end(group, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (`make test-cluster`) groups by GROUPS."""
    if config.getvalue("dist") == "loadgroup":
        return GroupsNodeAgentFirst(config, log)
    return None


def read_env(env_file: Path) -> dict[str, str]:
    """The environment that `.cluster/env`'s export lines give, on top of this process's."""
    env = dict(os.environ)
    for line in env_file.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = os.path.expandvars(shlex.split(value)[0]).replace("$PATH", env.get("PATH", ""))
    return env


@pytest.fixture(scope="session")
def cluster_env() -> dict[str, str]:
    state = Path(os.environ.get("TRAINJOBS_CLUSTER_DIR") or REPO / ".cluster")
    problem = None
    if not (state / "env").exists():
        problem = f"no cluster: {state / 'env'} is missing; run `make cluster`"
    else:
        env = read_env(state / "env")
        ready = subprocess.run(["kubectl", "get", "--raw", "/readyz"], env=env, capture_output=True, text=True)
        if ready.returncode != 0:
            problem = f"the cluster of {state} does not answer ({ready.stderr.strip()}); run `make cluster`"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return env
