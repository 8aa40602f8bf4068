"""Which labels and annotations of the objects a job registers reach further: what each controller copies
from an object's metadata onto the objects it creates.

A key written on a JobSet's own metadata is not a key on the JobSet alone: its controller copies some keys
onto every child Job and pod, the initializers' too. `COPIES` is the one table of what each controller
copies from where to what, for the objects that run pods or group them (JobSet, Job, PodGroup), each rule
cited from the controller's source; a place of theirs the table lists no rule for is copied nowhere. The
job's other objects (Service, ConfigMap, Secret, claims) run no pods, and nothing copies their keys onto
one. `copied` applies the table: the JobSet backend builds its controller's Jobs with it
(`jobset.child_jobs`), and tests/test_copies.py walks every rendered object through it.

The sources, at the commits whose CRDs the objects are checked against:
- JobSet: kubernetes-sigs/jobset 08dfbdfd (v0.13.0-devel), and v0.12.0, whose controller
  tests/cluster/test_jobset_controller.py runs, `pkg/controllers/jobset_controller.go`:
  `constructJob` starts each Job's metadata from its replicated job's template metadata;
  `labelAndAnnotateObject`, applied to the Job and to its pod template, adds the controller's own keys
  and, from the JobSet's metadata or the replicated job's template metadata, only the exclusive
  placement keys.
- Kubernetes v1.34, the Job controller (`pkg/controller/job/job_controller.go`, `manageJob`): pods are
  made from `spec.template` alone (with the completion index); nothing of the Job's own metadata reaches
  them.
- Kueue: kubernetes-sigs/kueue ff69552e (v0.20.0-devel). It reads the queue and priority labels on the
  Job or JobSet it admits; the Workload it makes copies only the Configuration's `labelKeysToCopy` (none
  by default) and the `provreq.kueue.x-k8s.io/` annotations (`jobframework.NewWorkload`). MultiKueue
  copies the JobSet (its labels, annotations and spec: `api.CloneObjectMetaForCreation` in
  `jobset_multikueue_adapter.go` `SyncJob`) and nothing else to the worker cluster.
- Volcano: volcano-sh/volcano ed72c7c8 (v1.16.0-alpha.1), `pkg/controllers/podgroup/pg_controller_handler.go`:
  for a pod of its scheduler that names no group, `buildPodGroupFromPod` makes one for the pod's Job,
  inheriting the Job's `volcano.sh/` annotations (`inheritUpperAnnotations`, on by default). A PodGroup
  that trainjobs registers is named by its pods; Volcano and scheduler-plugins copy nothing from it.
"""

from dataclasses import dataclass
from typing import Mapping

__all__ = ["COPIES", "Copy", "EVERY", "EXCLUSIVE_TOPOLOGY", "JOB", "METADATA_ANNOTATIONS", "METADATA_LABELS",
           "NODE_SELECTOR_STRATEGY", "POD", "POD_GROUP", "TEMPLATE_ANNOTATIONS", "TEMPLATE_LABELS", "WORKER", "WORKLOAD",
           "copied", "reaches"]

EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
"""JobSet's exclusive placement: each child Job gets one domain of this node label to itself (its pod
webhook turns it into affinities and node selectors on the pods)."""
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
"""Exclusive placement by node selectors on nodes labelled beforehand, copied with it."""
_EXCLUSIVE = (EXCLUSIVE_TOPOLOGY, NODE_SELECTOR_STRATEGY)

JOB, POD, WORKER = "Job", "Pod", "JobSet on the worker cluster"
WORKLOAD, POD_GROUP = "Workload", "PodGroup"
METADATA_LABELS, METADATA_ANNOTATIONS = "metadata.labels", "metadata.annotations"
TEMPLATE_LABELS = "spec.replicatedJobs[].template.metadata.labels"
TEMPLATE_ANNOTATIONS = "spec.replicatedJobs[].template.metadata.annotations"
EVERY = "*"
"""As `Copy.keys`: every key."""

_JOBSET = "JobSet jobset_controller.go"
_JOB_CONTROLLER = "Kubernetes job_controller.go manageJob"
_KUEUE = "Kueue jobframework.NewWorkload"
_MULTIKUEUE = "Kueue jobset_multikueue_adapter.go SyncJob"
_VOLCANO = "Volcano pg_controller_handler.go buildPodGroupFromPod"
_PROVISIONING = "provreq.kueue.x-k8s.io/"


@dataclass(frozen=True)
class Copy:
    """One rule: the keys a controller copies from `where` in an object of `kind` onto the objects `to`."""

    kind: str
    where: str
    keys: tuple[str, ...]
    """Exact keys, `EVERY`, or prefixes ending in "/"; none: nothing is copied."""
    to: tuple[str, ...]
    by: str
    """The controller code that copies them."""

    def takes(self, key: str) -> bool:
        return any(k == EVERY or k == key or (k.endswith("/") and key.startswith(k)) for k in self.keys)


COPIES: tuple[Copy, ...] = (
    Copy("JobSet", METADATA_LABELS, (), (JOB, POD), f"{_JOBSET} labelAndAnnotateObject"),
    Copy("JobSet", METADATA_ANNOTATIONS, _EXCLUSIVE, (JOB, POD), f"{_JOBSET} labelAndAnnotateObject"),
    Copy("JobSet", TEMPLATE_LABELS, (EVERY,), (JOB,), f"{_JOBSET} constructJob"),
    Copy("JobSet", TEMPLATE_ANNOTATIONS, (EVERY,), (JOB,), f"{_JOBSET} constructJob"),
    Copy("JobSet", TEMPLATE_ANNOTATIONS, _EXCLUSIVE, (POD,), f"{_JOBSET} labelAndAnnotateObject"),
    Copy("JobSet", METADATA_LABELS, (EVERY,), (WORKER,), _MULTIKUEUE),
    Copy("JobSet", METADATA_ANNOTATIONS, (EVERY,), (WORKER,), _MULTIKUEUE),
    Copy("JobSet", METADATA_LABELS, (), (WORKLOAD,), _KUEUE),
    Copy("JobSet", METADATA_ANNOTATIONS, (_PROVISIONING,), (WORKLOAD,), _KUEUE),
    Copy("Job", METADATA_LABELS, (), (POD,), _JOB_CONTROLLER),
    Copy("Job", METADATA_ANNOTATIONS, (), (POD,), _JOB_CONTROLLER),
    Copy("Job", METADATA_LABELS, (), (WORKLOAD,), _KUEUE),
    Copy("Job", METADATA_ANNOTATIONS, (_PROVISIONING,), (WORKLOAD,), _KUEUE),
    Copy("Job", METADATA_ANNOTATIONS, ("volcano.sh/",), (POD_GROUP,), _VOLCANO),
)


def copied(kind: str, where: str, values: Mapping[str, str] | None, to: str) -> dict[str, str]:
    """The keys of `values` (the labels or annotations at `where` of an object of `kind`) that its controller
    copies onto `to`, with their values."""
    rules = [r for r in COPIES if (r.kind, r.where) == (kind, where) and to in r.to]
    return {k: v for k, v in (values or {}).items() if any(r.takes(k) for r in rules)}


def reaches(kind: str, where: str, key: str) -> tuple[str, ...]:
    """Every kind of object that `key`, at `where` of an object of `kind`, is copied onto."""
    return tuple(dict.fromkeys(to for r in COPIES if (r.kind, r.where) == (kind, where) and r.takes(key)
                               for to in r.to))
