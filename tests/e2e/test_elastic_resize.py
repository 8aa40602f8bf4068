"""An elastic torch job in run-local with real torchrun and no torch variables of its own: declared 2:4,
admitted with 2 pods, grown to 3 and to 4 and shrunk back to 2 while it trains, the ranks re-formed by the
c10d rendezvous each time and training resumed from its checkpoint, and the job complete."""

import pytest

from e2e_support import PROGRAMS, run_local

ELASTIC = PROGRAMS / "elastic" / "__main__.py"
pytestmark = pytest.mark.usefixtures("torch_ready")


def test_an_elastic_job_grows_and_shrinks_while_it_trains_and_resumes_from_its_checkpoint(tmp_path):
    # Each resize waits for the training to say its phase is done: no clock decides when it happens.
    run = run_local(ELASTIC, "--stack", "grow", "--admit", "ela-node-0=2",
                    "--resize", "ela-node-0=3@output:E2E-PHASE-DONE 1 of 4",
                    "--resize", "ela-node-0=4@output:E2E-PHASE-DONE 2 of 4",
                    "--resize", "ela-node-0=2@output:E2E-PHASE-DONE 3 of 4", run_dir=tmp_path, limit=500)
    assert run.returncode == 0, run.output
    assert "admitted: Job ela-node-0 runs 2 of its 4 pods, as Kueue admits part of a Job" in run.output
    (job,) = run.summary["jobs"]
    assert (job["state"], job["completions"], job["succeeded"], job["failed_pods"]) == ("Complete", 2, [0, 1], 0)
    # Pods 2 and 3 joined as the job grew and were removed, not failed, by the shrink.
    pods = sorted((p["hostname"], p["phase"], p["reason"]) for p in run.pods())
    assert pods == [("ela-node-0-0", "Succeeded", ""), ("ela-node-0-1", "Succeeded", ""),
                    ("ela-node-0-2", "Stopped", "removed: Job scaled down to 2 pod(s)"),
                    ("ela-node-0-3", "Stopped", "removed: Job scaled down to 2 pod(s)")]
    resizes = [line for line in run.output.splitlines() if line.startswith("resizing Job ela-node-0")]
    assert resizes == ["resizing Job ela-node-0: 2 -> 3 pod(s) (run-local --resize)",
                       "resizing Job ela-node-0: 3 -> 4 pod(s) (run-local --resize)",
                       "resizing Job ela-node-0: 4 -> 2 pod(s) (run-local --resize)"]
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
        (1, 2, 2), (2, 3, 3), (3, 4, 4), (4, 2, 2)]
    assert rounds[0]["resumed_from"] == 0
    starts = [next(r["resumed_from"] for r in rounds if r["phase"] == phase) for phase in (2, 3, 4)]
    # From the checkpoint, after 3 steps or more at each size.
    assert starts[0] >= 3 and starts[1] >= starts[0] + 3 and starts[2] >= starts[1] + 3
    assert all(r["resumed_from"] > 0 for r in rounds[1:])
    # The grown worlds ranked pods 2 and 3 too.
    assert any(line.endswith("of 3 on pod 2") for line in run.lines("E2E-RANK"))
    assert any(line.endswith("of 4 on pod 3") for line in run.lines("E2E-RANK"))

    final = sorted(run.reports("E2E-DONE"), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"]) for r in final] == [(0, 2), (1, 2)]
    assert sorted(r["pod_index"] for r in final) == [0, 1]
    seen = final[0]["seen"]
    assert seen == [[2, 0], [3, starts[0]], [4, starts[1]], [2, starts[2]]] == final[1]["seen"]
    # No step lost or done twice: each step added w(w+1)/2 at its world size w.
    bounds = [start for _, start in seen[1:]] + [final[0]["step"]]
    expected = sum((end - start) * n * (n + 1) / 2 for (n, start), end in zip(seen, bounds))
    assert [r["weight"] for r in final] == [expected, expected]
