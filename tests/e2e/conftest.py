"""End-to-end tests: stack program -> render -> `trainjobs run-local` -> real processes in emulated pods.

They need root (namespaces, a bridge, mounts) and, for the torch, JAX and XGBoost ones, torch, jax or
xgboost in this environment. Without them the tests are skipped with the reason, except under CI
(`CI=true`), where a missing prerequisite fails them: CI must really run them. `make test` installs
what they need.

After each test, the runs it started must hold no network namespace, link, /etc/netns entry, run
state or pod process on the machine; what other runs hold is not the test's. Under parallel workers
(`pytest -n`), they run in two groups side by side, each in one worker, one test after another
(tests/conftest.py). The suite's own duration is reported at the end of the run (tests/conftest.py).
"""

import importlib.util
import os
import sys
import time

import pytest

from trainjobs.localrun import host_problems


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI=true and the end-to-end tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def host_ready() -> None:
    problems = host_problems()
    if problems:
        _unavailable("; ".join(problems))


@pytest.fixture(scope="session")
def torch_ready(host_ready) -> None:
    if importlib.util.find_spec("torch") is None:
        _unavailable(f"torch is not installed in {sys.prefix}: pip install -e '.[e2e]' (`make test` does)")


@pytest.fixture(scope="session")
def jax_ready(host_ready) -> None:
    if importlib.util.find_spec("jax") is None:
        _unavailable(f"jax is not installed in {sys.prefix}: pip install -e '.[e2e]' (`make test` does)")


@pytest.fixture(scope="session")
def xgboost_ready(host_ready) -> None:
    if importlib.util.find_spec("xgboost") is None:
        _unavailable(f"xgboost is not installed in {sys.prefix}: pip install -e '.[e2e]' (`make test` does)")


def _remove_leftovers_of_dead_runs() -> list[str]:
    """The networks and pod processes of runs whose run-local is gone (killed, or a crashed session)."""
    from trainjobs.localrun.network import sweep_stale

    return sweep_stale()


@pytest.fixture(autouse=True)
def leaves_nothing_behind(host_ready):
    """Every test starts on a machine without leftovers of earlier runs, and its own runs leave none.

    Before the test, what runs that are gone left behind is removed. After it, runs the test started
    and did not wait for are interrupted (they clean up after themselves); then the runs the test
    started may hold nothing on the host (`e2e_support.leftovers`): what other runs on the machine
    hold is theirs, never this test's. If they do, the leftovers are removed so that they cannot fail
    the next test, and this test fails naming them.
    """
    from e2e_support import CLEANUP_MARGIN, RUN_DIRS, leftovers, scaled, stop_started

    _remove_leftovers_of_dead_runs()
    RUN_DIRS.clear()
    yield
    unfinished = stop_started()
    deadline = time.monotonic() + scaled(CLEANUP_MARGIN)  # a bound for a hang, on a busy machine
    while (left := leftovers(RUN_DIRS)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        _remove_leftovers_of_dead_runs()
    RUN_DIRS.clear()
    assert not unfinished and not left, f"left behind: runs {unfinished}, on the host: {left}"
