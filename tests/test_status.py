"""A job's state from plain objects (trainjobs.observe.state), as `trainjobs status` prints it and as JSON; `logs`'
choice of pods; `wait`'s outcomes; run-local's runs as a source. The cluster itself: tests/cluster/test_status_on_cluster.py."""

import json
from pathlib import Path
from datetime import datetime, timezone

import pytest

from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION
from trainjobs.observe import StatusError, pods_of, read
from trainjobs.observe.local import STATE_FILE, LocalSource
from trainjobs.observe.state import Snapshot, job_statuses
from trainjobs.tools.cli.main import main
from trainjobs.tools.cli.status import age, job_text

NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=timezone.utc)
LABELS = {"trainjobs.io/job-name": "llm", "trainjobs.io/role": "node"}


def job(name="llm-node-0", pods=2, labels=LABELS, status=None, spec=None, annotations=None, uid=None):
    return {"metadata": {"name": name, "namespace": "ml", "uid": uid or f"uid-{name}", "labels": dict(labels),
                         "annotations": annotations or {}},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
                         "containerName": "node", "operator": "In", "values": [3]}}]}, **(spec or {})},
            "status": status or {}}


def pod(index, phase, job_name="llm-node-0", suffix="abcde", created="2026-11-28T11:55:00Z", node="n1",
        terminated=None, conditions=(), role="node", labels=LABELS):
    state = {"terminated": terminated} if terminated else {"running": {}} if phase == "Running" else {}
    return {"metadata": {"name": f"{job_name}-{index}-{suffix}", "namespace": "ml", "labels": {**labels, "trainjobs.io/role": role},
                         "annotations": {COMPLETION_INDEX_ANNOTATION: str(index)}, "creationTimestamp": created,
                         "ownerReferences": [{"kind": "Job", "name": job_name, "uid": f"uid-{job_name}"}]},
            "spec": {"hostname": f"{job_name}-{index}", "nodeName": node},
            "status": {"phase": phase, "conditions": list(conditions),
                       "containerStatuses": [{"name": "node", "restartCount": 0, "state": state}]}}


def workload(*conditions, **status):
    return {"metadata": {"name": "job-llm-node-0-5f2a1", "namespace": "ml",
                         "ownerReferences": [{"kind": "Job", "name": "llm-node-0", "uid": "uid-llm-node-0"}]},
            "spec": {"queueName": "team"}, "status": {"conditions": list(conditions), **status}}


def condition(kind, reason, message="", status="True"):
    return {"type": kind, "status": status, "reason": reason, "message": message}


def one(snapshot, logs=None):
    [found] = job_statuses(snapshot, NOW, logs)
    return found


def test_a_failed_job_names_the_rank_that_failed_first_and_why():
    failed_at = "2026-11-28T11:58:00Z"
    snapshot = Snapshot(
        jobs=[job(status={"failed": 2, "conditions": [condition("Failed", "PodFailurePolicy", "Container node ... exit code 3")]})],
        pods=[pod(0, "Failed", terminated={"exitCode": 137, "reason": "Error", "finishedAt": failed_at}, node="n1"),
              pod(1, "Failed", terminated={"exitCode": 3, "reason": "Error", "finishedAt": failed_at}, node="n2")],
        nodes={"n1": {"metadata": {"labels": {"example.com/rack": "r1"}}}})
    status = one(snapshot, logs=lambda p: [f"{p.rank}: dataset missing", "\x1b[31mexit\x1b[0m"])
    assert job_text(status) == (
        "llm (namespace ml): failed\n"
        "  role node, Job llm-node-0: Failed (PodFailurePolicy: Container node ... exit code 3)\n"
        "    pods: 2 Failed; backoff: 2 failed pods of backoffLimit 0\n"
        "    RANK          POD                 PHASE   RESTARTS  AGE  NODE  EXIT  REASON\n"
        "    llm-node-0-0  llm-node-0-0-abcde  Failed  0         5m   n1    137   Error\n"
        "    llm-node-0-1  llm-node-0-1-abcde  Failed  0         5m   n2    3     Error: fatal exit code\n"
        "  first failed rank: llm-node-0-1 (pod llm-node-0-1-abcde, role node): exit code 3, Error: fatal exit code\n"
        "    | llm-node-0-1: dataset missing\n"
        "    | $'\\e[31mexit\\e[0m'")
    assert status.to_json()["first_failure"] == {
        "pod": "llm-node-0-1-abcde", "rank": "llm-node-0-1", "role": "node", "exit_code": 3,
        "reason": "Error: fatal exit code", "message": "", "log_tail": ["llm-node-0-1: dataset missing", "\x1b[31mexit\x1b[0m"]}


