"""Failure policies in run-local with real training: a preempted pod replaced without counting, and
training resumed from its checkpoint; a fatal exit code failing the job at once."""

import pytest

from e2e_support import PROGRAMS, run_local

RESILIENCE = PROGRAMS / "resilience" / "__main__.py"
pytestmark = pytest.mark.usefixtures("torch_ready")


def done(run) -> list[dict]:
    return sorted(run.reports("E2E-DONE"), key=lambda r: r["pod_index"])


def test_a_preempted_worker_is_replaced_and_training_resumes_from_its_checkpoint(tmp_path):
    run = run_local(RESILIENCE, "--stack", "preempt", "--disrupt", "pre-node-0-1@output:E2E-STEP 4 ",
                    run_dir=tmp_path, limit=300)
    assert run.returncode == 0, run.output
    (job,) = run.summary["jobs"]
    # backoff_limit 0, and yet the job completes: the disruption was not counted.
    assert (job["state"], job["failed_pods"], job["ignored_failed_pods"]) == ("Complete", 0, 1)
    pods = [(p["hostname"], p["phase"], p["conditions"]) for p in run.pods()]
    assert pods == [("pre-node-0-0", "Succeeded", []), ("pre-node-0-1", "Failed", ["DisruptionTarget"]),
                    ("pre-node-0-1", "Succeeded", [])]
    assert run.pods()[1]["reason"] == "DisruptionTarget: preempted by run-local --disrupt"
    final = done(run)
    assert [r["world"] for r in final] == [2, 2]
    assert [r["weight"] for r in final] == [36.0, 36.0]   # 12 steps x (1 + 2): none lost, none done twice
    survivor, replacement = final
    assert survivor["restart_count"] >= 1                  # torchrun restarted its worker for a new round
    assert survivor["resumed_from"] == replacement["resumed_from"] >= 4   # from the checkpoint, not step 0
    assert "disrupting pod pre-node-0-1-" in run.output


def test_a_declared_fatal_exit_code_fails_the_job_at_once(tmp_path):
    run = run_local(RESILIENCE, "--stack", "fatal", run_dir=tmp_path, limit=180)
    assert run.returncode == 1, run.output
    (job,) = run.summary["jobs"]
    assert job["state"] == "Failed"
    assert job["reason"].startswith("PodFailurePolicy: Container node for pod default/fatal-node-0-1-")
    assert "failed with exit code 42 matching FailJob rule" in job["reason"]
    # backoff_limit 3 would have retried it: the fatal code ended the job with its first attempt.
    assert [(p["hostname"], p["exit_code"]) for p in run.pods() if p["phase"] == "Failed"] == [("fatal-node-0-1", 42)]
    # As the Job's status.failed: the culprit, and the pod the Job's failure stopped.
    assert (job["failed_pods"], job["ignored_failed_pods"]) == (2, 0)
    assert len(run.pods()) == 2
