"""The process that holds one emulated pod's namespaces (the pod's "pause" process), and the one that
forks it.

run-local starts `python -I -S _holder.py` once (`pods.Holders`). That process reads requests on its
stdin, a Unix socket: each is a pod's description (JSON) with two file descriptors, the pod's channel
to run-local and its log. For each, it forks the pod's holder, which has the channel as its stdin
and stdout and the log as its stderr: a pod costs a fork, not a Python start and its imports. The
holder joins the pod's network namespace (made by `network.Network`) and makes new UTS, IPC, mount
and PID namespaces itself, then forks: the child is PID 1 of the pod's PID namespace (the holder
only waits for it, and the child dies with it), and

1. sets the hostname, and the pod's address on its `eth0` and loopback up (ioctls, no `ip` process);
2. builds the pod's root filesystem: a copy-on-write overlay of the host's `/` on a tmpfs (so
   nothing a container writes outside its volumes reaches the host), the host's other mounts
   bound in again, a fresh /proc for the pod's PID namespace and a fresh /sys for its network;
3. binds the pod's /etc/hosts, /etc/resolv.conf and /etc/hostname;
4. lays out what the pod's images provide (`images.py`): each directory or file is made in the
   pod's scratch tmpfs with its owner and mode and bound at its path, hiding what this machine has
   there;
5. materializes the volumes (ConfigMap and Secret files with their modes, emptyDir, hostPath)
   and mounts them at their mount paths, creating missing mount points in the overlay;
6. pivots into that root, prints `{"ready": ..., "pid": <host pid>}` and waits.

Containers join it with `nsenter -t <pid> --net --mount --uts --pid`. The holder stops the pod when
its channel reaches EOF (run-local asks it to, or exited, whatever the reason) or on SIGTERM: it sends
SIGTERM to every process of the pod, waits the grace period, and exits; the kernel then kills whatever
is left in the PID namespace. run-local sees the holder gone when its end of the channel reaches EOF.
The forking process ends when its stdin does. Only the standard library is used: it runs with
`python -I -S`.
"""

import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
from binascii import a2b_base64  # base64 and ipaddress cost more to import than the holder's own work

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCSIFADDR, SIOCSIFNETMASK = 0x8913, 0x8914, 0x8916, 0x891C
IFF_UP = 0x1

_libc = ctypes.CDLL(None, use_errno=True)
_stop = False


class SetupError(Exception):
    pass


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise SetupError(f"mount {source or fstype} on {target} ({fstype or 'bind'}): {os.strerror(err)}")


