"""An elastic TorchTrainJob: `num_nodes: "2:4"` with the c10d rendezvous, 1 process per pod, queued in
Kueue as an elastic Job (workload slices), training `train.py` with a checkpoint on a claim mounted at
/workspace/ckpt, which outlives every pod of the job.

`phases` are the node counts the training expects to pass through, in order (e.g. "4,2,4"), and
`steps_per_phase` how many steps it trains at each before it says the phase is done; it completes
after the last one (train.py). `elastic_admission` and `queue` are the job's own arguments, `pod_cpus` the CPUs
each pod requests (what a ClusterQueue's quota counts).
"""

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
TorchTrainJob(name, {
    "num_nodes": "2:4",
    "num_proc_per_node": 1,
    "rendezvous": "c10d",
    "gang_scheduler": "kueue",
    "queue": config.get("queue") or "default",
    "elastic_admission": config.get("elastic_admission") or "slices",
    **({"resources_per_node": {"requests": {"cpu": config.get("pod_cpus")}}} if config.get("pod_cpus") else {}),
    "command": ["torchrun", "/opt/e2e/train.py"],
    "env": {
        "OMP_NUM_THREADS": "1",
        # A round closes 10 s after the fewest nodes joined (torchrun's default waits 30 s for more).
        "PET_RDZV_CONF": "last_call_timeout=10",
        "E2E_PHASES": config.get("phases") or "4,2,4",
        "E2E_STEPS_PER_PHASE": config.get("steps_per_phase") or "3",
    },
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}},
                {"name": "ckpt", "persistentVolumeClaim": {"claimName": f"{name}-ckpt"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/opt/e2e", "readOnly": True},
                      {"name": "ckpt", "mountPath": "/workspace/ckpt"}],
}, pulumi.ResourceOptions(depends_on=[code, claim]))
