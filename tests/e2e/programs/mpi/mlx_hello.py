"""MLX under a plain `mpirun`: `mx.distributed.init(backend="mpi")` takes rank and size from MPI and
`all_sum` adds across hosts (MLX's CPU build)."""

import json
import os
import socket

# MLX loads the MPI library by name, `libmpi.so` unless told otherwise: the development symlink,
# which Kubeflow's MLX image has (libopenmpi-dev) and a runtime-only OpenMPI install lacks.
os.environ.setdefault("MLX_MPI_LIBNAME", "libmpi.so.40")

import mlx.core as mx  # noqa: E402

group = mx.distributed.init(strict=True, backend="mpi")
rank, size = group.rank(), group.size()
total = mx.distributed.all_sum(mx.array([float(rank + 1)]))
names = mx.distributed.all_gather(mx.array([list(socket.gethostname().encode().ljust(64, b"\0"))], dtype=mx.uint8))
mx.eval(total, names)
hosts = [bytes(row.tolist()).rstrip(b"\0").decode() for row in names]
if rank == 0:
    report = {"size": size, "allreduce": int(total.item()), "expected": size * (size + 1) // 2,
              "library": f"mlx {mx.__version__} (mlx.core.distributed, MPI backend)",
              "ranks": [{"rank": r, "hostname": h} for r, h in enumerate(hosts)]}
    os.write(1, ("E2E-MPI " + json.dumps(report) + "\n").encode())
