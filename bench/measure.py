"""One measurement in a fresh process, so no run inherits another's garbage; prints one JSON object per line.

    python bench/measure.py register SPEC.json SIDE [REPEATS]   # SIDE: component, raw or floor
    python bench/measure.py derive FAMILY NODES...
    python bench/measure.py view CASE

Everything a run needs is imported before the clock starts. `register` first runs its side once
with a single job (a warm-up, not timed), then collects garbage and times the N-job run, REPEATS
times (default 1), and reports the medians of wall, CPU and garbage-collection time.
"""

import gc
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trainjobs  # noqa: E402
from trainjobs.backends import pod_sets  # noqa: E402
from trainjobs.tools.cli.render import ranks_text  # noqa: E402
from trainjobs.testing import run  # noqa: E402

import registration  # noqa: E402

# The families whose pure derivation is measured, by component class: `trainjobs.pipeline.pipeline.derive` turns
# the class's parsed arguments into manifests with its family, as the component does before registering.
DERIVE: dict[str, str] = {"torch": "TorchTrainJob", "mpi": "MpiTrainJob", "jax": "JaxTrainJob"}
DERIVE_ARGS = {
    "torch": registration.CASES["torch"][1],
    "mpi": registration.CASES["mpi"][1],
    "jax": {"image": "img:1", "command": ["python", "train.py"]},
}

# Per-pod view cases: the jobs whose objects `ranks_text` describes.
VIEWS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "torch 4096": [("TorchTrainJob", "t", {**registration.CASES["torch"][1], "num_nodes": 4096})],
    "torch 4096 + mpi 4096": [("TorchTrainJob", "t", {**registration.CASES["torch"][1], "num_nodes": 4096}),
                              ("MpiTrainJob", "m", {**registration.CASES["mpi"][1], "num_nodes": 4096})],
    "torch 100000": [("TorchTrainJob", "t", {**registration.CASES["torch"][1], "num_nodes": 100000})],
}


class GcClock:
    """Seconds spent in garbage collection while installed in gc.callbacks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (ssh-keygen under the mocks): what other
    processes on a shared machine take away from wall time does not count."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def emit(**values: Any) -> None:
    print(json.dumps(values), flush=True)


def register(spec_file: str, side: str, repeats: str = "1") -> None:
    """Time `side`'s registration of the spec's jobs; with repeats, the median of that many runs.

    Every run has its own mocks and starts after a garbage collection.
    """
    spec = json.loads(Path(spec_file).read_text())
    run(registration.program_for(side, registration.first_job(spec)))   # warm-up
    program = registration.program_for(side, spec)
    expected = sum(len(g["resources"]) for g in spec["groups"])
    times, cpu_times, gc_times = [], [], []
    for _ in range(int(repeats)):
        gc.collect()
        clock = GcClock()
        gc.callbacks.append(clock)
        start, cpu_start = time.perf_counter(), cpu_seconds()
        result = run(program)
        times.append(time.perf_counter() - start)
        cpu_times.append(cpu_seconds() - cpu_start)
        gc.callbacks.remove(clock)
        gc_times.append(clock.seconds)
        custom = sum(1 for r in result.resources if r.custom)
        if custom != expected:
            raise SystemExit(f"{side} registered {custom} resources, expected {expected}")
        del result
    emit(seconds=statistics.median(times), cpu_seconds=statistics.median(cpu_times),
         gc_seconds=statistics.median(gc_times))


def _per_call(call: Callable[[], Any], budget: float = 0.1, samples: int = 5) -> tuple[float, float]:
    """Median wall and CPU seconds per call, each sample repeating the call for about `budget` seconds."""
    start = time.perf_counter()
    call()
    loops = max(1, int(budget / max(time.perf_counter() - start, 1e-9)))
    wall, cpu = [], []
    for _ in range(samples):
        gc.collect()
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(loops):
            call()
        wall.append((time.perf_counter() - start) / loops)
        cpu.append((time.process_time() - cpu_start) / loops)
    return statistics.median(wall), statistics.median(cpu)


def derive(family: str, sizes: list[int]) -> None:
    from trainjobs.pipeline.pipeline import derive as derive_manifests   # here: the other sections also run on older checkouts
    component = getattr(trainjobs, DERIVE[family])
    for nodes in sizes:
        args = component.args_type.model_validate({**DERIVE_ARGS[family], "num_nodes": nodes})
        wall, cpu = _per_call(lambda: derive_manifests(component.family, "job", args))
        emit(family=family, nodes=nodes, seconds=wall, cpu_seconds=cpu)


def view(case: str) -> None:
    jobs = VIEWS[case]
    classes = {cls: getattr(trainjobs, cls) for cls, _, _ in jobs}
    start = time.perf_counter()
    result = run(lambda: [classes[cls](name, args) for cls, name, args in jobs])
    objects = [r.redacted_manifest for r in result.kubernetes()]
    seconds = time.perf_counter() - start
    emit(register_seconds=seconds, pods=sum(s.count for s in pod_sets(objects)))
    gc.collect()
    start, cpu_start = time.perf_counter(), cpu_seconds()
    text = ranks_text(objects)
    emit(view_seconds=time.perf_counter() - start, view_cpu_seconds=cpu_seconds() - cpu_start, chars=len(text))


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "register":
        register(*rest)
    elif command == "derive":
        derive(rest[0], [int(n) for n in rest[1:]])
    elif command == "view":
        view(rest[0])
    else:
        raise SystemExit(f"unknown measurement {command!r}")
