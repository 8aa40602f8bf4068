"""Reading the jobs of a `trainjobs run-local` run, from the objects it keeps in its run directory
(trainjobs.localrun.objects writes them while it runs) and its pods' log files."""

import json
import tempfile
import time
from pathlib import Path
from typing import Iterator

from trainjobs.kube.manifests import LABEL_JOB, MAIN_CONTAINER
from trainjobs.observe.cluster import StatusError
from trainjobs.observe.state import Snapshot

STATE_FILE = "objects.json"
RUN_DIR_PREFIX = "trainjobs-"
FOLLOW_POLL = 0.2


def latest_run_dir(root: Path | None = None) -> Path:
    """The directory of the newest local run under `root` (the temp dir, where run-local puts them)."""
    root = root or Path(tempfile.gettempdir())
    runs = sorted(root.glob(f"{RUN_DIR_PREFIX}*/{STATE_FILE}"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise StatusError(f"no local run in {root}: start one with `trainjobs run-local PROGRAM`, or give the run's "
                          "directory (--local DIR)")
    return runs[-1].parent


class LocalSource:
    """The pods of one local run, read from its directory."""

    def __init__(self, run_dir: Path | None = None):
        self.run_dir = Path(run_dir) if run_dir else latest_run_dir()
        if not (self.run_dir / STATE_FILE).is_file():
            raise StatusError(f"{self.run_dir} is not the directory of a local run (no {STATE_FILE}); run-local prints "
                              "its directory (`logs and summary.json in DIR`)")

    def _state(self) -> dict:
        return json.loads((self.run_dir / STATE_FILE).read_text())

    def snapshot(self, namespace: str | None, names: list[str]) -> Snapshot:
        state = self._state()

        def chosen(obj: dict) -> bool:
            meta = obj["metadata"]
            return ((not namespace or meta.get("namespace", "default") == namespace)
                    and (meta.get("labels") or {}).get(LABEL_JOB) is not None
                    and (not names or meta["labels"][LABEL_JOB] in names))

        return Snapshot(jobs=[o for o in state["jobs"] if chosen(o)], jobsets=[o for o in state["jobsets"] if chosen(o)],
                        pods=[o for o in state["pods"] if chosen(o)])

    def _log_path(self, pod: str, container: str) -> Path | None:
        path = (self._state()["logs"].get(pod) or {}).get(container)
        return Path(path) if path else None

    def log(self, namespace: str, pod: str, tail: int | None = None, container: str = MAIN_CONTAINER) -> list[str]:
        path = self._log_path(pod, container)
        if path is None or not path.exists():
            return []
        lines = path.read_text(errors="replace").splitlines()
        return lines[-tail:] if tail else lines

    def follow(self, namespace: str, pod: str, container: str = MAIN_CONTAINER) -> Iterator[str]:
        """The log's lines as they are written, until the pod has stopped (or the run ended) and all is read."""
        path = self._log_path(pod, container)
        position, pending = 0, b""
        while True:
            state = self._state()
            found = next((p for p in state["pods"] if p["metadata"]["name"] == pod), None)
            done = state["finished"] or found is None or found["status"]["phase"] in ("Succeeded", "Failed")
            if path is not None and path.exists():
                with path.open("rb") as log:
                    log.seek(position)
                    pending += log.read()
                    position = log.tell()
                *lines, pending = pending.split(b"\n")
                yield from (line.decode(errors="replace") for line in lines)
            if done:
                if pending:
                    yield pending.decode(errors="replace")
                return
            time.sleep(FOLLOW_POLL)
