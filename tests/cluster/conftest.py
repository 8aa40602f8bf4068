"""The real-engine suite: the Pulumi CLI and the Kubernetes provider built from source, against the local control
plane of `make cluster` (scripts/engine/cluster.sh). `make test-cluster` runs it; `make test` does not: these tests
are collected only when named (`pytest tests/cluster`) or when TRAINJOBS_CLUSTER_TESTS=1 (which `make test-cluster`
sets). They use the cluster whose state is in $TRAINJOBS_CLUSTER_DIR (from its `env` file), by default .cluster/.
Without a running cluster they skip, except in CI (CI=true), where they fail."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def pytest_ignore_collect(collection_path, config):
    if os.environ.get("TRAINJOBS_CLUSTER_TESTS") == "1":
        return None
    named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if any(path == HERE or HERE in path.parents for path in named):
        return None
    return True


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
