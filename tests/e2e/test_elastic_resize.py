"""An elastic torch job in run-local with real torchrun: declared 2:4, admitted with 2 pods, grown to 3
and shrunk back to 2 while it trains, the ranks re-formed by the c10d rendezvous each time and training
resumed from its checkpoint, and the job complete."""

import pytest

from e2e_support import PROGRAMS, run_local

ELASTIC = PROGRAMS / "elastic" / "__main__.py"
pytestmark = pytest.mark.usefixtures("torch_ready")


def test_an_elastic_job_grows_and_shrinks_while_it_trains_and_resumes_from_its_checkpoint(tmp_path):
    # Each resize waits for the training to say its phase is done: no clock decides when it happens.
    run = run_local(ELASTIC, "--stack", "grow", "--admit", "ela-node-0=2",
                    "--resize", "ela-node-0=3@output:E2E-PHASE-DONE 1 of 3",
                    "--resize", "ela-node-0=2@output:E2E-PHASE-DONE 2 of 3", run_dir=tmp_path, limit=400)
    assert run.returncode == 0, run.output
    assert "admitted: Job ela-node-0 runs 2 of its 4 pods, as Kueue admits part of a Job" in run.output
    (job,) = run.summary["jobs"]
    assert (job["state"], job["completions"], job["succeeded"], job["failed_pods"]) == ("Complete", 2, [0, 1], 0)
    # Pod 3 never ran; pod 2 joined for the second phase and was removed, not failed, by the shrink.
    pods = [(p["hostname"], p["phase"], p["reason"]) for p in run.pods()]
    assert pods == [("ela-node-0-0", "Succeeded", ""), ("ela-node-0-1", "Succeeded", ""),
                    ("ela-node-0-2", "Stopped", "removed: Job scaled down to 2 pod(s)")]
    resizes = [line for line in run.output.splitlines() if line.startswith("resizing Job ela-node-0")]
    assert resizes == ["resizing Job ela-node-0: 2 -> 3 pod(s) (run-local --resize)",
                       "resizing Job ela-node-0: 3 -> 2 pod(s) (run-local --resize)"]

    # Every rendezvous round: the nodes torchrun formed the world of, and the step it resumed from. (A slow
    # agent may miss a round and make one more of the same size: the sizes in turn are what counts.)
    rounds = run.reports("E2E-START")
    sizes = [(r["phase"], r["nodes"], r["world"]) for r in rounds]
    assert [size for i, size in enumerate(sizes) if i == 0 or size != sizes[i - 1]] == [(1, 2, 2), (2, 3, 3), (3, 2, 2)]
    assert rounds[0]["resumed_from"] == 0
    grown = next(r["resumed_from"] for r in rounds if r["phase"] == 2)
    shrunk = next(r["resumed_from"] for r in rounds if r["phase"] == 3)
    assert grown >= 3 and shrunk >= grown + 3   # from the checkpoint, after 3 steps or more at each size
    assert all(r["resumed_from"] > 0 for r in rounds[1:])
    # The grown world ranked pod 2 too.
    assert any(line.endswith("of 3 on pod 2") for line in run.lines("E2E-RANK"))

    final = sorted(run.reports("E2E-DONE"), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"]) for r in final] == [(0, 2), (1, 2)]
    assert sorted(r["pod_index"] for r in final) == [0, 1]
    seen = final[0]["seen"]
    assert seen == [[2, 0], [3, grown], [2, shrunk]] == final[1]["seen"]
    # No step lost or done twice: each step added w(w+1)/2 at its world size w.
    bounds = [start for _, start in seen[1:]] + [final[0]["step"]]
    expected = sum((end - start) * n * (n + 1) / 2 for (n, start), end in zip(seen, bounds))
    assert [r["weight"] for r in final] == [expected, expected]
