"""Real JAX on CPU across emulated pods, configured by the rendered JAX_* env.

JAX reads JAX_COORDINATOR_ADDRESS itself (jax/_src/distributed.py) but neither JAX_NUM_PROCESSES
nor JAX_PROCESS_ID: a bare `jax.distributed.initialize()` fails outside a cluster JAX detects on
its own, and training code passes those two, as docs/components.md shows. Both facts are checked
here, so a JAX release that changes either shows up as a failing test.
"""

import pytest

from e2e_support import PROGRAMS, run_local

JAX = PROGRAMS / "jax" / "__main__.py"
pytestmark = pytest.mark.usefixtures("jax_ready")


def reports(run, tag: str) -> list[dict]:
    return sorted(run.reports(tag), key=lambda r: r["pod_index"])


def test_two_processes_initialize_from_the_env_and_sum_across_pods(tmp_path):
    run = run_local(JAX, "--stack", "documented", run_dir=tmp_path, limit=90)
    assert run.returncode == 0, run.output
    seen = reports(run, "E2E-JAX")
    assert [r["process_index"] for r in seen] == [0, 1], run.output
    for r in seen:
        assert r["pod_index"] == r["process_index"]
        assert r["hostname"] == f"e2e-jax-node-0-{r['pod_index']}"
        assert r["coordinator"] == "e2e-jax-node-0-0.e2e-jax:29500"
        assert (r["process_count"], r["devices"], r["local_devices"]) == (2, 2, 1)
        assert r["sum"] == 3.0  # 1 + 2: each process's value reached the other
    assert [p["phase"] for p in run.pods()] == ["Succeeded", "Succeeded"]


def test_a_bare_initialize_fails_because_jax_reads_only_the_coordinator_address(tmp_path):
    run = run_local(JAX, "--stack", "env-alone", run_dir=tmp_path, limit=60)
    assert run.returncode == 1, run.output
    failures = reports(run, "E2E-JAX-INIT-FAILED")
    assert failures, run.output
    assert {f["error"] for f in failures} == {"ValueError: Number of processes must be defined."}
    assert not run.lines("E2E-JAX {")
