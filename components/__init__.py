"""trainjobs: typed Pulumi components for distributed training on any Kubernetes cluster."""

from .args import EnvVar, ExtraRole, Initializer, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from .errors import Issue, TrainJobError
from .jax import JAX_DISTRIBUTED, JaxRuntime, JaxTrainJob, JaxTrainJobArgs
from .mpi import (DEEPSPEED_DISTRIBUTED, MLX_DISTRIBUTED, MPI_DISTRIBUTED, DeepSpeedTrainJob, DeepSpeedTrainJobArgs,
                  MlxTrainJob, MlxTrainJobArgs, MpiRuntime, MpiTrainJob, MpiTrainJobArgs)
from .torch import TORCH_DISTRIBUTED, TorchRuntime, TorchTrainJob, TorchTrainJobArgs
from .torchtune import (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, TorchTuneRuntime,
                        TorchTuneTrainJob, TorchTuneTrainJobArgs)
from .xgboost import XGBOOST_DISTRIBUTED, XGBoostRuntime, XGBoostTrainJob, XGBoostTrainJobArgs

__all__ = [
    "DEEPSPEED_DISTRIBUTED", "DeepSpeedTrainJob", "DeepSpeedTrainJobArgs", "EnvVar", "ExtraRole", "Initializer",
    "Issue", "JAX_DISTRIBUTED", "JaxRuntime", "JaxTrainJob", "JaxTrainJobArgs", "MLX_DISTRIBUTED",
    "MPI_DISTRIBUTED", "MlxTrainJob", "MlxTrainJobArgs", "MpiRuntime", "MpiTrainJob", "MpiTrainJobArgs",
    "PodTemplate", "Resources", "TORCHTUNE_LLAMA3_2_1B", "TORCHTUNE_LLAMA3_2_3B", "TORCHTUNE_QWEN2_5_1_5B",
    "TORCH_DISTRIBUTED", "TorchRuntime", "TorchTrainJob", "TorchTrainJobArgs", "TorchTuneRuntime",
    "TorchTuneTrainJob", "TorchTuneTrainJobArgs", "TrainJobArgs", "TrainJobError", "TrainingRuntime",
    "XGBOOST_DISTRIBUTED", "XGBoostRuntime", "XGBoostTrainJob", "XGBoostTrainJobArgs",
]
