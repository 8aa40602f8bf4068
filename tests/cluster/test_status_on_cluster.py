"""`trainjobs status`, `wait` and `logs` against the local control plane of `make test-cluster` (kwok's pods): jobs
rendered by the library, applied with kubectl, driven through each state by the cluster's controllers; each state's
text asserted whole, and its JSON.

Kueue's controller and webhooks (v0.17) hold a job for quota and admit it; the JobSet controller (v0.12) restarts a
JobSet; kube-scheduler binds the pods, those of schedulerName volcano too. No Volcano controller runs (it is not
built here), so the test sets a PodGroup's phase as Volcano would. kwok plays the kubelet: a pod annotated with a
long `pod-ready` delay stays Pending on its node, one with a long `pod-complete` delay stays Running, and either goes
on when its delay is made 0s; a pod labelled for kwok's `pod-container-running-failed` stage fails with the exit code
and reason of its annotations.
"""

import json
import re
import subprocess
import sys
import time
import uuid

import pytest

from test_cluster import TIMEOUT, kubectl, until
from trainjobs import TorchTrainJob
from trainjobs.backends.jobset import RESTART_ATTEMPT
from trainjobs.testing import run
from trainjobs.tools.cli.render import kubernetes_objects

STAY_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}
STAY_PENDING = {"pod-ready.stage.kwok.x-k8s.io/delay": "1h", "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "1h"}
GPU = "nvidia.com/gpu"
FAIL = "pod-container-running-failed.stage.kwok.x-k8s.io"


@pytest.fixture
def namespace(cluster_env):
    name = f"status-{uuid.uuid4().hex[:8]}"
    kubectl(cluster_env, "create", "namespace", name)
    yield name
    kubectl(cluster_env, "delete", "namespace", name, "--wait", f"--timeout={TIMEOUT}s", "--ignore-not-found")


def trainjobs(env, *args, check=None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", *args], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    if check is not None:
        assert done.returncode == check, done.stdout + done.stderr
    return done


def apply_job(env, namespace: str, name: str, args: dict, pod_annotations: dict = STAY_RUNNING,
              suspend: bool = False) -> dict:
    """The Job the library renders for a TorchTrainJob, applied; its pods annotated for kwok."""
    objects = kubernetes_objects(run(lambda: TorchTrainJob(name, {"image": "x:1", "command": ["train"],
                                                                 "namespace": namespace, **args})))
    job = next(o for o in objects if o["kind"] == "Job")
    job["spec"]["template"]["metadata"].setdefault("annotations", {}).update(pod_annotations)
    if suspend:
        job["spec"]["suspend"] = True
    kubectl(env, "apply", "-f", "-", stdin=json.dumps(job))
    return json.loads(kubectl(env, "get", "-n", namespace, "job", job["metadata"]["name"], "-o", "json"))


def controllers(env) -> set[str]:
    return set(env.get("TRAINJOBS_CLUSTER_CONTROLLERS", "").split(","))


def get(env, *args) -> dict:
    return json.loads(kubectl(env, "get", *args, "-o", "json"))


def go_on(env, namespace: str, pods: list[dict], stage: str) -> None:
    """Ends kwok's long delay of a stage (pod-ready, pod-complete) for these pods: kwok moves them on at once."""
    kubectl(env, "annotate", "-n", namespace, "--overwrite", *(f"pod/{p['metadata']['name']}" for p in pods),
            f"{stage}.stage.kwok.x-k8s.io/delay=0s", f"{stage}.stage.kwok.x-k8s.io/jitter-delay=0s")


def pods(env, namespace: str, phase: str, count: int, exactly: bool = False) -> list[dict]:
    """The namespace's pods once `count` of them are in `phase` (and, `exactly`, no other pod is left)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = json.loads(kubectl(env, "get", "pods", "-n", namespace, "-o", "json"))["items"]
        if sum(p["status"].get("phase") == phase for p in found) >= count and (not exactly or len(found) == count):
            return sorted(found, key=lambda p: p["spec"]["hostname"])
        time.sleep(0.5)
    raise AssertionError(f"{count} pods never reached {phase}")


def normalised(text: str) -> str:
    """The output with what differs from run to run replaced: pods' generated suffixes, ages, and spacing that
    follows their widths."""
    text = re.sub(r"(-\d+)-[b-df-hj-np-tv-z2-9]{5}\b", r"\1-<id>", text)
    text = re.sub(r"  +\d+[smhd]  +", "  <age>  ", text)
    return re.sub(r" {2,}", "  ", text)


@pytest.fixture
def cluster_queue(cluster_env, namespace):
    """A ClusterQueue and a ResourceFlavor of the test's own (named after its namespace: another test may change
    the cluster's), the queue of 4 GPUs, and its LocalQueue `team` in the namespace. The flavor's pods go to the
    kwok Node of the pool status-tests (cluster.sh test_pool_nodes), where no other pod goes: held there, they take
    no GPU that Kueue's placement of another test's jobs counts."""
    if "kueue" not in controllers(cluster_env):
        pytest.skip("the cluster runs no Kueue controller: start it with `make cluster-controllers`")
    pool = {"key": "trainjobs.dev/pool", "value": "status-tests", "effect": "NoSchedule"}
    flavor = {"nodeLabels": {pool["key"]: pool["value"]}, "nodeTaints": [pool],
              "tolerations": [{**pool, "operator": "Equal"}]}
    queues = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": namespace},
               "spec": flavor},
              {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": namespace},
               "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [
                            {"name": namespace, "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                                           {"name": "memory", "nominalQuota": "100Ti"},
                                                           {"name": GPU, "nominalQuota": "4"}]}]}]}},
              {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "team", "namespace": namespace}, "spec": {"clusterQueue": namespace}}]
    kubectl(cluster_env, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": queues}))
    yield namespace
    # The namespace first: Kueue holds a ClusterQueue that still has Workloads, and a flavor a queue still names.
    for kind, name in (("namespace", namespace), ("clusterqueue", namespace), ("resourceflavor", namespace)):
        kubectl(cluster_env, "delete", kind, name, "--wait", f"--timeout={TIMEOUT}s", "--ignore-not-found")


def workload_of(env, namespace: str, job: str, ready) -> dict:
    """The Workload Kueue made for a Job, once ready(workload) holds."""
    def found():
        for workload in get(env, "workloads.kueue.x-k8s.io", "-n", namespace)["items"]:
            if any(o["name"] == job for o in workload["metadata"].get("ownerReferences") or []) and ready(workload):
                return workload
        return None
    return until(found, f"the Workload of Job {job}")


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def said(found: dict) -> str:
    """A condition as `status` says it: its reason and message."""
    return f"{found['reason']}: {found['message']}"


def test_a_job_waits_for_quota_then_is_admitted_and_runs(cluster_env, namespace, cluster_queue):
    """Two pods of 4 GPUs against a ClusterQueue of 4: Kueue's webhook suspends the Job and its controller leaves the
    Workload pending with its reason; with the quota raised to 8 it admits it and resumes the Job."""
    apply_job(cluster_env, namespace, "q", {"num_nodes": 2, "gang_scheduler": "kueue", "queue": "team",
                                            "resources_per_node": {"limits": {GPU: 4, "cpu": "8", "memory": "32Gi"}}},
              pod_annotations={**STAY_PENDING, **STAY_RUNNING})
    workload = workload_of(cluster_env, namespace, "q-node-0",
                           lambda w: condition(w, "QuotaReserved").get("reason") == "Pending")
    name, pending = workload["metadata"]["name"], condition(workload, "QuotaReserved")["message"]
    assert pending == (f"couldn't assign flavors to pod set main: insufficient quota for {GPU} in flavor {namespace}, "
                       "previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)")
    until(lambda: condition(get(cluster_env, "job", "q-node-0", "-n", namespace), "Suspended").get("status") == "True",
          "the Job's Suspended condition")

    queued = trainjobs(cluster_env, "status", "-n", namespace, "q", check=0)
    assert queued.stdout == (
        f"q (namespace {namespace}): queued\n"
        f"  admission: Workload {name} in queue team: queued (Pending: {pending})\n"
        "  role node, Job q-node-0: Suspended (JobSuspended: Job suspended)\n"
        "    pods: none yet; backoff: 0 failed pods of backoffLimit 0\n")
    data = json.loads(trainjobs(cluster_env, "status", "-n", namespace, "q", "-o", "json", check=0).stdout)
    assert data["jobs"][0]["state"] == "queued"
    assert data["jobs"][0]["admission"] == [{"kind": "Workload", "name": name, "state": "queued", "reason": "Pending",
                                             "message": pending, "queue": "team", "requeues": 0, "cluster": ""}]
    not_yet = trainjobs(cluster_env, "wait", "-n", namespace, "q", "--for", "admitted", "--timeout", "1", "--poll", "0.5")
    assert (not_yet.returncode, not_yet.stdout) == (124, "q: still queued after 1s, not admitted\n")

    # kwok holds the admitted Job's pods Pending (pod-ready): the job is admitted and not yet running.
    waiting = subprocess.Popen([sys.executable, "-m", "trainjobs.tools.cli", "wait", "-n", namespace, "q", "--for",
                                "admitted", "--poll", "1"], env=cluster_env, stdout=subprocess.PIPE, text=True)
    try:
        patch = [{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", "value": "8"}]
        kubectl(cluster_env, "patch", "clusterqueue", cluster_queue, "--type=json", "-p", json.dumps(patch))
        out, _ = waiting.communicate(timeout=TIMEOUT)
    finally:
        waiting.kill()
    assert (waiting.returncode, out) == (0, "q: admitted (admitted reached)\n")
    admitted = condition(workload_of(cluster_env, namespace, "q-node-0",
                                     lambda w: condition(w, "Admitted").get("status") == "True"), "Admitted")
    bound = until(lambda: (lambda found: found if len(found) == 2 and all(p["spec"].get("nodeName") for p in found)
                           else None)(get(cluster_env, "pods", "-n", namespace)["items"]), "2 pods bound to nodes")
    text = trainjobs(cluster_env, "status", "-n", namespace, "q", check=0).stdout
    assert normalised(text) == normalised(
        f"q (namespace {namespace}): admitted\n"
        f"  admission: Workload {name} in queue {cluster_queue}: admitted ({said(admitted)})\n"
        "  role node, Job q-node-0: Pending\n"
        "    pods: 2 Pending; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("q-node-0-0", "Pending", "-", "-"), ("q-node-0-1", "Pending", "-", "-")])
    assert admitted["reason"] == "Admitted"

    go_on(cluster_env, namespace, bound, "pod-ready")
    running = pods(cluster_env, namespace, "Running", 2)
    assert trainjobs(cluster_env, "wait", "-n", namespace, "q", "--for", "running", check=0).stdout == \
        "q: running (running reached)\n"
    text = trainjobs(cluster_env, "status", "-n", namespace, "q", check=0).stdout
    assert normalised(text) == normalised(
        f"q (namespace {namespace}): running\n"
        f"  admission: Workload {name} in queue {cluster_queue}: admitted ({said(admitted)})\n"
        "  role node, Job q-node-0: Running\n"
        "    pods: 2 Running; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("q-node-0-0", "Running", "-", "-"), ("q-node-0-1", "Running", "-", "-")])

    go_on(cluster_env, namespace, running, "pod-complete")
    done = trainjobs(cluster_env, "wait", "-n", namespace, "q", "--poll", "0.5")
    assert (done.returncode, done.stdout) == (0, "q: succeeded (complete reached)\n")
    finished = condition(workload_of(cluster_env, namespace, "q-node-0",
                                     lambda w: condition(w, "Finished").get("status") == "True"), "Finished")
    text = trainjobs(cluster_env, "status", "-n", namespace, "q", check=0).stdout
    assert normalised(text) == normalised(
        f"q (namespace {namespace}): succeeded\n"
        f"  admission: Workload {name} in queue {cluster_queue}: finished ({said(finished)})\n"
        "  role node, Job q-node-0: Complete (CompletionsReached: Reached expected number of succeeded pods)\n"
        "    pods: 2 Succeeded; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("q-node-0-0", "Succeeded", "0", "Completed"), ("q-node-0-1", "Succeeded", "0", "Completed")])


def _pod_rows(output: str, expected: list[tuple[str, str, str, str]]) -> str:
    """The rows the table must hold, with the node each pod really got (the scheduler picks it)."""
    nodes = dict(re.findall(r"^    (\S+-\d+)  +\S+  +\S+  +\d+  +\S+  +(kwok-\S+-\d+)", output, re.M))
    return "".join(normalised(f"    {rank}  {rank}-<id>  {phase}  0  <age>  {nodes.get(rank, '?')}  {code}  {reason}\n")
                   for rank, phase, code, reason in expected)


def test_a_job_that_succeeds(cluster_env, namespace):
    apply_job(cluster_env, namespace, "ok", {}, pod_annotations={})
    done = trainjobs(cluster_env, "wait", "-n", namespace, "ok", "--for", "complete", "--poll", "0.5", check=0)
    assert done.stdout == "ok: succeeded (complete reached)\n"
    text = trainjobs(cluster_env, "status", "-n", namespace, check=0).stdout
    assert normalised(text) == normalised(
        f"ok (namespace {namespace}): succeeded\n"
        "  role node, Job ok-node-0: Complete (CompletionsReached: Reached expected number of succeeded pods)\n"
        "    pods: 1 Succeeded; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("ok-node-0-0", "Succeeded", "0", "Completed")])
    failed_wait = trainjobs(cluster_env, "wait", "-n", namespace, "ok", "--for", "failed")
    assert (failed_wait.returncode, failed_wait.stdout) == (3, "ok: succeeded, not failed\n")


def _fail_rank(env, namespace: str, pod: dict, code: int, reason: str) -> None:
    name = pod["metadata"]["name"]
    kubectl(env, "annotate", "-n", namespace, "pod", name, f"{FAIL}/exit-code={code}", f"{FAIL}/reason={reason}",
            f"{FAIL}/message=the container stopped with {code}")
    kubectl(env, "label", "-n", namespace, "pod", name, f"{FAIL}=true")


def test_the_rank_that_failed_first_and_why(cluster_env, namespace):
    apply_job(cluster_env, namespace, "bad", {"num_nodes": 2, "failure_policy": {"fatal_exit_codes": [3]}})
    running = pods(cluster_env, namespace, "Running", 2)
    _fail_rank(cluster_env, namespace, running[1], 3, "Error")
    waited = trainjobs(cluster_env, "wait", "-n", namespace, "bad", "--poll", "0.5")
    assert (waited.returncode, normalised(waited.stdout)) == (
        1, "bad: failed, not complete: rank bad-node-0-1 exited 3 (Error: fatal exit code)\n")
    # The Job controller then stops rank 0 (kwok turns it Failed with 137, as a kubelet would: the Job counts it) and
    # deletes it.
    pods(cluster_env, namespace, "Failed", 1, exactly=True)
    text = trainjobs(cluster_env, "status", "-n", namespace, "bad", "--log-lines", "5", check=0).stdout
    pod = running[1]["metadata"]["name"]
    assert normalised(text) == normalised(
        f"bad (namespace {namespace}): failed\n"
        f"  role node, Job bad-node-0: Failed (PodFailurePolicy: Container node for pod {namespace}/{pod} failed with "
        "exit code 3 matching FailJob rule at index 1)\n"
        "    pods: 1 Failed; backoff: 2 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("bad-node-0-1", "Failed", "3", "Error: fatal exit code")]) + normalised(
        f"  first failed rank: bad-node-0-1 (pod {pod}, role node): exit code 3, Error: fatal exit code "
        "(the container stopped with 3)\n"
        f"    | (no log: pod {pod}: Get \"https://127.0.0.1:10250/containerLogs/{namespace}/{pod}/node?"
        "tailLines=5\": dial tcp 127.0.0.1:10250: connect: connection refused)\n")
    # kwok's nodes serve no logs: `logs` says which pod's log the API server could not get, and why.
    logs = trainjobs(cluster_env, "logs", "-n", namespace, "bad", "--rank", "1")
    assert (logs.returncode, logs.stdout, logs.stderr) == (
        2, "", f'error: pod {pod}: Get "https://127.0.0.1:10250/containerLogs/{namespace}/{pod}/node": dial tcp '
               "127.0.0.1:10250: connect: connection refused\n")
    first = json.loads(trainjobs(cluster_env, "status", "-n", namespace, "bad", "-o", "json", "--log-lines", "0",
                                 check=0).stdout)["jobs"][0]["first_failure"]
    assert first == {"pod": pod, "rank": "bad-node-0-1", "role": "node", "exit_code": 3,
                     "reason": "Error: fatal exit code", "message": "the container stopped with 3", "log_tail": []}


def test_an_oom_killed_rank(cluster_env, namespace):
    apply_job(cluster_env, namespace, "oom", {"num_nodes": 1})
    running = pods(cluster_env, namespace, "Running", 1)
    _fail_rank(cluster_env, namespace, running[0], 137, "OOMKilled")
    waited = trainjobs(cluster_env, "wait", "-n", namespace, "oom", "--poll", "0.5")
    assert (waited.returncode, waited.stdout) == (1, "oom: failed, not complete: rank oom-node-0-0 exited 137 (OOMKilled)\n")


def test_an_elastic_jobs_size_against_its_range(cluster_env, namespace):
    apply_job(cluster_env, namespace, "el", {"num_nodes": 4, "min_nodes": 2, "rendezvous": "c10d"})
    pods(cluster_env, namespace, "Running", 4)
    assert "    pods: 4 Running; backoff: 0 failed pods of backoffLimit 0; elastic: 4 pods of 2..4\n" in \
        trainjobs(cluster_env, "status", "-n", namespace, check=0).stdout
    kubectl(cluster_env, "patch", "-n", namespace, "job", "el-node-0", "--type=merge", "-p", '{"spec": {"parallelism": 3}}')
    role = json.loads(trainjobs(cluster_env, "status", "-n", namespace, "-o", "json", check=0).stdout)["jobs"][0]["roles"][0]
    assert (role["size"], role["min_size"], role["max_size"]) == (3, 2, 4)


def test_errors_name_what_to_do(cluster_env, namespace, tmp_path):
    missing = trainjobs(cluster_env, "status", "-n", namespace, "nope")
    assert (missing.returncode, missing.stderr) == (
        2, f"error: no training job 'nope' in namespace {namespace}; jobs there: none\n")

    nowhere = tmp_path / "kubeconfig"
    nowhere.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "gone",
                                   "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:9"}}],
                                   "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
                                   "users": [{"name": "u", "user": {"token": "x"}}]}))
    gone = trainjobs({**cluster_env, "KUBECONFIG": str(nowhere)}, "status")
    assert gone.returncode == 2
    assert gone.stderr.startswith("error: cannot reach the cluster at https://127.0.0.1:9 (context gone): ")
    assert gone.stderr.endswith("; is it running, and is this the kubeconfig and context you meant?\n")

    kubectl(cluster_env, "create", "serviceaccount", "-n", namespace, "viewer")
    token = kubectl(cluster_env, "create", "token", "-n", namespace, "viewer").strip()
    config = json.loads(kubectl(cluster_env, "config", "view", "--raw", "--flatten", "-o", "json"))
    config["users"] = [{"name": "viewer", "user": {"token": token}}]
    config["contexts"] = [{"name": "viewer", "context": {"cluster": config["clusters"][0]["name"], "user": "viewer"}}]
    config["current-context"] = "viewer"
    (tmp_path / "viewer").write_text(json.dumps(config))
    refused = trainjobs({**cluster_env, "KUBECONFIG": str(tmp_path / "viewer")}, "status", "-n", namespace)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: the context viewer may not list jobs.batch in namespace {namespace} "
                                     "(403 Forbidden): ")
    assert refused.stderr.endswith("; ask for that right, or use a context that has it\n")


def test_a_cluster_without_kueues_crds(cluster_env, namespace, monkeypatch):
    """Asked as for a Kueue version the cluster does not serve: the API server answers 404, as without the CRDs."""
    from trainjobs.observe import StatusError, cluster, status

    apply_job(cluster_env, namespace, "kq", {"gang_scheduler": "kueue", "queue": "team"}, suspend=True)
    monkeypatch.setattr(cluster, "WORKLOADS", ("kueue.x-k8s.io", "v9", "workloads"))
    monkeypatch.setenv("KUBECONFIG", cluster_env["KUBECONFIG"])
    with pytest.raises(StatusError) as caught:
        status(["kq"], namespace)
    assert str(caught.value) == ("Job kq-node-0 is queued with Kueue (kueue.x-k8s.io/queue-name), but the cluster has "
                                 "no Kueue CRDs (workloads.kueue.x-k8s.io/v9): install Kueue v0.17 or later, or remove "
                                 "the job's queue")


def rendered(namespace: str, name: str, args: dict) -> list[dict]:
    return kubernetes_objects(run(lambda: TorchTrainJob(name, {"image": "x:1", "command": ["train"],
                                                                "namespace": namespace, **args})))


def test_a_volcano_podgroups_phase(cluster_env, namespace):
    """kube-scheduler binds the gang's pods (its profile `volcano`) and kwok runs them; the test then sets the
    PodGroup's status as Volcano's scheduler shows a running gang (the CRD has no status subresource)."""
    objects = rendered(namespace, "v", {"num_nodes": 2, "gang_scheduler": "volcano", "queue": "research"})
    for obj in objects:
        if obj["kind"] == "Job":
            assert obj["spec"]["template"]["spec"]["schedulerName"] == "volcano"
            obj["spec"]["template"]["metadata"].setdefault("annotations", {}).update(STAY_RUNNING)
        kubectl(cluster_env, "apply", "-f", "-", stdin=json.dumps(obj))
    pods(cluster_env, namespace, "Running", 2)
    [group] = [o for o in objects if o["kind"] == "PodGroup"]
    group["status"] = {"phase": "Running", "running": 2, "conditions": [
        {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
         "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable",
         "transitionID": "1", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
         "transitionID": "2", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}
    kubectl(cluster_env, "apply", "-f", "-", stdin=json.dumps(group))
    text = trainjobs(cluster_env, "status", "-n", namespace, check=0).stdout
    assert normalised(text) == normalised(
        f"v (namespace {namespace}): running\n"
        "  admission: PodGroup v in queue research: Running (tasks in gang are ready to be scheduled)\n"
        "  role node, Job v-node-0: Running\n"
        "    pods: 2 Running; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("v-node-0-0", "Running", "-", "-"), ("v-node-0-1", "Running", "-", "-")])


def test_a_jobsets_restarts_against_its_max(cluster_env, namespace):
    """A rank that fails makes the JobSet controller restart the group (every Job recreated, its pods anew), up to
    max_restarts 3; the fourth failure fails the JobSet."""
    if "jobset" not in controllers(cluster_env):
        pytest.skip("the cluster runs no JobSet controller: start it with `make cluster-controllers`")
    [jobset] = [o for o in rendered(namespace, "js", {"num_nodes": 2, "backend": "jobset",
                                                      "failure_policy": {"max_restarts": 3}}) if o["kind"] == "JobSet"]
    for replicated in jobset["spec"]["replicatedJobs"]:
        replicated["template"]["spec"]["template"]["metadata"].setdefault("annotations", {}).update(STAY_RUNNING)
    kubectl(cluster_env, "apply", "-f", "-", stdin=json.dumps(jobset))
    for attempt in range(4):
        # The attempt's pods, once the previous attempt's are gone.
        running = until(lambda: (lambda found: found if len(found) == 2 and all(
            p["status"].get("phase") == "Running" and p["metadata"]["labels"].get(RESTART_ATTEMPT) == str(attempt)
            for p in found) else None)(get(cluster_env, "pods", "-n", namespace)["items"]),
            f"the 2 pods of attempt {attempt} running")
        restarts = get(cluster_env, "jobset", "js", "-n", namespace)["status"].get("restarts", 0)
        assert restarts == attempt
        text = trainjobs(cluster_env, "status", "-n", namespace, check=0).stdout
        assert normalised(text) == normalised(
            f"js (namespace {namespace}): running\n"
            f"  JobSet js: Running; restarts: {restarts} of maxRestarts 3\n"
            "  role node, Job js-node-0: Running\n"
            "    pods: 2 Running; backoff: 0 failed pods of backoffLimit 0\n"
            "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
                ("js-node-0-0", "Running", "-", "-"), ("js-node-0-1", "Running", "-", "-")])
        _fail_rank(cluster_env, namespace, sorted(running, key=lambda p: p["spec"]["hostname"])[1], 3, "Error")

    live = until(lambda: (lambda js: js if condition(js, "Failed").get("status") == "True" else None)(
        get(cluster_env, "jobset", "js", "-n", namespace)), "the JobSet failed")
    failed = condition(live, "Failed")
    assert (failed["reason"], live["status"]["restarts"]) == ("ReachedMaxRestarts", 3)
    waited = trainjobs(cluster_env, "wait", "-n", namespace, "js", "--poll", "0.5")
    assert (waited.returncode, normalised(waited.stdout)) == (
        1, "js: failed, not complete: rank js-node-0-1 exited 3 (Error)\n")
    # The failed Job's controller stops rank 0 (kwok turns it Failed with 137) and deletes it.
    [culprit] = pods(cluster_env, namespace, "Failed", 1, exactly=True)
    text = trainjobs(cluster_env, "status", "-n", namespace, "--log-lines", "0", check=0).stdout
    pod = culprit["metadata"]["name"]
    assert normalised(text) == normalised(
        f"js (namespace {namespace}): failed\n"
        f"  JobSet js: Failed ({failed['reason']}: {failed['message']}); restarts: 3 of maxRestarts 3\n"
        "  role node, Job js-node-0: Failed (BackoffLimitExceeded: Job has reached the specified backoff limit)\n"
        "    pods: 1 Failed; backoff: 2 failed pods of backoffLimit 0\n"
        "    RANK  POD  PHASE  RESTARTS  AGE  NODE  EXIT  REASON\n") + _pod_rows(text, [
            ("js-node-0-1", "Failed", "3", "Error")]) + normalised(
        f"  first failed rank: js-node-0-1 (pod {pod}, role node): exit code 3, Error (the container stopped with 3)\n")
    data = json.loads(trainjobs(cluster_env, "status", "-n", namespace, "-o", "json", "--log-lines", "0",
                                check=0).stdout)
    assert data["jobs"][0]["jobset"] == {"name": "js", "state": "Failed", "reason": failed["reason"],
                                         "message": failed["message"], "restarts": 3, "max_restarts": 3}
