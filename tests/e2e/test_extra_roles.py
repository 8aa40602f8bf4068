"""Pods that are not training pods: extra roles, sidecars and init containers, next to real training.

The Volcano WORLD_SIZE bug (volcano-sh/volcano#4166, #4238) counted an extra task's pods in
WORLD_SIZE and gave them the training variables; here 4 one-process-per-pod trainers agree on
WORLD_SIZE=4 and all_reduce while 4 extra pods see no training variable at all.
"""

import pytest

from e2e_support import PROGRAMS, run_local

ROLES = PROGRAMS / "roles" / "__main__.py"


def reports(run, tag: str) -> list[dict]:
    return run.reports(tag)


@pytest.mark.usefixtures("torch_ready")
def test_volcano_scenario_world_size_counts_only_training_pods(tmp_path):
    run = run_local(ROLES, "--stack", "volcano", run_dir=tmp_path, limit=120)
    assert run.returncode == 0, run.output
    ranks = sorted(reports(run, "E2E-RANK"), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3], run.output
    for r in ranks:
        # rank 0 is the master pod, ranks 1-3 the workers; the process group agrees with the env
        assert r["hostname"] == f"vc-node-0-{r['rank']}" and r["pod_index"] == r["group_rank"] == r["rank"]
        assert r["world_size"] == r["group_size"] == 4
        assert (r["master_addr"], r["master_port"]) == ("vc-node-0-0.vc", "29500")
        assert r["all_reduce"] == 10.0
        assert r["pet"] == []  # no torchrun, no PET_* variables
    extras = sorted(reports(run, "E2E-ENV"), key=lambda r: r["hostname"])
    assert [e["hostname"] for e in extras] == [f"vc-extras-0-{i}" for i in range(4)], run.output
    assert all(e["container"] == "extras" and e["env"] == {} for e in extras), extras
    phases = {(p["job"], p["index"]): p["phase"] for p in run.pods()}
    assert phases == {(job, i): "Succeeded" for job in ("vc-node-0", "vc-extras-0") for i in range(4)}


def test_env_injection_gives_the_torch_env_to_named_sidecars_and_init_containers_only(tmp_path):
    run = run_local(ROLES, "--stack", "sidecars", run_dir=tmp_path, limit=60)
    assert run.returncode == 0, run.output
    seen = {(r["hostname"], r["container"]): r["env"] for r in reports(run, "E2E-ENV")}
    assert len(seen) == 8, run.output  # 2 pods x (node, warmup, metrics, logs)
    for index in (0, 1):
        host = f"sc-node-0-{index}"
        expected = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(index),
                    "PET_MASTER_ADDR": "sc-node-0-0.sc", "PET_MASTER_PORT": "29500"}
        assert seen[host, "node"] == expected
        assert seen[host, "warmup"] == expected   # init container named in env_injection
        assert seen[host, "metrics"] == expected  # native sidecar named in env_injection
        assert seen[host, "logs"] == {}           # a sidecar not named gets nothing
    assert [p["phase"] for p in run.pods()] == ["Succeeded", "Succeeded"]
