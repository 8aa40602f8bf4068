"""Example stack: every training job is described in the stack's config (`Pulumi.<stack>.yaml`).

    config:
      trainjobs-examples:jobs:
        - kind: TorchTrainJob
          name: mnist-ddp
          image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
          num_nodes: 2
          ...

Each entry is a component class name (`kind`), a job name and that component's arguments, plus
optionally `code`: files next to this program shipped as a ConfigMap `<name>-code` and mounted
read-only in the job's pods, so a stock image runs them (the ConfigMap must stay under 1 MiB):

      code: {files: [train.py], mount_path: /workspace}
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

import components
from components.component import TrainJobComponent

HERE = Path(__file__).resolve().parent


def job_component(kind: str) -> type[TrainJobComponent]:
    cls = getattr(components, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, TrainJobComponent)):
        known = sorted(n for n in components.__all__ if n.endswith("TrainJob"))
        raise pulumi.ConfigTypeError("jobs", kind, f"one of {', '.join(known)}")
    return cls


def ship_code(name: str, spec: dict) -> list[pulumi.Resource]:
    """Turn a job's `code` entry into a ConfigMap and a read-only volume mount of it."""
    code = spec.pop("code", None)
    if not code:
        return []
    config_map = f"{name}-code"
    metadata = {"name": config_map, **({"namespace": spec["namespace"]} if spec.get("namespace") else {})}
    files = {Path(path).name: (HERE / path).read_text() for path in code["files"]}
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": "code", "configMap": {"name": config_map}}]
    spec["volume_mounts"] = [*(spec.get("volume_mounts") or []),
                             {"name": "code", "mountPath": code["mount_path"], "readOnly": True}]
    return [k8s.core.v1.ConfigMap(config_map, metadata=metadata, data=files)]


for spec in pulumi.Config().require_object("jobs"):
    spec = dict(spec)
    kind, name = spec.pop("kind"), spec.pop("name")
    shipped = ship_code(name, spec)
    job = job_component(kind)(name, spec, pulumi.ResourceOptions(depends_on=shipped))
    pulumi.export(name, {key: getattr(job, key) for key in job.outputs_type.model_fields})
