"""Real xgboost on CPU across emulated pods, configured by the rendered DMLC_* env alone.

The program starts xgboost's tracker in the pod with DMLC_TASK_ID 0, as programs in Kubeflow's
xgboost runtime do; both workers join it at DMLC_TRACKER_URI:DMLC_TRACKER_PORT and train one model
on their shards together.
"""

import pytest

from e2e_support import PROGRAMS, run_local

XGBOOST = PROGRAMS / "xgboost" / "__main__.py"
pytestmark = pytest.mark.usefixtures("xgboost_ready")


def reports(run, tag: str) -> list[dict]:
    return run.reports(tag)


def test_two_workers_join_the_tracker_of_task_0_and_train_one_model(tmp_path):
    run = run_local(XGBOOST, "--stack", "two-workers", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    seen = sorted(reports(run, "E2E-XGB"), key=lambda r: r["task_id"])
    assert [r["task_id"] for r in seen] == [0, 1], run.output
    assert sorted(r["rank"] for r in seen) == [0, 1]
    for r in seen:
        assert r["hostname"] == f"e2e-xgb-node-0-{r['task_id']}"
        assert r["tracker"] == "e2e-xgb-node-0-0.e2e-xgb:29500"
        assert (r["num_worker"], r["world_size"], r["joined"]) == (2, 2, [1, 1])
        assert (r["local_rows"], r["rows"], r["root_covers"], r["trees"]) == (1000, 2000, [2000], 5)
    assert seen[0]["model"] == seen[1]["model"]
    done = run.lines("E2E-XGB-DONE ")
    assert len(done) == 1 and done[0].startswith("[e2e-xgb-node-0-0] "), run.output
    assert reports(run, "E2E-XGB-DONE") == [{"world_size": 2, "trees": 5, "model": seen[0]["model"]}]
    assert [p["phase"] for p in run.pods()] == ["Succeeded", "Succeeded"]
