"""End-to-end tests: stack program -> render -> `trainjobs run-local` -> real processes in emulated pods.

They need root (namespaces, a bridge, mounts) and, for the torch, JAX and XGBoost ones, torch, jax or
xgboost in this environment. Without them the tests are skipped with the reason, except under CI
(`CI=true`), where a missing prerequisite fails them: CI must really run them. `make test` installs
what they need.

After each test the machine must hold no network namespace, link, /etc/netns entry, run state or
pod process that was not there before. Under parallel workers (`pytest -n`), they all run in one
worker, one after another (tests/conftest.py). The suite's own duration is reported at the end of
the run (tests/conftest.py).
"""

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

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


def _host_state() -> dict:
    def lines(*cmd: str) -> list[str]:
        return sorted(subprocess.run(cmd, capture_output=True, text=True).stdout.split("\n"))

    def listing(path: str) -> list[str] | None:
        return sorted(os.listdir(path)) if os.path.isdir(path) else None

    holders = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and b"localrun/_holder.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                holders.append(pid)
        except OSError:
            pass
    return {
        "network namespaces": lines("ip", "netns", "list"),
        "links": sorted(line.split(":")[1].split("@")[0].strip() for line in lines("ip", "-o", "link", "show")
                        if ":" in line),
        "/etc/netns": listing("/etc/netns"),
        "/run/trainjobs": listing("/run/trainjobs"),
        "/run/netns": listing("/run/netns"),
        "pod holder processes": holders,
    }


def _remove_leftovers_of_dead_runs() -> list[str]:
    """The networks and pod processes of runs whose run-local is gone (killed, or a crashed session)."""
    from trainjobs.localrun.network import sweep_stale

    return sweep_stale()


@pytest.fixture(autouse=True)
def leaves_nothing_behind(host_ready):
    """Every test starts on a machine without leftovers of earlier runs, and leaves none.

    Before the test, what runs that are gone left behind is removed. After it, runs the test started
    and did not wait for are interrupted (they clean up after themselves); then nothing may be on the
    host that was not there before the test (what another run on the machine removes meanwhile is its
    own). If something is, the leftovers are removed so that they cannot fail the next test, and this
    test fails naming them.
    """
    from e2e_support import CLEANUP_MARGIN, scaled, stop_started

    _remove_leftovers_of_dead_runs()
    before = _host_state()
    yield
    unfinished = stop_started()
    deadline = time.monotonic() + scaled(CLEANUP_MARGIN)  # a bound for a hang, on a busy machine
    after = _host_state()
    while _appeared(before, after) and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _host_state()
    left = _appeared(before, after)
    if left:
        _remove_leftovers_of_dead_runs()
    assert not unfinished and not left, f"left behind: runs {unfinished}, on the host: {left}"


def _appeared(before: dict, after: dict) -> dict[str, list[str]]:
    """Per kind of host object, what exists now that did not before (a directory that is gone counts as empty)."""
    new = {key: sorted(set(after[key] or []) - set(before[key] or [])) for key in before}
    return {key: names for key, names in new.items() if names}
