"""trainjobs: typed Pulumi components for distributed training on any Kubernetes cluster."""

from .args import EnvVar, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from .errors import Issue, TrainJobError
from .torch import TORCH_DISTRIBUTED, TorchRuntime, TorchTrainJob, TorchTrainJobArgs

__all__ = [
    "EnvVar", "Issue", "PodTemplate", "Resources", "TORCH_DISTRIBUTED", "TorchRuntime",
    "TorchTrainJob", "TorchTrainJobArgs", "TrainJobArgs", "TrainJobError", "TrainingRuntime",
]
