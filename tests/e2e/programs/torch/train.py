"""Checks, on every rank, the identity torchrun derived from the pod's PET_* env alone.

Prints one `E2E-RANK {json}` line per rank (a single write, so ranks never interleave) and fails
the rank, and so the pod, on any mismatch.
"""

import json
import os
import socket

import torch
import torch.distributed as dist

env = os.environ
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
identity = {
    "rank": int(env["RANK"]), "local_rank": int(env["LOCAL_RANK"]), "world_size": int(env["WORLD_SIZE"]),
    "local_world_size": int(env["LOCAL_WORLD_SIZE"]), "group_rank": int(env["GROUP_RANK"]),
    "master_addr": env["MASTER_ADDR"], "master_port": env["MASTER_PORT"], "hostname": socket.gethostname(),
    "pod_index": int(env["JOB_COMPLETION_INDEX"]), "all_reduce": total.item(),
}
os.write(1, f"E2E-RANK {json.dumps(identity, sort_keys=True)}\n".encode())

expected_world = int(env["EXPECT_WORLD_SIZE"])
problems = []
if identity["world_size"] != expected_world or world != expected_world:
    problems.append(f"WORLD_SIZE {identity['world_size']} (process group {world}), expected {expected_world}")
if rank != identity["rank"]:
    problems.append(f"process group rank {rank} but RANK={identity['rank']}")
if identity["rank"] != identity["group_rank"] * identity["local_world_size"] + identity["local_rank"]:
    problems.append("RANK is not GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK")
if env["EXPECT_GROUP_RANK_IS_INDEX"] == "true" and identity["group_rank"] != identity["pod_index"]:
    problems.append(f"GROUP_RANK {identity['group_rank']} on pod index {identity['pod_index']}")
if identity["master_addr"] not in env["EXPECT_MASTER_ADDR"].split(","):
    problems.append(f"MASTER_ADDR {identity['master_addr']}, expected one of {env['EXPECT_MASTER_ADDR']}")
if identity["hostname"] != f"{env['EXPECT_HOSTNAME_PREFIX']}{identity['pod_index']}":
    problems.append(f"hostname {identity['hostname']} on pod index {identity['pod_index']}")
if total.item() != world * (world + 1) / 2:
    problems.append(f"all_reduce {total.item()}, expected {world * (world + 1) / 2}")
if problems:
    os.write(2, f"E2E-FAIL rank {rank}: {'; '.join(problems)}\n".encode())
    raise SystemExit(1)
dist.barrier()
dist.destroy_process_group()
