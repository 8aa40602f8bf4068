"""One emulated pod: a sandbox process holding its namespaces, and its containers' processes.

The sandbox is a holder forked by the run's one `_holder.py` process (`Holders`), in the pod's
network namespace inside new UTS, mount and PID namespaces (see its docstring for what it mounts).
Containers join it with `nsenter`, run the host's programs with the container's resolved env, and
write their output to a log per container (optionally echoed, prefixed with the pod, as `kubectl
logs --prefix` would).

The holder keeps a socket from this process, its channel, on its stdin: if this process dies in any
way, the holder sees EOF and takes every process of the pod down with it; this process sees the
holder gone when its end reaches EOF. Processes are only ever signalled by PID.
"""

import base64
import ipaddress
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from .network import ETC_NETNS, RUN_NETNS
from .output import Filter
from .plan import ContainerSpec, PodSpec

HOLDER = Path(__file__).with_name("_holder.py")
READY_TIMEOUT = 30.0


class SandboxError(RuntimeError):
    pass


class Holders:
    """The run's one `_holder.py` process, which forks each pod's holder: a pod then costs a fork, not
    a Python start and its imports (about 20 ms of CPU each)."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self._socket, theirs = socket.socketpair()
        with theirs, open(log_path, "ab") as err:
            # A session of its own: a Ctrl-C at the terminal reaches run-local only, which stops pods in order.
            self.process = subprocess.Popen([sys.executable, "-I", "-S", str(HOLDER)], stdin=theirs,
                                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                            env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")})
        self._answers = self._socket.makefile("rb")

    def fork(self, config: dict, log: IO[bytes]) -> tuple[int, socket.socket]:
        """A new holder for the pod `config` describes, with `log` as its stderr: its PID and its channel."""
        ours, theirs = socket.socketpair()
        data = json.dumps(config).encode()
        message = struct.pack("!I", len(data)) + data
        try:
            with theirs:
                sent = socket.send_fds(self._socket, [message], [theirs.fileno(), log.fileno()])
                self._socket.sendall(message[sent:])
                answer = self._answers.readline().decode(errors="replace").strip()
        except OSError as exc:
            answer = f"{exc}"
        if not answer.isdigit():
            ours.close()
            raise SandboxError(f"the pod holder could not be started: {answer or 'no answer'}; see {self.log_path}")
        return int(answer), ours

    def close(self) -> None:
        """End the forking process (the holders it forked live on until their pods stop)."""
        self._answers.close()
        self._socket.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.log_path.exists() and self.log_path.stat().st_size == 0:
            self.log_path.unlink()


_TCP_STATES = {"01": "established", "02": "connecting", "0A": "listening"}


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in reversed(raw))
    else:
        address = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
        ip = str(address.ipv4_mapped or address)
    return ip, int(port, 16)


def tcp_sockets(pid: int) -> list[tuple[str, tuple[str, int], tuple[str, int]]]:
    """(state, local, remote) of the TCP sockets in the network namespace of `pid`."""
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            state = _TCP_STATES.get(fields[3])
            if state:
                found.append((state, _address(fields[1]), _address(fields[2])))
    return found


def exit_code(returncode: int) -> int:
    """A container's exit code as Kubernetes reports it: 128+N when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class LogPump(threading.Thread):
    """Copies a container's output to its log file, and line by line to `echo` if given, with the
    kind of line it is if it is left out by default (`output.Filter`).

    It also keeps the last line that is not left out: what the container reported.
    """

    def __init__(self, stream: IO[bytes], log_path: Path, prefix: str,
                 echo: Callable[[str, str, str | None], None] | None):
        super().__init__(daemon=True)
        self.stream, self.log_path, self.prefix, self.echo = stream, log_path, prefix, echo
        self.last = ""
        self.filter = Filter()

    def run(self) -> None:
        lines = self.filter
        with open(self.log_path, "ab") as log:
            for line in iter(self.stream.readline, b""):
                log.write(line)
                log.flush()
                self._show(lines.feed(line.decode(errors="replace").rstrip()))
        self._show(lines.end())
        self.stream.close()

    def _show(self, lines: list[tuple[str, str | None]]) -> None:
        for text, left_out in lines:
            if text.strip() and not left_out:
                self.last = text
            if self.echo:
                self.echo(self.prefix, text, left_out)


@dataclass
class ContainerRun:
    spec: ContainerSpec
    process: subprocess.Popen
    pump: LogPump
    log_path: Path
    started: float
    finished: float | None = None
    exit_code: int | None = None

    def poll(self) -> int | None:
        if self.exit_code is None:
            code = self.process.poll()
            if code is not None:
                self.exit_code = exit_code(code)
                self.finished = time.monotonic()
        return self.exit_code


