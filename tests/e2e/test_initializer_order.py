"""Initializers before training when every Job starts at once, as when GitOps tooling applies the
rendered YAML with no Pulumi in the loop: only the training pods' `wait-for-initializers` init
container orders them. (Under `pulumi up` the training Jobs are also created only after the
initializer Jobs complete; tests/test_roles.py checks that dependency.)

The initializers write files into the shared /workspace after a delay; the trainers fail if a file
is missing. Plain shell commands: no training framework involved.
"""

from e2e_support import PROGRAMS, run_local

INIT = PROGRAMS / "initializers" / "__main__.py"


def by_job(run, job: str) -> list[dict]:
    return sorted((p for p in run.pods() if p["job"] == job), key=lambda p: p["index"])


def test_training_starts_only_after_the_initializers_wrote_their_files(tmp_path):
    run = run_local(INIT, "--stack", "ordered", run_dir=tmp_path, limit=60)
    assert run.returncode == 0, run.output
    assert len(run.lines("/wait-for-initializers] initializers finished")) == 2, run.output
    assert sorted(run.lines("E2E-TRAINER ")) == [
        f"[init-ok-node-0-{i}/node] E2E-TRAINER init-ok-node-0-{i} read: 3 rows, tiny weights" for i in (0, 1)]
    trainers = by_job(run, "init-ok-node-0")
    assert [p["phase"] for p in trainers] == ["Succeeded", "Succeeded"]
    # Started with the initializers, the trainers outlived the 5 s the dataset initializer took.
    assert all(p["duration_seconds"] >= 4.5 for p in trainers), trainers
    for job in ("init-ok-dataset-initializer-0", "init-ok-model-initializer-0"):
        assert [p["phase"] for p in by_job(run, job)] == ["Succeeded"]


def test_without_the_wait_the_trainers_would_not_find_the_data(tmp_path):
    """The control: the same stack with the wait removed from the rendering fails at once."""
    prelude = ("from trainjobs.pipeline import initializers\n"
               "initializers.InitializerSetup.wait_container = lambda self, template: []\n")
    run = run_local(INIT, "--stack", "ordered", run_dir=tmp_path, limit=60,
                    python_prelude=prelude)
    assert run.returncode == 1, run.output
    assert "found no /workspace/dataset/data.txt" in run.output
    assert not run.lines(" read: ")


def test_a_failed_initializer_means_training_never_starts(tmp_path):
    run = run_local(INIT, "--stack", "failing", run_dir=tmp_path, limit=60)
    assert run.returncode == 1, run.output
    [initializer] = by_job(run, "init-fail-dataset-initializer-0")
    assert initializer["phase"] == "Failed" and initializer["exit_code"] == 3
    assert "init container dataset-initializer exited 3" in run.output
    assert "dataset initializer cannot reach its bucket" in run.output
    for trainer in by_job(run, "init-fail-node-0"):
        assert trainer["phase"] == "Stopped"
        assert "node" not in trainer["logs"]  # the training container never started
    assert not run.lines("E2E-TRAINER")


def test_trainers_give_up_waiting_after_initializer_timeout_seconds(tmp_path):
    """An initializer that never finishes: the trainers' wait ends after initializer_timeout_seconds (6)."""
    run = run_local(INIT, "--stack", "slow", run_dir=tmp_path, limit=60)
    assert run.returncode == 1, run.output
    failed = [p for p in by_job(run, "init-slow-node-0") if p["phase"] == "Failed"]
    assert failed and failed[0]["reason"] == "init container wait-for-initializers exited 1", run.output
    assert failed[0]["duration_seconds"] >= 5.5  # it waited; the message below says why it stopped
    assert "initializer did not finish before the deadline: /workspace/.trainjobs/dataset-initializer-" in run.output
    assert "node" not in failed[0]["logs"]
    assert not run.lines("E2E-TRAINER")
