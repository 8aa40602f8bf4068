"""Every rank: MPI rank and size, an allreduce, and where it runs; rank 0 prints one JSON line.

Run as `mpirun python hello.py` (or `mpiexec ...`) with no other flags: the hostfile, slots and
ssh options come from the launcher's env. Exits non-zero when the allreduce is wrong.
"""

import json
import os
import socket
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
key = os.stat(os.path.expanduser("~/.ssh/id_rsa"))  # the job's key as mounted where this rank runs
me = {"rank": rank, "hostname": socket.gethostname(), "uid": os.getuid(), "gid": os.getgid(),
      "groups": sorted(os.getgroups()), "python": sys.executable,
      "key": {"mode": oct(key.st_mode & 0o7777), "uid": key.st_uid, "gid": key.st_gid}}
everyone = comm.gather(me, root=0)
if rank == 0:
    report = {"size": size, "allreduce": total, "expected": size * (size + 1) // 2,
              "library": MPI.Get_library_version().splitlines()[0].strip(), "ranks": everyone}
    os.write(1, ("E2E-MPI " + json.dumps(report) + "\n").encode())
comm.Barrier()
sys.exit(0 if total == size * (size + 1) // 2 else 1)
