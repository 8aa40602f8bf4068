"""Stand-in for /home/mpiuser/pi of mpi-operator's `mpi-pi` image, which is a compiled MPI program.

run-local puts this script at that path in pods of `mpioperator/mpi-pi:openmpi`, run by Debian's
python3 with its mpi4py (package python3-mpi4py) over Debian's OpenMPI, which stands in for the
image's. Like the image's program, every rank draws points in the square [-1, 1]^2 from a generator
seeded with its rank, counts those inside the unit circle, and rank 0 reduces the counts to an
estimate of pi. It prints what the image's program prints, with fewer points per rank (Python is
slower than the compiled program).
"""

import random

from mpi4py import MPI

POINTS_PER_RANK = 200_000

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if rank == 0:
    print(f"Workers: {size}", flush=True)
print(f"Rank {rank} on host {MPI.Get_processor_name()}", flush=True)

draw = random.Random(rank).uniform
inside = sum(1 for _ in range(POINTS_PER_RANK) if draw(-1.0, 1.0) ** 2 + draw(-1.0, 1.0) ** 2 <= 1.0)
total = comm.reduce(inside, op=MPI.SUM, root=0)
if rank == 0:
    print(f"pi is approximately {4.0 * total / POINTS_PER_RANK / size:.16f}", flush=True)
comm.Barrier()
