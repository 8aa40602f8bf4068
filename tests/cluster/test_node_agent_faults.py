"""The faults of the e2e programs that need JobSet's and Kueue's real controllers, on the cluster of `make
cluster-controllers`, each pod run by `trainjobs node-agent` with its real program: a JobSet group restarted exactly
twice, and an elastic job admitted in part by Kueue and grown. Each end is compared with what `trainjobs run-local`'s
emulation of the controllers says of the same program and stack."""

import json
import subprocess
import threading
import time
from typing import Any

import pytest

from test_node_agent import (WAIT, agent, deploy, emulated, kubectl, reports, runnable)  # noqa: F401 (fixtures)
from pulumi_cli import REPO, kubectl_json

RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"


@pytest.fixture(autouse=True)
def controllers(cluster_env) -> None:
    running = set(cluster_env.get("TRAINJOBS_CLUSTER_CONTROLLERS", "").split(","))
    if not {"jobset", "kueue"} <= running:
        pytest.skip("the cluster runs neither JobSet's nor Kueue's controller: start it with `make cluster-controllers`")


class PodWatch:
    """Every pod of `selector` the API server shows while the test runs, by uid, as last seen (a watch: the pods the
    controllers delete are seen too)."""

    def __init__(self, env: dict[str, str], selector: str):
        self.pods: dict[str, dict[str, Any]] = {}
        self.process = subprocess.Popen(["kubectl", "get", "pods", "-l", selector, "--watch", "-o", "json"],
                                        cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.process.stdout:
            buffer += line
            try:
                pod, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.lstrip()[end:]
            self.pods[pod["metadata"]["uid"]] = pod

    def stop(self) -> list[dict[str, Any]]:
        """The pods seen, oldest first."""
        self.process.terminate()
        self.process.wait(timeout=60)
        self.reader.join(timeout=60)
        return sorted(self.pods.values(), key=lambda p: (p["metadata"]["creationTimestamp"], p["spec"]["hostname"]))


def jobset_finished(env: dict[str, str], name: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT
    while True:
        found = kubectl_json(env, "get", "jobset", name)
        done = {c["type"] for c in found.get("status", {}).get("conditions", []) if c["status"] == "True"}
        if done & {"Completed", "Failed"}:
            return found
        assert time.monotonic() < deadline, f"JobSet {name} did not finish: {found.get('status')}"
        time.sleep(1)


def exit_code(pod: dict[str, Any]) -> int | None:
    (main,) = pod["status"].get("containerStatuses") or [{}]
    return (main.get("state", {}).get("terminated") or {}).get("exitCode")


def test_a_jobset_group_restarted_twice_completes_under_the_jobset_controller(tmp_path, cluster_env, agent):
    """failurePolicy maxRestarts 2; pod index 1 fails its first two attempts (counted on the claim), each failure
    fails its Job and the JobSet controller restarts the whole group; the third attempt trains to the end."""
    running = agent()
    watch = PodWatch(cluster_env, "jobset.sigs.k8s.io/jobset-name=grp")
    project = deploy(tmp_path, cluster_env, "resilience", "group", fail_attempts="2")
    try:
        jobset = jobset_finished(cluster_env, "grp")
        completed = next((c for c in jobset["status"]["conditions"] if c["type"] == "Completed"), None)
        assert completed and completed["status"] == "True", (jobset["status"], running.text())
        assert jobset["status"]["restarts"] == 2
        final = kubectl_json(cluster_env, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=grp")["items"]
        done = sorted((r for p in final for r in reports(cluster_env, p, "E2E-DONE")), key=lambda r: r["pod_index"])
        assert [r["weight"] for r in done] == [36.0, 36.0], running.text()   # 12 steps x (1 + 2), none lost or twice
        assert {r["resumed_from"] for r in done} == {4}                        # 2 steps in each failed attempt
    finally:
        project.destroy()
        seen = watch.stop()
    # Three attempts of the group, each its own pods: index 1 fails (torchrun exits 1) twice, and its Job with it;
    # index 0 of that attempt fails too (its peer lost, or stopped as the Job fails: which is first is a race).
    ran = sorted((p["metadata"]["labels"][RESTART_ATTEMPT], p["spec"]["hostname"], p["status"]["phase"]) for p in seen)
    assert ran == [("0", "grp-node-0-0", "Failed"), ("0", "grp-node-0-1", "Failed"),
                   ("1", "grp-node-0-0", "Failed"), ("1", "grp-node-0-1", "Failed"),
                   ("2", "grp-node-0-0", "Succeeded"), ("2", "grp-node-0-1", "Succeeded")], running.text()
    assert [exit_code(p) for p in seen if p["spec"]["hostname"] == "grp-node-0-1"] == [1, 1, 0]

    local = emulated(tmp_path, "resilience", "group", "--config", "fail_attempts=2")
    assert [(s["state"], s["restarts"]) for s in local["jobsets"]] == [("Completed", 2)], local["output"]
    assert [(p["hostname"], p["phase"]) for p in local["pods"]] == [
        ("grp-node-0-0", "Stopped"), ("grp-node-0-1", "Failed")] * 2 + [
        ("grp-node-0-0", "Succeeded"), ("grp-node-0-1", "Succeeded")], local["output"]

