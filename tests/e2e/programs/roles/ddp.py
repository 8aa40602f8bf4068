"""One training process per pod, no torchrun: `init_process_group` reads MASTER_ADDR, MASTER_PORT,
WORLD_SIZE and RANK from the env (the env:// method) and the ranks all_reduce.

Prints one `E2E-RANK {json}` line and exits non-zero on any mismatch with the EXPECT_* env.
"""

import json
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

env = os.environ
# A wrong WORLD_SIZE or master makes the rendezvous wait for ranks that never come: give up after 30 s.
dist.init_process_group("gloo", timeout=timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
identity = {
    "rank": int(env["RANK"]), "world_size": int(env["WORLD_SIZE"]), "master_addr": env["MASTER_ADDR"],
    "master_port": env["MASTER_PORT"], "hostname": socket.gethostname(),
    "pod_index": int(env["JOB_COMPLETION_INDEX"]), "group_rank": rank, "group_size": world,
    "all_reduce": total.item(), "pet": sorted(k for k in env if k.startswith("PET_")),
}
os.write(1, f"E2E-RANK {json.dumps(identity, sort_keys=True)}\n".encode())

problems = []
if world != int(env["EXPECT_WORLD_SIZE"]):
    problems.append(f"world size {world}, expected {env['EXPECT_WORLD_SIZE']}")
if rank != identity["pod_index"]:
    problems.append(f"rank {rank} on pod index {identity['pod_index']}")
if (identity["master_addr"], identity["master_port"]) != (env["EXPECT_MASTER_ADDR"], env["EXPECT_MASTER_PORT"]):
    problems.append(f"master {identity['master_addr']}:{identity['master_port']}")
if total.item() != world * (world + 1) / 2:
    problems.append(f"all_reduce {total.item()}, expected {world * (world + 1) / 2}")
if problems:
    os.write(2, f"E2E-FAIL rank {rank}: {'; '.join(problems)}\n".encode())
    raise SystemExit(1)
dist.barrier()
dist.destroy_process_group()
