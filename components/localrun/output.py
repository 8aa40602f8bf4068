"""Which lines of the containers' output run-local leaves out of its console by default.

The logs keep every line, and `--verbose` shows every line. Left out are sshd's per-connection
messages (an MPI job logs in to every worker a few times: the launcher's wait, mpirun, the end
notice) and warnings known to be harmless in an emulated pod, each with why.
"""

import re

_CHATTER = [
    # sshd -De, at its default log level
    r"Server listening on \S+ port \d+\.",
    r"Accepted publickey for \S+ from \S+ port \d+ ssh2: .*",
    r"Received disconnect from \S+ port \d+:\d+: disconnected by user",
    r"Disconnected from user \S+ \S+ port \d+",
    r"Connection closed by \S+ port \d+( \[preauth\])?",
    r"Received signal 15; terminating\.",
    # OpenMPI 4's mpirun in a container started in a session of its own: ssh stays in mpirun's process
    # group, which changes nothing for the job.
    r"\[[^\]]+\] plm:rsh: Warning: setpgid\(\d+,\d+\) failed in parent with errno=Permission denied\(13\)",
    # gloo's reverse lookup of a peer: a pod's hosts file answers names, not IPv4-mapped addresses, which
    # the cluster DNS would (docs/local-run.md, what is not emulated).
    r".*\[c10d\] The hostname of the client socket cannot be retrieved\. err=-3",
]
_PATTERN = re.compile("|".join(f"(?:{p})" for p in _CHATTER))


def chatter(line: str) -> bool:
    """True for a line run-local hides by default."""
    return _PATTERN.fullmatch(line.strip()) is not None
