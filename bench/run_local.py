"""What `trainjobs run-local` costs over running the same training without it.

A: `trainjobs run-local bench/torch2x2/__main__.py`: render the program, set up two
   emulated pods, run `torchrun allreduce.py` in each (2 nodes x 2 processes), clean up.
B: the same two `torchrun allreduce.py` processes started directly on loopback, with the PET_*
   env the pods get (PET_MASTER_ADDR 127.0.0.1).

Runs alternate A, B, A, B, ... (each going first in turn) after one unmeasured warm-up of each;
each run is a fresh process, timed from its start to its exit. Prints every pair, the medians, the
median of the per-pair ratios A/B, and run-local's own cost: its time outside its longest pod (from
summary.json), which a busy machine disturbs less than the training. With --before DIR, each round
also times run-local as installed in DIR (`pip install --target DIR <older checkout>`), so a change is
measured against what it replaces under the same load. --out writes the results as JSON. Needs root and torch.

    sudo .venv/bin/python bench/run_local.py [--pairs 7] [--before DIR] [--out results.json]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "bench" / "torch2x2"
NODES, PROCS = 2, 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local(scratch: Path, target: Path | None = None) -> tuple[float, float]:
    """Seconds of the whole run, and of them the longest pod's (from its containers' start to its end).

    `target`: a `pip install --target` directory holding another version, run instead of this one."""
    env = {**os.environ, "PYTHONPATH": str(target)} if target else os.environ
    trainjobs = target / "bin" / "trainjobs" if target else Path(sys.executable).with_name("trainjobs")
    run_dir = Path(tempfile.mkdtemp(dir=scratch))
    command = [str(trainjobs), "run-local", str(PROGRAM / "__main__.py"), "--run-dir", str(run_dir)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"run-local failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    [summary] = run_dir.glob("trainjobs-*/summary.json")
    return seconds, max(pod["duration_seconds"] for pod in json.loads(summary.read_text())["pods"])


def bare_torchrun() -> float:
    torchrun = Path(sys.executable).with_name("torchrun")
    port = free_port()
    started = time.perf_counter()
    processes = [subprocess.Popen([str(torchrun), "allreduce.py"], cwd=PROGRAM, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "1", "PET_NNODES": str(NODES),
                                       "PET_NPROC_PER_NODE": str(PROCS), "PET_NODE_RANK": str(rank),
                                       "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)})
                 for rank in range(NODES)]
    outputs = [p.communicate()[0] for p in processes]
    seconds = time.perf_counter() - started
    if any(p.returncode != 0 for p in processes):
        raise SystemExit("torchrun failed:\n" + "\n".join(outputs))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--before", type=Path, metavar="DIR", help="also time run-local as installed in DIR by pip install --target")
    parser.add_argument("--out", help="write the results here as JSON")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-run-local-"))
    rounds = []
    try:
        run_local(scratch), bare_torchrun()  # warm-up: page cache, bytecode
        runs = {"run_local": lambda: run_local(scratch), "torchrun": lambda: (bare_torchrun(), 0.0)}
        if args.before:
            runs["before"] = lambda: run_local(scratch, args.before)
        for i in range(args.pairs):
            order = list(runs)[i % len(runs):] + list(runs)[:i % len(runs)]  # each kind goes first in turn
            measured = {kind: runs[kind]() for kind in order}
            times = {kind: seconds for kind, (seconds, _) in measured.items()}
            # run-local's own cost: the run's time outside its longest pod
            times.update({f"{kind}_own": seconds - pod for kind, (seconds, pod) in measured.items() if kind != "torchrun"})
            rounds.append(times)
            a, b, before = times["run_local"], times["torchrun"], times.get("before")
            print(f"pair {i + 1}: run-local {a:.2f}s (own {times['run_local_own']:.2f}s)"
                  + (f", before {before:.2f}s (own {times['before_own']:.2f}s)" if before else "")
                  + f", bare torchrun {b:.2f}s, ratio {a / b:.3f}" + (f" (before {before / b:.3f})" if before else ""),
                  flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    median = lambda key: round(statistics.median(r[key] for r in rounds), 3)  # noqa: E731
    ratio = lambda key: round(statistics.median(r[key] / r["torchrun"] for r in rounds), 3)  # noqa: E731
    result = {"rounds": [{k: round(v, 3) for k, v in r.items()} for r in rounds],
              "median_run_local": median("run_local"), "median_run_local_own": median("run_local_own"),
              "median_torchrun": median("torchrun"), "median_ratio": ratio("run_local"),
              "cpus": len(os.sched_getaffinity(0)), "load_average": os.getloadavg()}
    if args.before:
        result.update(median_before=median("before"), median_before_own=median("before_own"),
                      median_ratio_before=ratio("before"))
    print(f"median run-local {result['median_run_local']:.2f}s (own {result['median_run_local_own']:.2f}s), "
          f"bare torchrun {result['median_torchrun']:.2f}s, median ratio {result['median_ratio']:.3f}"
          + (f" (before: {result['median_before']:.2f}s, own {result['median_before_own']:.2f}s, ratio "
             f"{result['median_ratio_before']:.3f})" if args.before else "")
          + f"; {len(rounds)} pairs, {result['cpus']} CPUs, load {result['load_average'][0]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
