"""Every rank: MPI rank and size, an allreduce, where it runs and the job env it sees; rank 0 prints
one JSON line.

Run as `mpirun python hello.py` (or `mpiexec ...`) with no other flags: the hostfile, slots and
ssh options come from the launcher's env, and `python` from the PATH forwarded with the job's env.
Exits non-zero when the allreduce is wrong or a rank lacks the job's E2E_MARKER.
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
      "key": {"mode": oct(key.st_mode & 0o7777), "uid": key.st_uid, "gid": key.st_gid},
      "env": {name: os.environ.get(name) for name in ("E2E_MARKER", "E2E_FLAGS", "E2E_LIST")}}
everyone = comm.gather(me, root=0)
without_marker = comm.allreduce(0 if os.environ.get("E2E_MARKER") else 1, op=MPI.SUM)
if rank == 0:
    report = {"size": size, "allreduce": total, "expected": size * (size + 1) // 2,
              "library": MPI.Get_library_version().splitlines()[0].strip(), "ranks": everyone,
              "ranks_without_marker": without_marker}
    os.write(1, ("E2E-MPI " + json.dumps(report) + "\n").encode())
comm.Barrier()
sys.exit(0 if total == size * (size + 1) // 2 and without_marker == 0 else 1)