def test_the_first_failure_is_the_earliest_and_a_preempted_pod_says_so():
    snapshot = Snapshot(jobs=[job(status={"failed": 1})], pods=[
        pod(0, "Failed", terminated={"exitCode": 143, "reason": "Error", "finishedAt": "2026-11-28T11:57:00Z"},
            conditions=[condition("DisruptionTarget", "PreemptionByScheduler", "Kueue preempted the workload")]),
        pod(1, "Failed", terminated={"exitCode": 1, "reason": "OOMKilled", "finishedAt": "2026-11-28T11:58:00Z"})])
    status = one(snapshot)
    assert [(p.rank, p.reason, p.message) for p in status.roles[0].pods] == [
        ("llm-node-0-0", "preempted (PreemptionByScheduler)", "Kueue preempted the workload"),
        ("llm-node-0-1", "OOMKilled", "")]
    assert (status.first_failure.rank, status.first_failure.exit_code) == ("llm-node-0-0", 143)
    assert status.state == "pending"   # the Job goes on: a preemption counts against no backoff


def test_fatal_exit_code_is_what_the_jobs_pod_failure_policy_fails_the_job_on():
    """The rules as the Job controller evaluates them, the first match winning: with retriable codes, any other
    code is fatal (NotIn); a preempted pod is ignored before its exit code is looked at."""
    rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
             {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "In", "values": [137]}},
             {"action": "Count", "onExitCodes": {"containerName": "node", "operator": "In", "values": [1]}},
             {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "NotIn", "values": [1]}}]
    snapshot = Snapshot(jobs=[job(pods=3, spec={"podFailurePolicy": {"rules": rules}})], pods=[
        pod(0, "Failed", terminated={"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-28T11:57:00Z"}),
        pod(1, "Failed", terminated={"exitCode": 2, "reason": "Error", "finishedAt": "2026-11-28T11:58:00Z"}),
        pod(2, "Failed", terminated={"exitCode": 137, "reason": "Error", "finishedAt": "2026-11-28T11:59:00Z"},
            conditions=[condition("DisruptionTarget", "TerminationByKubelet", "preempted")])])
    assert [(p.rank, p.reason) for p in one(snapshot).roles[0].pods] == [
        ("llm-node-0-0", "Error"), ("llm-node-0-1", "Error: fatal exit code"),
        ("llm-node-0-2", "preempted (TerminationByKubelet)")]


