"""A 2-pod TorchTrainJob with a dataset and a model initializer, all plain shell commands.

Each initializer's command comes from config; the trainers check that both files the
initializers write are in the shared /workspace, and fail if one is missing. The workspace is
the default one: a PersistentVolumeClaim `<name>-initializer`.
"""

import pulumi

from trainjobs import TorchTrainJob

config = pulumi.Config()
TRAIN = """
for f in /workspace/dataset/data.txt /workspace/model/weights.txt; do
  [ -f "$f" ] || { echo "E2E-TRAINER $(hostname) found no $f"; exit 1; }
done
echo "E2E-TRAINER $(hostname) read: $(cat /workspace/dataset/data.txt), $(cat /workspace/model/weights.txt)"
"""

TorchTrainJob(config.require("name"), {
    "num_nodes": 2,
    "torchrun": False,
    "command": ["sh", "-c", TRAIN],
    "dataset_initializer": {"command": ["sh", "-c", config.require("dataset")]},
    "model_initializer": {"command": ["sh", "-c", config.require("model")]},
    "initializer_timeout_seconds": config.require_int("timeout"),
})
