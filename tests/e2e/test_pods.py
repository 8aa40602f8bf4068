"""The pod emulation and Job semantics, with plain commands: no training framework involved."""

import json
import os
import signal
import time
from pathlib import Path

from e2e_support import PROGRAMS, finish, run_local, scaled, start_local

PODS = PROGRAMS / "pods" / "__main__.py"


def wait_for(process, marker: str, count: int) -> list[str]:
    """Read the run's output until `count` lines hold `marker` (the run's own timeout bounds it)."""
    seen: list[str] = []
    while sum(marker in line for line in seen) < count:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
    assert sum(marker in line for line in seen) >= count, "".join(seen)
    return seen


def namespace_ids(netns: list[str]) -> set[int]:
    """The network namespaces named `netns` (one run's), by inode: they outlive their names."""
    from trainjobs.localrun.network import RUN_NETNS

    return {os.stat(RUN_NETNS / name).st_ino for name in netns}


def pod_processes(namespaces: set[int]) -> list[int]:
    """PIDs of the hang stack's pod processes (`sleep 300`) in the network namespaces `namespaces` (one
    run's pods): a `sleep 300` elsewhere on the machine, another run's or a shell's, is not one."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            if (pid.isdigit() and open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\x00300\x00"
                    and os.stat(f"/proc/{pid}/ns/net").st_ino in namespaces):
                found.append(int(pid))
        except OSError:
            pass
    return found


def run_state(owner: int) -> Path:
    """The state file of the run whose run-local is `owner` (other runs on the machine have their own)."""
    from trainjobs.localrun.network import STATE_DIR

    for path in STATE_DIR.glob("tj-*.json"):
        try:
            if json.loads(path.read_text())["owner"] == owner:
                return path
        except (OSError, ValueError):
            pass  # another run's, just removed
    raise AssertionError(f"no state file of run-local {owner} in {STATE_DIR}")


def test_pods_see_names_env_volumes_and_each_other_and_two_runs_do_not_collide(tmp_path):
    started = time.monotonic()
    first = start_local(PODS, "--stack", "sandbox", run_dir=tmp_path / "a", limit=60)
    second = start_local(PODS, "--stack", "sandbox", run_dir=tmp_path / "b", limit=60)
    runs = [finish(first, started, tmp_path / "a", 60), finish(second, started, tmp_path / "b", 60)]
    for run in runs:
        assert run.returncode == 0, run.output
        assert not run.lines("PROBE FAIL"), run.output
        assert len(run.lines("PROBE done")) == 3
        assert len(run.lines("PROBE ok tcp to")) == 6
    subnets = {run.output.split("subnet ")[1].split()[0] for run in runs}
    assert len(subnets) == 2, subnets
    # Writes outside volumes stay in the pod's overlay; new top-level mount points are not on the host.
    assert not os.path.exists("/e2e-scratch")
    assert not [f for f in os.listdir("/etc") if f.startswith("e2e-written-by-")]


def test_a_failed_pod_fails_the_job_and_stops_the_others(tmp_path):
    run = run_local(PODS, "--stack", "fail-fast", run_dir=tmp_path, limit=60)
    assert run.returncode == 1, run.output
    by_index = {p["index"]: p for p in run.pods()}
    assert by_index[1]["phase"] == "Failed" and by_index[1]["exit_code"] == 3
    assert by_index[0]["phase"] == by_index[2]["phase"] == "Stopped"
    assert by_index[0]["exit_code"] == by_index[2]["exit_code"] == 143  # SIGTERM
    assert f"pod {by_index[1]['name']} (index 1) failed: container node exited 3" in run.output
    assert "index 1 gives up" in run.output  # the failing pod's log is shown


def test_timeout_stops_every_pod(tmp_path):
    run = run_local(PODS, "--stack", "hang", "--timeout", "3", run_dir=tmp_path)
    assert run.returncode == 124, run.output
    assert run.seconds >= 3
    assert "TIMED OUT: timed out after 3s with pods still running" in run.output
    assert [p["phase"] for p in run.pods()] == ["Stopped", "Stopped"]


def test_ctrl_c_stops_every_pod_and_cleans_up(tmp_path):
    started = time.monotonic()
    process = start_local(PODS, "--stack", "hang", run_dir=tmp_path, limit=60, new_session=True)
    wait_for(process, " started", 2)
    os.killpg(process.pid, signal.SIGINT)  # as a Ctrl-C at a terminal: the whole foreground process group
    run = finish(process, started, tmp_path, 60)
    assert run.returncode == 130, run.output
    assert "INTERRUPTED: interrupted by SIGINT" in run.output


def test_a_killed_run_takes_its_pods_down_and_the_next_run_removes_its_network(tmp_path):
    from trainjobs.localrun.network import RUN_NETNS, sweep_stale

    process = start_local(PODS, "--stack", "hang", run_dir=tmp_path, limit=60)
    try:
        wait_for(process, " started", 2)
        state = run_state(process.pid)
        netns = json.loads(state.read_text())["netns"]
        namespaces = namespace_ids(netns)
        deadline = time.monotonic() + scaled(60)
        while len(pod_processes(namespaces)) < 2 and time.monotonic() < deadline:   # each pod's shell execs sleep
            time.sleep(0.2)
        assert len(pod_processes(namespaces)) == 2
        process.kill()  # no chance to clean up
        process.wait()
        # Each pod's first process sees its pipe from run-local close and takes the pod down. The bound
        # is for a hang, not a speed: on a loaded machine this can take a while.
        deadline = time.monotonic() + scaled(60)
        while (left := pod_processes(namespaces)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, "the pods' processes outlived their owner"
        # Its network is still there until the next run sweeps it: this test's, or one another run-local on
        # the machine (another test's, a user's) started meanwhile.
        assert state.stem in sweep_stale() or not state.exists()
        assert not [name for name in netns if (RUN_NETNS / name).exists()]
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        sweep_stale()
