"""Which lines of the containers' output run-local leaves out of its console by default.

The logs keep every line, and `--verbose` shows every line. Left out are sshd's per-connection
messages (an MPI job logs in to every worker a few times: the launcher's wait, mpirun, the end
notice), messages known to be harmless, each with why, and the errors a resize (`--resize`) makes
the pods print: run-local says once which pods a shrink stopped instead.
"""

import re
from typing import Iterable, Iterator


def _any(patterns: list[str]) -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


SSHD, HARMLESS = "sshd connection messages", "known harmless messages"  # what is left out, by kind
REMOVED, LOST_PEERS = "lines of pods a shrink removed", "lines of lost-peer errors after a resize"

# sshd -De, at its default log level
_SSHD = _any([
    r"Server listening on \S+ port \d+\.",
    r"Accepted publickey for \S+ from \S+ port \d+ ssh2: .*",
    r"Received disconnect from \S+ port \d+:\d+: disconnected by user",
    r"Disconnected from user \S+ \S+ port \d+",
    r"Connection closed by \S+ port \d+( \[preauth\])?",
    # the launcher's readiness check offers no credentials to every host but one, so it leaves while authenticating
    r"Connection closed by authenticating user \S+ \S+ port \d+ \[preauth\]",
    r"Received signal 15; terminating\.",
])
_HARMLESS = _any([
    # OpenMPI 4's mpirun in a container started in a session of its own: ssh stays in mpirun's process
    # group, which changes nothing for the job.
    r"\[[^\]]+\] plm:rsh: Warning: setpgid\(\d+,\d+\) failed in parent with errno=Permission denied\(13\)",
    # gloo's reverse lookup of a peer: a pod's hosts file answers names, not IPv4-mapped addresses, which
    # the cluster DNS would (docs/local-run.md, what is not emulated).
    r".*\[c10d\] The hostname of the client socket cannot be retrieved\. err=-3",
])

# torchrun's exit barrier, reached only once every worker of the pod succeeded: when the agent
# serving the rendezvous store has already exited, the others log a lost connection and a
# traceback, then exit 0 all the same. A block starts with either message and goes on while its
# lines are part of such a report; it is hidden only if it is that barrier's.
_BLOCK_START = _any([
    r"\[W\S+ \S+ TCPStore\.cpp:\d+\] \[c10d\] recvValueWithTimeout failed on SocketImpl\(.*\): Failed to recv, "
    r"got 0 bytes\. Connection was likely closed\. Did the remote server shutdown or crash\?",
    r"E\d{4} \S+ \d+ torch/distributed/elastic/agent/server/api\.py:\d+\] Error waiting on exit barrier\. .*",
])
_BLOCK_MORE = _any([
    r"Exception raised from \S+ at .*",
    r"frame #\d+: .*",
    r"<omitting python frames>",
    r"",
    r"E\d{4} \S+ \d+ torch/distributed/elastic/agent/server/api\.py:\d+\] .*",
])
_BLOCK_HARMLESS = "] Error waiting on exit barrier. "

# After a resize, the workers of the pods that remain may fail in their next collective (gloo's "Connection
# closed by peer", or "Read error ...: Connection reset by peer" when the peer's worker was killed, a
# traceback per worker, "[rankN]: " before each line): a peer left, or its agent restarted it for a new
# round. Their agents report it and start the new round. Such a traceback is hidden only if it names the
# lost peer.
_RANK = r"(?:\[rank\d+\]: )?"
_TRACEBACK_START = re.compile(_RANK + r"Traceback \(most recent call last\):")
_TRACEBACK_MORE = re.compile(_RANK + r"(?:Traceback \(most recent call last\):|\s.*|[\w.]+(?:Error|Exception)\b.*)")
_LOST_PEER = ("Connection closed by peer", "Connection reset by peer")
_WORKER_FAILED = re.compile(r"E\d{4} \S+ \d+ torch/distributed/elastic/multiprocessing/api\.py:\d+\] failed "
                            r"\(exitcode: \d+\) local_rank: .*")
_AGENT_LOG = re.compile(r"[IWE]\d{4} \S+ \d+ torch/distributed/elastic/.*")


def left_out(line: str) -> str | None:
    """The kind of a single line run-local leaves out by default (SSHD, HARMLESS), else None."""
    line = line.strip()
    if _SSHD.fullmatch(line):
        return SSHD
    if _HARMLESS.fullmatch(line):
        return HARMLESS
    return None


class Filter:
    """Tells, line by line, which lines of one container's output are left out by default.

    `feed` gives back (line, kind left out or None) pairs in order; lines that may belong to a
    harmless block, or after a resize to a lost peer's traceback, are held until the block ends (`end`
    at the end of the output). `after_resize` is told by the run, while the pod prints.
    """

    def __init__(self) -> None:
        self._held: list[str] = []
        self._removed = False        # a shrink removed the pod: every line from now on
        self._lost_peers = False     # a resize kept the pod: its workers' lost-peer errors, until they train again
        self._traceback: list[str] = []

    def after_resize(self, removed: bool) -> None:
        """A shrink removed the pod (all it prints from now on is left out), or a resize kept it running (its
        workers' lost-peer errors are, until the pod prints something else than torchrun's agent log)."""
        if removed:
            self._removed = True
        else:
            self._lost_peers = True

    def feed(self, line: str) -> list[tuple[str, str | None]]:
        if self._removed:
            return self.end() + [(line, REMOVED)]
        if self._lost_peers:
            return self._feed_lost_peers(line)
        return self._feed(line)

    def _feed_lost_peers(self, line: str) -> list[tuple[str, str | None]]:
        stripped = line.strip()
        if self._traceback and _TRACEBACK_MORE.fullmatch(stripped):
            self._traceback.append(line)
            return []
        ready = self._end_traceback()
        if _TRACEBACK_START.fullmatch(stripped):
            self._traceback = [line]
            return ready
        if _WORKER_FAILED.fullmatch(stripped):
            return ready + [(line, LOST_PEERS)]
        if not _AGENT_LOG.fullmatch(stripped):
            self._lost_peers = False   # the workers of the new round print
        return ready + self._feed(line)

    def _end_traceback(self) -> list[tuple[str, str | None]]:
        held, self._traceback = self._traceback, []
        kind = LOST_PEERS if any(lost in line for line in held for lost in _LOST_PEER) else None
        return [(line, kind) for line in held]

    def _feed(self, line: str) -> list[tuple[str, str | None]]:
        ready: list[tuple[str, str | None]] = []
        if self._held and _BLOCK_MORE.fullmatch(line.strip()) is None:
            ready = self.end()
        if self._held or _BLOCK_START.fullmatch(line.strip()):
            self._held.append(line)
            return ready
        return ready + [(line, left_out(line))]

    def end(self) -> list[tuple[str, str | None]]:
        """The lines still held, with their kinds (at the end of the output, or when a block ends)."""
        held, self._held = self._held, []
        kind = HARMLESS if any(_BLOCK_HARMLESS in line for line in held) else None
        return self._end_traceback() + [(line, kind) for line in held]

    def lines(self, lines: Iterable[str]) -> Iterator[tuple[str, str | None]]:
        for line in lines:
            yield from self.feed(line)
        yield from self.end()
