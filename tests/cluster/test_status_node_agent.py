"""`trainjobs status`, `logs` and `wait` against pods that `trainjobs node-agent` runs for real on the cluster of
`make cluster`: real programs with real exit codes, a container killed by SIGKILL (as the kernel's OOM killer kills
one: the agent enforces no memory limit), a worker preempted (`--disrupt`) and replaced, the logs read through the
API server from the agent's log endpoint. Each state's text is asserted whole, and its JSON.

Needs root and torch, as test_node_agent.py (whose fixtures these tests use)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from pulumi_cli import REPO
from test_node_agent import (WAIT, agent, deploy, env, finished, kubectl, namespace, pods,  # noqa: F401 (fixtures)
                             runnable)
from test_status_on_cluster import normalised

POLL = "0.5"
PREEMPTED = "Pod was preempted by the node agent (trainjobs node-agent --disrupt)"


def trainjobs(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", *args], env=cli_env(env), capture_output=True,
                          text=True, timeout=WAIT)


def cli_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "PYTHONPATH": str(REPO / "components")}


def table(text: str) -> str:
    """`normalised`, and the node each pod got (the scheduler picks one of the agent's two) as <node>."""
    return re.sub(r"\bagent-[0-9a-f]{8}-[01]\b", "<node>", normalised(text))


def timeless(data):
    """The JSON with what differs from run to run replaced: ages, times, pods' generated suffixes."""
    if isinstance(data, dict):
        return {k: ("<t>" if k in ("age_seconds", "created_at", "finished_at") and v not in (None, "") else
                    "<node>" if k == "node" and v else timeless(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [timeless(v) for v in data]
    return re.sub(r"(-\d+)-[b-df-hj-np-tv-z2-9]{5}\b", r"\1-<id>", data) if isinstance(data, str) else data


def test_status_wait_and_logs_of_a_4_rank_torch_job(tmp_path, env, namespace, agent):
    """2 pods x 2 torchrun workers: `wait` sees it complete, `logs` prints each pod's lines after its rank, with the
    4 ranks' reports in them, read through the API server from the agent's log endpoint."""
    running = agent()
    project = deploy(tmp_path, env, namespace, "torch", "static")
    try:
        done = trainjobs(env, "wait", "e2e-static", "-n", namespace, "--poll", POLL)
        assert (done.returncode, done.stdout, done.stderr) == (0, "e2e-static: succeeded (complete reached)\n", ""), \
            running.text()
        other = trainjobs(env, "wait", "e2e-static", "-n", namespace, "--for", "failed", "--poll", POLL)
        assert (other.returncode, other.stdout) == (3, "e2e-static: succeeded, not failed\n")
        status = trainjobs(env, "status", "e2e-static", "-n", namespace)
        assert table(status.stdout) == table(
            f"e2e-static (namespace {namespace}): succeeded\n"
            "  role node, Job e2e-static-node-0: Complete (CompletionsReached: Reached expected number of succeeded "
            "pods)\n"
            "    pods: 2 Succeeded; backoff: 0 failed pods of backoffLimit 0\n"
            "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n"
            "    e2e-static-node-0-0  e2e-static-node-0-0-<id>  Succeeded  0  <age>  <node>  0  Completed\n"
            "    e2e-static-node-0-1  e2e-static-node-0-1-<id>  Succeeded  0  <age>  <node>  0  Completed\n")
        logs = trainjobs(env, "logs", "e2e-static", "-n", namespace)
        assert (logs.returncode, logs.stderr) == (0, "")
        lines = logs.stdout.splitlines()
        assert lines and all(re.match(r"\[e2e-static-node-0-[01]\] ", line) for line in lines), logs.stdout
        reports = {(line.split("]", 1)[0][1:], json.loads(line.split("E2E-RANK ", 1)[1])["rank"])
                   for line in lines if "E2E-RANK " in line}
        assert reports == {("e2e-static-node-0-0", 0), ("e2e-static-node-0-0", 1), ("e2e-static-node-0-1", 2),
                           ("e2e-static-node-0-1", 3)}, logs.stdout
        one = trainjobs(env, "logs", "e2e-static", "-n", namespace, "--rank", "1")
        assert one.stdout == "".join(line.split("] ", 1)[1] + "\n" for line in lines
                                     if line.startswith("[e2e-static-node-0-1] ")), one.stdout
    finally:
        project.destroy()


def test_a_rank_killed_like_the_oom_killer_does(tmp_path, env, namespace, agent):
    """The training process of rank 1 killed with SIGKILL: the agent reports exit code 137 (128 + 9) with reason
    Error (a kubelet says OOMKilled only when the kernel's cgroup OOM killer did it); backoff_limit 0 fails the job,
    and the first failed rank comes with the last lines of its log."""
    running = agent()
    project = deploy(tmp_path, env, namespace, "resilience", "preempt", torchrun="false", steps="200")
    try:
        waiting = subprocess.Popen([sys.executable, "-m", "trainjobs.tools.cli", "wait", "pre", "-n", namespace,
                                    "--poll", POLL], env=cli_env(env), stdout=subprocess.PIPE, text=True)
        try:
            victim = _training_process(env, "pre-node-0", 1, "E2E-STEP 2 ")
            os.kill(victim, signal.SIGKILL)
            out, _ = waiting.communicate(timeout=WAIT)
        finally:
            waiting.kill()
        assert (waiting.returncode, out) == (1, "pre: failed, not complete: rank pre-node-0-1 exited 137 (Error)\n"), \
            running.text()
        finished(env, "pre-node-0")
        (culprit,) = [p for p in pods(env, "pre-node-0") if p["spec"]["hostname"] == "pre-node-0-1"]
        name = culprit["metadata"]["name"]
        # The last lines it wrote, as the agent keeps them on disk (the step it was killed at varies).
        tail = written(running, name)[-2:]
        assert all(re.fullmatch(r"E2E-STEP \d+ rank 1", line) for line in tail) and len(tail) == 2, tail
        status = trainjobs(env, "status", "pre", "-n", namespace, "--log-lines", "2")
        assert table(status.stdout) == table(
            f"pre (namespace {namespace}): failed\n"
            "  role node, Job pre-node-0: Failed (BackoffLimitExceeded: Job has reached the specified backoff limit)\n"
            "    pods: 1 Failed; backoff: 2 failed pods of backoffLimit 0\n"
            "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n"
            "    pre-node-0-1  pre-node-0-1-<id>  Failed  0  <age>  <node>  137  Error\n"
            f"  first failed rank: pre-node-0-1 (pod {name}, role node): exit code 137, Error\n"
            f"    | {tail[0]}\n"
            f"    | {tail[1]}\n"), running.text()
        data = json.loads(trainjobs(env, "status", "pre", "-n", namespace, "-o", "json",
                                    "--log-lines", "2").stdout)
        assert timeless(data["jobs"][0]["first_failure"]) == timeless({
            "pod": name, "rank": "pre-node-0-1", "role": "node", "exit_code": 137, "reason": "Error",
            "message": "", "log_tail": tail})
        assert timeless(data["jobs"][0]["roles"][0]["pods"]) == [{
            "name": "pre-node-0-1-<id>", "rank": "pre-node-0-1", "role": "node", "index": 1, "phase": "Failed",
            "restarts": 0, "age_seconds": "<t>", "node": "<node>", "domain": "", "exit_code": 137, "reason": "Error",
            "message": "", "created_at": "<t>", "finished_at": "<t>", "replaced_by": ""}]
    finally:
        project.destroy()


def written(agent, pod: str) -> list[str]:
    """The lines the main container of a pod wrote, as the agent keeps them in its run directory."""
    (log,) = agent.run_dir.glob(f"trainjobs-agent-*/logs/{agent.namespace}_{pod}/node.log")
    return log.read_text().splitlines()


def _training_process(env: dict[str, str], job: str, index: int, after: str) -> int:
    """The PID of the program in the main container of pod `index` (the child of the `nsenter` the agent started,
    whose PID is the container's ID), once its log has a line starting with `after`."""
    deadline = time.monotonic() + WAIT
    while True:
        found = [p for p in pods(env, job) if p["spec"]["hostname"] == f"{job}-{index}"]
        if found and found[-1]["status"].get("containerStatuses"):
            pod = found[-1]
            container = pod["status"]["containerStatuses"][0].get("containerID", "")
            log = kubectl(env, "logs", pod["metadata"]["name"], check=False).stdout
            if container and any(line.startswith(after) for line in log.splitlines()):
                nsenter = int(container.removeprefix("run-local://"))
                children = Path(f"/proc/{nsenter}/task/{nsenter}/children").read_text().split()
                return int(children[0])
        assert time.monotonic() < deadline, f"pod {index} of {job} never printed {after!r}"
        time.sleep(0.5)


def test_logs_follow_a_preempted_rank_to_its_successor(tmp_path, env, namespace, agent):
    """Rank 1 preempted by the agent (DisruptionTarget) after its second step and replaced: `logs --follow --rank 1`
    prints the preempted pod's lines, then its successor's until the job ends; `wait` sees the job complete, and
    `status` shows the preempted pod replaced by its successor, not counted against backoffLimit 0 and not a failed
    rank of the job that succeeded."""
    running = agent("--disrupt", "pre-node-0-1@output:E2E-STEP 2 ")
    project = deploy(tmp_path, env, namespace, "resilience", "preempt", steps="4")
    try:
        up = trainjobs(env, "wait", "pre", "-n", namespace, "--for", "running", "--poll", POLL)
        assert (up.returncode, up.stdout) == (0, "pre: running (running reached)\n"), up.stderr
        later = trainjobs(env, "wait", "pre", "-n", namespace, "--timeout", "1", "--poll", POLL)
        # Each pod's phase is reported on its own: on a busy machine rank 1 can be preempted by now, its successor not
        # yet started, while rank 0 is not yet reported Running, and a job with no pod Running is pending (seen once).
        assert later.returncode == 124, later.stderr
        assert re.fullmatch(r"pre: still (running|pending) after 1s, not complete\n", later.stdout), later.stdout
        follow = subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", "logs", "pre", "-n", namespace, "--rank",
                                 "1", "--follow", "--poll", POLL], env=cli_env(env), capture_output=True,
                                text=True, timeout=WAIT)
        assert (follow.returncode, follow.stderr) == (0, ""), running.text()
        names = [p["metadata"]["name"] for p in pods(env, "pre-node-0")]
        first, second = [n for n in names if n.startswith("pre-node-0-1-")]
        # Each pod's whole log, as the agent wrote it, the successor's after the line that says it replaces the other.
        assert follow.stdout.splitlines() == [*written(running, first),
                                              f"--- pod {second} replaces the previous pod of rank pre-node-0-1",
                                              *written(running, second)], follow.stdout
        assert "E2E-STEP 2 " in follow.stdout.split("\n---")[0]
        assert re.search(r"^E2E-START rank \d of 2 on pod 1, from step [1-9]", follow.stdout.split("\n---")[1], re.M)
        done = trainjobs(env, "wait", "pre", "-n", namespace, "--poll", POLL)
        assert (done.returncode, done.stdout) == (0, "pre: succeeded (complete reached)\n")
        # torchrun exits 1 on the SIGTERM of the preemption; the agent reports its own code, as a kubelet would.
        status = trainjobs(env, "status", "pre", "-n", namespace, "--log-lines", "1")
        assert table(status.stdout) == table(
            f"pre (namespace {namespace}): succeeded\n"
            "  role node, Job pre-node-0: Complete (CompletionsReached: Reached expected number of succeeded pods)\n"
            "    pods: 1 Failed, 2 Succeeded; backoff: 0 failed pods of backoffLimit 0\n"
            "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n"
            "    pre-node-0-0  pre-node-0-0-<id>  Succeeded  0  <age>  <node>  0  Completed\n"
            "    pre-node-0-1  pre-node-0-1-<id>  Failed  0  <age>  <node>  1  preempted (TerminationByKubelet)\n"
            "    pre-node-0-1  pre-node-0-1-<id>  Succeeded  0  <age>  <node>  0  Completed\n"
            f"  replaced after preemption: pre-node-0-1 (pod {first} by pod {second}, role node): exit code 1, "
            f"preempted (TerminationByKubelet) ({PREEMPTED})\n"), running.text()
        data = json.loads(trainjobs(env, "status", "pre", "-n", namespace, "-o", "json", "--log-lines",
                                    "1").stdout)["jobs"][0]
        assert (data["state"], data["roles"][0]["failed"], data["roles"][0]["phases"]) == (
            "succeeded", 0, {"Failed": 1, "Succeeded": 2})
        assert [(p["name"], p["phase"], p["exit_code"], p["reason"], p["message"], p["replaced_by"])
                for p in data["roles"][0]["pods"]] == [
            (names[0], "Succeeded", 0, "Completed", "", ""),
            (first, "Failed", 1, "preempted (TerminationByKubelet)", PREEMPTED, second),
            (second, "Succeeded", 0, "Completed", "", "")]
        assert data["first_failure"] is None
    finally:
        project.destroy()
