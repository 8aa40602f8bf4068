"""Failure policies and JobSet semantics of a local run, with stand-in pods: podFailurePolicy,
backoffLimitPerIndex, a JobSet's start order, success policy and whole-group restarts, disruptions."""

import pytest

from trainjobs.localrun.jobs import JobRun
from trainjobs.backends.jobset import REPLICATED_JOB
from trainjobs.localrun.jobsets import Disruption, JobSetRun
from trainjobs.localrun.plan import JobSpec
from trainjobs.kube.policies import PodVerdict, jobset_rule, pod_verdict

# What the job derives for a failure policy with fatal exit code 42: disruptions ignored, 42 fails the Job.
RULES = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
         {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "In", "values": [42]}}]


class Pod:
    def __init__(self, index, phase="Running", codes=None, conditions=()):
        self.index, self.phase, self.reason = index, phase, "container node exited 1"
        self.codes, self.conditions = codes or {}, set(conditions)
        self.spec = type("Spec", (), {"name": f"p-{index}"})()
        self.ready, self.settled = True, True

    def exit_codes(self):
        return self.codes

    def terminate(self, reason, now):
        self.phase, self.stopped_because = "Stopped", reason


def job(name="j", completions=2, backoff_limit=0, rules=(), per_index=None, max_failed=None, replicated=None):
    manifest = {"metadata": {"labels": {REPLICATED_JOB: replicated}}} if replicated else {}
    spec = JobSpec(name=name, namespace="default", manifest=manifest, completions=completions, parallelism=completions,
                   backoff_limit=backoff_limit, active_deadline_seconds=None, indexed=True, group="g", slots=[],
                   pod_failure_rules=list(rules), backoff_limit_per_index=per_index, max_failed_indexes=max_failed,
                   owner="g" if replicated else None)
    return JobRun(spec)


def start_all(run, now=0.0):
    pods = {}
    for index in run.due(now):
        pods[index] = run.active[index] = Pod(index)
        run.pods.append(pods[index])
    return pods


def fail(run, pod, now=1.0, codes=None, conditions=()):
    pod.phase, pod.codes, pod.conditions = "Failed", codes or {"node": 1}, set(conditions)
    run.pod_finished(pod, now)


def test_rules_match_in_order_on_exit_codes_and_conditions():
    assert pod_verdict(RULES, "p", {"node": 143}, {"DisruptionTarget"}) == PodVerdict(
        "Ignore", "Pod p has condition DisruptionTarget matching Ignore rule at index 0")
    assert pod_verdict(RULES, "p", {"node": 42}, set()) == PodVerdict(
        "FailJob", "Container node for pod p failed with exit code 42 matching FailJob rule at index 1")
    assert pod_verdict(RULES, "p", {"node": 1}, set()) is None
    assert pod_verdict(RULES, "p", {"sidecar": 42}, set()) is None   # another container's code
    not_in = [{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [3]}}]
    assert pod_verdict(not_in, "p", {"node": 0, "x": 3}, set()) is None
    assert pod_verdict(not_in, "p", {"node": 7}, set()).action == "Count"


def test_a_disrupted_pod_is_replaced_without_counting():
    run = job(rules=RULES)
    pods = start_all(run)
    fail(run, pods[1], codes={"node": 143}, conditions={"DisruptionTarget"})
    assert not run.state and run.failures == 0 and run.ignored_failures == 1
    assert run.due(1.0) == [1]   # at once: no backoff delay for an ignored failure


def test_a_replacement_waits_until_the_failed_pod_is_gone():
    run = job(rules=RULES)
    pods = start_all(run)
    pods[1].settled = False
    fail(run, pods[1], conditions={"DisruptionTarget"})
    assert run.due(1.0) == []
    pods[1].settled = True
    assert run.due(1.1) == [1]


def test_without_a_policy_a_disruption_counts():
    run = job()
    pods = start_all(run)
    fail(run, pods[1], conditions={"DisruptionTarget"})
    assert run.state == "Failed" and run.failure_reason == "BackoffLimitExceeded"


def test_a_fatal_exit_code_fails_the_job_at_once_whatever_the_backoff_limit():
    run = job(backoff_limit=5, rules=RULES)
    pods = start_all(run)
    fail(run, pods[0], codes={"node": 42})
    assert run.state == "Failed" and run.failure_reason == "PodFailurePolicy"
    assert run.reason == ("PodFailurePolicy: Container node for pod default/p-0 failed with exit code 42 matching FailJob "
                          "rule at index 1")
    # The Job's status.failed counts the pod, and the pod the Job's failure stopped (the controller deletes it).
    assert (run.failures, run.ignored_failures) == (2, 0)
    assert pods[1].phase == "Stopped" and run.due(30.0) == []


def test_backoff_limit_per_index_retries_an_index_alone_and_max_failed_indexes_ends_it():
    run = job(completions=3, backoff_limit=2**31 - 1, per_index=1, max_failed=0)
    pods = start_all(run)
    fail(run, pods[2], now=1.0)
    assert not run.state and run.index_failures[2] == 1
    assert pods[0].phase == pods[1].phase == "Running"   # the others keep running
    assert run.due(5.0) == [] and run.due(11.5) == [2]
    again = run.active[2] = Pod(2)
    fail(run, again, now=12.0)
    assert run.state == "Failed" and run.failure_reason == "MaxFailedIndexesExceeded"


def test_failed_indexes_fail_the_job_once_the_others_are_done():
    run = job(completions=2, backoff_limit=2**31 - 1, per_index=0)
    pods = start_all(run)
    fail(run, pods[0])
    assert not run.state and run.failed_indexes == {0}
    pods[1].phase = "Succeeded"
    run.pod_finished(pods[1], 2.0)
    assert run.state == "Failed" and run.failure_reason == "FailedIndexes"


