"""Job controller semantics of a local run, with stand-in pods."""

from trainjobs.localrun.jobs import JobRun
from trainjobs.localrun.plan import JobSpec


class Pod:
    def __init__(self, index, phase="Running"):
        self.index, self.phase, self.reason = index, phase, "container node exited 1"
        self.spec = type("Spec", (), {"name": f"p-{index}"})()
        self.stopped_because = None
        self.resized = None   # after a resize: "removed" or "kept"

    def after_resize(self, removed):
        self.resized = "removed" if removed else "kept"

    def terminate(self, reason, now):
        self.phase, self.stopped_because = "Stopped", reason


def job(completions=3, parallelism=3, backoff_limit=0, deadline=None):
    spec = JobSpec(name="j", namespace="default", manifest={}, completions=completions, parallelism=parallelism,
                   backoff_limit=backoff_limit, active_deadline_seconds=deadline, indexed=True, group="j", slots=[])
    return JobRun(spec)


def start_all(run, now=0.0):
    pods = {}
    for index in run.due(now):
        pods[index] = run.active[index] = Pod(index)
    return pods


def test_every_index_must_succeed():
    run = job()
    pods = start_all(run)
    for index in (2, 0):
        pods[index].phase = "Succeeded"
        run.pod_finished(pods[index], 1.0)
        assert not run.state
    pods[1].phase = "Succeeded"
    run.pod_finished(pods[1], 2.0)
    assert run.state == "Complete"


def test_with_backoff_limit_0_the_first_failure_stops_the_rest():
    run = job()
    pods = start_all(run)
    pods[1].phase = "Failed"
    run.pod_finished(pods[1], 1.0)
    assert run.state == "Failed" and run.reason.startswith("BackoffLimitExceeded: pod p-1 (index 1) failed")
    assert pods[0].phase == pods[2].phase == "Stopped"
    assert run.due(2.0) == []


def test_failures_within_the_backoff_limit_retry_the_index_after_a_delay():
    run = job(backoff_limit=1)
    pods = start_all(run)
    pods[0].phase = "Failed"
    run.pod_finished(pods[0], 1.0)
    assert not run.state
    assert run.due(5.0) == []  # the controller's backoff: 10 s after the first failure
    assert run.due(11.5) == [0]


def test_parallelism_limits_running_pods():
    run = job(completions=3, parallelism=2)
    pods = start_all(run)
    assert sorted(pods) == [0, 1]
    pods[0].phase = "Succeeded"
    run.pod_finished(pods[0], 1.0)
    assert run.due(1.0) == [2]


def test_active_deadline_fails_the_job():
    run = job(deadline=30)
    run.started = 0.0
    pods = start_all(run)
    assert run.due(31.0) == []
    assert run.state == "Failed" and run.reason.startswith("DeadlineExceeded")
    assert all(p.phase == "Stopped" for p in pods.values())
