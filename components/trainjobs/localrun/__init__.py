"""Run rendered Jobs on this machine, each pod emulated with Linux namespaces.

`trainjobs run-local` uses this to show that what a program renders really trains: every pod of
the selected Jobs gets its own network namespace on a private bridge, hostname, hosts file,
resolved env, and volumes at their mount paths, and its containers run the host's programs
(images are not pulled; what known runtime images add, such as sshd's directory and their user, is
set up in each pod as the image has it: `images.py`). The emulator knows Kubernetes objects and
a few images, not training frameworks.

    from trainjobs.localrun import run_local
    result = run_local(objects, jobs=["mnist-ddp"], timeout=300)
    result.exit_code   # 0 succeeded, 1 failed, 124 timed out, 130 interrupted

Needs root (namespaces, a bridge, mounts) and the `ip`, `nsenter`, `setpriv` and `pivot_root`
commands (Debian packages iproute2 and util-linux).
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .jobsets import Disruption
from .run import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TIMEOUT, LocalRun, RunResult
from .network import sweep_stale
from .plan import PlanError, select
from .resize import Admission, Resize, resolve

EXIT_USAGE = 2
REQUIRED_COMMANDS = {"ip": "iproute2", "nsenter": "util-linux",
                     "pivot_root": "util-linux", "setpriv": "util-linux", "umount": "mount"}
DEFAULT_TIMEOUT = 900.0
DEFAULT_MAX_GRACE = 5.0

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "HostNotReady",
           "PlanError", "RunResult", "host_problems", "run_local"]


class HostNotReady(RuntimeError):
    """This machine cannot run pods locally (not root, or a command is missing)."""


def host_problems() -> list[str]:
    """What stops this machine from running pods locally; empty when it can."""
    problems = []
    if os.geteuid() != 0:
        problems.append("run-local needs root: it creates network namespaces, a bridge and mounts. "
                        f"Run it as root, e.g. `sudo {shutil.which('trainjobs') or 'trainjobs'} run-local ...`")
    missing = sorted(f"{cmd} (package {pkg})" for cmd, pkg in REQUIRED_COMMANDS.items()
                     if shutil.which(cmd) is None and not os.path.exists(f"/usr/sbin/{cmd}")
                     and not os.path.exists(f"/sbin/{cmd}"))
    if missing:
        problems.append("missing commands: " + ", ".join(missing))
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if filesystems and "overlay" not in filesystems:
        problems.append("the kernel has no overlay filesystem (try `modprobe overlay`)")
    return problems


def run_local(objects: list[dict], jobs: list[str] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
              run_root: str | os.PathLike | None = None, max_grace: float = DEFAULT_MAX_GRACE,
              echo_logs: bool = True, write: Callable[[str], None] | None = None,
              verbose: bool = False, disruptions: list[str] = (), admissions: list[str] = (),
              resizes: list[str] = ()) -> RunResult:
    """Run the Jobs among `objects` (plain manifests, secrets revealed) as local pods.

    `jobs` names Jobs or training jobs (a subdomain shared by Jobs); all runnable ones by default.
    The containers' output is echoed (`echo_logs`) without sshd's connection messages and known
    harmless messages unless `verbose`; the logs keep every line. `disruptions` evict pods as a
    preemption would, each `HOSTNAME@SECONDS` (after the pod's containers start) or `HOSTNAME@output:TEXT`
    (once the pod prints TEXT). `admissions` (`JOB=N`) run only a Job's first N indexes, as Kueue admits
    part of it; `resizes` (`JOB=N@SECONDS` or `JOB=N@output:TEXT`) set a running Job's parallelism and
    completions to N, in the order given (resize.py).
    Raises PlanError when the rendering cannot run here and HostNotReady when this machine can't
    run pods; both before anything is created.
    """
    try:
        evictions = [Disruption.parse(text) for text in disruptions]
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    admitted = [Admission.parse(text) for text in admissions]
    resized = [Resize.parse(text) for text in resizes]
    problems = host_problems()
    if problems:
        raise HostNotReady("; ".join(problems))
    selection = select(objects, jobs)
    hostnames = {slot.hostname for job in selection.jobs for slot in job.slots}
    for disruption in evictions:
        if disruption.hostname not in hostnames:
            raise PlanError(f"--disrupt {disruption.hostname}: no pod of that hostname runs; pods: "
                            f"{', '.join(sorted(hostnames))}")
    resolve(admitted, resized, selection.jobs)
    if write is None:
        def write(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    for stale in sweep_stale():
        write(f"removed the leftovers of an interrupted local run {stale}")
    root = Path(run_root) if run_root else Path(tempfile.gettempdir())
    run = LocalRun(objects, selection, root, timeout=timeout, max_grace=max_grace, echo_logs=echo_logs, write=write,
                   verbose=verbose, disruptions=evictions, resizes=resized)
    return run.run()
