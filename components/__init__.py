"""trainjobs: typed Pulumi components for distributed training on any Kubernetes cluster.

Each family's module is imported when one of its names is first used, so a program that runs only
torch jobs never loads the MPI, JAX, TorchTune or XGBoost code.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .args import EnvVar, ExtraRole, Initializer, PodTemplate, Resources, TrainingRuntime, TrainJobArgs
from .errors import Issue, TrainJobError

if TYPE_CHECKING:   # what type checkers and editors see; at run time __getattr__ imports on first use
    from .jax import JAX_DISTRIBUTED, JaxRuntime, JaxTrainJob, JaxTrainJobArgs
    from .mpi import (DEEPSPEED_DISTRIBUTED, MLX_DISTRIBUTED, MPI_DISTRIBUTED, DeepSpeedTrainJob,
                      DeepSpeedTrainJobArgs, MlxTrainJob, MlxTrainJobArgs, MpiRuntime, MpiTrainJob, MpiTrainJobArgs)
    from .torch import TORCH_DISTRIBUTED, TorchRuntime, TorchTrainJob, TorchTrainJobArgs
    from .torchtune import (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, TorchTuneRuntime,
                            TorchTuneTrainJob, TorchTuneTrainJobArgs)
    from .xgboost import XGBOOST_DISTRIBUTED, XGBoostRuntime, XGBoostTrainJob, XGBoostTrainJobArgs

_FAMILY_NAMES = {
    ".jax": ["JAX_DISTRIBUTED", "JaxRuntime", "JaxTrainJob", "JaxTrainJobArgs"],
    ".mpi": ["DEEPSPEED_DISTRIBUTED", "MLX_DISTRIBUTED", "MPI_DISTRIBUTED", "DeepSpeedTrainJob",
             "DeepSpeedTrainJobArgs", "MlxTrainJob", "MlxTrainJobArgs", "MpiRuntime", "MpiTrainJob", "MpiTrainJobArgs"],
    ".torch": ["TORCH_DISTRIBUTED", "TorchRuntime", "TorchTrainJob", "TorchTrainJobArgs"],
    ".torchtune": ["TORCHTUNE_LLAMA3_2_1B", "TORCHTUNE_LLAMA3_2_3B", "TORCHTUNE_QWEN2_5_1_5B", "TorchTuneRuntime",
                   "TorchTuneTrainJob", "TorchTuneTrainJobArgs"],
    ".xgboost": ["XGBOOST_DISTRIBUTED", "XGBoostRuntime", "XGBoostTrainJob", "XGBoostTrainJobArgs"],
}
_MODULE_OF = {name: module for module, names in _FAMILY_NAMES.items() for name in names}

__all__ = sorted(["EnvVar", "ExtraRole", "Initializer", "Issue", "PodTemplate", "Resources", "TrainJobArgs",
                  "TrainJobError", "TrainingRuntime", *_MODULE_OF])


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'components' has no attribute {name!r}")
    value = getattr(import_module(_MODULE_OF[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
