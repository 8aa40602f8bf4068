"""The tests of what differs between Python versions, on the other Pythons pyproject.toml supports, when asked:
`pytest --other-pythons "3.10 3.13"` (`make test` asks). Each is `scripts/test-other-pythons --part N VERSION`,
one test per part and version, so that they spread over the parallel workers beside the rest of the suite: the
version's own virtualenv (built by `make test` before the tests start, or by the first of its parts to run) and
the tests that script names (and says why), whose generated docs and schema must come out the same.
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "test-other-pythons"
# A bound for a hang (a first run builds the virtualenv), not for a slow machine.
SECONDS = 3600


def pytest_generate_tests(metafunc) -> None:
    if "version" in metafunc.fixturenames:
        versions = metafunc.config.getoption("other_pythons").split()
        parts = int(subprocess.run([SCRIPT, "--parts"], capture_output=True, text=True, check=True).stdout)
        unasked = pytest.mark.skip(reason="no --other-pythons VERSIONS given (`make test` gives them)")
        metafunc.parametrize(("version", "part"), [(v, p) for v in versions for p in range(1, parts + 1)]
                             or [pytest.param("none", 0, marks=unasked)])


def test_the_fast_suite_passes_on(version, part):
    done = subprocess.run([SCRIPT, "--part", str(part), version], cwd=REPO, capture_output=True, text=True,
                          timeout=SECONDS)
    output = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, output
    if done.stdout.startswith("test-other-pythons: no Python"):   # outside CI, a version the machine lacks
        pytest.skip(done.stdout.strip())
    assert re.search(r"^\d+ passed\b.* in [\d.]+s\b", done.stdout, re.M), output   # pytest's closing line
