"""Real torchrun across emulated pods, configured only by the rendered PET_* env (`torchrun train.py`)."""

import pytest

from e2e_support import PROGRAMS, REPO, run_local

TORCH = PROGRAMS / "torch" / "__main__.py"
pytestmark = pytest.mark.usefixtures("torch_ready")


def ranks(run) -> list[dict]:
    return sorted(run.reports("E2E-RANK"), key=lambda r: r["rank"])


def test_static_rendezvous_2_nodes_x_2_processes(tmp_path):
    run = run_local(TORCH, "--stack", "static", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    seen = ranks(run)
    assert [r["rank"] for r in seen] == [0, 1, 2, 3], run.output
    for r in seen:
        assert r["world_size"] == 4 and r["local_world_size"] == 2
        assert r["group_rank"] == r["pod_index"] == r["rank"] // 2
        assert r["local_rank"] == r["rank"] % 2
        assert r["hostname"] == f"e2e-static-node-0-{r['pod_index']}"
        assert r["master_addr"] == "e2e-static-node-0-0.e2e-static" and r["master_port"] == "29500"
        assert r["all_reduce"] == 10.0
    assert [p["phase"] for p in run.pods()] == ["Succeeded", "Succeeded"]
    assert "SUCCEEDED" in run.output


def test_c10d_rendezvous(tmp_path):
    run = run_local(TORCH, "--stack", "c10d", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    seen = ranks(run)
    assert [r["rank"] for r in seen] == [0, 1, 2, 3], run.output
    assert {r["world_size"] for r in seen} == {4}
    assert sorted(r["group_rank"] for r in seen) == [0, 0, 1, 1]
    # c10d: MASTER_ADDR is the FQDN of the agent that became group rank 0, the same for every rank.
    masters = {r["master_addr"] for r in seen}
    assert len(masters) == 1, masters
    leader = next(r for r in seen if r["rank"] == 0)
    assert masters == {f"e2e-c10d-node-0-{leader['pod_index']}.e2e-c10d.default.svc.cluster.local"}
    assert {r["all_reduce"] for r in seen} == {10.0}


def test_master_address_at_the_wrong_pod_fails_fast_with_a_clear_report(tmp_path):
    """A broken derivation (rank 0's address pointing at pod 1) must fail within a bound, not hang."""
    prelude = ("import trainjobs.families.torch as t\n"
               "from trainjobs.core import naming\n"
               "t.master_addr = lambda name: naming.pod_dns_name(name, t.ROLE, 1)\n")
    run = run_local(TORCH, "--stack", "static", "--config", "rdzv_timeout=5", run_dir=tmp_path, limit=90,
                    python_prelude=prelude)
    assert run.returncode == 1, run.output  # failed by itself (a hang would end in the run's timeout, 124)
    failed = run.pods("Failed")
    assert len(failed) == 1 and failed[0]["exit_code"] == 1, run.output
    assert run.pods("Stopped"), "the other pod was not stopped"
    assert "BackoffLimitExceeded" in run.output and f"pod {failed[0]['name']}" in run.output
    assert "(e2e-static-node-0-1.e2e-static, 29500)" in run.output  # torch names the wrong master
    assert not run.lines("E2E-RANK ")


def test_the_example_stack_runs_and_every_rank_reports(tmp_path):
    run = run_local(REPO / "stacks" / "__main__.py", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    identities = run.lines(" all_reduce=")
    assert len(identities) == 6, run.output  # 2 pods x 3 processes (2.5 CPUs -> 3)
    for rank in range(6):
        assert any(f"RANK={rank} " in line and "WORLD_SIZE=6" in line for line in identities), rank
    assert "replicas in sync: True" in run.output
    assert "not run: llama-finetune-node-0: needs nvidia.com/gpu: 8" in run.output
