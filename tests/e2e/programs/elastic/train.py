"""Training that goes on while nodes join and leave: every step all-reduces each rank's contribution
(rank + 1) into the weight, rank 0 checkpoints step, weight and the node counts seen (replaced
atomically) to the shared claim, and every new rendezvous round resumes from the checkpoint. The final
weight is exact only if no step was lost or done twice: the sum over steps of w(w+1)/2, w the world
size of that step.

E2E_PHASES lists the node counts the job is expected to pass through. After E2E_STEPS_PER_PHASE steps at
a phase's node count, rank 0 prints `E2E-PHASE-DONE <i> of <n>` once and the ranks keep training (the
signal to resize the job) until the nodes change; after the last phase they finish. Each round prints
`E2E-START {json}` (rank 0) and each rank `E2E-DONE {json}` at the end.
"""

import json
import os
import time

import torch
import torch.distributed as dist

CKPT = "/workspace/ckpt/state.pt"
env = os.environ
phases = [int(n) for n in env["E2E_PHASES"].split(",")]
per_phase = int(env["E2E_STEPS_PER_PHASE"])

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
nodes = world // int(env["LOCAL_WORLD_SIZE"])
step, weight, seen = 0, torch.zeros(1), []   # seen: [node count, first step at it] per change
if os.path.exists(CKPT):
    state = torch.load(CKPT)
    step, weight, seen = state["step"], state["weight"], state["seen"]
resumed_from = step
if not seen or seen[-1][0] != nodes:
    seen.append([nodes, step])
phase = len(seen) - 1
restarts = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
if rank == 0:
    start = {"nodes": nodes, "world": world, "resumed_from": step, "phase": phase + 1, "restart_count": restarts}
    print(f"E2E-START {json.dumps(start, sort_keys=True)}", flush=True)
print(f"E2E-RANK rank {rank} of {world} on pod {env['JOB_COMPLETION_INDEX']}", flush=True)

announced = False
while True:
    contribution = torch.tensor([float(rank + 1)])
    dist.all_reduce(contribution)
    weight += contribution
    step += 1
    if rank == 0:
        torch.save({"step": step, "weight": weight, "seen": seen}, CKPT + ".tmp")
        os.replace(CKPT + ".tmp", CKPT)
    dist.barrier()
    if step - seen[-1][1] >= per_phase:
        if phase + 1 >= len(phases):
            break
        if rank == 0 and not announced:
            print(f"E2E-PHASE-DONE {phase + 1} of {len(phases)} at {nodes} nodes, step {step}", flush=True)
        announced = True
    time.sleep(0.5)

report = {"rank": rank, "world": world, "nodes": nodes, "pod_index": int(env["JOB_COMPLETION_INDEX"]),
          "weight": weight.item(), "step": step, "seen": seen, "resumed_from": resumed_from,
          "restart_count": restarts}
print(f"E2E-DONE {json.dumps(report, sort_keys=True)}", flush=True)
dist.destroy_process_group()
