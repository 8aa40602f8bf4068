"""The JobSet backend in run-local: the same training on it, its start order, whole-group restarts."""

from collections import Counter

import pytest

from e2e_support import PROGRAMS, run_local
from test_mpi import (IMPLEMENTATIONS, assert_job_env_on_every_rank, mpi_envs, pod_hosts,  # noqa: F401 (a fixture)
                      report, run_mpi)
from test_torch import TORCH, ranks

RESILIENCE = PROGRAMS / "resilience" / "__main__.py"


def done(run) -> list[dict]:
    return sorted(run.reports("E2E-DONE"), key=lambda r: r["rank"])


@pytest.mark.usefixtures("torch_ready")
def test_torch_2_nodes_x_2_processes_on_a_jobset(tmp_path):
    run = run_local(TORCH, "--stack", "static", "--config", "backend=jobset", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    seen = ranks(run)
    assert [r["rank"] for r in seen] == [0, 1, 2, 3], run.output
    for r in seen:
        assert r["world_size"] == 4 and r["local_world_size"] == 2 and r["all_reduce"] == 10.0
        assert r["hostname"] == f"e2e-static-node-0-{r['pod_index']}"
        assert r["master_addr"] == "e2e-static-node-0-0.e2e-static"
    assert run.summary["jobsets"] == [{"name": "e2e-static", "state": "Completed", "restarts": 0,
                                       "reason": "AllJobsCompleted: jobset completed successfully"}]
    assert [(p["job"], p["phase"]) for p in run.pods()] == [("e2e-static-node-0", "Succeeded")] * 2


def test_openmpi_3_hosts_on_a_jobset(mpi_envs, tmp_path):
    env, config = IMPLEMENTATIONS["openmpi4"]
    run = run_mpi("three-hosts", f"{mpi_envs}/{env}", tmp_path, backend="jobset", **config)
    assert run.returncode == 0, run.output
    seen = report(run)
    assert seen["size"] == 6 and seen["allreduce"] == seen["expected"], seen
    assert Counter(r["hostname"] for r in seen["ranks"]) == {host: 2 for host in pod_hosts("three", 3, launcher=False)}
    assert_job_env_on_every_rank(seen)
    assert [(s["name"], s["state"], s["restarts"]) for s in run.summary["jobsets"]] == [("three", "Completed", 0)]
    # dependsOn: the launcher starts once every node pod is ready; its end is the JobSet's (successPolicy),
    # and the controller then stops the nodes, which no longer wait to hear the launcher's exit code.
    assert "JobSet three: replicated jobs node -> launcher" in run.output
    launcher = [p for p in run.pods() if p["job"] == "three-launcher-0"]
    assert [(p["phase"], p["exit_code"]) for p in launcher] == [("Succeeded", 0)]
    nodes = [p for p in run.pods() if p["job"] == "three-node-0"]
    assert len(nodes) == 3 and all(p["phase"] in ("Succeeded", "Stopped") for p in nodes), nodes
    assert {p["reason"] for p in nodes if p["phase"] == "Stopped"} <= {"stopped: JobSet three completed"}


# The group's training runs as the container's own process (`torchrun=false`): a restart of the whole group needs
# no torchrun agent in each pod, which would import torch once more per pod and attempt.
ALONE = ("--config", "torchrun=false")


@pytest.mark.usefixtures("torch_ready")
def test_a_failed_rank_restarts_the_whole_group_which_resumes_from_its_checkpoint(tmp_path):
    run = run_local(RESILIENCE, "--stack", "group", *ALONE, "--config", "fail_attempts=1", run_dir=tmp_path, limit=240)
    assert run.returncode == 0, run.output
    assert [(s["state"], s["restarts"]) for s in run.summary["jobsets"]] == [("Completed", 1)]
    attempts = [(p["hostname"], p["phase"], p["reason"]) for p in run.pods()]
    # Index 1 fails (its script exits 3), its Job fails; the JobSet stops index 0 and recreates both.
    assert attempts == [("grp-node-0-0", "Stopped", "stopped: Job failed"),
                        ("grp-node-0-1", "Failed", "container node exited 3"),
                        ("grp-node-0-0", "Succeeded", ""), ("grp-node-0-1", "Succeeded", "")]
    final = done(run)
    assert [r["weight"] for r in final] == [36.0, 36.0]          # 12 steps x (1 + 2): none lost, none twice
    assert {r["resumed_from"] for r in final} == {2}              # from the checkpoint of the first attempt


@pytest.mark.usefixtures("torch_ready")
def test_the_group_restarts_at_most_max_restarts_times(tmp_path):
    run = run_local(RESILIENCE, "--stack", "group", *ALONE, "--config", "fail_attempts=9", run_dir=tmp_path, limit=300)
    assert run.returncode == 1, run.output
    (jobset,) = run.summary["jobsets"]
    assert jobset["state"] == "Failed" and jobset["restarts"] == 2
    assert jobset["reason"].startswith("ReachedMaxRestarts: jobset failed due to reaching max number of restarts (2)")
    # Every pod ran three times: the first run and two restarts of the whole group.
    assert [p["hostname"] for p in run.pods()] == ["grp-node-0-0", "grp-node-0-1"] * 3
    assert [p["phase"] for p in run.pods() if p["hostname"] == "grp-node-0-1"] == ["Failed"] * 3
