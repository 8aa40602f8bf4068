"""The leftover check judges only what the test's own runs made: another run's network namespace on the
machine (someone else's run-local, another test run) is not the test's, its own run's is."""

import secrets
import subprocess

from e2e_support import leftovers


def test_only_the_runs_a_test_started_are_judged(tmp_path):
    ours, theirs = (f"tj-{secrets.token_hex(3)}" for _ in range(2))
    (tmp_path / f"trainjobs-{ours}").mkdir()   # as run-local names the directory of its run
    namespaces = [f"{theirs}-ela-node-0-0", f"{ours}-ela-node-0-0"]
    try:
        subprocess.run(["ip", "netns", "add", namespaces[0]], check=True)
        assert leftovers([tmp_path]) == {}
        subprocess.run(["ip", "netns", "add", namespaces[1]], check=True)
        assert leftovers([tmp_path]) == {"network namespaces": [namespaces[1]]}
    finally:
        for name in namespaces:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    assert leftovers([tmp_path]) == {}
