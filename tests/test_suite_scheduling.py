"""How `make test` spreads the suite over pytest-xdist workers (tests/conftest.py): the long units (the end-to-end
groups, each other Python's part, the installed wheel's tests, torchtune's) first, each on a worker of its own, no
short test queued ahead of one; the short tests on the other workers and after them. Checked with xdist's
scheduler and stand-in workers that run what they are sent as an xdist worker does."""

import importlib.util
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("suite_conftest", HERE / "conftest.py")
suite_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_conftest)

PARTS = int(subprocess.run([HERE.parent / "scripts" / "test-other-pythons", "--parts"], capture_output=True,
                           text=True, check=True).stdout)
OTHER_PYTHONS = [f"tests/test_other_pythons.py::test_the_fast_suite_passes_on[{version}-{part}]"
                 for version in ("3.10", "3.13") for part in range(1, PARTS + 1)]
# As pytest collects them: by path, the other Pythons' parts among the short modules.
COLLECTION = [
    "tests/e2e/test_mpi.py::test_a", "tests/e2e/test_mpi.py::test_b", "tests/e2e/test_torch.py::test_a",
    "tests/e2e/test_torch.py::test_b", "tests/e2e/test_xgboost_distributed.py::test_a",
    "tests/localrun/test_host.py::test_a",
    *[f"tests/test_cli.py::test_{i}" for i in range(4)],
    *[f"tests/test_docs.py::test_{i}" for i in range(2)],
    *[f"tests/test_import.py::test_{i}" for i in range(8)],
    *[f"tests/test_installed.py::test_{i}" for i in range(5)],
    "tests/test_layers.py::test_a",
    *OTHER_PYTHONS,
    "tests/test_policy.py::test_a",
    *[f"tests/test_render.py::test_{i}" for i in range(6)],
    *[f"tests/test_s{i}.py::test_a" for i in range(12)],
    "tests/test_torchtune_cli.py::test_a", "tests/test_torchtune_cli.py::test_b",
    "tests/test_wire.py::test_a", "tests/test_wire.py::test_b", "tests/test_wire.py::test_c",
]


def unit_of(nodeid: str) -> str:
    """The long unit a test belongs to (its group, or the other Python's part), else its module."""
    group = next((g for p, g in suite_conftest.ONE_WORKER.items() if nodeid.startswith(p)), None)
    return group or (nodeid if nodeid in OTHER_PYTHONS else nodeid.split("::")[0])


LONG_UNITS = ["host: torch", "host: mpi", *OTHER_PYTHONS, "installed", "torchtune"]


class Worker:
    """An xdist worker: it runs a test only once it holds the next one, or is told to stop."""

    def __init__(self, name: str, sends: list):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[str] = []
        self.done = 0
        self.sends = sends

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sends.append((self, self.sent[self.done:], [COLLECTION[i] for i in indexes]))
        self.sent += [COLLECTION[i] for i in indexes]

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.sent) - self.done >= (1 if self.shutting_down else 2)


def run_suite(workers: int):
    """Schedule COLLECTION on `workers` workers, which finish a test each in turn; every send (worker, its
    unfinished tests then, the tests sent), in order."""
    sends: list = []
    pool = [Worker(f"gw{i}", sends) for i in range(workers)]
    config = SimpleNamespace(getvalue=lambda name: {"tx": [f"{workers}*popen"]}[name],
                             option=SimpleNamespace(loadscopereorder=True))
    sched = suite_conftest.pytest_xdist_make_scheduler(config, SimpleNamespace(loadscopesched=lambda *_: None))
    for worker in pool:
        sched.add_node(worker)
        sched.add_node_collection(worker, COLLECTION)
    sched.schedule()
    while any(w.can_run() for w in pool):
        for worker in pool:
            if worker.can_run():
                worker.done += 1
                sched.mark_test_complete(worker, COLLECTION.index(worker.sent[worker.done - 1]))
    assert sorted(n for w in pool for n in w.sent) == sorted(COLLECTION)   # each test once
    assert all(w.shutting_down and w.done == len(w.sent) for w in pool)
    return pool, sends


def test_the_long_units():
    assert PARTS >= 1
    assert [u for u in dict.fromkeys(map(unit_of, COLLECTION)) if suite_conftest.long_rank(u) is not None] == [
        "host: mpi", "host: torch", "installed", *OTHER_PYTHONS, "torchtune"]
    assert sorted(LONG_UNITS, key=suite_conftest.long_rank) == LONG_UNITS


@pytest.mark.parametrize("workers", [4, 6, 12])
def test_the_long_units_start_first_each_on_a_worker_of_its_own(workers):
    pool, sends = run_suite(workers)
    long_sends = [(w, ahead, unit_of(sent[0])) for w, ahead, sent in sends if unit_of(sent[0]) in LONG_UNITS]
    # Every long unit is sent whole, in LONG_ORDER, the first of them one to each worker before anything else.
    assert [unit for _, _, unit in long_sends] == LONG_UNITS
    first = min(workers, len(LONG_UNITS))
    assert [(w, unit_of(sent[0])) for w, _, sent in sends[:first]] == list(zip(pool, LONG_UNITS[:first]))
    for worker, ahead, unit in long_sends:
        assert [n for n in worker.sent if unit_of(n) == unit] == [n for n in COLLECTION if unit_of(n) == unit]
        # No other long unit unfinished on that worker, and at most the two short tests an xdist worker asks
        # for more work with ahead of it.
        assert not any(unit_of(n) in LONG_UNITS for n in ahead), (worker.gateway.id, unit, ahead)
        assert len(ahead) <= 2, (worker.gateway.id, unit, ahead)
    # While a long unit waits, a worker gets a short test only to start its own long unit, one test.
    last_long = sends.index(next(s for s in sends if unit_of(s[2][0]) == LONG_UNITS[-1]))
    for worker, ahead, sent in sends[:last_long]:
        if unit_of(sent[0]) not in LONG_UNITS:
            assert any(unit_of(n) in LONG_UNITS for n in ahead) and len(sent) == 1, (worker.gateway.id, sent)
    # With more workers than long units, the others start with the short tests, one each, in order.
    shorts = [n for n in COLLECTION if unit_of(n) not in LONG_UNITS]
    assert [w.sent[0] for w in pool[len(LONG_UNITS):]] == shorts[:max(0, workers - len(LONG_UNITS))]
