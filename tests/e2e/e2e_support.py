"""Driving `trainjobs run-local` from the end-to-end tests: a subprocess per run, always bounded.

Bounds are upper limits for a hang, never expectations of speed: each is scaled to this machine
(`scaled`), so a busy machine with few cores gets more time. Tests assert what happened, not how
fast.
"""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROGRAMS = HERE / "programs"
# How much longer than on 4 cores anything may take here; TRAINJOBS_E2E_TIME_SCALE overrides it.
TIME_SCALE = float(os.environ.get("TRAINJOBS_E2E_TIME_SCALE") or max(1.0, 4 / len(os.sched_getaffinity(0))))
DEFAULT_LIMIT = 150.0  # seconds a run may take (run-local's own --timeout), before scaling
CLEANUP_MARGIN = 60.0  # what the test waits beyond that for run-local to stop its pods and clean up


def scaled(seconds: float) -> float:
    """An upper bound of `seconds`, scaled to this machine."""
    return seconds * TIME_SCALE


@dataclass
class LocalRun:
    returncode: int
    output: str
    seconds: float
    summary: dict

    def pods(self, phase: str | None = None) -> list[dict]:
        return [p for p in self.summary.get("pods", []) if phase is None or p["phase"] == phase]

    def lines(self, marker: str) -> list[str]:
        """The containers' output lines (echoed as `[pod] ...` or `[pod/container] ...`) holding `marker`."""
        return [line for line in self.output.splitlines() if line.startswith("[") and marker in line]

    def reports(self, marker: str) -> list[dict]:
        """The JSON objects the test programs printed after `marker ` (e.g. `E2E-RANK {...}`), in output order."""
        return [json.loads(line.split(f"{marker} ", 1)[1]) for line in self.lines(f"{marker} ")]


def run_local_command(program: Path | str, *args: str, run_dir: Path, limit: float = DEFAULT_LIMIT,
                      python_prelude: str = "") -> list[str]:
    """The command line; `--timeout` is `limit` scaled, unless `args` give their own (the last one counts)."""
    argv = ["run-local", str(program), "--run-dir", str(run_dir), "--timeout", f"{scaled(limit):g}", *args]
    if python_prelude:
        code = f"import sys\n{python_prelude}\nfrom trainjobs.tools.cli.main import main\nsys.exit(main({argv!r}))\n"
        return [sys.executable, "-c", code]
    return [sys.executable, "-m", "trainjobs.tools.cli", *argv]


def finish(process: subprocess.Popen, started: float, run_dir: Path, limit: float = DEFAULT_LIMIT) -> LocalRun:
    """Wait for a run started with the same `limit`; a run that outlives it is interrupted and fails the test."""
    bound = scaled(limit + CLEANUP_MARGIN)
    try:
        output, _ = process.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # let run-local clean up, then report the hang
        output, _ = process.communicate(timeout=scaled(CLEANUP_MARGIN))
        pytest.fail(f"run-local did not finish within {bound:g}s:\n{output}")
    summaries = list(run_dir.glob("trainjobs-*/summary.json"))
    summary = json.loads(summaries[0].read_text()) if len(summaries) == 1 else {}
    return LocalRun(process.returncode, output, time.monotonic() - started, summary)


def start_local(program: Path | str, *args: str, run_dir: Path, limit: float = DEFAULT_LIMIT,
                python_prelude: str = "", new_session: bool = False) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    command = run_local_command(program, *args, run_dir=run_dir, limit=limit, python_prelude=python_prelude)
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=new_session)
    STARTED.append(process)
    RUN_DIRS.append(run_dir)
    return process


STARTED: list[subprocess.Popen] = []  # this test's runs, which `stop_started` ends if the test did not
RUN_DIRS: list[Path] = []  # where this test's runs keep their logs: each names its run (`trainjobs-<prefix>`)


def stop_started() -> list[str]:
    """End every run the test started and did not wait for (Ctrl-C, then a kill); returns their commands."""
    left = []
    for process in STARTED:
        if process.poll() is None:
            left.append(" ".join(map(str, process.args[-6:])))
            process.send_signal(signal.SIGINT)  # run-local stops its pods and cleans up
            try:
                process.wait(timeout=scaled(CLEANUP_MARGIN))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout:
            process.stdout.close()
    STARTED.clear()
    return left


def run_local(program: Path | str, *args: str, run_dir: Path, limit: float = DEFAULT_LIMIT,
              python_prelude: str = "") -> LocalRun:
    """`trainjobs run-local PROGRAM ARGS` in a subprocess, given `limit` seconds (scaled)."""
    started = time.monotonic()
    process = start_local(program, *args, run_dir=run_dir, limit=limit, python_prelude=python_prelude)
    return finish(process, started, run_dir, limit)


def run_prefixes(run_dirs: Iterable[Path]) -> tuple[str, ...]:
    """The prefixes (`tj-<6 hex>`) of the runs whose directories are in `run_dirs`: each names all its run makes."""
    return tuple(sorted({d.name.removeprefix("trainjobs-") for r in run_dirs for d in Path(r).glob("trainjobs-tj-*")}))


def leftovers(run_dirs: Iterable[Path]) -> dict[str, list[str]]:
    """What the runs kept in `run_dirs` still hold on the host, per kind: network namespaces, links, /etc/netns
    entries and run state named by their prefixes, and pod holder processes whose stderr is one of their logs.
    Other runs on the machine (someone else's run-local, another test run) are not looked at."""
    run_dirs = [Path(r).resolve() for r in run_dirs]
    prefixes = run_prefixes(run_dirs)

    def own(path: str) -> list[str]:
        return sorted(name for name in (os.listdir(path) if os.path.isdir(path) else []) if name.startswith(prefixes))

    holders = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"localrun/_holder.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                stderr = Path(os.readlink(f"/proc/{pid}/fd/2"))
                if any(stderr.is_relative_to(r) for r in run_dirs):
                    holders.append(f"{pid} ({stderr})")
        except OSError:
            pass
    found = {"network namespaces": own("/run/netns"), "links": own("/sys/class/net"), "/etc/netns": own("/etc/netns"),
             "/run/trainjobs": own("/run/trainjobs"), "pod holder processes": holders}
    return {kind: names for kind, names in found.items() if names}
