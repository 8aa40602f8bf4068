"""The pods' network: one network namespace per pod on a private bridge, and their name files.

Each run has a unique prefix (`tj-<6 hex>`) naming everything it creates, and its own private
subnet, so runs side by side do not collide:

- bridge `<prefix>-br`, with no address on the host side: the pods reach each other and nothing
  else (no default route, nothing forwarded);
- per pod a network namespace `<prefix>-<hostname>` holding the `eth0` end of a veth pair whose
  host end (`<prefix>-<n>`) is a port of the bridge;
- per pod `/etc/netns/<netns>/{hosts,resolv.conf,hostname}`: the hosts file the kubelet writes
  for the pod plus the names the cluster DNS would answer for the pods of headless Services, and
  a resolver pointing at 127.0.0.1 inside the pod, where nothing listens, so an unknown name
  fails at once instead of leaving the machine.

A state file under /run/trainjobs records what a run created and which process owns it; a run
that was killed before it could clean up is cleaned by the next run (`sweep_stale`).
"""

import errno
import fcntl
import ipaddress
import json
import os
import random
import secrets
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trainjobs.core.naming import CLUSTER_DOMAIN
from .plan import PodSlot

STATE_DIR = Path("/run/trainjobs")
ETC_NETNS = Path("/etc/netns")
RUN_NETNS = Path("/run/netns")
_CREATED_MARK = "created-{}"  # state-dir markers: a shared directory a run created and the last run removes


class NetworkError(RuntimeError):
    pass


