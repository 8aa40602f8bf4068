"""Data-parallel training on CPU or GPU, configured only by what torchrun puts in the env.

Shipped with the example stack as a ConfigMap (`mnist-ddp-code`) mounted at /workspace, so the
stock PyTorch image runs it with `torchrun /workspace/train.py`: torchrun reads PET_NNODES,
PET_NPROC_PER_NODE, PET_NODE_RANK and PET_MASTER_ADDR/PORT from the pod's env.

Each rank prints its identity on one line, checks an all_reduce, then trains a small model on
synthetic MNIST-shaped data with DistributedDataParallel and checks the ranks stayed in sync.
"""

import gc
import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("TRAIN_STEPS", "20"))


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())  # one write per line: ranks sharing stdout don't interleave


def main() -> None:
    started = time.time()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)

    total = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    identity = " ".join(f"{key}={os.environ.get(key)}" for key in
                        ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"))
    say(f"rank {rank}/{world} on {socket.gethostname()}: {identity} all_reduce={total.item():g} "
        f"(expected {expected:g})")
    assert total.item() == expected, f"all_reduce gave {total.item()}, expected {expected}"

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(28 * 28, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)  # each rank its own shard of the data
    for _ in range(STEPS):
        images = torch.randn(32, 1, 28, 28, generator=generator).to(device)
        labels = torch.randint(0, 10, (32,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    checksum = torch.stack([p.detach().sum() for p in model.parameters()]).sum().reshape(1)
    gathered = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    in_sync = all(torch.allclose(g, checksum) for g in gathered)
    if rank == 0:
        say(f"trained {STEPS} steps on {world} ranks in {time.time() - started:.1f}s: loss {loss.item():.3f}, "
            f"replicas in sync: {in_sync}")
    assert in_sync, "model replicas diverged: gradients were not averaged across ranks"
    # DDP's reducer holds the process group: release it before the group is destroyed, or its
    # threads can be torn down mid-use at exit ("terminate called without an active exception").
    del model, optimizer, loss
    gc.collect()
    dist.barrier()  # nobody tears the group down while a peer still uses it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