def test_a_preempted_pod_that_was_replaced_is_no_failure_of_the_job():
    """Rank 1 preempted and replaced, the job then succeeded: the preempted pod is shown replaced by its successor,
    and no rank failed. A later real failure is the first failed rank, not the preemption before it."""
    preempted = pod(1, "Failed", suffix="old11", terminated={"exitCode": 1, "reason": "Error",
                                                              "finishedAt": "2026-11-28T11:56:00Z"},
                    conditions=[condition("DisruptionTarget", "TerminationByKubelet", "Pod was preempted")])
    successor = pod(1, "Succeeded", suffix="new11", created="2026-11-28T11:56:30Z",
                    terminated={"exitCode": 0, "reason": "Completed", "finishedAt": "2026-11-28T11:59:00Z"})
    done = one(Snapshot(jobs=[job(status={"conditions": [condition("Complete", "CompletionsReached")]})], pods=[
        pod(0, "Succeeded", terminated={"exitCode": 0, "reason": "Completed", "finishedAt": "2026-11-28T11:59:00Z"}),
        preempted, successor]))
    assert job_text(done) == (
        "llm (namespace ml): succeeded\n"
        "  role node, Job llm-node-0: Complete (CompletionsReached)\n"
        "    pods: 1 Failed, 2 Succeeded; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK          POD                 PHASE      RESTARTS  AGE  NODE  EXIT  REASON\n"
        "    llm-node-0-0  llm-node-0-0-abcde  Succeeded  0         5m   n1    0     Completed\n"
        "    llm-node-0-1  llm-node-0-1-old11  Failed     0         5m   n1    1     preempted (TerminationByKubelet)\n"
        "    llm-node-0-1  llm-node-0-1-new11  Succeeded  0         3m   n1    0     Completed\n"
        "  replaced after preemption: llm-node-0-1 (pod llm-node-0-1-old11 by pod llm-node-0-1-new11, role node): "
        "exit code 1, preempted (TerminationByKubelet) (Pod was preempted)")
    assert done.first_failure is None
    assert [p["replaced_by"] for p in done.to_json()["roles"][0]["pods"]] == ["", "llm-node-0-1-new11", ""]

    failed = one(Snapshot(jobs=[job(status={"failed": 1, "conditions": [condition("Failed", "BackoffLimitExceeded")]})],
                          pods=[pod(0, "Failed", terminated={"exitCode": 2, "reason": "Error",
                                                              "finishedAt": "2026-11-28T11:58:00Z"}),
                                preempted, successor]))
    assert (failed.first_failure.pod, failed.first_failure.exit_code) == ("llm-node-0-0-abcde", 2)


@pytest.mark.parametrize("conditions, extra, state, line", [
    ([condition("QuotaReserved", "Pending", "couldn't assign flavors to pod set main: insufficient quota", "False")], {},
     "queued", "Workload job-llm-node-0-5f2a1 in queue team: queued (Pending: couldn't assign flavors to pod set main: "
               "insufficient quota)"),
    ([condition("QuotaReserved", "QuotaReserved"), condition("Admitted", "Admitted", "The workload is admitted")],
     {"admission": {"clusterQueue": "cluster-total"}}, "admitted",
     "Workload job-llm-node-0-5f2a1 in queue cluster-total: admitted (Admitted: The workload is admitted)"),
    ([condition("Evicted", "Preempted", "Preempted to accommodate a workload (UID: 1) due to prioritization"),
      condition("Preempted", "InClusterQueue", "Preempted to accommodate a workload (UID: 1) due to prioritization"),
      condition("QuotaReserved", "Pending", "", "False")], {"requeueState": {"count": 2}}, "queued",
     "Workload job-llm-node-0-5f2a1 in queue team: preempted (InClusterQueue: Preempted to accommodate a workload "
     "(UID: 1) due to prioritization); requeued 2 times"),
    ([condition("Evicted", "PodsReadyTimeout", "Exceeded the PodsReady timeout ml/job-llm-node-0-5f2a1")], {}, "queued",
     "Workload job-llm-node-0-5f2a1 in queue team: evicted (PodsReadyTimeout: Exceeded the PodsReady timeout "
     "ml/job-llm-node-0-5f2a1)"),
    ([condition("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue cluster-total")],
     {"admission": {"clusterQueue": "cluster-total"}}, "queued",
     "Workload job-llm-node-0-5f2a1 in queue cluster-total: quota reserved (QuotaReserved: Quota reserved in "
     "ClusterQueue cluster-total)"),
])
def test_kueues_workload_by_its_conditions(conditions, extra, state, line):
    status = one(Snapshot(jobs=[job(spec={"suspend": True})], workloads=[workload(*conditions, **extra)]))
    assert status.state == state
    assert job_text(status).splitlines()[1] == f"  admission: {line}"


