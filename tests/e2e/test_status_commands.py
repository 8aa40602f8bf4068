"""`trainjobs status`, `logs` and `wait` on run-local's pods (`--local`): a 4-rank job whose rank 1 is evicted
and replaced, read while it runs and after."""

import re
import socket
import subprocess
import sys
import time

from e2e_support import PROGRAMS, REPO, finish, scaled, start_local

PODS = PROGRAMS / "pods" / "__main__.py"


def trainjobs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=scaled(120))


def test_logs_follow_each_rank_and_a_replaced_pod_and_status_reads_the_run(tmp_path):
    started = time.monotonic()
    process = start_local(PODS, "--stack", "status", "--disrupt", "st-node-0-1@output:rank 1 step 1", "--quiet",
                          run_dir=tmp_path, limit=90)
    deadline = time.monotonic() + scaled(60)
    while not list(tmp_path.glob("trainjobs-*/objects.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    [run_dir] = [path.parent for path in tmp_path.glob("trainjobs-*/objects.json")]
    follow = subprocess.Popen([sys.executable, "-m", "trainjobs.tools.cli", "logs", "st", "--rank", "1", "--follow",
                               "--poll", "0.2", "--local", str(run_dir)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    waited = trainjobs("wait", "st", "--for", "complete", "--poll", "0.2", "--local", str(run_dir))
    run = finish(process, started, tmp_path, limit=90)
    followed, errors = follow.communicate(timeout=scaled(60))
    assert run.returncode == 0, run.output
    assert (waited.returncode, waited.stdout) == (0, "st: succeeded (complete reached)\n")
    assert (follow.returncode, errors) == (0, "")
    successor = next(p["name"] for p in run.pods() if p["hostname"] == "st-node-0-1" and p["attempt"] == 2)
    assert followed.splitlines() == ["rank 1 starts", "rank 1 step 1",
                                     f"--- pod {successor} replaces the previous pod of rank st-node-0-1",
                                     "rank 1 starts", "rank 1 step 1", "rank 1 done"]

    every = trainjobs("logs", "st", "--local", str(run_dir))
    assert every.returncode == 0, every.stderr
    assert every.stdout == "".join(f"[st-node-0-{i}] rank {i} starts\n[st-node-0-{i}] rank {i} step 1\n"
                                   f"[st-node-0-{i}] rank {i} done\n" for i in range(4))

    status = trainjobs("status", "--local", str(run_dir), "--log-lines", "2")
    evicted = next(p["name"] for p in run.pods() if p["hostname"] == "st-node-0-1" and p["attempt"] == 1)
    node = socket.gethostname()
    rows = [f"    st-node-0-{p['index']}  {p['name']}  " + ("Failed  0  <age>  {node}  143  preempted (PreemptionByScheduler)"
                                                         if p["phase"] == "Failed" else "Succeeded  0  <age>  {node}  0  Completed")
            for p in sorted(run.pods(), key=lambda p: (p["index"], p["attempt"]))]
    assert columns(status.stdout) == columns("\n".join([
        "st (namespace default): succeeded",
        "  role node, Job st-node-0: Complete",
        "    pods: 1 Failed, 4 Succeeded; backoff: 0 failed pods of backoffLimit 0",
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON",
        *[row.format(node=node) for row in rows],
        f"  replaced after preemption: st-node-0-1 (pod {evicted} by pod {successor}, role node): exit code 143, "
        "preempted (PreemptionByScheduler) (preempted by run-local --disrupt)"]) + "\n")


def columns(text: str) -> str:
    """The text with its table's ages replaced and its columns' padding made two spaces (widths follow the names)."""
    return re.sub(r" {2,}", "  ", re.sub(r"(?<=  )\d+[smhd](?=  )", "<age>", text))