@dataclass
class Sandbox:
    """The namespaces, root filesystem and volumes of one pod attempt."""

    spec: PodSpec
    scratch: Path
    log_dir: Path
    claims: Path  # where PersistentVolumeClaims live: one shared directory per claim
    holder_pid: int | None = None  # the holder's PID: it waits for the pod's PID 1
    channel: socket.socket | None = None
    pod_pid: int | None = None  # the pod's PID 1, as this machine numbers it
    containers: list[ContainerRun] = field(default_factory=list)
    _stopping: bool = False
    _gone: bool = False

    def config(self) -> dict:
        volumes = {}
        for name, v in self.spec.volumes.items():
            entry: dict = {"kind": v.kind}
            if v.kind == "files":
                entry["files"] = {rel: [base64.b64encode(content).decode(), mode]
                                  for rel, (content, mode) in v.files.items()}
            elif v.kind == "emptyDir":
                entry.update(medium=v.medium, size_limit=v.size_limit)
            elif v.kind == "claim":
                claim = self.claims / v.path
                claim.mkdir(parents=True, exist_ok=True)
                entry = {"kind": "hostPath", "path": str(claim), "type": "Directory"}
            else:
                entry.update(path=v.path, type=v.host_type)
            volumes[name] = entry
        slot = self.spec.slot
        etc = ETC_NETNS / slot.netns
        return {
            "hostname": slot.hostname,
            "netns": str(RUN_NETNS / slot.netns),
            "address": slot.ip,
            "prefixlen": slot.prefixlen,
            "scratch": str(self.scratch),
            "pivot_root": shutil.which("pivot_root") or "/sbin/pivot_root",
            "etc_files": {f"/etc/{name}": str(etc / name) for name in ("hosts", "resolv.conf", "hostname")},
            "image": [{"path": e.path, "content": None if e.content is None else base64.b64encode(e.content).decode(),
                       "mode": e.mode, "uid": e.uid, "gid": e.gid} for e in self.spec.image.entries],
            "volumes": volumes,
            "mounts": [{"volume": m.volume, "path": m.path, "sub_path": m.sub_path, "read_only": m.read_only}
                       for m in self.spec.mounts],
            "workdirs": sorted({c.workdir for c in self.spec.containers}),
            "grace_seconds": self.spec.grace_seconds,
            "fs_group": self.spec.fs_group,
        }

    def start(self, holders: Holders) -> None:
        """Fork the holder; `wait_ready` waits for its namespaces and filesystem."""
        self.scratch.mkdir(parents=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "sandbox.log", "ab") as err:
            self.holder_pid, self.channel = holders.fork(self.config(), err)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self.channel], [], [], max(0.0, remaining))
            if not readable:
                raise SandboxError(f"the pod sandbox did not start within {timeout:.0f}s; see {self.log_dir / 'sandbox.log'}")
            chunk = self.channel.recv(4096)
            if not chunk:
                self._gone = True
                tail = (self.log_dir / "sandbox.log").read_text(errors="replace").strip()[-2000:]
                raise SandboxError(f"the pod sandbox exited while starting: {tail or 'no message'}")
            line += chunk
        message = json.loads(line)
        if "error" in message:
            raise SandboxError(f"the pod sandbox could not be set up: {message['error']}")
        self.pod_pid = int(message["pid"])

    def holder_gone(self, wait: float = 0.0) -> bool:
        """True once the holder and the pod's PID 1 have exited: their channel's end here reads EOF."""
        if self._gone or self.channel is None:
            return True
        while select.select([self.channel], [], [], wait)[0]:
            if not self.channel.recv(4096):
                self._gone = True
                break
        return self._gone

    def run(self, container: ContainerSpec, echo: Callable[[str, str, str | None], None] | None,
            prefix: str) -> ContainerRun:
        """Start a container: the pod's namespaces, the container's env and working directory."""
        log_path = self.log_dir / f"{container.name}.log"
        command = ["nsenter", "-t", str(self.pod_pid), "--net", "--mount", "--uts", "--ipc", "--pid", "--"]
        if container.user:  # runAsUser/runAsGroup, fsGroup and supplementalGroups as extra groups
            user = container.user
            groups = ",".join(map(str, user.groups))
            command += ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}",
                        f"--groups={groups}" if groups else "--clear-groups", "--"]
        command += ["/bin/sh", "-c", 'cd "$0" && exec "$@"', container.workdir, *container.argv]
        process = subprocess.Popen(command, env=container.env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        pump = LogPump(process.stdout, log_path, prefix, echo)
        pump.start()
        run = ContainerRun(spec=container, process=process, pump=pump, log_path=log_path, started=time.monotonic())
        self.containers.append(run)
        return run

    def begin_stop(self) -> None:
        """Ask the holder to stop the pod: SIGTERM to its processes, SIGKILL after the grace period."""
        if self._stopping or self.channel is None:
            return
        self._stopping = True
        if self.pod_pid and not self.holder_gone():
            try:
                os.kill(self.pod_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.channel.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def stopped(self) -> bool:
        """True once the holder and every container process have exited."""
        return self.holder_gone() and all(c.process.poll() is not None for c in self.containers)

    def kill(self) -> None:
        """SIGKILL the pod's PID 1 (the kernel then kills every process of the pod) and its holder, by PID."""
        if self.holder_gone():
            return
        for pid in (self.pod_pid, self.holder_pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def cleanup(self) -> None:
        """After `stopped()`: collect exit codes, finish the logs, remove the scratch directory."""
        for c in self.containers:
            try:
                c.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                c.process.kill()
                c.process.wait()
            c.poll()
            c.pump.join(timeout=5)
        if self.channel is not None:
            if not self.holder_gone(wait=5):
                self.kill()
                self.holder_gone(wait=5)
            self.channel.close()
            self._gone = True
        shutil.rmtree(self.scratch, ignore_errors=True)
        sandbox_log = self.log_dir / "sandbox.log"
        if sandbox_log.exists() and sandbox_log.stat().st_size == 0:
            sandbox_log.unlink()
