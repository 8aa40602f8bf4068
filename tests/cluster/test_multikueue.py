"""MultiKueue on two control planes: this cluster, the manager (the JobSet and Kueue controllers of `make
cluster-controllers`), and a worker cluster that the test starts beside it (`scripts/engine/cluster.sh worker up`: an
API server, JobSet and Kueue controllers and kwok Nodes of its own, and on the manager the ClusterQueue
team-llm-multikueue with MultiKueue's admission check) and always stops.

A JobSet the project renders with `multikueue: true`, created through `pulumi up` on the manager, is admitted there,
copied by Kueue to the worker and run there by its JobSet controller (kwok completes its pods); its status comes back
to the manager's JobSet, whose own JobSet controller leaves it alone (no Job, no pod on the manager). Kueue deletes
the worker's copy once the job has finished, so the worker's JobSets and pods are watched from before `pulumi up`."""

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO, read_env
from pulumi_cli import Project
from test_kueue_controller import QUEUE, TIMEOUT, condition, controllers, get, kubectl, until

MANAGER_QUEUE = "team-llm-multikueue"   # cluster.sh's multikueue_fixtures: the ClusterQueue with the admission check
WORKER_QUEUE = "team-llm"              # the worker's kueue_fixtures
JOB = "dispatched"
GPUS = {"limits": {"nvidia.com/gpu": 4, "cpu": "8", "memory": "32Gi"}}
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def cluster_sh(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([str(REPO / "scripts/engine/cluster.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"cluster.sh {' '.join(args)} exited {done.returncode}:\n{done.stderr}"


@pytest.fixture(scope="module")
def worker(cluster_env) -> Iterator[dict[str, str]]:
    """The worker cluster's environment (its KUBECONFIG), MultiKueue on the manager dispatching to it."""
    if not {"jobset", "kueue"} <= controllers(cluster_env):
        pytest.skip("the cluster runs no JobSet and Kueue controllers: start it with `make cluster-controllers`")
    try:
        cluster_sh(cluster_env, "worker", "up")
        yield read_env(Path(cluster_env["TRAINJOBS_CLUSTER_DIR"]) / "worker" / "env")
    finally:
        cluster_sh(cluster_env, "worker", "down")


@pytest.fixture
def namespace(cluster_env, worker) -> Iterator[str]:
    """A namespace of the same name on both clusters, each with a LocalQueue team-llm: on the manager drawing from
    the MultiKueue ClusterQueue, on the worker from its own ClusterQueue team-llm."""
    name = f"mk-{uuid.uuid4().hex[:8]}"
    try:
        for env, cluster_queue in ((cluster_env, MANAGER_QUEUE), (worker, WORKER_QUEUE)):
            kubectl(env, "create", "namespace", name)
            kubectl(env, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": QUEUE, "namespace": name}, "spec": {"clusterQueue": cluster_queue}}))
        yield name
    finally:
        for env in (cluster_env, worker):
            kubectl(env, "delete", "namespace", name, "--wait", f"--timeout={TIMEOUT}s", "--ignore-not-found")


class Watch:
    """`kubectl get --watch` of a kind in a namespace, from before anything of it exists: every version seen."""

    def __init__(self, env: dict[str, str], kind: str, namespace: str, path: Path):
        self.path = path
        with path.open("w") as out:
            self.process = subprocess.Popen(["kubectl", "get", kind, "-n", namespace, "--watch",
                                             "--output-watch-events", "-o", "json"], env=env, stdout=out,
                                            stderr=subprocess.DEVNULL)

    def objects(self) -> list[dict]:
        """The objects of the events so far, in order (a partly written last event is left for later)."""
        text, found, decoder, at = self.path.read_text(), [], json.JSONDecoder(), 0
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            try:
                event, at = decoder.raw_decode(text, at)
            except json.JSONDecodeError:
                return found
            found.append(event["object"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def trainjobs_status(env: dict[str, str], namespace: str) -> str:
    done = subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", "status", "-n", namespace, JOB], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_multikueue_jobset_is_dispatched_to_the_worker_run_there_and_its_status_seen_on_the_manager(
        tmp_path, cluster_env, worker, namespace):
    project = Project.create(tmp_path, cluster_env, "multikueue", "trainjobs-examples",
                             {"stacks/__main__.py": REPO / "stacks" / "__main__.py"}, main="stacks/")
    project.set_config({"trainjobs-examples:jobs": [
        {"kind": "TorchTrainJob", "name": JOB, "namespace": namespace, "image": "pytorch/pytorch:2.13.0",
         "num_nodes": 2, "command": ["torchrun", "-m", "train"], "backend": "jobset", "multikueue": True,
         "queue": QUEUE, "resources_per_node": GPUS}]})
    jobsets = Watch(worker, "jobsets.jobset.x-k8s.io", namespace, tmp_path / "worker-jobsets.json")
    pods = Watch(worker, "pods", namespace, tmp_path / "worker-pods.json")
    try:
        project.up()
        # On the manager: admitted through MultiKueue's check, the JobSet's status Completed, copied from the worker.
        managed = until(lambda: (lambda s: s if s.get("status", {}).get("terminalState") else None)(
            get(cluster_env, "jobset", JOB, "-n", namespace)), f"the manager's JobSet {JOB} ended")
        (workload,) = get(cluster_env, "workloads.kueue.x-k8s.io", "-n", namespace)["items"]

        # On the worker: a JobSet of the same name, Kueue's copy for the JobSet controller there, which ran it.
        seen = until(lambda: (lambda o: o if o and o[-1].get("status", {}).get("terminalState") else None)(
            [o for o in jobsets.objects() if o["metadata"]["name"] == JOB]), f"the worker's JobSet {JOB} ended")
        ran = until(lambda: (lambda done: done if len(done) == 2 else None)(
            {p["metadata"]["name"]: p for p in pods.objects() if p["status"].get("phase") == "Succeeded"}),
            f"2 pods of {JOB} Succeeded on the worker")

        assert managed["spec"]["managedBy"] == MULTIKUEUE
        assert managed["status"]["terminalState"] == "Completed"
        assert {k: condition(managed, "Completed").get(k) for k in ("status", "reason")} == {
            "status": "True", "reason": "AllJobsCompleted"}
        assert managed["status"]["replicatedJobsStatus"] == [
            {"name": "node", "active": 0, "failed": 0, "ready": 0, "succeeded": 1, "suspended": 0}]
        assert workload["spec"]["queueName"] == QUEUE
        assert workload["status"]["admission"]["clusterQueue"] == MANAGER_QUEUE
        assert workload["status"]["clusterName"] == "worker"
        assert [(c["name"], c["state"]) for c in workload["status"]["admissionChecks"]] == [("worker", "Ready")]
        assert condition(workload, "Finished")["reason"] == "Succeeded"
        assert get(cluster_env, "jobs", "-n", namespace)["items"] == []
        assert get(cluster_env, "pods", "-n", namespace)["items"] == []

        copy = seen[0]
        assert "managedBy" not in copy["spec"]   # Kueue clears it, so the worker's JobSet controller runs it
        assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == workload["metadata"]["name"]
        assert seen[-1]["status"]["terminalState"] == "Completed"
        assert sorted((p["spec"]["hostname"], p["spec"]["subdomain"]) for p in ran.values()) == [
            (f"{JOB}-node-0-0", JOB), (f"{JOB}-node-0-1", JOB)]
        assert all(p["spec"]["nodeName"].startswith("kwok-node-") for p in ran.values())

        assert trainjobs_status(cluster_env, namespace) == (
            f"{JOB} (namespace {namespace}): succeeded\n"
            f"  admission: Workload {workload['metadata']['name']} in queue {MANAGER_QUEUE}: finished (Succeeded: jobset "
            "completed successfully)\n"
            "  dispatched by MultiKueue to the worker cluster worker: its Jobs and pods run there\n"
            f"  JobSet {JOB}: Completed (AllJobsCompleted: jobset completed successfully); restarts: 0 of maxRestarts 0\n")
    finally:
        jobsets.stop()
        pods.stop()
        project.pulumi("destroy", "--yes", "--skip-preview", check=False)
