"""The local control plane's fake pods (kwok, scripts/engine/cluster.sh): a Job's pods succeed, fail with the exit code
a test asks for."""

import json
import subprocess
import time
import uuid

import pytest

TIMEOUT = 300


def until(check, what: str, timeout: float = TIMEOUT):
    """Polls check() until it returns something true, which it returns; fails after `timeout` s with what it waited
    for."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"after {timeout} s: {what}"
        time.sleep(0.5)
    return value


def kubectl(env, *args, stdin=None) -> str:
    done = subprocess.run(["kubectl", *args], input=stdin, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT + 60)  # past kubectl's own --timeout, which reports what it waited for
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
def namespace(cluster_env):
    name = f"kwok-{uuid.uuid4().hex[:8]}"
    kubectl(cluster_env, "create", "namespace", name)
    yield name
    kubectl(cluster_env, "delete", "namespace", name, "--wait", f"--timeout={TIMEOUT}s", "--ignore-not-found")


def job(name: str, labels: dict, annotations: dict, pods: int = 2) -> str:
    """An Indexed Job of `pods` pods with a pod failure policy, as the library renders them."""
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "completions": pods, "parallelism": pods, "completionMode": "Indexed",
                 "podFailurePolicy": {"rules": [{"action": "Ignore",
                                                 "onPodConditions": [{"type": "DisruptionTarget"}]}]},
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
                  {"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "3"}, pods=1)
    # One pod: with two, the Job's failure deletes the other, which may still run (then it stops with 137).
    kubectl(cluster_env, "apply", "-n", namespace, "-f", "-", stdin=failing)
    kubectl(cluster_env, "wait", "-n", namespace, "--for=condition=Failed", f"--timeout={TIMEOUT}s", "job/bad")
    pods = json.loads(kubectl(cluster_env, "get", "pods", "-n", namespace, "-o", "json"))["items"]
    assert {(p["status"]["phase"], p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])
            for p in pods} == {("Failed", 3)}


def test_a_running_pod_that_is_deleted_stops_as_a_kubelet_would_stop_it(cluster_env, namespace):
    """kwok's pod-terminate stage (scripts/engine/kwok-pod-terminate.yaml): the pod turns Failed, so that a Job's
    controller, which holds its pods by a finalizer until they stop, lets it go (here a finalizer of the test's)."""
    pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "finalizers": ["test/hold"]},
                      "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "x"}]}})
    kubectl(cluster_env, "apply", "-n", namespace, "-f", "-", stdin=pod)
    kubectl(cluster_env, "wait", "-n", namespace, "--for=jsonpath={.status.phase}=Running", f"--timeout={TIMEOUT}s",
            "pod/held")
    kubectl(cluster_env, "delete", "-n", namespace, "pod/held", "--wait=false")
    kubectl(cluster_env, "wait", "-n", namespace, "--for=jsonpath={.status.phase}=Failed", f"--timeout={TIMEOUT}s",
            "pod/held")
    state = json.loads(kubectl(cluster_env, "get", "-n", namespace, "pod/held", "-o", "json"))
    assert state["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    kubectl(cluster_env, "patch", "-n", namespace, "pod/held", "--type=json",
            "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
