import pytest

from trainjobs.testing import run

# With parallel workers (`pytest -n`, as `make test` runs the suite), the tests of one group run in one
# worker, one after another. The end-to-end tests are two groups that run side by side: each run names
# everything it makes by its own prefix and each test judges only its own runs' leftovers, as two users'
# run-local jobs do on one machine; within a group, tests run one at a time, so that pods which train
# for real do not all compete for the CPUs at once. The groups are about as long as each other: MPI
# over sshd, bare pods and initializers in one, the torch, JAX and XGBoost jobs in the other.
# test_installed.py's tests share one build and install; test_torchtune_cli.py's one import of torchtune.
ONE_WORKER = {
    "tests/e2e/test_mpi.py": "host: mpi", "tests/e2e/test_pods.py": "host: mpi",
    "tests/e2e/test_initializer_order.py": "host: mpi", "tests/e2e/test_leftovers.py": "host: mpi",
    "tests/localrun/test_host.py": "host: mpi", "tests/e2e/": "host: torch",
    "tests/test_installed.py": "installed", "tests/test_torchtune_cli.py": "torchtune",
}


def pytest_addoption(parser) -> None:
    parser.addoption("--other-pythons", default="", metavar="VERSIONS",
                     help="also run the tests of what differs between versions on these Pythons, e.g. "
                          "'3.10 3.13', one test each (tests/test_other_pythons.py)")


# The long units, in the order they start: each group of ONE_WORKER and each other Python's part (one test each of
# tests/test_other_pythons.py). In `make test` at load 12-16 the end-to-end groups take about 1000 s each (mostly
# waiting on their pods), the other Pythons' parts 190 to 960 s, the installed wheel's tests 500 s, torchtune's
# 100 s; the rest of the suite is thousands of tests of seconds each.
OTHER_PYTHONS = "tests/test_other_pythons.py::"
LONG_ORDER = ("host: torch", "host: mpi", OTHER_PYTHONS, "installed", "torchtune")


def long_rank(scope: str) -> int | None:
    """The place of a scheduling scope in LONG_ORDER; None for a short one."""
    key = OTHER_PYTHONS if scope.startswith(OTHER_PYTHONS) else scope
    return LONG_ORDER.index(key) if key in LONG_ORDER else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduling by scope, each group of ONE_WORKER one scope; the long units first, one per worker.

    xdist sends the scopes with the most tests first, which left each other Python's part (one test) behind the
    rest. Here a worker gets a long unit whenever it has none unfinished, before any short test: so each starts
    first on a worker of its own, and short tests fill the other workers and follow. A worker that still has a
    long unit to finish gets a single short test: an xdist worker starts a test only once it holds the next one
    (or is told to stop), and what it holds waits behind the long unit. Any other test is a scope of its own.
    By path, not with xdist's `xdist_group` mark: on pytest 9.2 xdist loses that mark's groups
    (pytest-dev/pytest-xdist#1386) and distributes the tests one by one.
    """
    from xdist.scheduler import LoadScopeScheduling

    class LongFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((group for prefix, group in ONE_WORKER.items() if nodeid.startswith(prefix)), nodeid)

        def _assign_work_unit(self, node) -> None:
            longs = sorted((scope for scope in self.workqueue if long_rank(scope) is not None), key=long_rank)
            shorts = [scope for scope in self.workqueue if long_rank(scope) is None]
            busy = any(long_rank(scope) is not None and not all(unit.values())
                       for scope, unit in self.assigned_work[node].items())
            scope = longs[0] if longs and not (busy and shorts) else shorts[0]
            work_unit = self.workqueue.pop(scope)
            self.assigned_work[node][scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    return LongFirst(config, log)


@pytest.fixture
def render_job():
    """Run a single component under mocks; return the StackResult."""

    def _render(component_cls, name, args, **kwargs):
        return run(lambda: component_cls(name, args, **kwargs))

    return _render


# --- the end-to-end suite's own duration ----------------------------------------------------------
# Here, not in tests/e2e/conftest.py: with parallel workers (`pytest -n`) the process that prints the
# summary collects no tests, so it loads only this conftest; the workers send it their reports.

_e2e_reports: list = []


def pytest_runtest_logreport(report) -> None:
    if report.nodeid.startswith("tests/e2e/"):
        _e2e_reports.append(report)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _e2e_reports:
        return
    start = min(r.start for r in _e2e_reports)
    stop = max(r.stop for r in _e2e_reports)
    calls = [r for r in _e2e_reports if r.when == "call"]
    outcomes = {}
    for r in _e2e_reports:
        if r.when == "call" or r.outcome != "passed":
            outcomes[r.nodeid] = r.outcome
    counts = ", ".join(f"{sum(1 for o in outcomes.values() if o == k)} {k}"
                       for k in ("passed", "failed", "skipped") if k in outcomes.values())
    terminalreporter.write_sep("-", f"e2e suite: {len(outcomes)} tests ({counts}) in {stop - start:.1f}s "
                                    f"(test calls {sum(r.duration for r in calls):.1f}s)")