def test_a_workload_of_another_job_is_not_this_ones():
    other = workload(condition("Admitted", "Admitted"))
    other["metadata"]["ownerReferences"][0]["uid"] = "uid-of-another-job"
    assert one(Snapshot(jobs=[job()], workloads=[other])).admission == ()


def test_a_volcano_podgroup_and_where_the_pods_run():
    group = {"metadata": {"name": "llm", "namespace": "ml", "labels": LABELS}, "spec": {"queue": "research"},
             "status": {"phase": "Inqueue", "conditions": [
                 condition("Unschedulable", "NotEnoughResources", "2/2 tasks in gang unschedulable")]}}
    placed = pod(0, "Pending", node="")
    placed["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "example.com/rack"
    queued = one(Snapshot(jobs=[job(pods=1)], pods=[placed], podgroups=[group]))
    assert queued.state == "queued"
    assert job_text(queued).splitlines()[1] == ("  admission: PodGroup llm in queue research: Inqueue "
                                               "(NotEnoughResources: 2/2 tasks in gang unschedulable)")
    group["status"] = {"phase": "Running"}
    running = pod(0, "Running", node="n1")
    running["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "example.com/rack"
    status = one(Snapshot(jobs=[job(pods=1)], pods=[running], podgroups=[group],
                          nodes={"n1": {"metadata": {"labels": {"example.com/rack": "rack-7"}}}}))
    assert job_text(status) == (
        "llm (namespace ml): running\n"
        "  admission: PodGroup llm in queue research: Running\n"
        "  placement: pods by example.com/rack\n"
        "  role node, Job llm-node-0: Running\n"
        "    pods: 1 Running; backoff: 0 failed pods of backoffLimit 0\n"
        "    RANK          POD                 PHASE    RESTARTS  AGE  NODE  EXAMPLE.COM/RACK  EXIT  REASON\n"
        "    llm-node-0-0  llm-node-0-0-abcde  Running  0         5m   n1    rack-7            -     -")


def test_a_jobsets_restarts_against_its_max_and_an_elastic_jobs_size():
    jobset = {"metadata": {"name": "llm", "namespace": "ml", "uid": "uid-js", "labels": LABELS},
              "spec": {"failurePolicy": {"maxRestarts": 3}},
              "status": {"restarts": 2, "conditions": []}}
    elastic = job(pods=3, spec={"completions": 4}, annotations={"trainjobs.io/min-pods": "2"})
    status = one(Snapshot(jobs=[elastic], jobsets=[jobset], pods=[pod(i, "Running") for i in range(3)]))
    lines = job_text(status).splitlines()
    assert lines[:4] == ["llm (namespace ml): running",
                         "  JobSet llm: Running; restarts: 2 of maxRestarts 3",
                         "  role node, Job llm-node-0: Running",
                         "    pods: 3 Running; backoff: 0 failed pods of backoffLimit 0; elastic: 3 pods of 2..4"]
    assert (status.jobset.restarts, status.jobset.max_restarts, status.roles[0].size, status.roles[0].min_size,
            status.roles[0].max_size) == (2, 3, 3, 2, 4)


def test_a_jobset_multikueue_dispatched_names_the_worker_cluster_its_pods_run_in():
    """On the manager cluster: the JobSet's status comes from the worker, and no Job or pod of it is here."""
    jobset = {"metadata": {"name": "llm", "namespace": "ml", "uid": "uid-js", "labels": LABELS},
              "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
              "status": {"conditions": [condition("Completed", "AllJobsCompleted", "jobset completed successfully")]}}
    dispatched = workload(condition("QuotaReserved", "QuotaReserved"), condition("Admitted", "Admitted"),
                          condition("Finished", "Succeeded", "jobset completed successfully"),
                          admission={"clusterQueue": "team-multikueue"}, clusterName="worker-1")
    dispatched["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "llm", "uid": "uid-js"}]
    status = one(Snapshot(jobsets=[jobset], workloads=[dispatched]))
    assert job_text(status) == (
        "llm (namespace ml): succeeded\n"
        "  admission: Workload job-llm-node-0-5f2a1 in queue team-multikueue: finished (Succeeded: jobset completed "
        "successfully)\n"
        "  dispatched by MultiKueue to the worker cluster worker-1: its Jobs and pods run there\n"
        "  JobSet llm: Completed (AllJobsCompleted: jobset completed successfully); restarts: 0 of maxRestarts 0")
    assert status.to_json()["admission"][0]["cluster"] == "worker-1"


def test_logs_take_the_newest_pod_of_each_rank_and_a_rank_by_its_index():
    launcher = {"trainjobs.io/job-name": "llm", "trainjobs.io/role": "launcher"}
    snapshot = Snapshot(
        jobs=[job(), job("llm-launcher-0", pods=1, labels=launcher)],
        pods=[pod(0, "Failed", suffix="old00", created="2026-11-28T11:50:00Z",
                  conditions=[condition("DisruptionTarget", "PreemptionByScheduler")]),
              pod(0, "Running", suffix="new00", created="2026-11-28T11:56:00Z"), pod(1, "Running"),
              pod(0, "Running", job_name="llm-launcher-0", role="launcher", labels=launcher)])
    status = one(snapshot)
    assert [p.name for p in pods_of(status)] == ["llm-launcher-0-0-abcde", "llm-node-0-0-new00", "llm-node-0-1-abcde"]
    assert [p.name for p in pods_of(status, rank=0)] == ["llm-node-0-0-new00"]
    assert [p.name for p in pods_of(status, role="launcher")] == ["llm-launcher-0-0-abcde"]
    with pytest.raises(StatusError, match="^job llm has no rank 5 in role node; ranks: 0, 1$"):
        pods_of(status, rank=5)
    with pytest.raises(StatusError, match="^job llm has no role 'worker'; roles: launcher, node$"):
        pods_of(status, role="worker")


def test_a_followed_rank_waits_for_its_successor_to_start(monkeypatch):
    """The pod that replaces a preempted one has no log while it is Pending (its container has not started): `logs
    --follow` follows it once it runs, rather than finding nothing and giving up on it."""
    import argparse

    from trainjobs.tools.cli import status as commands

    def replaced(job_status, successor):
        return Snapshot(jobs=[job(status=job_status)], pods=[
            pod(0, "Succeeded" if successor == "Succeeded" else "Running", suffix="zero0"),
            pod(1, "Failed", suffix="old11", conditions=[condition("DisruptionTarget", "TerminationByKubelet")]),
            pod(1, successor, suffix="new11", created="2026-11-28T11:56:00Z")])

    reads = [replaced({}, "Pending"), replaced({}, "Pending"), replaced({}, "Running"),
             replaced({"conditions": [condition("Complete", "CompletionsReached")]}, "Succeeded")]

    class Cluster:
        def snapshot(self, namespace, names):
            self.now = reads.pop(0) if len(reads) > 1 else reads[0]
            return self.now

        def follow(self, namespace, name):   # a kubelet has no log for a container that has not started
            phase = next(p["status"]["phase"] for p in self.now.pods if p["metadata"]["name"] == name)
            return iter([] if phase == "Pending" else [f"{name} line"])

    monkeypatch.setattr(commands.time, "sleep", lambda seconds: None)
    where = Cluster()
    args = argparse.Namespace(job="llm", namespace="ml", poll=0.5)
    job_status = commands._one_job(args, where)
    assert list(commands._follow_rank(args, where, job_status, "llm-node-0-1")) == [
        "llm-node-0-1-old11 line", "--- pod llm-node-0-1-new11 replaces the previous pod of rank llm-node-0-1",
        "llm-node-0-1-new11 line"]


def test_ages_as_kubectl_shows_them():
    assert [age(s) for s in (None, 5, 119, 120, 7199, 7200, 172799, 172800)] == \
        ["-", "5s", "119s", "2m", "119m", "2h", "47h", "2d"]


# --- run-local's runs -----------------------------------------------------------------------------------

def local_run(tmp_path, phase_1="Failed", finished=True):
    """A run directory as run-local leaves it (trainjobs.localrun.objects)."""
    run_dir = tmp_path / "trainjobs-tj-000001"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    logs = {}
    for index in (0, 1):
        name = f"llm-node-0-{index}-abcde"
        (run_dir / "logs" / f"{name}.log").write_text(f"rank {index} up\nrank {index} step 1\n")
        logs[name] = {"node": str(run_dir / "logs" / f"{name}.log")}
    failed = {"exitCode": 3, "reason": "Error", "finishedAt": "2026-11-28T11:58:00Z"}
    state = {"finished": finished, "node": "host",
             "jobs": [job(status={"failed": int(phase_1 == "Failed"), "conditions": [
                 condition("Failed", "PodFailurePolicy", "exit code 3")] if phase_1 == "Failed" else []})],
             "jobsets": [],
             "pods": [pod(0, "Running", node="host"),
                      pod(1, phase_1, node="host", terminated=failed if phase_1 == "Failed" else None)],
             "logs": logs}
    (run_dir / STATE_FILE).write_text(json.dumps(state))
    return run_dir


def test_status_of_a_local_run(tmp_path, capsys):
    run_dir = local_run(tmp_path)
    assert main(["status", "--local", str(run_dir), "--log-lines", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "llm (namespace ml): failed"
    assert lines[-2:] == ["  first failed rank: llm-node-0-1 (pod llm-node-0-1-abcde, role node): exit code 3, "
                          "Error: fatal exit code", "    | rank 1 step 1"]
    assert main(["status", "--local", str(run_dir), "-o", "json", "--log-lines", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["roles"][0]["phases"] == {"Failed": 1, "Running": 1}


def test_logs_of_each_rank_and_of_one(tmp_path, capsys):
    run_dir = local_run(tmp_path)
    assert main(["logs", "llm", "--local", str(run_dir)]) == 0
    assert capsys.readouterr().out == ("[llm-node-0-0] rank 0 up\n[llm-node-0-0] rank 0 step 1\n"
                                       "[llm-node-0-1] rank 1 up\n[llm-node-0-1] rank 1 step 1\n")
    assert main(["logs", "llm", "--rank", "1", "--tail", "1", "--local", str(run_dir)]) == 0
    assert capsys.readouterr().out == "rank 1 step 1\n"


@pytest.mark.parametrize("phase_1, wait_for, code, line", [
    ("Failed", "complete", 1, "llm: failed, not complete: rank llm-node-0-1 exited 3 (Error: fatal exit code)"),
    ("Failed", "failed", 0, "llm: failed (failed reached)"),
    ("Running", "running", 0, "llm: running (running reached)"),
    ("Running", "complete", 124, "llm: still running after 0.2s, not complete"),
])
def test_wait_exits_with_a_status_for_each_outcome(tmp_path, capsys, phase_1, wait_for, code, line):
    run_dir = local_run(tmp_path, phase_1, finished=False)
    assert main(["wait", "llm", "--for", wait_for, "--timeout", "0.2", "--poll", "0.05", "--local", str(run_dir)]) == code
    assert capsys.readouterr().out == line + "\n"


def test_errors_a_user_can_act_on(tmp_path, capsys):
    run_dir = local_run(tmp_path)
    assert main(["status", "nope", "--local", str(run_dir)]) == 2
    assert capsys.readouterr().err == "error: no training job 'nope' in any namespace; jobs there: llm\n"
    assert main(["logs", "llm", "--role", "worker", "--local", str(run_dir)]) == 2
    assert capsys.readouterr().err == "error: job llm has no role 'worker'; roles: node\n"
    assert main(["status", "--local", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path} is not the directory of a local run (no {STATE_FILE}); "
                                       "run-local prints its directory (`logs and summary.json in DIR`)\n")
    nowhere = tmp_path / "kubeconfig"
    nowhere.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    assert main(["status", "--kubeconfig", str(nowhere)]) == 2
    assert capsys.readouterr().err.startswith(f"error: no cluster to read: the kubeconfig ({nowhere}) gives none: ")


def test_a_followed_local_log_ends_with_its_pod(tmp_path):
    run_dir = local_run(tmp_path)
    assert list(LocalSource(run_dir).follow("ml", "llm-node-0-1-abcde")) == ["rank 1 up", "rank 1 step 1"]


def test_reading_a_local_run_by_name_finds_every_job(tmp_path):
    assert [j.name for j in read(LocalSource(local_run(tmp_path)), ["llm"])] == ["llm"]


def test_watch_prints_each_change_and_ends_with_the_job(tmp_path, capsys, monkeypatch):
    run_dir = local_run(tmp_path, "Running", finished=False)
    sleeps = []

    def next_state(seconds):   # between two reads, rank 1 fails: the job has ended
        sleeps.append(seconds)
        local_run(tmp_path, "Failed", finished=True)

    monkeypatch.setattr("trainjobs.tools.cli.status.time.sleep", next_state)
    assert main(["status", "--watch", "--poll", "7", "--log-lines", "0", "--local", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert sleeps == [7.0]
    assert [line for line in out.splitlines() if line.startswith("llm ")] == ["llm (namespace ml): running",
                                                                              "llm (namespace ml): failed"]


def test_the_jobs_of_a_program_as_render_reads_it(tmp_path, capsys):
    """The dev stack's jobs: mnist-ddp in namespace default, llama-finetune in ml."""
    program = str(Path(__file__).resolve().parents[1] / "stacks" / "__main__.py")
    run_dir = local_run(tmp_path)
    state = json.loads((run_dir / STATE_FILE).read_text())
    for obj in state["jobs"] + state["pods"]:
        obj["metadata"]["labels"]["trainjobs.io/job-name"] = "llama-finetune"
    (run_dir / STATE_FILE).write_text(json.dumps(state))
    assert main(["status", "--program", program, "--stack", "dev", "--local", str(run_dir), "--log-lines", "0"]) == 2
    assert capsys.readouterr().err == "error: no training job 'mnist-ddp' in namespace default; jobs there: none\n"
    assert main(["status", "llama-finetune", "--program", program, "--local", str(run_dir), "--log-lines", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "llama-finetune (namespace ml): failed"


def test_the_command_and_the_package_load_the_kubernetes_client_only_to_read_a_cluster(tmp_path):
    """`import trainjobs` and the command's start import neither it nor trainjobs.observe (so `render` starts as fast
    as before); without it, reading a cluster says what to install."""
    import subprocess
    import sys

    loaded = ("import sys, trainjobs, trainjobs.tools.cli.main; before = set(sys.modules); trainjobs.status; "
              "print(sorted(m for m in before if m.startswith('trainjobs.observe')), "
              "sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))")
    assert subprocess.run([sys.executable, "-c", loaded], capture_output=True, text=True,
                          timeout=120).stdout == "[] []\n"
    blocked = ("import sys; sys.modules['kubernetes'] = None; from trainjobs.tools.cli.main import main; "
               "sys.exit(main(['status']))")
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, "error: reading a cluster needs the Kubernetes Python client, which "
                                                 "is not installed: pip install 'trainjobs[cluster]'\n")
