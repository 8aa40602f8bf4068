"""What checking a job's manifests against the API server's rules costs when a job is constructed.

For each family at 1 and 1000 nodes: CPU milliseconds to derive the job's plan (the validation
included) and to validate its manifests alone (`apivalidation.problems`; naming the argument of each
problem costs nothing for a valid job, which has none). Each figure is the median of R samples of
N calls, in process CPU time so other work on the machine does not count.

    .venv/bin/python bench/validation.py [--repeat R] [--number N]
"""

import argparse
import statistics
import time

from trainjobs.kube import apivalidation
from trainjobs.core.args import parse_args
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.families.jax import JaxTrainJob
from trainjobs.families.mpi import DeepSpeedTrainJob, MlxTrainJob, MpiTrainJob
from trainjobs.families.torch import TorchTrainJob
from trainjobs.families.torchtune import TorchTuneTrainJob

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


def median_ms(action, repeat: int, number: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            action()
        samples.append((time.process_time() - start) / number)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=50)
    options = parser.parse_args()
    print(f"{'family':<20} {'nodes':>6} {'derive ms':>10} {'validate ms':>12} {'share':>6}")
    for component, spec in CASES.items():
        for nodes in (1, 1000):
            cls: type[TrainJobComponent] = component
            args = parse_args(cls.__name__, "bench", cls.args_type, {**spec, "num_nodes": nodes})
            plan = cls.derive("bench", args)
            derive = median_ms(lambda: cls.derive("bench", args), options.repeat, options.number)
            validate = median_ms(lambda: apivalidation.problems(plan.manifests), options.repeat, options.number)
            print(f"{cls.__name__:<20} {nodes:>6} {derive:>10.2f} {validate:>12.2f} {validate / derive:>6.0%}")


if __name__ == "__main__":
    main()
