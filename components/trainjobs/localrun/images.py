"""What a runtime's image gives its pods, beyond the programs this machine runs in its place.

Images are not pulled: containers run this machine's programs. What an image adds on top of its
distribution's packages, and what the rendered commands rely on, is set up in each pod as the image
has it, over the pod's copy-on-write view of this machine's filesystem (the host is never written):

- mpi-operator's images (`mpioperator/base` and the images built on it: `openmpi`, `mpich`, `intel`,
  `mpi-pi`): sshd's privilege separation directory `/run/sshd`; ssh and sshd on port 2222, ssh without
  host key checks or a known_hosts file, sshd without StrictModes (Debian's stock settings otherwise);
  the user `mpiuser` (uid and gid 1000) with its home and `~/.sshd_config`, for sshd run as that user;
- `mpioperator/mpi-pi:openmpi` also has `/home/mpiuser/pi`, a compiled MPI program. Its stand-in is
  `_mpi_pi.py`: the same computation and output, in Python over Debian's mpi4py and OpenMPI;
- Kubeflow Trainer's DeepSpeed and MLX runtime images: the same ssh, sshd and `mpiuser` setup copied
  from mpi-operator's base image (no `/run/sshd`: their sshd runs as `mpiuser`), `HOME=/home/mpiuser`;
- any other image whose pod runs sshd gets `/run/sshd`: an image that runs sshd as root must have it
  (Debian's openssh-server package creates it only when its service starts).

A pod's containers share one filesystem here, so a pod gets what all of its containers' images have.
"""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

MPI_PI_STAND_IN = Path(__file__).with_name("_mpi_pi.py")
STAND_IN_PYTHON = "/usr/bin/python3"  # Debian's, which finds python3-mpi4py
PRIVSEP_DIR = "/run/sshd"
PASSWD, GROUP = "/etc/passwd", "/etc/group"  # this machine's, standing in for the image's distribution
_SSHD = re.compile(r"\bsshd\b")


@dataclass(frozen=True)
class User:
    """An account of the image's /etc/passwd, with its own group of the same name."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str = "/bin/sh"


@dataclass(frozen=True)
class Entry:
    """A directory (content None) or file the image has, with its mode and owner."""

    path: str
    content: bytes | None
    mode: int
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class StandIn:
    """A program of the image that this machine lacks, replaced by a script that does the same."""

    path: str
    what: str
    script: Path  # run by STAND_IN_PYTHON
    needs: str  # a path the script needs on this machine
    package: str  # the Debian package providing it

    def entry(self) -> Entry:
        return Entry(self.path, f"#!{STAND_IN_PYTHON}\n".encode() + self.script.read_bytes(), 0o755)

    def missing(self) -> bool:
        return not os.path.exists(self.needs)


@dataclass(frozen=True)
class Image:
    """What a known image provides."""

    description: str
    users: tuple[User, ...] = ()
    entries: tuple[Entry, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    stand_ins: tuple[StandIn, ...] = ()


@dataclass
class Layer:
    """What one pod gets from its containers' images: files and directories, users, env."""

    entries: list[Entry] = field(default_factory=list)
    users: dict[int, User] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    stand_ins: list[StandIn] = field(default_factory=list)


MPIUSER = User("mpiuser", 1000, 1000, "/home/mpiuser")
SSH_PORT = 2222

# Debian's stock ssh client and server settings (the non-comment lines of openssh's files), then
# what mpi-operator's base image changes in them.
_SSH_CONFIG = f"""\
Include /etc/ssh/ssh_config.d/*.conf

Host *
    SendEnv LANG LC_*
    HashKnownHosts yes
    GSSAPIAuthentication yes
    # mpi-operator's base image: no host key prompt, no known_hosts to write (~/.ssh is a read-only
    # Secret), and its sshd's port
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    Port {SSH_PORT}
"""
_SSHD_CONFIG = f"""\
Include /etc/ssh/sshd_config.d/*.conf

# mpi-operator's base image: its port, and no permission checks on the mounted keys
Port {SSH_PORT}
StrictModes no
KbdInteractiveAuthentication no
UsePAM yes
X11Forwarding yes
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
"""
# sshd run as mpiuser: `sshd -De -f /home/mpiuser/.sshd_config`, the job's key doubling as host key.
_USER_SSHD_CONFIG = f"""\
PidFile {MPIUSER.home}/sshd.pid
HostKey {MPIUSER.home}/.ssh/id_rsa
StrictModes no
Port {SSH_PORT}
"""
_SSH_FILES = (Entry("/etc/ssh/ssh_config", _SSH_CONFIG.encode(), 0o644),
              Entry("/etc/ssh/sshd_config", _SSHD_CONFIG.encode(), 0o644))
_PRIVSEP = Entry(PRIVSEP_DIR, None, 0o755)
_HOME = Entry(MPIUSER.home, None, 0o755, MPIUSER.uid, MPIUSER.gid)

