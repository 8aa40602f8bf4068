"""run-local refuses plainly when the machine cannot run pods; helpers of the pod sandbox."""

import json
import os
from pathlib import Path

from trainjobs.tools.cli import main as cli
from trainjobs.localrun import _holder, host_problems
from trainjobs.localrun.pods import Holders, _address

REPO = Path(__file__).resolve().parents[2]


def test_run_local_says_plainly_that_it_needs_root(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["run-local", str(REPO / "stacks" / "__main__.py")]) == 2
    err = capsys.readouterr().err
    assert "error: run-local needs root: it creates network namespaces, a bridge and mounts" in err


def test_missing_commands_name_their_package(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda cmd: None if cmd == "nsenter" else f"/usr/bin/{cmd}")
    monkeypatch.setattr(os.path, "exists", lambda path: False)
    assert any("nsenter (package util-linux)" in p for p in host_problems())


def test_mount_paths_resolve_symlinks_inside_the_pod_root(tmp_path):
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("/run")  # absolute: must stay inside the root
    (root / "lib").symlink_to("usr/lib")
    assert _holder.resolve(str(root), "/var/run/secrets/x") == f"{root}/run/secrets/x"
    assert _holder.resolve(str(root), "/lib/../etc") == f"{root}/usr/etc"
    assert _holder.resolve(str(root), "/../../etc") == f"{root}/etc"


def test_mountinfo_escapes_and_proc_net_addresses():
    assert _holder._unescape(r"/mnt/with\040space") == "/mnt/with space"
    assert _address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert _address("0000000000000000FFFF00000302090A:7530") == ("10.9.2.3", 30000)


def test_the_holder_sets_the_pods_address_as_ip_addr_add_would():
    """The holder's ioctls in an unnamed network namespace with an eth0 (a veth pair, both ends in it,
    gone with it): the address with the subnet's prefix and its route, eth0 and lo up. Needs root
    (CI runs as root)."""
    import subprocess
    import sys

    import pytest

    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true: this test needs root")
        pytest.skip("needs root (network namespaces)")
    code = (f"import sys; sys.path.insert(0, {str(Path(_holder.__file__).parent)!r}); import _holder; "
            "_holder.configure_network('10.77.0.5', 23)")
    shell = ('ip link add eth0 type veth peer name peer0 && "$0" -I -S -c "$1" && '
             'ip -4 -o addr show && echo --- && ip -4 route && echo --- && ip -o link show')
    done = subprocess.run(["unshare", "--net", "--", "/bin/sh", "-c", shell, sys.executable, code],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    addresses, routes, links = done.stdout.split("---\n")
    assert "lo    inet 127.0.0.1/8 " in addresses and "eth0    inet 10.77.0.5/23 " in addresses
    assert "10.77.0.0/23 dev eth0 proto kernel scope link src 10.77.0.5" in routes
    for link in links.splitlines():
        if ": eth0@" in link or ": lo:" in link:
            assert ",UP" in link, link


def _read_to_eof(channel) -> bytes:
    data = b""
    while chunk := channel.recv(65536):
        data += chunk
    return data


def test_holders_forked_by_one_process_report_each_pods_setup_error_and_end(tmp_path):
    """Each pod's description goes to the run's one forking process with the pod's socket and log; the
    holder it forks answers on that socket, and the socket reads EOF once the holder is gone."""
    holders = Holders(tmp_path / "holders.log")
    try:
        answers = []
        for i in range(2):
            with open(tmp_path / f"sandbox-{i}.log", "ab") as log:
                # A description larger than one read of the forking process's socket.
                pid, channel = holders.fork({"netns": str(tmp_path / f"missing-{i}"), "padding": "x" * 300_000}, log)
            with channel:
                channel.settimeout(60)
                answers.append((pid, _read_to_eof(channel)))
    finally:
        holders.close()
    assert [json.loads(answer) for _, answer in answers] == [
        {"error": f"FileNotFoundError: [Errno 2] No such file or directory: '{tmp_path}/missing-{i}'"} for i in range(2)]
    assert len({pid for pid, _ in answers} | {os.getpid(), holders.process.pid}) == 4   # forked, not started here
    assert holders.process.returncode == 0   # it ends when run-local closes its socket
    assert not (tmp_path / "holders.log").exists()   # nothing was logged: the empty log is removed
