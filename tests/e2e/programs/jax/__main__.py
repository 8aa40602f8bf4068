"""A JaxTrainJob of 2 pods, one JAX process each, running `python /opt/e2e/jax_sum.py`.

The script ships as a ConfigMap. How it calls `jax.distributed.initialize()` comes from config
(E2E_INITIALIZE); everything else it needs comes from the env the library renders.
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import JaxTrainJob

HERE = Path(__file__).resolve().parent
config = pulumi.Config()
name = config.require("name")

code = k8s.core.v1.ConfigMap(f"{name}-code", metadata={"name": f"{name}-code"},
                             data={"jax_sum.py": (HERE / "jax_sum.py").read_text()})
JaxTrainJob(name, {
    "num_nodes": 2,
    "command": ["python", "/opt/e2e/jax_sum.py"],
    "env": {
        "E2E_INITIALIZE": config.require("initialize"),
        "EXPECT_PROCESSES": "2",
        "JAX_PLATFORMS": "cpu",
        "OMP_NUM_THREADS": "1",
    },
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/opt/e2e", "readOnly": True}],
}, pulumi.ResourceOptions(depends_on=[code]))
