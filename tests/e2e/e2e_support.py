"""Driving `trainjobs run-local` from the end-to-end tests: a subprocess per run, always bounded."""

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROGRAMS = HERE / "programs"


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


def run_local_command(program: Path | str, *args: str, run_dir: Path, python_prelude: str = "") -> list[str]:
    argv = ["run-local", str(program), "--run-dir", str(run_dir), *args]
    if python_prelude:
        code = f"import sys\n{python_prelude}\nfrom components.cli import main\nsys.exit(main({argv!r}))\n"
        return [sys.executable, "-c", code]
    return [sys.executable, "-m", "components.cli", *argv]


def finish(process: subprocess.Popen, started: float, run_dir: Path, timeout: float) -> LocalRun:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # let run-local clean up, then report the hang
        output, _ = process.communicate(timeout=30)
        pytest.fail(f"run-local did not finish within {timeout}s:\n{output}")
    summaries = list(run_dir.glob("trainjobs-*/summary.json"))
    summary = json.loads(summaries[0].read_text()) if len(summaries) == 1 else {}
    return LocalRun(process.returncode, output, time.monotonic() - started, summary)


def start_local(program: Path | str, *args: str, run_dir: Path, python_prelude: str = "",
                new_session: bool = False) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(run_local_command(program, *args, run_dir=run_dir, python_prelude=python_prelude),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=new_session)


def run_local(program: Path | str, *args: str, run_dir: Path, timeout: float = 180,
              python_prelude: str = "") -> LocalRun:
    """`trainjobs run-local PROGRAM ARGS` in a subprocess, bounded by `timeout` seconds."""
    started = time.monotonic()
    process = start_local(program, *args, run_dir=run_dir, python_prelude=python_prelude)
    return finish(process, started, run_dir, timeout)
