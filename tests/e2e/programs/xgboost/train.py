"""One XGBoost worker per pod, joined the way programs in Kubeflow's xgboost runtime join.

Reads the worker's identity from the DMLC_* env alone. The worker with DMLC_TASK_ID 0 starts xgboost's
RabitTracker on all addresses at DMLC_TRACKER_PORT, as Kubeflow's examples do; every worker then joins
the collective at DMLC_TRACKER_URI:DMLC_TRACKER_PORT and trains on its shard of one synthetic data set.

It checks that training was really distributed: every task id 0..DMLC_NUM_WORKER-1 joined exactly
once, the gradient statistics of each tree's root cover the rows of all shards, not only this
worker's, and every worker ends with the same model. Prints one `E2E-XGB {json}` line per worker,
then task 0 prints `E2E-XGB-DONE {json}` once the tracker has seen every worker leave. Exits non-zero
on any mismatch, and on a group that cannot form (such as a DMLC_NUM_WORKER larger than the number of
workers) once E2E_BOOTSTRAP_TIMEOUT seconds have passed.
"""

import hashlib
import json
import os
import socket
import sys
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

env = os.environ
TASK_ID = int(env["DMLC_TASK_ID"])
NUM_WORKER = int(env["DMLC_NUM_WORKER"])
TRACKER_URI = env["DMLC_TRACKER_URI"]
TRACKER_PORT = int(env["DMLC_TRACKER_PORT"])
# How long the group may take to form, and any one collective operation to finish. Generous: the other
# pods may still be starting, importing xgboost or waiting for their DNS name on a loaded machine.
BOOTSTRAP_TIMEOUT = int(env.get("E2E_BOOTSTRAP_TIMEOUT", "600"))
# Connection attempts to the tracker and to peers; xgboost sleeps 2*i seconds before attempt i, so 20
# attempts wait up to 380 s for a tracker whose pod has not started listening yet.
CONNECT_RETRIES = 20
ROWS, FEATURES, ROUNDS = 2000, 8, 5


def report(tag: str, **fields) -> None:
    """One write per line, so lines of different workers never interleave."""
    os.write(1, f"{tag} {json.dumps(fields, sort_keys=True)}\n".encode())


def fail(problem: str) -> None:
    os.write(2, f"E2E-FAIL task {TASK_ID}: {problem}\n".encode())
    sys.exit(1)


def wait_for_tracker_name() -> None:
    """xgboost gives up at once on a name that does not resolve; a headless Service's record for the
    tracker's pod appears only once that pod runs."""
    deadline = time.monotonic() + BOOTSTRAP_TIMEOUT
    while True:
        try:
            socket.getaddrinfo(TRACKER_URI, TRACKER_PORT, type=socket.SOCK_STREAM)
            return
        except socket.gaierror as exc:
            if time.monotonic() > deadline:
                fail(f"tracker name {TRACKER_URI} did not resolve within {BOOTSTRAP_TIMEOUT} s: {exc}")
            time.sleep(1)


def shard() -> tuple[np.ndarray, np.ndarray]:
    """Rows TASK_ID, TASK_ID + NUM_WORKER, ... of a data set every worker generates identically."""
    rng = np.random.default_rng(20240601)
    features = rng.normal(size=(ROWS, FEATURES))
    target = features @ rng.normal(size=FEATURES) + 0.1 * rng.normal(size=ROWS)
    return features[TASK_ID::NUM_WORKER], target[TASK_ID::NUM_WORKER]


def root_covers(booster: xgb.Booster) -> list[float]:
    """Hessian sum at each tree's root: with squared error every row weighs 1, so it counts the rows
    the tree was grown on, across all workers when the histograms were allreduced."""
    return [json.loads(tree)["cover"] for tree in booster.get_dump(with_stats=True, dump_format="json")]


def train() -> dict:
    joined = np.zeros(NUM_WORKER, dtype=np.int64)
    joined[TASK_ID] = 1
    joined = collective.allreduce(joined, collective.Op.SUM)

    features, target = shard()
    rows = collective.allreduce(np.array([len(target)], dtype=np.int64), collective.Op.SUM)[0]
    # Built inside the collective: the quantile sketch of the hist method is merged across workers.
    data = xgb.QuantileDMatrix(features, label=target)
    booster = xgb.train({"tree_method": "hist", "objective": "reg:squarederror", "max_depth": 3,
                         "eta": 0.3, "nthread": 1, "seed": 0}, data, num_boost_round=ROUNDS)
    dump = "\n".join(booster.get_dump(with_stats=True))
    digest = hashlib.sha256(dump.encode()).hexdigest()[:16]
    differs = int(digest != collective.broadcast(digest, 0))
    differing = collective.allreduce(np.array([differs], dtype=np.int64), collective.Op.SUM)[0]

    identity = {
        "task_id": TASK_ID, "rank": collective.get_rank(), "world_size": collective.get_world_size(),
        "num_worker": NUM_WORKER, "tracker": f"{TRACKER_URI}:{TRACKER_PORT}", "hostname": socket.gethostname(),
        "joined": joined.tolist(), "local_rows": len(target), "rows": int(rows),
        "root_covers": sorted(set(root_covers(booster))), "trees": booster.num_boosted_rounds(),
        "model": digest,
    }
    report("E2E-XGB", **identity)
    problems = []
    if identity["world_size"] != NUM_WORKER:
        problems.append(f"world size {identity['world_size']}, DMLC_NUM_WORKER={NUM_WORKER}")
    if identity["joined"] != [1] * NUM_WORKER:
        problems.append(f"task ids joined {identity['joined']}, expected each of 0..{NUM_WORKER - 1} once")
    if identity["rows"] != ROWS:
        problems.append(f"{identity['rows']} rows across workers, expected {ROWS}")
    if identity["root_covers"] != [float(ROWS)]:
        problems.append(f"tree roots cover {identity['root_covers']} rows, expected {ROWS}: not trained on all shards")
    if identity["trees"] != ROUNDS:
        problems.append(f"{identity['trees']} trees, expected {ROUNDS}")
    if differing:
        problems.append(f"{differing} worker(s) ended with a model different from rank 0's")
    if problems:
        fail("; ".join(problems))
    return identity


def brief(exc: Exception) -> str:
    """xgboost's error without its native stack trace, on one line."""
    return " ".join(str(exc).split("Stack trace:")[0].split())


def main() -> None:
    tracker = None
    if TASK_ID == 0:
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=NUM_WORKER, port=TRACKER_PORT,
                               timeout=BOOTSTRAP_TIMEOUT)
        tracker.start()
    wait_for_tracker_name()
    try:
        with collective.CommunicatorContext(dmlc_tracker_uri=TRACKER_URI, dmlc_tracker_port=TRACKER_PORT,
                                            dmlc_task_id=str(TASK_ID), dmlc_retry=CONNECT_RETRIES,
                                            dmlc_timeout=BOOTSTRAP_TIMEOUT):
            identity = train()
        if tracker is not None:
            tracker.wait_for(BOOTSTRAP_TIMEOUT)
    except xgb.core.XGBoostError as exc:
        problem = f"collective failed: {brief(exc)}"
        if tracker is not None:
            try:
                tracker.free()
            except xgb.core.XGBoostError as tracker_exc:
                problem += f"; tracker failed: {brief(tracker_exc)}"
        fail(problem)
    if tracker is not None:
        report("E2E-XGB-DONE", world_size=identity["world_size"], trees=identity["trees"], model=identity["model"])


if __name__ == "__main__":
    main()
