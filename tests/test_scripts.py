"""The shell scripts the library's containers run, run as shell: each parses, and each does its job."""

import os
import stat
import subprocess
from importlib.resources import files

import pytest

from trainjobs.scripts import script

SCRIPTS = sorted(p.name.removesuffix(".sh") for p in files("trainjobs.scripts").iterdir() if p.name.endswith(".sh"))


def test_every_script_is_shipped_with_the_package():
    assert SCRIPTS == ["mpi-launcher", "mpi-node", "wait-for-hosts", "wait-for-initializers"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_parses_as_posix_shell_without_its_header(name):
    text = script(name)
    assert not text.startswith("#") and text == text.strip()
    done = subprocess.run(["/bin/sh", "-n", "-c", text], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def run(name, *args, env=None, timeout=60):
    return subprocess.run(["/bin/sh", "-c", script(name), name, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_training_starts_once_every_initializer_marker_exists(tmp_path):
    markers = [tmp_path / "dataset-initializer-abc.done", tmp_path / "model-initializer-def.done"]
    for marker in markers:
        marker.touch()
    done = run("wait-for-initializers", 60, *markers)
    assert (done.returncode, done.stdout) == (0, "initializers finished\n")


def test_a_missing_marker_fails_the_wait_at_its_deadline_naming_it(tmp_path):
    present, missing = tmp_path / "dataset-initializer-abc.done", tmp_path / "model-initializer-def.done"
    present.touch()
    done = run("wait-for-initializers", 1, present, missing)
    assert done.returncode == 1
    assert done.stderr == f"initializer did not finish before the deadline: {missing} is missing\n"


@pytest.fixture
def ssh_log_env(tmp_path):
    """An env whose `ssh` only logs its arguments to tmp_path/ssh.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text('#!/bin/sh\necho "$*" >> "$SSH_LOG"\n')
    ssh.chmod(ssh.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SSH_LOG": str(tmp_path / "ssh.log")}
    return env


def test_the_launcher_exits_with_its_commands_code_and_tells_every_worker(tmp_path, ssh_log_env):
    env = ssh_log_env
    done = run("mpi-launcher", "/ctl", "-o BatchMode=yes", "w-0.n w-1.n", "/bin/sh", "-c", "echo ran; exit 3", env=env)
    assert (done.returncode, done.stdout) == (3, "ran\n")
    told = sorted((tmp_path / "ssh.log").read_text().splitlines())
    assert told == [f"-o BatchMode=yes -o BatchMode=yes -o ConnectTimeout=10 {host} echo 3 > /ctl/exit-code"
                    for host in ("w-0.n", "w-1.n")]


def test_a_stopped_launcher_stops_its_command_and_tells_the_workers(tmp_path, ssh_log_env):
    import signal
    import time
    env = ssh_log_env
    launcher = subprocess.Popen(["/bin/sh", "-c", script("mpi-launcher"), "mpi-launcher", "/ctl", "-q", "w-0.n",
                                 "sleep", "300"], env=env)
    try:
        time.sleep(1)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 128 + signal.SIGTERM   # the command's own end, killed by TERM
    finally:
        launcher.kill()
    assert (tmp_path / "ssh.log").read_text().strip().endswith("w-0.n echo 143 > /ctl/exit-code")
