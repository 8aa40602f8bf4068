"""What checking a job's manifests against the API server's rules costs when a job is constructed.

For each family at 1 and 1000 nodes: milliseconds to derive the job's plan (the validation
included) and to validate its manifests alone (`apivalidation.problems`, and naming the argument of
each problem, of which a valid job has none), median of R repeats.

    .venv/bin/python bench/validation.py [--repeat R]
"""

import argparse
import statistics
import time

from components import apivalidation
from components.args import parse_args
from components.component import TrainJobComponent
from components.jax import JaxTrainJob
from components.mpi import DeepSpeedTrainJob, MlxTrainJob, MpiTrainJob
from components.torch import TorchTrainJob
from components.torchtune import TorchTuneTrainJob

CASES = {
    TorchTrainJob: {"image": "img:1", "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}},
    # Llama 3.3 70B, the model torchtune runs on several nodes.
    TorchTuneTrainJob: {"runtime": {"name": "torchtune-llama3.3-70b", "node": {
        "image": "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0", "resources": {"limits": {"nvidia.com/gpu": 8}}},
        "dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"},
        "model_initializer": {"storage_uri": "hf://meta-llama/Llama-3.3-70B-Instruct"}}},
    JaxTrainJob: {},
    MpiTrainJob: {"image": "img:1", "command": ["mpirun", "python", "x.py"]},
    DeepSpeedTrainJob: {"command": ["mpirun", "python", "x.py"]},
    MlxTrainJob: {"command": ["mpirun", "python", "x.py"]},
}


def median_ms(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    print(f"{'family':<20} {'nodes':>6} {'derive ms':>10} {'validate ms':>12} {'share':>6}")
    for component, spec in CASES.items():
        for nodes in (1, 1000):
            cls: type[TrainJobComponent] = component
            args = parse_args(cls.__name__, "bench", cls.args_type, {**spec, "num_nodes": nodes})
            plan = cls.derive("bench", args)
            derive = median_ms(lambda: cls.derive("bench", args), options.repeat)
            validate = median_ms(lambda: apivalidation.problems(plan.manifests), options.repeat)
            print(f"{cls.__name__:<20} {nodes:>6} {derive:>10.2f} {validate:>12.2f} {validate / derive:>6.0%}")


if __name__ == "__main__":
    main()
