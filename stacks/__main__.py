"""Example stack: every training job is described in the stack's config (`Pulumi.<stack>.yaml`).

    config:
      trainjobs-examples:jobs:
        - kind: TorchTrainJob
          name: mnist-ddp
          image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
          num_nodes: 2
          ...

Each entry is a component class name (`kind`), a job name and that component's arguments.
"""

import pulumi

import components
from components.component import TrainJobComponent


def job_component(kind: str) -> type[TrainJobComponent]:
    cls = getattr(components, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, TrainJobComponent)):
        known = sorted(n for n in components.__all__ if n.endswith("TrainJob"))
        raise pulumi.ConfigTypeError("jobs", kind, f"one of {', '.join(known)}")
    return cls


for spec in pulumi.Config().require_object("jobs"):
    spec = dict(spec)
    kind, name = spec.pop("kind"), spec.pop("name")
    job = job_component(kind)(name, spec)
    pulumi.export(name, {key: getattr(job, key) for key in job.plan.outputs})
