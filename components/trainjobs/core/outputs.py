"""The outputs every job component has; each family's outputs model adds its own.

A family's outputs model is the one declaration of its outputs: the derivation fills it, and the
component turns its fields into Pulumi outputs (attributes, `register_outputs`, package schema).
"""

from typing import Optional

from pydantic import BaseModel, ConfigDict

__all__ = ["JobOutputs"]


class JobOutputs(BaseModel):
    """Outputs of every training job."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    service_name: str
    """Headless Service of the job, which is also its pods' DNS subdomain."""
    job_name: str
    """The Job that runs the training command (for the MPI family, the launcher)."""
    namespace: Optional[str] = None
    """Namespace given, or none for the provider's default."""
    requests: dict[str, str] = {}
    """What the job asks the cluster for: resource name -> total requests of all its pods (training pods,
    launcher, initializers, extra roles), e.g. `{"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "32"}`."""
