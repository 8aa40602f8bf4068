"""The local control plane's fake pods (kwok, scripts/engine/cluster.sh): a Job's pods succeed, fail with the exit code
a test asks for, and a running pod of a deleted namespace goes away as a kubelet would let it."""

import json
import subprocess
import uuid

import pytest

TIMEOUT = 300


def kubectl(env, *args, stdin=None) -> str:
    done = subprocess.run(["kubectl", *args], input=stdin, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
def namespace(cluster_env):
    name = f"kwok-{uuid.uuid4().hex[:8]}"
    kubectl(cluster_env, "create", "namespace", name)
    yield name
    kubectl(cluster_env, "delete", "namespace", name, "--wait", f"--timeout={TIMEOUT}s", "--ignore-not-found")


def job(name: str, labels: dict, annotations: dict) -> str:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "completions": 2, "parallelism": 2, "completionMode": "Indexed",
                 "template": {"metadata": {"labels": labels, "annotations": annotations},
                              "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "x"}]}}}})


def test_a_jobs_pods_succeed(cluster_env, namespace):
    kubectl(cluster_env, "apply", "-n", namespace, "-f", "-", stdin=job("ok", {}, {}))
    kubectl(cluster_env, "wait", "-n", namespace, "--for=condition=Complete", f"--timeout={TIMEOUT}s", "job/ok")
    pods = json.loads(kubectl(cluster_env, "get", "pods", "-n", namespace, "-o", "json"))["items"]
    assert sorted((p["status"]["phase"], p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])
                  for p in pods) == [("Succeeded", 0), ("Succeeded", 0)]


def test_a_pod_fails_with_the_exit_code_its_annotation_asks(cluster_env, namespace):
    failing = job("bad", {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"},
                  {"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "3",
                   "pod-complete.stage.kwok.x-k8s.io/weight": "0"})
    kubectl(cluster_env, "apply", "-n", namespace, "-f", "-", stdin=failing)
    kubectl(cluster_env, "wait", "-n", namespace, "--for=condition=Failed", f"--timeout={TIMEOUT}s", "job/bad")
    pods = json.loads(kubectl(cluster_env, "get", "pods", "-n", namespace, "-o", "json"))["items"]
    assert {(p["status"]["phase"], p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])
            for p in pods} == {("Failed", 3)}


def test_the_running_pods_of_a_deleted_namespace_go_away(cluster_env, namespace):
    """Pods that never complete (pod-complete's weight 0) hold the Job's tracking finalizer until they stop."""
    kubectl(cluster_env, "apply", "-n", namespace, "-f", "-",
            stdin=job("forever", {}, {"pod-complete.stage.kwok.x-k8s.io/weight": "0"}))
    kubectl(cluster_env, "wait", "-n", namespace, "--for=jsonpath={.status.ready}=2", f"--timeout={TIMEOUT}s",
            "job/forever")
    kubectl(cluster_env, "delete", "namespace", namespace, "--wait", f"--timeout={TIMEOUT}s")
    assert namespace not in kubectl(cluster_env, "get", "namespaces", "-o", "name")
