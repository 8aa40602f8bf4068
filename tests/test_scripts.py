"""The shell scripts the library's containers run, run as shell: each parses, and each does its job."""

import os
import re
import signal
import subprocess
import time
from importlib.resources import files

import pytest

from trainjobs.scripts import script

SCRIPTS = sorted(p.name.removesuffix(".sh") for p in files("trainjobs.scripts").iterdir() if p.name.endswith(".sh"))


def test_every_script_is_shipped_with_the_package():
    assert SCRIPTS == ["discover-hosts", "fan-out", "mpi-launcher", "mpi-node", "wait-for-hosts", "wait-for-initializers"]


def test_the_launchers_scripts_begin_with_the_fan_out_functions():
    assert script("wait-for-hosts").startswith(script("fan-out") + "\n")
    assert script("mpi-launcher").startswith(script("fan-out") + "\n")
    assert not script("mpi-node").startswith(script("fan-out"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_parses_as_posix_shell_without_its_header(name):
    text = script(name)
    assert not text.startswith("#") and text == text.strip()
    done = subprocess.run(["/bin/sh", "-n", "-c", text], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_no_script_holds_what_the_kubelet_expands_in_a_command(name):
    """A container's command goes through the kubelet's expansion: `$$` becomes `$`, `$(NAME)` a variable."""
    assert not re.search(r"\$\$|\$\([A-Za-z_][A-Za-z0-9_]*\)", script(name))


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


# --- the MPI launcher's fan-out, with a stand-in `ssh` and `getent` on PATH ----------------------

LANES = 32  # fan-out.sh's bound
SSH_OPTS = "-o BatchMode=yes -p 2222"

# Logs `+ HOST ARGS` when it starts and `- HOST` when it ends. A host in $SSH_HANG never answers; one in
# $SSH_DENY refuses the key; with authentication turned off, sshd's answer is "Permission denied".
STAND_IN_SSH = """#!/bin/sh
if [ "$1" = -Q ]; then printf 'curve25519-sha256\\nsntrup761x25519-sha512@openssh.com\\n'; exit 0; fi
args="$*"
while [ $# -gt 0 ]; do case $1 in -o|-i|-p) shift 2;; -*) shift;; *) break;; esac; done
host=$1
echo "+ $host $args" >> "$SSH_LOG"
case " $SSH_HANG " in *" $host "*) exec sleep 3600;; esac
sleep "${SSH_SLEEP:-0}"
echo "- $host" >> "$SSH_LOG"
case "$args" in *PubkeyAuthentication=no*) echo "root@$host: Permission denied (publickey)." >&2; exit 255;; esac
case " $SSH_DENY " in *" $host "*) echo "root@$host: Permission denied (publickey)." >&2; exit 255;; esac
exit 0
"""
STAND_IN_GETENT = """#!/bin/sh
case " $UNRESOLVED " in *" $2 "*) exit 2;; esac
echo "10.0.0.1 $2"
"""


@pytest.fixture
def fake(tmp_path):
    """An env whose `ssh` and `getent` are the stand-ins above, and what they logged."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ssh", STAND_IN_SSH), ("getent", STAND_IN_GETENT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)

    class Fake:
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SSH_LOG": str(tmp_path / "ssh.log")}

        @staticmethod
        def hostfile(hosts, line="{} slots=2"):
            path = tmp_path / "hostfile"
            path.write_text("".join(line.format(h) + "\n" for h in hosts))
            return path

        @staticmethod
        def calls():
            """(host, arguments) of every ssh started."""
            log = tmp_path / "ssh.log"
            return [tuple(line[2:].split(" ", 1)) for line in log.read_text().splitlines()
                    if line.startswith("+")] if log.exists() else []

        @staticmethod
        def most_at_once():
            running = peak = 0
            for line in (tmp_path / "ssh.log").read_text().splitlines():
                running += 1 if line.startswith("+") else -1
                peak = max(peak, running)
            return peak
    return Fake


def workers(n):
    return [f"job-node-0-{i}.job" for i in range(n)]


KEX = "-o KexAlgorithms=-sntrup761x25519-sha512@openssh.com,sntrup761x25519-sha512"   # where ssh has sntrup761
PROBE = ("-o PubkeyAuthentication=no -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no "
         "-o HostbasedAuthentication=no -o GSSAPIAuthentication=no")


def test_every_host_is_checked_once_and_the_key_logs_in_to_the_first_worker(fake):
    hosts = [*workers(3), "job-launcher-0-0.job"]
    done = run("wait-for-hosts", "/ctl", 60, SSH_OPTS, "job-launcher-0-0.job", fake.hostfile(hosts), env=fake.env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "all MPI hosts reachable\n", "")
    first = f"-o ConnectionAttempts=1 -o ConnectTimeout=5 -o BatchMode=yes {KEX}"
    # The launcher itself is not logged in to; the first worker is, the others get a key exchange only.
    assert sorted(fake.calls()) == [
        (workers(3)[0], f"{first} {SSH_OPTS} {workers(3)[0]} true"),
        *((host, f"{first} {PROBE} {SSH_OPTS} {host} true") for host in workers(3)[1:])]


def test_hydra_hostfile_lines_name_the_hosts_too(fake):
    hosts = workers(2)
    done = run("wait-for-hosts", "/ctl", 60, SSH_OPTS, "job-launcher-0-0", fake.hostfile(hosts, "{}:4"), env=fake.env)
    assert done.returncode == 0, done.stderr
    assert sorted(host for host, _ in fake.calls()) == hosts


def test_hosts_are_checked_in_parallel_never_more_than_the_bound_at_once(fake):
    hosts = workers(100)
    env = {**fake.env, "SSH_SLEEP": "1"}
    started = time.monotonic()
    done = run("wait-for-hosts", "/ctl", 600, SSH_OPTS, "job-launcher-0-0.job", fake.hostfile(hosts), env=env)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert sorted(host for host, _ in fake.calls()) == sorted(hosts)   # each once
    assert 1 < fake.most_at_once() <= LANES   # in parallel, never more than the bound
    assert seconds < 100 / 2   # one at a time, 100 checks of 1 s would take 100 s


def test_hosts_that_never_answer_fail_the_wait_at_its_deadline_naming_each(fake):
    """64 hosts that never answer, checked 32 at a time with 5 s each, would take 10 s a round; the
    3 s deadline holds because no check outlasts it, and the hosts whose turn came after it are named."""
    up, unresolved, hung = workers(67)[:2], workers(67)[2], workers(67)[3:]
    env = {**fake.env, "SSH_HANG": " ".join(hung), "UNRESOLVED": unresolved}
    started = time.monotonic()
    done = run("wait-for-hosts", "/ctl", 3, SSH_OPTS, "job-launcher-0-0.job", fake.hostfile([*up, unresolved, *hung]),
               env=env)
    seconds = time.monotonic() - started
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "MPI hosts not reachable within 3s: " + " ".join([unresolved, *hung])
    reasons = dict(line.strip().split(": ", 1) for line in lines[1:])
    assert list(reasons) == [unresolved, *hung]
    assert reasons[unresolved] == "the name does not resolve"
    checked = [h for h in hung if re.fullmatch(r"no SSH answer within [1-3]s", reasons[h])]
    late = [h for h in hung if reasons[h] == "not checked before the deadline"]
    assert len(checked) + len(late) == 64 and len(checked) >= LANES - 2, reasons
    assert seconds < 3 + 30   # a round of 64 such checks, 32 at a time, would take 10 s; sequential, 320 s
    # The workers that came up are told to end their pods (exit code 1); no other is.
    told = sorted(h for h, args in fake.calls() if args.endswith("echo 1 > /ctl/exit-code"))
    assert told == up


def test_a_refused_key_keeps_the_first_worker_pending_with_sshds_answer(fake):
    env = {**fake.env, "SSH_DENY": workers(2)[0]}
    # Whole seconds (`date +%s`): at least 3 s for the first round to check the host, even on a busy machine.
    done = run("wait-for-hosts", "/ctl", 4, SSH_OPTS, "job-launcher-0-0.job", fake.hostfile(workers(2)), env=env)
    assert done.returncode == 1
    assert done.stderr.splitlines()[:2] == [f"MPI hosts not reachable within 4s: {workers(2)[0]}",
                                            f"  {workers(2)[0]}: root@{workers(2)[0]}: Permission denied (publickey)."]


def test_the_launcher_exits_with_its_commands_code_and_tells_every_worker(fake):
    hostfile = fake.hostfile([*workers(2), "job-launcher-0-0"], "{}:1")
    done = run("mpi-launcher", "/ctl", "-o BatchMode=yes", hostfile, "job-launcher-0-0", "OMPI_MCA_plm_rsh_args",
               "/bin/sh", "-c", "echo ran; exit 3", env=fake.env)
    assert (done.returncode, done.stdout, done.stderr) == (3, "ran\n", "")
    assert sorted(fake.calls()) == [
        (host, f"-o ConnectTimeout=10 -o BatchMode=yes {KEX} -o BatchMode=yes {host} echo 3 > /ctl/exit-code")
        for host in workers(2)]


SHOW_SSH_ENV = ["/bin/sh", "-c", 'echo "$OMPI_MCA_plm_rsh_args|$PRTE_MCA_plm_ssh_args|${HYDRA_LAUNCHER_EXTRA_ARGS-unset}"']


def test_mpiruns_own_ssh_options_leave_sntrup761_out_where_ssh_has_it(fake):
    env = {**fake.env, "OMPI_MCA_plm_rsh_args": SSH_OPTS, "PRTE_MCA_plm_ssh_args": SSH_OPTS}
    done = run("mpi-launcher", "/ctl", SSH_OPTS, fake.hostfile(workers(1)), "job-launcher-0-0.job",
               "OMPI_MCA_plm_rsh_args PRTE_MCA_plm_ssh_args HYDRA_LAUNCHER_EXTRA_ARGS", *SHOW_SSH_ENV, env=env)
    # Only the named variables that are set change; the notice's own options are what they were.
    assert (done.returncode, done.stdout) == (0, f"{SSH_OPTS} {KEX}|{SSH_OPTS} {KEX}|unset\n")
    assert fake.calls()[0][1].startswith(f"-o ConnectTimeout=10 -o BatchMode=yes {KEX} {SSH_OPTS} ")


def test_mpiruns_ssh_options_are_untouched_where_ssh_has_no_sntrup761(fake, tmp_path):
    ssh = tmp_path / "bin" / "ssh"
    ssh.write_text(ssh.read_text().replace("\\nsntrup761x25519-sha512@openssh.com", ""))
    env = {**fake.env, "OMPI_MCA_plm_rsh_args": SSH_OPTS, "PRTE_MCA_plm_ssh_args": SSH_OPTS}
    done = run("mpi-launcher", "/ctl", SSH_OPTS, fake.hostfile(workers(1)), "job-launcher-0-0.job",
               "OMPI_MCA_plm_rsh_args PRTE_MCA_plm_ssh_args", *SHOW_SSH_ENV, env=env)
    assert (done.returncode, done.stdout) == (0, f"{SSH_OPTS}|{SSH_OPTS}|unset\n")
    assert fake.calls() == [(workers(1)[0], f"-o ConnectTimeout=10 -o BatchMode=yes {SSH_OPTS} {workers(1)[0]} "
                                            "echo 0 > /ctl/exit-code")]


def test_the_end_notice_reaches_every_worker_never_more_than_the_bound_at_once(fake):
    hosts = workers(100)
    env = {**fake.env, "SSH_SLEEP": "1", "SSH_DENY": "job-node-0-7.job job-node-0-70.job"}
    done = run("mpi-launcher", "/ctl", SSH_OPTS, fake.hostfile(hosts), "job-launcher-0-0.job", "", "true", env=env)
    assert done.returncode == 0
    assert sorted(host for host, _ in fake.calls()) == sorted(hosts)   # each once
    assert 1 < fake.most_at_once() <= LANES   # in parallel, never more than the bound
    assert sorted(done.stderr.splitlines()) == [f"could not tell job-node-0-{i}.job that the launcher finished"
                                                for i in (7, 70)]


def test_a_stopped_launcher_stops_its_command_and_tells_the_workers(fake):
    launcher = subprocess.Popen(["/bin/sh", "-c", script("mpi-launcher"), "mpi-launcher", "/ctl", "-q",
                                 fake.hostfile(workers(1)), "job-launcher-0-0.job", "", "sleep", "300"], env=fake.env)
    try:
        time.sleep(1)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 128 + signal.SIGTERM   # the command's own end, killed by TERM
    finally:
        launcher.kill()
    assert fake.calls() == [(workers(1)[0], f"-o ConnectTimeout=10 -o BatchMode=yes {KEX} -q {workers(1)[0]} "
                                            "echo 143 > /ctl/exit-code")]
