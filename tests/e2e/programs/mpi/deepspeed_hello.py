"""DeepSpeed under a plain `mpirun`: `deepspeed.init_distributed()` finds rank, world size and the
master address through MPI (mpi4py), then torch.distributed (gloo, CPU) all-reduces across hosts."""

import json
import os
import socket

import deepspeed
import torch
import torch.distributed as dist
from mpi4py import MPI

deepspeed.init_distributed(dist_backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
me = {"rank": rank, "mpi_rank": MPI.COMM_WORLD.Get_rank(), "hostname": socket.gethostname(), "uid": os.getuid(),
      "local_rank": int(os.environ["LOCAL_RANK"]), "master_addr": os.environ["MASTER_ADDR"]}
everyone = [None] * size
dist.all_gather_object(everyone, me)
if rank == 0:
    report = {"size": size, "allreduce": int(total.item()), "expected": size * (size + 1) // 2,
              "library": f"deepspeed {deepspeed.__version__}, accelerator "
                         f"{deepspeed.get_accelerator().device_name()}, backend {dist.get_backend()}",
              "ranks": everyone}
    os.write(1, ("E2E-MPI " + json.dumps(report) + "\n").encode())
dist.barrier()
dist.destroy_process_group()
