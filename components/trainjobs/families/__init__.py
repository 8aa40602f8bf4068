"""One module per framework family: what it reserves and checks, its roles and env, its extra objects
and its outputs. The pipeline drives them through the `Family` hooks and knows none of them.

The registry: `FAMILIES` names each family module and the public names it exports, once. `trainjobs`
imports a family's module when one of its names is first used (a program of torch jobs never loads
the MPI code), and the provider and the generated reference take every job component from
`components()`, in this order.
"""

from importlib import import_module
from typing import Any

__all__ = ["FAMILIES", "components"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "torch": ("TorchTrainJob", "TorchTrainJobArgs", "TorchRuntime", "TORCH_DISTRIBUTED"),
    "torchtune": ("TorchTuneTrainJob", "TorchTuneTrainJobArgs", "TorchTuneRuntime", "TORCHTUNE_LLAMA3_2_1B",
                  "TORCHTUNE_LLAMA3_2_3B", "TORCHTUNE_QWEN2_5_1_5B"),
    "jax": ("JaxTrainJob", "JaxTrainJobArgs", "JaxRuntime", "JAX_DISTRIBUTED"),
    "mpi": ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob", "MpiTrainJobArgs", "DeepSpeedTrainJobArgs",
            "MlxTrainJobArgs", "MpiRuntime", "MPI_DISTRIBUTED", "DEEPSPEED_DISTRIBUTED", "MLX_DISTRIBUTED"),
    "xgboost": ("XGBoostTrainJob", "XGBoostTrainJobArgs", "XGBoostRuntime", "XGBOOST_DISTRIBUTED"),
}


def components() -> list[type[Any]]:
    """Every job component class (a module's names that carry a `family`), in the registry's order;
    imports every family."""
    found = []
    for module, names in FAMILIES.items():
        loaded = import_module(f"{__name__}.{module}")
        found += [value for value in (getattr(loaded, name) for name in names)
                  if isinstance(value, type) and hasattr(value, "family")]
    return found
