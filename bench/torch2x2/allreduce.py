"""One gloo all_reduce across every rank; one line per rank."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
os.write(1, f"rank {rank}/{world} all_reduce={total.item():g} (expected {world * (world + 1) / 2:g})\n".encode())
dist.barrier()
dist.destroy_process_group()
