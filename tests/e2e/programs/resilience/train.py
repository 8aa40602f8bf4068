"""Training that survives losing a pod: every step all-reduces each rank's contribution into the
weight, rank 0 checkpoints it (step and weight, replaced atomically) to the shared claim, and a
restarted rank resumes from the checkpoint. The final weight is exact only if no step was lost or
done twice: steps x (1 + 2) for two ranks.

Prints `E2E-STEP <n>` per step and one `E2E-DONE {json}` per rank. With E2E_FAIL_INDEX set, that
pod exits E2E_FAIL_CODE after its second step on its first E2E_FAIL_ATTEMPTS attempts.
"""

import json
import os
import time

import torch
import torch.distributed as dist

CKPT = "/workspace/ckpt/state.pt"
env = os.environ
steps = int(env["E2E_STEPS"])
pod_index = env["JOB_COMPLETION_INDEX"]

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
step, weight = 0, torch.zeros(1)
if os.path.exists(CKPT):
    state = torch.load(CKPT)
    step, weight = state["step"], state["weight"]
resumed_from = step
print(f"E2E-START rank {rank} of {world} on pod {pod_index}, from step {step}", flush=True)

failing = env["E2E_FAIL_INDEX"] == pod_index
if failing:
    counter = f"/workspace/ckpt/attempts-{pod_index}"
    attempts = (int(open(counter).read()) if os.path.exists(counter) else 0) + 1
    with open(counter, "w") as f:
        f.write(str(attempts))
    failing = attempts <= int(env["E2E_FAIL_ATTEMPTS"])

while step < steps:
    contribution = torch.tensor([float(rank + 1)])
    dist.all_reduce(contribution)
    weight += contribution
    step += 1
    if rank == 0:
        torch.save({"step": step, "weight": weight}, CKPT + ".tmp")
        os.replace(CKPT + ".tmp", CKPT)
    dist.barrier()
    print(f"E2E-STEP {step} rank {rank}", flush=True)
    if failing and step - resumed_from == 2:
        print(f"E2E-FAIL pod {pod_index} exits {env['E2E_FAIL_CODE']}", flush=True)
        # At once, as a crashing worker does: an interpreter's exit would run down gloo's threads, which can end the
        # process with SIGABRT (134, "terminate called without an active exception") instead of the code.
        os._exit(int(env["E2E_FAIL_CODE"]))
    time.sleep(1)

report = {"rank": rank, "world": world, "pod_index": int(pod_index), "weight": weight.item(),
          "resumed_from": resumed_from, "restart_count": int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))}
print(f"E2E-DONE {json.dumps(report, sort_keys=True)}", flush=True)
dist.destroy_process_group()
