"""The tests of what differs between Python versions, on the other Pythons pyproject.toml supports, one
test per version, when asked: `pytest --other-pythons "3.10 3.13"` (`make test` asks). As tests they run in
parallel workers beside the rest of the suite. Each is `scripts/test-other-pythons VERSION`: the version's
own virtualenv, built on the first run, and the tests that script names (and says why), whose generated
docs and schema must come out the same.
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A bound for a hang (a first run builds the virtualenv), not for a slow machine.
SECONDS = 3600


def pytest_generate_tests(metafunc) -> None:
    if "version" in metafunc.fixturenames:
        versions = metafunc.config.getoption("other_pythons").split()
        unasked = pytest.mark.skip(reason="no --other-pythons VERSIONS given (`make test` gives them)")
        metafunc.parametrize("version", versions or [pytest.param("none", marks=unasked)])


def test_the_fast_suite_passes_on(version):
    done = subprocess.run([REPO / "scripts" / "test-other-pythons", version], cwd=REPO, capture_output=True,
                          text=True, timeout=SECONDS)
    output = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, output
    if done.stdout.startswith("test-other-pythons: no Python"):   # outside CI, a version the machine lacks
        pytest.skip(done.stdout.strip())
    assert re.search(r"^\d+ passed\b.* in [\d.]+s\b", done.stdout, re.M), output   # pytest's closing line