def jobset(max_restarts=None, rules=None, success=None, initializer=False):
    replicated = ([{"name": "init"}] if initializer else []) + [
        {"name": "node"}, {"name": "launcher", "dependsOn": [{"name": "node", "status": "Ready"}]}]
    if initializer:
        replicated[1]["dependsOn"] = [{"name": "init", "status": "Complete"}]
    spec = {"replicatedJobs": replicated,
            "successPolicy": success or {"operator": "All", "targetReplicatedJobs": ["launcher"]}}
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts, **({"rules": rules} if rules else {})}
    jobs = {r["name"]: [job(f"g-{r['name']}-0", completions=1 if r["name"] != "node" else 2,
                            replicated=r["name"], rules=RULES)] for r in replicated}
    for runs in jobs.values():
        runs[0].held = True
    return JobSetRun("g", {"spec": spec}, jobs)


def test_start_order_follows_depends_on():
    js = jobset(initializer=True)
    init, (node,), (launcher,) = js.jobs["init"][0], js.jobs["node"], js.jobs["launcher"]
    js.step(0.0)
    assert (init.held, node.held, launcher.held) == (False, True, True)
    (pod,) = start_all(init).values()
    pod.phase = "Succeeded"
    init.pod_finished(pod, 1.0)
    js.step(1.0)
    assert (node.held, launcher.held) == (False, True)
    pods = start_all(node, 1.0)
    pods[0].ready = False
    js.step(2.0)
    assert launcher.held   # Ready: every pod of the node Job ready
    pods[0].ready = True
    js.step(3.0)
    assert not launcher.held and launcher.started == 3.0


def test_success_policy_completes_on_the_launcher_and_stops_the_rest():
    js = jobset()
    js.step(0.0)
    node_pods = start_all(js.jobs["node"][0])
    js.step(0.5)
    (pod,) = start_all(js.jobs["launcher"][0]).values()
    pod.phase = "Succeeded"
    js.jobs["launcher"][0].pod_finished(pod, 1.0)
    js.step(1.0)
    assert js.state == "Completed"
    assert js.jobs["node"][0].state == "Stopped" and {p.phase for p in node_pods.values()} == {"Stopped"}


def test_no_failure_policy_the_first_failed_job_fails_the_jobset():
    js = jobset()
    js.step(0.0)
    pods = start_all(js.jobs["node"][0])
    fail(js.jobs["node"][0], pods[1])
    js.step(1.0)
    assert js.state == "Failed" and js.reason.startswith("FailedJobs:") and js.restarts == 0
    assert js.jobs["launcher"][0].state == "Stopped"


def test_a_failed_job_restarts_the_whole_group_up_to_max_restarts():
    js = jobset(max_restarts=2)
    node = js.jobs["node"][0]
    for attempt in range(3):
        js.step(10.0 * attempt)
        assert not js.state and not node.held and not node.state
        pods = start_all(node, 10.0 * attempt)
        fail(node, pods[1], now=10.0 * attempt + 1)
        assert pods[0].phase == "Stopped"    # the Job's other pod, stopped by the Job
        js.step(10.0 * attempt + 2)
    assert js.state == "Failed" and js.restarts == 2
    assert js.reason.startswith("ReachedMaxRestarts: jobset failed due to reaching max number of restarts (2)")


def test_a_restart_waits_for_every_pod_of_the_group_to_be_gone():
    js = jobset(max_restarts=1)
    node = js.jobs["node"][0]
    js.step(0.0)
    pods = start_all(node)
    pods[0].settled = False
    fail(node, pods[1])
    js.step(1.0)
    assert js.restarting and node.state == "Restarting" and node.due(1.0) == []
    js.step(2.0)
    assert js.restarting
    pods[0].settled = True
    js.step(3.0)
    assert not js.restarting and node.state == "" and node.due(3.0) == [0, 1] and js.restarts == 1


def test_a_fatal_exit_code_fails_the_jobset_without_a_restart():
    js = jobset(max_restarts=3, rules=[{"name": "fatal_exit_code", "action": "FailJobSet",
                                        "onJobFailureReasons": ["PodFailurePolicy"]}])
    node = js.jobs["node"][0]
    js.step(0.0)
    pods = start_all(node)
    fail(node, pods[0], codes={"node": 42})
    js.step(1.0)
    assert js.state == "Failed" and js.restarts == 0
    assert js.reason.startswith("FailJobSetFailurePolicyAction: Job g-node-0: PodFailurePolicy")


def test_jobset_rules_match_reason_message_and_replicated_job():
    rule = {"name": "r", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": ["exit code 4[0-9]"], "targetReplicatedJobs": ["node"]}
    assert jobset_rule([rule], "node", "PodFailurePolicy", "failed with exit code 42") is rule
    assert jobset_rule([rule], "launcher", "PodFailurePolicy", "failed with exit code 42") is None
    assert jobset_rule([rule], "node", "BackoffLimitExceeded", "failed with exit code 42") is None
    assert jobset_rule([rule], "node", "PodFailurePolicy", "failed with exit code 1") is None


def test_disruptions_parse():
    assert Disruption.parse("job-node-0-1@30") == Disruption("job-node-0-1", after_seconds=30.0)
    assert Disruption.parse("job-node-0-1@2.5s") == Disruption("job-node-0-1", after_seconds=2.5)
    assert Disruption.parse("job-node-0-1@output:step 5") == Disruption("job-node-0-1", after_output="step 5")
    for bad in ("job-node-0-1", "@30", "job-node-0-1@soon", "job-node-0-1@output:"):
        with pytest.raises(ValueError):
            Disruption.parse(bad)
