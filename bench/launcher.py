"""The MPI launcher's path to mpirun against the host count: its readiness check (`wait-for-hosts`,
the launcher pod's init container) from start to "all MPI hosts reachable".

Emulated hosts: N names `bench-node-0-<i>.bench`, all resolving to 127.0.0.1 through a private
/etc/hosts (bound over the machine's in a mount namespace of the measured process only), and one
real sshd on a free port of 127.0.0.1 that logs in with a job key made as the library's default
(ECDSA P-521). A real host gets one check at a time on its own sshd; here every check lands on the
one sshd, so its MaxStartups is raised for the lanes' 32 at once. Each host is then the cost of its
checks on this machine: client and server share the 2 CPUs.

Sides, alternating (each measurement a fresh `/bin/sh` process of the script as the pod runs it,
with the ssh options the library renders):
- *parallel*: `wait-for-hosts` of this checkout, reading the hostfile;
- *sequential*: `wait-for-hosts` as of commit BEFORE (from git history), hosts as arguments,
  one SSH login after another.
The sequential side runs only up to `sequential_upto` hosts (it takes about 0.35 s a host here).

Needs root (sshd, the mount namespace) and openssh-server.
"""

import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from trainjobs.families.mpi import CONTROL_DIR, ssh_args
from trainjobs.scripts import script

REPO = Path(__file__).resolve().parents[1]
BEFORE = "9003b53"   # the last commit with the sequential check (hosts passed as arguments)
# Where the readiness check lived at BEFORE (the package moved under components/trainjobs/ since).
SCRIPT_PATH = "components/scripts/wait-for-hosts.sh"
HOSTS = (16, 64, 256, 1024)
SELF = "bench-launcher-0-0.bench"
TIMEOUT = 3600


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sequential_script() -> str:
    """The readiness check as of BEFORE, without its header comments (as the library passed it)."""
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{BEFORE}:{SCRIPT_PATH}"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    while text and text[0].startswith("#"):
        text.pop(0)
    return "\n".join(text).strip()


class Hosts:
    """One sshd and a key, and a hosts file and hostfile per host count."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.port = _free_port()
        keys = directory / "keys"
        keys.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-N", "", "-f", str(keys / "id_rsa")], check=True)
        shutil.copy(keys / "id_rsa.pub", keys / "authorized_keys")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "hostkey")], check=True)
        (directory / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {directory}/hostkey\n"
            f"AuthorizedKeysFile {keys}/authorized_keys\nPidFile {directory}/sshd.pid\n"
            "StrictModes no\nUsePAM no\nMaxStartups 1000\nMaxSessions 100\nLogLevel ERROR\n")
        self.made_privsep = not Path("/run/sshd").exists()
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(directory / "sshd_config")],
                                     stderr=open(directory / "sshd.log", "wb"))
        self.ssh_opts = ssh_args(str(keys), self.port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise SystemExit(f"sshd did not start: {(directory / 'sshd.log').read_text()}")

    def names(self, count: int) -> list[str]:
        return [f"bench-node-0-{i}.bench" for i in range(count)]

    def files(self, count: int) -> tuple[Path, Path]:
        """The hosts file every name resolves with, and the OpenMPI hostfile of `count` hosts."""
        hosts, hostfile = self.dir / f"hosts-{count}", self.dir / f"hostfile-{count}"
        names = [SELF, *self.names(count)]
        hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {name}\n" for name in names))
        hostfile.write_text("".join(f"{name} slots=1\n" for name in self.names(count)))
        return hosts, hostfile

    def sshd_cpu(self) -> float:
        """CPU seconds of sshd's finished connection processes so far."""
        fields = Path(f"/proc/{self.sshd.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.sshd.terminate()
        self.sshd.wait(timeout=30)
        if self.made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def timed_check(hosts: Hosts, count: int, sequential: bool, text: str) -> dict[str, float]:
    """One run of a readiness check over `count` hosts, in a mount namespace with the hosts file."""
    hosts_file, hostfile = hosts.files(count)
    last = [str(hostfile)] if not sequential else hosts.names(count)
    argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            'mount --bind "$0" /etc/hosts && exec /bin/sh -c "$@"', str(hosts_file),
            text, "wait-for-hosts", CONTROL_DIR, str(TIMEOUT), hosts.ssh_opts, SELF, *last]
    sshd_before, children = hosts.sshd_cpu(), os.times()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = os.times()
    if done.returncode != 0 or done.stdout.strip() != "all MPI hosts reachable":
        raise SystemExit(f"wait-for-hosts over {count} hosts failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"seconds": seconds,
            "cpu": after.children_user + after.children_system - children.children_user - children.children_system,
            "sshd_cpu": hosts.sshd_cpu() - sshd_before}


def section(say: Callable[[str], None], table: Callable, counts=HOSTS, pairs: int = 3,
            sequential_upto: int = 256) -> dict[str, Any]:
    say("## The MPI launcher's readiness check (wait-for-hosts) against the host count")
    if os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists():
        say("skipped: needs root and sshd (Debian package openssh-server)")
        return {"skipped": "needs root and sshd"}
    say(f"Emulated hosts sharing one sshd on 127.0.0.1; {pairs} alternating runs per side up to 64 hosts, "
        f"1 above; the sequential check (commit {BEFORE}) up to {sequential_upto} hosts.")
    texts = {"parallel": script("wait-for-hosts"), "sequential": sequential_script()}
    results: dict[str, Any] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-launcher-") as tmp:
        hosts = Hosts(Path(tmp))
        try:
            for count in counts:
                sides = ["parallel"] + (["sequential"] if count <= sequential_upto else [])
                runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
                for i in range(pairs if count <= 64 else 1):
                    for side in sides[i % len(sides):] + sides[:i % len(sides)]:
                        runs[side].append(timed_check(hosts, count, side == "sequential", texts[side]))
                med = {side: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for side, rs in runs.items()}
                results[str(count)] = {"runs": runs, "median": med}
                p, s = med["parallel"], med.get("sequential")
                rows.append([str(count), p["seconds"], p["seconds"] / count * 1000, p["cpu"] + p["sshd_cpu"],
                             s["seconds"] if s else "-", f"{s['seconds'] / p['seconds']:.1f}" if s else "-"])
        finally:
            hosts.close()
    say(table(["hosts", "parallel s", "ms per host", "CPU s (check+sshd)", "sequential s", "sequential/parallel"],
              rows))
    return results