def ip_batch(commands: list[str], *options: str, check: bool = True) -> subprocess.CompletedProcess:
    """Several `ip` commands in one process (`ip OPTIONS -batch -`); without `check`, it goes on past
    failures (-force) and the caller looks at what is left."""
    argv = ["ip", *options, *([] if check else ["-force"]), "-batch", "-"]
    result = subprocess.run(argv, input="".join(f"{c}\n" for c in commands), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: {result.stderr.strip()}")
    return result


def _links() -> set[str]:
    """The network interfaces of this (the host's) network namespace."""
    return set(os.listdir("/sys/class/net"))


def _netns() -> set[str]:
    """The named network namespaces (what `ip netns list` lists)."""
    return set(os.listdir(RUN_NETNS)) if RUN_NETNS.is_dir() else set()


def new_prefix() -> str:
    """A prefix no existing link or network namespace uses."""
    links, namespaces = _links(), _netns()
    while True:
        prefix = f"tj-{secrets.token_hex(3)}"
        if not any(n.startswith(prefix) for n in links | namespaces):
            return prefix


def pick_subnet(pods: int, avoid: list[ipaddress.IPv4Network] | None = None) -> ipaddress.IPv4Network:
    """A random private subnet with room for `pods`, overlapping none of the host's networks."""
    size = 24
    while (2 ** (32 - size)) - 3 < pods:
        size -= 1
    if size < 16:
        raise NetworkError(f"{pods} pods is more than a local run supports")
    avoid = avoid if avoid is not None else host_networks()
    for _ in range(200):
        base = ipaddress.IPv4Address(f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0")
        net = ipaddress.IPv4Network(f"{base}/{size}", strict=False)
        if not any(net.overlaps(a) for a in avoid):
            return net
    raise NetworkError("found no free private subnet")


def host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of the host's addresses and routes."""
    nets = []
    for word in ip_batch(["addr show", "route show table all"], "-4", "-o", check=False).stdout.split():
        try:
            net = ipaddress.IPv4Network(word, strict=False)
        except ValueError:
            continue
        if net.prefixlen > 0:
            nets.append(net)
    return nets


def hosts_file(me: PodSlot, pods: list[PodSlot]) -> str:
    """The pod's /etc/hosts: the kubelet's entries, then the names cluster DNS answers for the pods.

    nss_files applies no search list, so each name a pod may use is listed: `<host>.<subdomain>`
    (same namespace only, as the search list allows in a cluster), `.<ns>`, `.<ns>.svc` and the
    full `.<ns>.svc.cluster.local`, plus what the pod's own `dnsConfig.searches` domains make of
    them (with `<subdomain>.<ns>.svc.cluster.local` there, the bare `<host>` of every pod). The
    headless Service's own name lists all its pods' addresses.
    """
    lines = ["# Kubernetes-managed hosts file, as trainjobs run-local emulates it.",
             "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback",
             "fe00::0\tip6-localnet",
             "fe00::0\tip6-mcastprefix",
             "fe00::1\tip6-allnodes",
             "fe00::2\tip6-allrouters"]
    if me.subdomain:
        lines.append(f"{me.ip}\t{me.hostname}.{me.subdomain}.{me.namespace}.svc.{CLUSTER_DOMAIN}\t{me.hostname}")
    else:
        lines.append(f"{me.ip}\t{me.hostname}")
    lines.append("# pod DNS records of headless Services (answered by the cluster DNS in a cluster)")
    for pod in pods:
        names = pod.dns_names(CLUSTER_DOMAIN)
        if not names:
            continue
        if pod.namespace != me.namespace:
            names = names[1:]
        shorter = [short for short in _searched(names[-1], me.searches) if short not in names]
        lines.append(f"{pod.ip}\t{' '.join([*reversed(names), *shorter])}")
    for pod in pods:
        if pod.published:
            service = [f"{pod.subdomain}.{pod.namespace}.svc.{CLUSTER_DOMAIN}", f"{pod.subdomain}.{pod.namespace}.svc",
                       f"{pod.subdomain}.{pod.namespace}"] + ([pod.subdomain] if pod.namespace == me.namespace else [])
            lines.append(f"{pod.ip}\t{' '.join(service)}")
    return "\n".join(lines) + "\n"


def _searched(fqdn: str, searches: tuple[str, ...]) -> list[str]:
    """The shorter names of `fqdn` that a resolver completes with one of `searches`."""
    return [fqdn[:-len(domain) - 1] for domain in searches if fqdn.endswith("." + domain.strip("."))]


def resolv_conf(me: PodSlot) -> str:
    ns = me.namespace
    default = [f"{ns}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN]
    searches = default + [s for s in me.searches if s not in default]
    return (f"search {' '.join(searches)}\n"
            "nameserver 127.0.0.1\n"
            "options ndots:5 timeout:1 attempts:1\n")


# --- shared state, locking -----------------------------------------------------------------

@contextmanager
def state_lock():
    """An exclusive lock over the shared state (/run/trainjobs, /etc/netns, /run/netns)."""
    while True:
        STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(STATE_DIR, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(STATE_DIR).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the last run removed the directory while we waited: take the new one
    try:
        yield
    finally:
        _remove_shared_dirs_if_unused()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _mark_created(name: str) -> None:
    (STATE_DIR / _CREATED_MARK.format(name)).touch()


def _remove_shared_dirs_if_unused() -> None:
    """Once no run is left, remove the shared directories runs created (called under the lock)."""
    if any(STATE_DIR.glob("tj-*.json")):
        return
    mark = STATE_DIR / _CREATED_MARK.format("etc-netns")
    if mark.exists():
        try:
            ETC_NETNS.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
        mark.unlink()
    mark = STATE_DIR / _CREATED_MARK.format("run-netns")
    if mark.exists():
        if RUN_NETNS.exists() and not any(RUN_NETNS.iterdir()):
            subprocess.run(["umount", str(RUN_NETNS)], capture_output=True)
            try:
                RUN_NETNS.rmdir()
            except OSError:
                pass
        mark.unlink()
    for leftover in STATE_DIR.iterdir():
        if not leftover.name.startswith("created-"):
            return
    try:
        STATE_DIR.rmdir()
    except OSError:
        pass


def _is_mountpoint(path: Path) -> bool:
    try:
        return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())
    except OSError:
        return False


def _process_start(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


# --- the network -----------------------------------------------------------------------------

@dataclass
class Network:
    """The bridge, namespaces and name files of one run."""

    prefix: str
    subnet: ipaddress.IPv4Network
    pods: list[PodSlot]
    bridge: str = ""
    created_netns: list[str] = field(default_factory=list)
    created_links: list[str] = field(default_factory=list)
    created_etc: list[str] = field(default_factory=list)

    @classmethod
    def plan(cls, pods: list[PodSlot]) -> "Network":
        """Prefix, subnet, addresses and namespace names; creates nothing."""
        prefix = new_prefix()
        subnet = pick_subnet(len(pods))
        hosts = subnet.hosts()
        next(hosts)  # .1 stays free: there is no gateway
        for pod in pods:
            pod.ip, pod.prefixlen = str(next(hosts)), subnet.prefixlen
            pod.netns = f"{prefix}-{pod.hostname}"
        return cls(prefix=prefix, subnet=subnet, pods=pods, bridge=f"{prefix}-br")

    @property
    def state_file(self) -> Path:
        return STATE_DIR / f"{self.prefix}.json"

    def _save(self) -> None:
        state = {"owner": os.getpid(), "owner_start": _process_start(os.getpid()), "bridge": self.bridge,
                 "netns": self.created_netns, "links": self.created_links, "etc": self.created_etc,
                 "subnet": str(self.subnet)}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.rename(self.state_file)

    def create(self) -> None:
        """Make the bridge, namespaces, veths and name files; all of them are recorded first, so that
        teardown (or the next run's sweep) removes whatever of them exists, whenever this stops."""
        veths = [f"{self.prefix}-{n}" for n in range(len(self.pods))]
        with state_lock():
            _shared_dirs()
            self.created_links = [self.bridge]  # a veth goes with its pod's namespace
            self.created_netns = [pod.netns for pod in self.pods]
            self.created_etc = [str(ETC_NETNS / pod.netns) for pod in self.pods]
            self._save()
            for pod in self.pods:
                etc = ETC_NETNS / pod.netns
                etc.mkdir()
                (etc / "hosts").write_text(hosts_file(pod, self.pods))
                (etc / "resolv.conf").write_text(resolv_conf(pod))
                (etc / "hostname").write_text(pod.hostname + "\n")
            ip_batch([f"link add {self.bridge} type bridge",
                      *(f"netns add {pod.netns}" for pod in self.pods),
                      *(f"link add {veth} type veth peer name eth0 netns {pod.netns}"
                        for veth, pod in zip(veths, self.pods))])
            for link in [self.bridge, *veths]:
                _no_host_address(link)  # before they are up
            ip_batch([f"link set {self.bridge} up", *(f"link set {veth} master {self.bridge} up" for veth in veths)])
            # Each pod's holder gives its eth0 the pod's address and brings it and lo up (`_holder.py`).

    def open(self) -> None:
        """Only the bridge: pods are attached to it one by one as they come (`attach`), and detached."""
        with state_lock():
            _shared_dirs()
            self.created_links = [self.bridge]
            self._save()
            ip_batch([f"link add {self.bridge} type bridge"])
            _no_host_address(self.bridge)
            ip_batch([f"link set {self.bridge} up"])

    def attach(self, pod: PodSlot, veth: str, hosts: str) -> None:
        """Pod `pod` (its netns and address set) on the bridge through `veth`, with its name files."""
        etc = ETC_NETNS / pod.netns
        with state_lock():
            self.created_netns.append(pod.netns)
            self.created_etc.append(str(etc))
            self._save()
            etc.mkdir()
            (etc / "hosts").write_text(hosts)
            (etc / "resolv.conf").write_text(resolv_conf(pod))
            (etc / "hostname").write_text(pod.hostname + "\n")
            ip_batch([f"netns add {pod.netns}", f"link add {veth} type veth peer name eth0 netns {pod.netns}"])
            _no_host_address(veth)
            ip_batch([f"link set {veth} master {self.bridge} up"])

    def detach(self, pod: PodSlot) -> list[str]:
        """Remove what `attach` made for `pod`; returns what could not be removed."""
        etc = str(ETC_NETNS / pod.netns)
        with state_lock():
            problems = teardown_state([pod.netns], [], [etc])
            if not problems:
                self.created_netns.remove(pod.netns)
                self.created_etc.remove(etc)
                self._save()
            return problems

    def teardown(self) -> list[str]:
        """Remove everything `create` made; returns what could not be removed (should be empty)."""
        with state_lock():
            problems = teardown_state(self.created_netns, self.created_links, self.created_etc)
            if not problems:
                self.state_file.unlink(missing_ok=True)
            return problems


def _shared_dirs() -> None:
    """/etc/netns, made if missing, and what the last run then removes (called under the lock)."""
    if not ETC_NETNS.exists():
        ETC_NETNS.mkdir(mode=0o755)
        _mark_created("etc-netns")
    if not _is_mountpoint(RUN_NETNS) and not (STATE_DIR / _CREATED_MARK.format("run-netns")).exists():
        _mark_created("run-netns")  # `ip netns add` is about to make /run/netns a mount point


def _no_host_address(link: str) -> None:
    """Keep the host off the pods' network: no IPv6 link-local address on its side of it either."""
    setting = Path(f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6")
    if setting.exists():
        setting.write_text("1\n")


def netns_pids(names: list[str]) -> list[int]:
    """PIDs of the processes inside any of these network namespaces (what `ip netns pids` lists),
    from one pass over /proc."""
    targets = set()
    for name in names:
        try:
            st = os.stat(RUN_NETNS / name)
        except FileNotFoundError:
            continue
        targets.add((st.st_ino, st.st_dev))
    pids = []
    for entry in os.listdir("/proc") if targets else ():
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (st.st_ino, st.st_dev) in targets:
            pids.append(int(entry))
    return pids


def teardown_state(netns: list[str], links: list[str], etc: list[str]) -> list[str]:
    """Remove what of `netns`, `links` and `etc` exists; returns what could not be removed."""
    for pid in netns_pids(netns):  # normally none: the pods were stopped before
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    if netns_pids(netns):
        time.sleep(0.2)
    namespaces, interfaces = _netns(), _links()
    commands = [f"netns del {name}" for name in netns if name in namespaces]
    commands += [f"link del {link}" for link in links if link in interfaces]
    why = ip_batch(commands, check=False).stderr.strip() if commands else ""
    left = [f"netns {name}" for name in netns if name in _netns()] + [f"link {link}" for link in links
                                                                      if link in _links()]
    problems = [f"{thing}: {why or 'still there'}" for thing in left]
    for path in etc:
        p = Path(path)
        if p.parent == ETC_NETNS and p.exists():
            for child in p.iterdir():
                child.unlink()
            p.rmdir()
    return problems


def sweep_stale() -> list[str]:
    """Clean up after runs whose owner process is gone (killed before its own cleanup)."""
    cleaned = []
    if not STATE_DIR.exists():
        return cleaned
    with state_lock():
        for path in sorted(STATE_DIR.glob("tj-*.json")):
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            owner = state.get("owner")
            if owner and _process_start(owner) == state.get("owner_start") and _process_start(owner) is not None:
                continue  # still running
            problems = teardown_state(state.get("netns", []), state.get("links", []), state.get("etc", []))
            if not problems:
                path.unlink()
                cleaned.append(path.stem)
    return cleaned
