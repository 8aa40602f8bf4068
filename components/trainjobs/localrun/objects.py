"""A local run's Jobs, JobSets and pods as the Kubernetes API would show them (`trainjobs.observe.local`), so
that `trainjobs status`, `logs` and `wait` read run-local's pods by the same rules as a cluster's. Written to
the run's directory whenever a pod or Job changes, and at the end.

Only what those commands read is written: names, labels, annotations, the Job fields its backoff and failure
policy are read from, and status. Never a container's env or command, so no value of a Secret.
"""

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainjobs.kube.manifests import MAIN_CONTAINER
from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION
from trainjobs.kube.policies import DISRUPTION_TARGET
from trainjobs.observe.local import STATE_FILE
from .jobs import JobRun, PodRun
from .jobsets import JobSetRun

# What a pod evicted by `--disrupt` says in its DisruptionTarget condition: a preemption's reason.
PREEMPTION_REASON = "PreemptionByScheduler"


def _stamp(monotonic: float | None, offset: float) -> str | None:
    if monotonic is None:
        return None
    # Microseconds, where the API server has seconds: a pod replaced within a second still sorts after its predecessor.
    return datetime.fromtimestamp(monotonic + offset, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pod(pod: PodRun, job: JobRun, namespace: str, node: str, offset: float) -> dict[str, Any]:
    slot = pod.spec.slot
    phase = "Failed" if pod.phase == "Stopped" else pod.phase   # a pod stopped from outside fails, as on a node
    main = next((c for c in pod.sandbox.containers if c.spec.name == MAIN_CONTAINER), None) or next(
        (c for c in pod.sandbox.containers if c.spec.kind == "main"), None)
    code = main.exit_code if main is not None and main.exit_code is not None else pod.exit_code
    if pod.done and code is not None:
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                "finishedAt": _stamp(pod.finished, offset)}}
    else:
        state = {"running": {}} if pod.phase == "Running" else {"waiting": {"reason": "PodInitializing"}}
    conditions = []
    if DISRUPTION_TARGET in pod.conditions:
        conditions.append({"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_REASON,
                           "message": pod.reason.removeprefix(f"{DISRUPTION_TARGET}: ")})
    annotations = {COMPLETION_INDEX_ANNOTATION: str(slot.index)} if slot.indexed else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.spec.name, "namespace": namespace, "labels": dict(slot.labels),
                         "annotations": annotations, "creationTimestamp": _stamp(pod.started, offset),
                         "ownerReferences": [{"kind": "Job", "name": job.name, "uid": f"{namespace}/{job.name}"}]},
            "spec": {"hostname": slot.hostname, "nodeName": node},
            "status": {"phase": phase, "conditions": conditions,
                       "message": "" if pod.phase in ("Succeeded", "Running", "Pending") or conditions else pod.reason,
                       "containerStatuses": [{"name": main.spec.name if main else MAIN_CONTAINER, "restartCount": 0,
                                              "state": state}]}}


def _job(job: JobRun) -> dict[str, Any]:
    manifest = job.spec.manifest
    meta = manifest.get("metadata") or {}
    conditions = []
    if job.state in ("Complete", "Failed"):
        reason, _, message = job.reason.partition(": ")
        conditions.append({"type": job.state, "status": "True", "reason": job.failure_reason or reason,
                           "message": job.failure_message or message})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job.name, "namespace": job.spec.namespace, "uid": f"{job.spec.namespace}/{job.name}",
                         "labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})},
            "spec": {"parallelism": job.spec.parallelism, "completions": job.spec.completions,
                     "backoffLimit": job.spec.backoff_limit,
                     "podFailurePolicy": {"rules": list(job.spec.pod_failure_rules)}},
            "status": {"active": len(job.active), "succeeded": len(job.succeeded), "failed": job.failures,
                       "conditions": conditions}}


def _jobset(jobset: JobSetRun) -> dict[str, Any]:
    meta = jobset.manifest.get("metadata") or {}
    namespace = meta.get("namespace", "default")
    conditions = []
    if jobset.state:
        reason, _, message = jobset.reason.partition(": ")
        conditions.append({"type": jobset.state, "status": "True", "reason": reason, "message": message})
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": jobset.name, "namespace": namespace, "uid": f"{namespace}/{jobset.name}",
                         "labels": dict(meta.get("labels") or {})},
            "spec": {"failurePolicy": {"maxRestarts": int((jobset.spec.get("failurePolicy") or {}).get("maxRestarts", 0))}},
            "status": {"restarts": jobset.restarts, "conditions": conditions}}


def write(run_dir: Path, jobs: list[JobRun], jobsets: list[JobSetRun], node: str, finished: bool) -> None:
    """The run's objects and each pod's log files, replaced at once (a reader never sees half a file)."""
    offset = time.time() - time.monotonic()
    state = {"finished": finished, "node": node,
             "jobs": [_job(j) for j in jobs], "jobsets": [_jobset(s) for s in jobsets],
             "pods": [_pod(p, j, j.spec.namespace, node, offset) for j in jobs for p in j.pods],
             "logs": {p.spec.name: {c.spec.name: str(c.log_path) for c in p.sandbox.containers}
                      for j in jobs for p in j.pods}}
    temporary = run_dir / f".{STATE_FILE}.tmp"
    temporary.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(temporary, run_dir / STATE_FILE)
