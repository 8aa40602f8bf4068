"""trainjobs: typed Pulumi components for distributed training on any Kubernetes cluster.

Each family's module is imported when one of its names is first used, so a program that runs only
torch jobs never loads the MPI, JAX, TorchTune or XGBoost code.
"""

__version__ = "0.1.0"

from importlib import import_module
from typing import TYPE_CHECKING, Any

from trainjobs.core.args import (DeviceRequest, EnvVar, ExtraRole, FailurePolicy, Initializer, Placement,
                                 PlatformProfile, PodTemplate, Resources, TrainingRuntime, TrainJobArgs)
from trainjobs.core.errors import Issue, TrainJobError
from trainjobs.families import FAMILIES

if TYPE_CHECKING:
    # Type checkers and editors cannot follow __getattr__, so they read these imports (tests/test_registries.py
    # checks they are exactly the registry's names); at run time __getattr__ imports on first use.
    from trainjobs.families.jax import JAX_DISTRIBUTED, JaxRuntime, JaxTrainJob, JaxTrainJobArgs
    from trainjobs.families.mpi import (DEEPSPEED_DISTRIBUTED, MLX_DISTRIBUTED, MPI_DISTRIBUTED, DeepSpeedTrainJob,
                                        DeepSpeedTrainJobArgs, MlxTrainJob, MlxTrainJobArgs, MpiRuntime, MpiTrainJob, MpiTrainJobArgs)
    from trainjobs.families.torch import TORCH_DISTRIBUTED, TorchRuntime, TorchTrainJob, TorchTrainJobArgs
    from trainjobs.families.torchtune import (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, TorchTuneRuntime,
                                              TorchTuneTrainJob, TorchTuneTrainJobArgs)
    from trainjobs.families.xgboost import XGBOOST_DISTRIBUTED, XGBoostRuntime, XGBoostTrainJob, XGBoostTrainJobArgs
    from trainjobs.observe import (Admission, FailedRank, JobSetStatus, JobStatus, PodStatus, RoleStatus, StatusError,
                                   status)
    from trainjobs.platform.namespace import TrainingNamespace, TrainingNamespaceArgs

# Where each lazily imported public name lives: the families' registry, the platform's component, and what reads
# deployed jobs (`status`), whose Kubernetes client a program that only deploys never loads.
_MODULE_OF = {**{name: f".families.{module}" for module, names in FAMILIES.items() for name in names},
              **{name: ".platform.namespace" for name in ("TrainingNamespace", "TrainingNamespaceArgs")},
              **{name: ".observe" for name in ("status", "StatusError", "JobStatus", "RoleStatus", "PodStatus",
                                               "Admission", "FailedRank", "JobSetStatus")}}

__all__ = sorted(["DeviceRequest", "EnvVar", "ExtraRole", "FailurePolicy", "Initializer", "Issue", "Placement",
                  "PlatformProfile", "PodTemplate", "Resources", "TrainJobArgs", "TrainJobError", "TrainingRuntime",
                  *_MODULE_OF])


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'trainjobs' has no attribute {name!r}")
    value = getattr(import_module(_MODULE_OF[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
