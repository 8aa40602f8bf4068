"""An elastic torch job in run-local with real torchrun and no torch variables of its own: declared 2:4 and
queued as a Kueue elastic Job (workload slices), admitted whole with 4 pods (Kueue admits such a Job whole or
not at all), shrunk to 2 and grown back to 4 while it trains, the ranks re-formed by the c10d rendezvous each
time and training resumed from its checkpoint, and the job complete."""

import pytest

from e2e_support import PROGRAMS, run_local

ELASTIC = PROGRAMS / "elastic" / "__main__.py"
pytestmark = pytest.mark.usefixtures("torch_ready")


def test_an_elastic_job_shrinks_and_grows_while_it_trains_and_resumes_from_its_checkpoint(tmp_path):
    # Each resize waits for the training to say its phase is done: no clock decides when it happens.
    run = run_local(ELASTIC, "--stack", "grow",
                    "--resize", "ela-node-0=2@output:E2E-PHASE-DONE 1 of 3",
                    "--resize", "ela-node-0=4@output:E2E-PHASE-DONE 2 of 3", run_dir=tmp_path, limit=500)
    assert run.returncode == 0, run.output
    assert "admitted:" not in run.output
    (job,) = run.summary["jobs"]
    assert (job["state"], job["completions"], job["succeeded"], job["failed_pods"]) == ("Complete", 4, [0, 1, 2, 3], 0)
    # Pods 2 and 3 were removed, not failed, by the shrink, and made again by the growth.
    pods = sorted((p["hostname"], p["phase"], p["reason"]) for p in run.pods())
    assert pods == [("ela-node-0-0", "Succeeded", ""), ("ela-node-0-1", "Succeeded", ""),
                    ("ela-node-0-2", "Stopped", "removed: Job scaled down to 2 pod(s)"),
                    ("ela-node-0-2", "Succeeded", ""),
                    ("ela-node-0-3", "Stopped", "removed: Job scaled down to 2 pod(s)"),
                    ("ela-node-0-3", "Succeeded", "")]
    resizes = [line for line in run.output.splitlines() if line.startswith("resizing Job ela-node-0")]
    assert resizes == ["resizing Job ela-node-0: 4 -> 2 pod(s) (run-local --resize)",
                       "resizing Job ela-node-0: 2 -> 4 pod(s) (run-local --resize)"]
    # The shrink is said once; the removed pods' SignalException and the lost peers of the pods that remain
    # (after a shrink, and after a growth when an agent restarts its worker first) stay in the logs.
    removed = [p for p in run.pods() if p["phase"] == "Stopped"]
    lines = run.output.splitlines()
    shrink = lines.index("resizing Job ela-node-0: 4 -> 2 pod(s) (run-local --resize)")
    assert lines[shrink + 1] == (f"  the shrink stops pod(s) {removed[1]['name']}, {removed[0]['name']}: their "
                                 "output, and the lost-peer errors of the pods that remain, go to the logs only")
    for hidden in ("SignalException", "Connection closed by peer", "Traceback"):
        assert not run.lines(hidden), run.output
        assert any(hidden in open(log).read() for p in removed + run.pods("Succeeded") for log in p["logs"].values())
    assert "lines of pods a shrink removed" in run.output and "lines of lost-peer errors after a resize" in run.output

    # Every rendezvous round: the nodes torchrun formed the world of, and the step it resumed from. (A slow
    # agent may miss a round and make one more of the same size: the sizes in turn are what counts.)
    rounds = run.reports("E2E-START")
    sizes = [(r["phase"], r["nodes"], r["world"]) for r in rounds]
    assert [size for i, size in enumerate(sizes) if i == 0 or size != sizes[i - 1]] == [
        (1, 4, 4), (2, 2, 2), (3, 4, 4)]
    assert rounds[0]["resumed_from"] == 0
    starts = [next(r["resumed_from"] for r in rounds if r["phase"] == phase) for phase in (2, 3)]
    # From the checkpoint, after 3 steps or more at each size.
    assert starts[0] >= 3 and starts[1] >= starts[0] + 3
    assert all(r["resumed_from"] > 0 for r in rounds[1:])
    # The grown world ranked pods 2 and 3 again.
    assert any(line.endswith("of 4 on pod 3") for line in run.lines("E2E-RANK"))

    final = sorted(run.reports("E2E-DONE"), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"]) for r in final] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert sorted(r["pod_index"] for r in final) == [0, 1, 2, 3]
    seen = final[0]["seen"]
    assert all(r["seen"] == seen == [[4, 0], [2, starts[0]], [4, starts[1]]] for r in final)
    # No step lost or done twice: each step added w(w+1)/2 at its world size w.
    bounds = [start for _, start in seen[1:]] + [final[0]["step"]]
    expected = sum((end - start) * n * (n + 1) / 2 for (n, start), end in zip(seen, bounds))
    assert [r["weight"] for r in final] == [expected] * 4
