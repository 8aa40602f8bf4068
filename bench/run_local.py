"""What `trainjobs run-local` costs over running the same training without it.

A: `python -m components.cli run-local bench/torch2x2/__main__.py`: render the program, set up two
   emulated pods, run `torchrun allreduce.py` in each (2 nodes x 2 processes), clean up.
B: the same two `torchrun allreduce.py` processes started directly on loopback, with the PET_*
   env the pods get (PET_MASTER_ADDR 127.0.0.1).

Runs alternate A, B, A, B, ... after one unmeasured warm-up of each; each run is a fresh process,
timed from its start to its exit. Prints every pair, the medians and the median of the per-pair
ratios A/B, and writes them as JSON with --out. Needs root (run-local does) and torch.

    sudo .venv/bin/python bench/run_local.py [--pairs 7] [--out results.json]
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


def run_local(scratch: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "components.cli", "run-local", str(PROGRAM / "__main__.py"),
               "--run-dir", str(scratch)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"run-local failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds


def bare_torchrun(scratch: Path) -> float:
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
    parser.add_argument("--out", help="write the results here as JSON")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-run-local-"))
    try:
        run_local(scratch), bare_torchrun(scratch)  # warm-up: page cache, bytecode
        pairs = []
        for i in range(args.pairs):
            a, b = run_local(scratch), bare_torchrun(scratch)
            pairs.append((a, b))
            print(f"pair {i + 1}: run-local {a:.2f}s, bare torchrun {b:.2f}s, ratio {a / b:.3f}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "pairs": [{"run_local": round(a, 3), "torchrun": round(b, 3)} for a, b in pairs],
        "median_run_local": round(statistics.median(a for a, _ in pairs), 3),
        "median_torchrun": round(statistics.median(b for _, b in pairs), 3),
        "median_ratio": round(statistics.median(a / b for a, b in pairs), 3),
        "cpus": len(os.sched_getaffinity(0)), "load_average": os.getloadavg(),
    }
    print(f"median run-local {result['median_run_local']:.2f}s, bare torchrun {result['median_torchrun']:.2f}s, "
          f"median ratio {result['median_ratio']:.3f} ({len(pairs)} pairs, {result['cpus']} CPUs, "
          f"load {result['load_average'][0]:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