def _check(result: int, what: str) -> None:
    if result != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def enter_namespaces(netns: str) -> None:
    """Join the network namespace at `netns`; new UTS, IPC, mount (private) and PID namespaces, the
    last for the children of this process."""
    fd = os.open(netns, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"join network namespace {netns}")
    finally:
        os.close(fd)
    _check(_libc.unshare(CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def _ifreq(name: str, payload: bytes = b"") -> bytes:
    return struct.pack("16s", name.encode()) + payload.ljust(24, b"\0")


def _sockaddr(address: str) -> bytes:
    return struct.pack("=H2s4s", socket.AF_INET, b"", socket.inet_aton(address))


def configure_network(address: str, prefixlen: int) -> None:
    """`ip addr add <address>/<prefixlen> dev eth0; ip link set eth0 up; ip link set lo up`."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        netmask = socket.inet_ntoa(struct.pack("!I", (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF))
        fcntl.ioctl(s, SIOCSIFADDR, _ifreq("eth0", _sockaddr(address)))
        fcntl.ioctl(s, SIOCSIFNETMASK, _ifreq("eth0", _sockaddr(netmask)))
        for name in ("eth0", "lo"):
            flags = struct.unpack_from("H", fcntl.ioctl(s, SIOCGIFFLAGS, _ifreq(name)), 16)[0]
            fcntl.ioctl(s, SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags | IFF_UP)))


def umount_detach(target: str) -> None:
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise SetupError(f"umount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and path[i + 1:i + 4].isdigit() and len(path) >= i + 4:
            out.append(chr(int(path[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def host_mounts(skip_under: list[str]) -> list[str]:
    """Mount points of this mount namespace to carry into the pod's root, parents first."""
    points: list[str] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            point, fstype = _unescape(fields[4]), fields[sep + 1]
            if point == "/" or fstype == "nsfs" or point in points:
                continue
            if any(point == s or point.startswith(s.rstrip("/") + "/") for s in skip_under):
                continue
            points.append(point)
    return sorted(points, key=lambda p: p.count("/"))


def within(root: str, path: str) -> str:
    return root.rstrip("/") + "/" + path.lstrip("/")


def resolve(root: str, path: str) -> str:
    """`path` inside `root`, following symlinks as if `root` were `/` (e.g. /var/run -> /run)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    current, hops = root.rstrip("/"), 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if current != root.rstrip("/"):
                current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise SetupError(f"too many symlinks in {path}")
            link = os.readlink(candidate)
            if link.startswith("/"):
                current = root.rstrip("/")
            parts = [p for p in link.split("/") if p not in ("", ".")] + parts
            continue
        current = candidate
    return current


def ensure_mountpoint(root: str, path: str, is_dir: bool, scratch: str, overlays: list[int]) -> None:
    """Make `path` (inside `root`) exist without writing to any host filesystem.

    Missing directories are created in the root overlay (copy-on-write), or in the pod's own scratch
    tmpfs when the nearest existing ancestor is a writable directory there (an image directory, an
    emptyDir).
    When that ancestor belongs to another filesystem (a host mount bound into the pod), it gets an
    overlay of its own first, as a container runtime's own mount points would not touch it.
    """
    target = resolve(root, path)
    if os.path.lexists(target):
        return
    ancestor = os.path.dirname(target)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    device = os.stat(ancestor).st_dev
    ours = device == os.stat(scratch).st_dev and os.access(ancestor, os.W_OK)  # not a read-only volume
    if device != os.stat(root).st_dev and not ours:
        overlays[0] += 1
        layer = os.path.join(scratch, "ovl", str(overlays[0]))
        os.makedirs(layer + "/upper")
        os.makedirs(layer + "/work")
        mount("overlay", ancestor, "overlay", 0, f"lowerdir={ancestor},upperdir={layer}/upper,workdir={layer}/work")
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()


def own(path: str, fs_group: int | None, read_only: bool) -> None:
    """What the kubelet does to a volume for the pod's fsGroup: group-owned, group-readable (and
    writable unless read-only), directories setgid."""
    if fs_group is None:
        return
    for directory, _, files in os.walk(path):
        for p in [directory] + [os.path.join(directory, f) for f in files]:
            st = os.lstat(p)
            os.lchown(p, -1, fs_group)
            if stat.S_ISLNK(st.st_mode):
                continue  # a link's mode means nothing; its target is changed on its own
            mask = 0o440 if read_only else 0o660
            if stat.S_ISDIR(st.st_mode):
                mask |= 0o2110
            os.chmod(p, (st.st_mode & 0o7777) | mask)


def lay_out_image(entries: list[dict], root: str, scratch: str, overlays: list[int]) -> None:
    """The image's directories and files, made under `scratch`/image and bound at their paths (the
    outermost ones; those inside them are made in place)."""
    layer = os.path.join(scratch, "image")
    tops: list[str] = []
    for entry in sorted(entries, key=lambda e: e["path"]):
        path = entry["path"]
        made = within(layer, path)
        if entry["content"] is None:
            os.makedirs(made, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(made), exist_ok=True)
            with open(made, "wb") as f:
                f.write(a2b_base64(entry["content"]))
        os.chmod(made, entry["mode"])
        os.lchown(made, entry["uid"], entry["gid"])
        if not any(path.startswith(top.rstrip("/") + "/") for top in tops):
            tops.append(path)
    for path in tops:
        source = within(layer, path)
        ensure_mountpoint(root, path, os.path.isdir(source), scratch, overlays)
        mount(source, resolve(root, path), None, MS_BIND)


def materialize(volumes: dict, scratch: str, fs_group: int | None = None) -> dict[str, str]:
    """Each volume as a host path to bind from.

    As the kubelet: an emptyDir is world-writable (0777); with an fsGroup, emptyDir, ConfigMap and
    Secret volumes are group-owned by it and group-readable (`own`). hostPath volumes are untouched.
    """
    paths: dict[str, str] = {}
    for name, volume in volumes.items():
        kind = volume["kind"]
        if kind == "hostPath":
            path, host_type = volume["path"], volume.get("type") or ""
            if host_type == "DirectoryOrCreate" and not os.path.exists(path):
                os.makedirs(path, mode=0o755)
            elif host_type == "FileOrCreate" and not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
                os.chmod(path, 0o644)
            if not os.path.exists(path):
                raise SetupError(f'volume "{name}": hostPath {path} does not exist on this machine')
            if host_type == "Directory" and not os.path.isdir(path):
                raise SetupError(f'volume "{name}": hostPath {path} is not a directory')
            if host_type == "File" and not os.path.isfile(path):
                raise SetupError(f'volume "{name}": hostPath {path} is not a file')
            paths[name] = path
            continue
        directory = os.path.join(scratch, "volumes", name)
        os.makedirs(directory)
        if kind == "emptyDir" and volume.get("medium") == "Memory":
            size = volume.get("size_limit")
            mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}" if size else None)
        elif kind == "files":
            for rel, (content, mode) in sorted(volume["files"].items()):
                path = os.path.join(directory, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(a2b_base64(content))
                os.chmod(path, mode)
        if kind == "emptyDir":
            os.chmod(directory, 0o777)
        own(directory, fs_group, read_only=kind == "files")
        paths[name] = directory
    return paths


def build_root(config: dict) -> None:
    scratch = config["scratch"]
    root = os.path.join(scratch, "root")
    # The scratch dir gets a tmpfs in this namespace only: overlay layers, volume files.
    mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
    for sub in ("upper", "work", "root"):
        os.makedirs(os.path.join(scratch, sub))
    mount("overlay", root, "overlay", 0, f"lowerdir=/,upperdir={scratch}/upper,workdir={scratch}/work")
    for point in host_mounts(skip_under=["/proc", "/sys", "/run/netns", scratch]):
        target = within(root, point)
        if not os.path.lexists(target):
            continue  # a mount point on a filesystem that is itself not carried over
        try:
            mount(point, target, None, MS_BIND)
        except SetupError as exc:
            print(f"note: host mount {point} not carried into the pod: {exc}", file=sys.stderr)
    mount("proc", within(root, "/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("sysfs", within(root, "/sys"), "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # this network's devices
    overlays = [0]
    for dest, source in sorted(config.get("etc_files", {}).items()):
        ensure_mountpoint(root, dest, False, scratch, overlays)
        mount(source, resolve(root, dest), None, MS_BIND)
    lay_out_image(config.get("image", []), root, scratch, overlays)

    sources = materialize(config.get("volumes", {}), scratch, config.get("fs_group"))
    for m in sorted(config.get("mounts", []), key=lambda m: m["path"].rstrip("/").count("/")):
        source = sources[m["volume"]]
        if m.get("sub_path"):
            source = os.path.join(source, m["sub_path"])
            if not os.path.lexists(source):
                os.makedirs(source)  # as the kubelet: a missing subPath becomes a directory
        ensure_mountpoint(root, m["path"], os.path.isdir(source), scratch, overlays)
        target = resolve(root, m["path"])
        mount(source, target, None, MS_BIND | MS_REC)
        if m.get("read_only"):
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    for workdir in config.get("workdirs", []):
        ensure_mountpoint(root, workdir, True, scratch, overlays)

    os.chdir(root)
    old = ".trainjobs-oldroot"
    os.mkdir(old)
    pid = os.posix_spawn(config["pivot_root"], [config["pivot_root"], ".", old], os.environ)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise SetupError(f"{config['pivot_root']} . {old} failed")
    os.chdir("/")
    umount_detach("/" + old)
    os.rmdir("/" + old)


def others() -> list[int]:
    """Processes of the pod other than this one (this /proc is the pod's own)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and p != "1"]


def reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def stop_pod(grace: float) -> None:
    """SIGTERM to every process of the pod, SIGKILL after `grace` seconds."""
    try:
        os.kill(-1, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while others() and time.monotonic() < deadline:
        reap()
        time.sleep(0.05)
    if others():
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _on_term(signum, frame) -> None:
    global _stop
    _stop = True


def receive(owner: socket.socket) -> tuple[dict, list[int]] | None:
    """The next request: a pod's description and its channel's and log's descriptors; None at EOF."""
    data, fds, _, _ = socket.recv_fds(owner, 65536, 2)
    # A 4-byte length, then the JSON; run-local sends the next request only after this one's answer.
    while 0 < len(data) < 4 or (len(data) >= 4 and len(data) < 4 + struct.unpack_from("!I", data)[0]):
        chunk = owner.recv(65536)
        if not chunk:
            return None
        data += chunk
    return (json.loads(data[4:]), fds) if data else None


def main() -> int:
    """Fork a holder for each request until run-local closes this process's stdin."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the owner, which stops pods in order
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the holders; run-local watches their channels
    owner = socket.socket(fileno=0)
    while request := receive(owner):
        config, (channel, log) = request
        try:
            holder = os.fork()
        except OSError as exc:
            holder, answer = None, f"error: fork: {exc}"
        if holder == 0:
            os.dup2(channel, 0)   # replaces this process's end of `owner`
            os.dup2(channel, 1)
            os.dup2(log, 2)
            os.close(channel)
            os.close(log)
            code = hold(config)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        os.close(channel)
        os.close(log)
        owner.sendall(f"{answer if holder is None else holder}\n".encode())
    return 0


def hold(config: dict) -> int:
    """The pod's holder: its namespaces, then its PID 1, which builds its root and waits for the end."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        enter_namespaces(config["netns"])
    except Exception as exc:  # reported to the owner, which fails the pod with this message
        return report_error(exc)
    child = os.fork()
    if child:  # only waits: the pod's PID 1 is the child, which dies with this process
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) & 0xFF
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    host_pid = int(os.readlink("/proc/self"))  # the host's /proc is still mounted here
    try:
        socket.sethostname(config["hostname"])
        configure_network(config["address"], config["prefixlen"])
        build_root(config)
    except Exception as exc:
        return report_error(exc)
    print(json.dumps({"ready": True, "pid": host_pid}), flush=True)
    while not _stop:
        try:
            readable, _, _ = select.select([0], [], [], 0.5)
        except InterruptedError:
            continue
        if readable and not os.read(0, 4096):
            break  # the owner is gone, or asks the pod to stop
        reap()
    stop_pod(float(config.get("grace_seconds", 5)))
    return 0


def report_error(exc: Exception) -> int:
    """Tell the owner why the pod could not be set up; it fails the pod with this message."""
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, SetupError) else str(exc)}),
          flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
