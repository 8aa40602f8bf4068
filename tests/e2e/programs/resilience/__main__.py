"""A TorchTrainJob of 2 pods x 1 process, c10d rendezvous, training `train.py` with a checkpoint
on a claim mounted at /workspace/ckpt, which outlives every pod of the job.

Fault settings for the tests: `fail_index` makes that pod's training exit `fail_code` after its
second step, on its first `fail_attempts` attempts (counted on the claim); `backend` and
`failure_policy` are the job's own arguments. `torchrun_restarts` is how often torchrun restarts
its workers itself (0: a failed worker fails the pod); `torchrun: false` runs the script as the
container's own process, so its exit code is the container's (torchrun exits 1 whatever its
workers' codes).
"""

import json
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import TorchTrainJob

HERE = Path(__file__).resolve().parent
config = pulumi.Config()
name = config.require("name")

code = k8s.core.v1.ConfigMap(f"{name}-code", metadata={"name": f"{name}-code"},
                             data={"train.py": (HERE / "train.py").read_text()})
claim = k8s.core.v1.PersistentVolumeClaim(f"{name}-ckpt", metadata={"name": f"{name}-ckpt"}, spec={
    "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}})
torchrun = config.get_bool("torchrun") is not False
TorchTrainJob(name, {
    "num_nodes": 2,
    "num_proc_per_node": 1,
    "rendezvous": "c10d" if torchrun else "static",
    "torchrun": torchrun,
    "backend": config.get("backend") or "jobs",
    "backoff_limit": config.get_int("backoff_limit") or 0,
    **({"failure_policy": json.loads(config.get("failure_policy"))} if config.get("failure_policy") else {}),
    "command": ["torchrun" if torchrun else "python", "/opt/e2e/train.py"],
    "env": {
        "OMP_NUM_THREADS": "1",
        # torchrun restarts its workers when a peer is lost, and the new round waits for the replacement.
        "PET_MAX_RESTARTS": config.get("torchrun_restarts") or "3",
        "E2E_STEPS": config.get("steps") or "12",
        "E2E_FAIL_INDEX": config.get("fail_index") or "",
        "E2E_FAIL_CODE": config.get("fail_code") or "1",
        "E2E_FAIL_ATTEMPTS": config.get("fail_attempts") or "0",
    },
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}},
                {"name": "ckpt", "persistentVolumeClaim": {"claimName": f"{name}-ckpt"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/opt/e2e", "readOnly": True},
                      {"name": "ckpt", "mountPath": "/workspace/ckpt"}],
}, pulumi.ResourceOptions(depends_on=[code, claim]))
