"""A TorchTrainJob of 2 pods x 2 processes, `torchrun allreduce.py`, the script shipped as a ConfigMap."""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import TorchTrainJob

HERE = Path(__file__).resolve().parent
code = k8s.core.v1.ConfigMap("bench-code", metadata={"name": "bench-code"},
                             data={"allreduce.py": (HERE / "allreduce.py").read_text()})
TorchTrainJob("bench", {
    "num_nodes": 2,
    "num_proc_per_node": 2,
    "command": ["torchrun", "allreduce.py"],
    "working_dir": "/workspace",
    "env": {"OMP_NUM_THREADS": "1"},
    "volumes": [{"name": "code", "configMap": {"name": "bench-code"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/workspace", "readOnly": True}],
}, pulumi.ResourceOptions(depends_on=[code]))
