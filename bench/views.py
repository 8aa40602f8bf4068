"""What rendering huge jobs costs: registration, the per-pod view (`ranks.txt`) and the whole render to disk.

    .venv/bin/python bench/views.py [--both N] [--torch N]

`--both N` renders one N-node torch job next to one N-node MPI job (default: 4096 each); `--torch N`
one N-node torch job (default: 100000, the Indexed Job limit). "total" is registration plus the
render to disk (YAML and ranks.txt), what `trainjobs render` spends beyond its imports.
"""

import argparse
import tempfile
import time
from pathlib import Path

from components import MpiTrainJob, TorchTrainJob
from components import render
from components.testing import run


def measure(label: str, program) -> None:
    start = time.perf_counter()
    result = run(program)
    registered = time.perf_counter() - start
    objects = render.kubernetes_objects(result)
    start = time.perf_counter()
    text = render.ranks_text(objects)
    view = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        render.write(result, Path(tmp) / "out")
        written = time.perf_counter() - start
    print(f"{label}: register {registered:.2f} s, ranks.txt {view:.2f} s ({len(text.splitlines())} lines), "
          f"render to disk {written:.2f} s; total {registered + written:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch", type=int, default=100000)
    parser.add_argument("--both", type=int, default=4096)
    options = parser.parse_args()
    n = options.both
    measure(f"torch {n} + MPI {n} nodes", lambda: (
        TorchTrainJob("big", {"image": "x:1", "num_nodes": n}),
        MpiTrainJob("mpi", {"image": "x:1", "command": ["mpirun", "x"], "num_nodes": n})))
    measure(f"torch {options.torch} nodes",
            lambda: TorchTrainJob("big", {"image": "x:1", "num_nodes": options.torch}))


if __name__ == "__main__":
    main()
