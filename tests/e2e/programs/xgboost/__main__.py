"""An XGBoostTrainJob of 2 pods, one xgboost worker each, running `python /opt/e2e/train.py`.

The script ships as a ConfigMap; everything it needs to join the collective comes from the DMLC_*
env the library renders (the worker with DMLC_TASK_ID 0 also starts the tracker).
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import XGBoostTrainJob

HERE = Path(__file__).resolve().parent
name = pulumi.Config().require("name")

code = k8s.core.v1.ConfigMap(f"{name}-code", metadata={"name": f"{name}-code"},
                             data={"train.py": (HERE / "train.py").read_text()})
XGBoostTrainJob(name, {
    "num_nodes": 2,
    "command": ["python", "/opt/e2e/train.py"],
    "env": {"OMP_NUM_THREADS": "1"},
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/opt/e2e", "readOnly": True}],
}, pulumi.ResourceOptions(depends_on=[code]))