MPI_OPERATOR = Image(
    description="mpi-operator's base image: /run/sshd, ssh and sshd on port 2222 without host key checks, "
                "user mpiuser (1000) with ~/.sshd_config",
    users=(MPIUSER,),
    entries=(_PRIVSEP, *_SSH_FILES, _HOME,
             Entry(f"{MPIUSER.home}/.sshd_config", _USER_SSHD_CONFIG.encode(), 0o644, MPIUSER.uid, MPIUSER.gid)),
)
MPI_PI = Image(
    description=MPI_OPERATOR.description,
    users=MPI_OPERATOR.users,
    entries=MPI_OPERATOR.entries,
    stand_ins=(StandIn(f"{MPIUSER.home}/pi", "the image's compiled MPI program (Monte Carlo pi) is replaced by "
                       "trainjobs' stand-in: the same computation and output in Python over mpi4py",
                       MPI_PI_STAND_IN, "/usr/lib/python3/dist-packages/mpi4py/__init__.py", "python3-mpi4py"),),
)
KUBEFLOW_MPI_RUNTIME = Image(
    description="Kubeflow Trainer's MPI runtime image: ssh and sshd on port 2222 without host key checks, "
                "user mpiuser (1000) with ~/.sshd_config, HOME=/home/mpiuser",
    users=(MPIUSER,),
    entries=(*_SSH_FILES, _HOME,
             Entry(f"{MPIUSER.home}/.sshd_config", _USER_SSHD_CONFIG.encode(), 0o644),
             Entry(f"{MPIUSER.home}/.cache", None, 0o755, MPIUSER.uid, MPIUSER.gid),
             Entry(f"{MPIUSER.home}/.local", None, 0o755, MPIUSER.uid, MPIUSER.gid)),
    env=(("HOME", MPIUSER.home),),
)
KNOWN = {
    "mpioperator/base": MPI_OPERATOR,
    "mpioperator/openmpi": MPI_OPERATOR,
    "mpioperator/mpich": MPI_OPERATOR,
    "mpioperator/intel": MPI_OPERATOR,
    "mpioperator/mpi-pi:openmpi": MPI_PI,
    "mpioperator/mpi-pi": MPI_OPERATOR,
    "ghcr.io/kubeflow/trainer/deepspeed-runtime": KUBEFLOW_MPI_RUNTIME,
    "ghcr.io/kubeflow/trainer/mlx-runtime": KUBEFLOW_MPI_RUNTIME,
}
SSHD_ONLY = Image(description="unknown here; its pod runs sshd, so it gets sshd's privilege separation "
                              "directory /run/sshd", entries=(_PRIVSEP,))


def repository(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference, Docker Hub's implicit prefixes removed."""
    name = image.strip().split("@", 1)[0]
    tag = ""
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    for prefix in ("docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.removeprefix("library/"), tag


def known(image: object) -> Image | None:
    """The facts of a known image (by repository and tag, else by repository), or None."""
    if not isinstance(image, str):
        return None
    name, tag = repository(image)
    return KNOWN.get(f"{name}:{tag}") or KNOWN.get(name)


def images_of(images: list[object], commands: list[tuple[str, ...]]) -> list[tuple[object, Image]]:
    """The known images among a pod's `images`, plus SSHD_ONLY for an unknown one when the pod runs sshd."""
    found = []
    for image in dict.fromkeys(i if isinstance(i, str) else repr(i) for i in images):
        facts = known(image)
        if facts is None and any(_SSHD.search(arg) for argv in commands for arg in argv):
            facts = SSHD_ONLY
        if facts is not None:
            found.append((image, facts))
    return found


def layer(images: list[object], commands: list[tuple[str, ...]]) -> Layer:
    """What a pod whose containers use `images` and run `commands` gets from those images."""
    result = Layer()
    paths: set[str] = set()
    for _, facts in images_of(images, commands):
        for user in facts.users:
            result.users.setdefault(user.uid, user)
        for name, value in facts.env:
            result.env.setdefault(name, value)
        result.stand_ins += [s for s in facts.stand_ins if s not in result.stand_ins]
        for entry in [*facts.entries, *(s.entry() for s in facts.stand_ins)]:
            if entry.path not in paths:
                paths.add(entry.path)
                result.entries.append(entry)
    if result.users:
        users = list(result.users.values())
        result.entries += [Entry("/etc/passwd", _accounts(PASSWD, users, lambda u: (
                                     u.name, u.uid, f"{u.name}:x:{u.uid}:{u.gid}::{u.home}:{u.shell}")), 0o644),
                           Entry("/etc/group", _accounts(GROUP, users, lambda u: (
                                     u.name, u.gid, f"{u.name}:x:{u.gid}:")), 0o644)]
    return result


def _accounts(path: str, users: list[User], line) -> bytes:
    """This machine's account file standing in for the image's, with the image's accounts in place of
    any of the same name or id."""
    mine = [line(u) for u in users]
    names, ids = {name for name, _, _ in mine}, {str(i) for _, i, _ in mine}
    try:
        host = Path(path).read_text().splitlines()
    except OSError:
        host = []
    kept = [row for row in host if not (len(row.split(":")) > 2 and (row.split(":")[0] in names
                                                                       or row.split(":")[2] in ids))]
    return ("\n".join(kept + [text for _, _, text in mine]) + "\n").encode()
