"""A TorchTrainJob of 2 pods x 2 processes running `torchrun train.py` with no flags.

The training script ships as a ConfigMap mounted at the working directory. What each rank must
see is given as literal config (EXPECT_* env), independent of how the library derives it.
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
TorchTrainJob(name, {
    "num_nodes": 2,
    "num_proc_per_node": 2,
    "rendezvous": config.get("rendezvous") or "static",
    "backend": config.get("backend") or "jobs",
    "command": ["torchrun", "train.py"],
    "working_dir": "/workspace",
    "env": {
        "OMP_NUM_THREADS": "1",
        "EXPECT_WORLD_SIZE": config.require("expect_world_size"),
        "EXPECT_MASTER_ADDR": config.require("expect_master_addr"),
        "EXPECT_GROUP_RANK_IS_INDEX": config.require("expect_group_rank_is_index"),
        "EXPECT_HOSTNAME_PREFIX": config.require("expect_hostname_prefix"),
        # How long torchrun's rendezvous waits for its peers (torchrun's default: 600 s).
        **({"PET_RDZV_CONF": f"timeout={config.require('rdzv_timeout')}"} if config.get("rdzv_timeout") else {}),
    },
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/workspace", "readOnly": True}],
}, pulumi.ResourceOptions(depends_on=[code]))
