"""How much the components cost over registering the same Kubernetes objects directly.

Runs N jobs under Pulumi mocks two ways: through the component (validation, derivation,
component resource, outputs) and as the raw pulumi-kubernetes resources of the same manifests
(derived once, outside the timed section). Prints seconds and the component/raw ratio per family.

    .venv/bin/python bench/register.py [N] [--repeat R]
"""

import argparse
import statistics
import time

import pulumi
import pulumi_kubernetes as k8s

from components import MpiTrainJob, TorchTrainJob
from components.component import _RESOURCE_CLASSES, _snake
from components.testing import run

CASES = {
    "TorchTrainJob": (TorchTrainJob, {"image": "img:1", "command": ["torchrun", "train.py"], "num_nodes": 4,
                                      "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}}),
    "MpiTrainJob": (MpiTrainJob, {"image": "img:1", "command": ["mpirun", "python", "x.py"], "num_nodes": 4}),
}


def raw_program(manifests_per_job):
    def program():
        for manifests in manifests_per_job:
            for manifest in manifests:
                if manifest["kind"] == "Secret":   # the component's key pair is a resource too
                    manifest = {**manifest, "stringData": {"ssh-privatekey": "k", "ssh-publickey": "k"}}
                cls = _RESOURCE_CLASSES[(manifest["apiVersion"], manifest["kind"])]
                cls(manifest["metadata"]["name"], **{_snake(k): v for k, v in manifest.items()
                                                      if k not in ("apiVersion", "kind")})
    return program


def timed(program) -> float:
    start = time.perf_counter()
    run(program)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=100)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    print(f"{'family':<16}{'jobs':>6}{'component s':>14}{'raw s':>10}{'ratio':>8}")
    for family, (cls, args) in CASES.items():
        names = [f"job-{i}" for i in range(options.n)]
        manifests = [cls.derive(name, cls.args_type.model_validate(args)).manifests for name in names]
        component = min(timed(lambda: [cls(name, args) for name in names]) for _ in range(options.repeat))
        raw = min(timed(raw_program(manifests)) for _ in range(options.repeat))
        print(f"{family:<16}{options.n:>6}{component:>14.3f}{raw:>10.3f}{component / raw:>8.2f}")


if __name__ == "__main__":
    main()
