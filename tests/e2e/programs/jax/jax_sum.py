"""One JAX process per pod: join the distributed system, then sum one value per process across it.

E2E_INITIALIZE=env-alone calls `jax.distributed.initialize()` with no arguments; `documented`
passes the process count and id from the rendered env, as docs/components.md shows, and leaves
the coordinator address to JAX. Prints one `E2E-JAX {json}` line per process and exits non-zero
on any mismatch.
"""

import json
import os
import socket
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

env = os.environ


def report(tag: str, **fields) -> None:
    fields.update(hostname=socket.gethostname(), pod_index=int(env["JOB_COMPLETION_INDEX"]))
    os.write(1, f"{tag} {json.dumps(fields, sort_keys=True)}\n".encode())


if env["E2E_INITIALIZE"] == "env-alone":
    try:
        jax.distributed.initialize()
    except ValueError as exc:
        report("E2E-JAX-INIT-FAILED", error=f"{type(exc).__name__}: {exc}")
        sys.exit(1)
else:
    jax.distributed.initialize(num_processes=int(env["JAX_NUM_PROCESSES"]),
                               process_id=int(env["JAX_PROCESS_ID"]))

# Process i contributes i + 1; the sum runs as one jitted computation over an array whose
# shards live in different processes, so it needs the cross-process collective (gloo on CPU).
mesh = Mesh(np.array(jax.devices()), ("processes",))
local = jnp.array([float(jax.process_index() + 1)] * len(jax.local_devices()))
shards = [jax.device_put(local[i:i + 1], device) for i, device in enumerate(jax.local_devices())]
values = jax.make_array_from_single_device_arrays((len(jax.devices()),), NamedSharding(mesh, PartitionSpec("processes")),
                                                  shards)
total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, PartitionSpec()))(values)
total = float(total.addressable_data(0))

count = jax.process_count()
expected = float(sum(range(1, count + 1)) * len(jax.local_devices()))
report("E2E-JAX", process_index=jax.process_index(), process_count=count, devices=len(jax.devices()),
       local_devices=len(jax.local_devices()), coordinator=env.get("JAX_COORDINATOR_ADDRESS"),
       sum=total)
problems = []
if count != int(env["EXPECT_PROCESSES"]):
    problems.append(f"{count} processes, expected {env['EXPECT_PROCESSES']}")
if jax.process_index() != int(env["JOB_COMPLETION_INDEX"]):
    problems.append(f"process index {jax.process_index()} on pod index {env['JOB_COMPLETION_INDEX']}")
if total != expected:
    problems.append(f"sum {total}, expected {expected}")
if problems:
    os.write(2, f"E2E-FAIL process {jax.process_index()}: {'; '.join(problems)}\n".encode())
    sys.exit(1)
jax.distributed.shutdown()
