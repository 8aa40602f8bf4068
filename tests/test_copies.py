"""What reaches the pods: every label and annotation a job writes on an object (a JobSet, a replicated job's
template, a Job, a PodGroup), walked through what each controller copies onward (trainjobs.backends.copies),
for every family, backend, gang scheduler and variant (placement, an elastic node range, MultiKueue,
initializers and an extra role). Initializers and extra roles end up with no placement and no gang
membership; each key lands where the docs say: the JobSet's own keys on the JobSet alone, a replicated
job's on its Job, exclusive placement on the training Jobs and their pods."""

import copy

import pytest

from trainjobs import (DeepSpeedTrainJob, JaxTrainJob, MlxTrainJob, MpiTrainJob, TorchTrainJob, TorchTuneTrainJob,
                       TrainJobError, XGBoostTrainJob)
from trainjobs.backends import copies, pod_sets
from trainjobs.backends.copies import (EXCLUSIVE_TOPOLOGY, JOB, METADATA_ANNOTATIONS, METADATA_LABELS,
                                       NODE_SELECTOR_STRATEGY, POD, TEMPLATE_ANNOTATIONS, TEMPLATE_LABELS, WORKER)
from trainjobs.core.args import parse_args
from trainjobs.pipeline.pipeline import derive
from trainjobs.scheduling import placement_of

RACK = "example.com/rack"
GANG_ROLES = ("node", "launcher")
# Each pod set requests a resource, as Kueue places only those that do.
CPU = {"resources_per_node": {"requests": {"cpu": "1"}}}
MPI = {"image": "mpi:1", "command": ["mpirun", "hostname"], **CPU}
FAMILIES = {
    "torch": (TorchTrainJob, {"image": "t:1", "num_nodes": 2, "rendezvous": "c10d", **CPU}),
    "torchtune": (TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b"}),   # its runtime has both initializers
    "jax": (JaxTrainJob, {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2, **CPU}),
    "xgboost": (XGBoostTrainJob, {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 2, **CPU}),
    "openmpi": (MpiTrainJob, {**MPI, "num_nodes": 2, "runtime": {"name": "mpi-distributed", "launcher": {
        "resources": {"requests": {"cpu": "1"}}}}}),
    "mpi-launcher-host": (MpiTrainJob, {**MPI, "num_nodes": 1, "run_launcher_as_node": True}),
    "deepspeed": (DeepSpeedTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 2, **CPU}),
    "mlx": (MlxTrainJob, {"command": ["mpirun", "python", "train.py"], "num_nodes": 2, **CPU}),
}
SCHEDULERS = {"none": {}, "kueue": {"gang_scheduler": "kueue", "queue": "team"},
              "volcano": {"gang_scheduler": "volcano", "queue": "team"}, "coscheduling": {"gang_scheduler": "coscheduling"}}
PLACEMENTS = {"none": {"topology": RACK}, "kueue": {"topology": RACK}, "volcano": {"tier": 1}, "coscheduling": {}}
INITIALIZERS = {"dataset_initializer": {"storage_uri": "hf://org/data"},
                "model_initializer": {"storage_uri": "hf://org/model"}}
EXTRA = {"extra_roles": {"tensorboard": {"image": "tb:1"}}}
SHARED = {"workspace_volume": {"nfs": {"server": "nfs.example.com", "path": "/ws"}}}


def variants(scheduler):
    placement = {"placement": PLACEMENTS[scheduler]} if PLACEMENTS[scheduler] else {}
    return {
        "plain": {},
        "initializers": {**INITIALIZERS, **EXTRA},
        "placement": {**placement, **INITIALIZERS, **EXTRA},
        "elastic": {**placement, **INITIALIZERS, "num_nodes": "2:4"},
        "elastic-slices": {**INITIALIZERS, "num_nodes": "2:4", "elastic_admission": "slices"},
        "multikueue": {**placement, **INITIALIZERS, **SHARED, "multikueue": True, "queue": "team"},
        "multikueue-devices": {**INITIALIZERS, **SHARED, "multikueue": True, "queue": "team",
                               "devices_per_node": [{"count": 1}]},
    }


# Keys that place pods or make them members of a gang: none may reach an initializer or an extra role.
PLACING = (EXCLUSIVE_TOPOLOGY, NODE_SELECTOR_STRATEGY, "kueue.x-k8s.io/podset-", "scheduling.k8s.io/group-name",
           "scheduling.x-k8s.io/pod-group")


def placing(keys):
    return sorted(k for k in keys if any(k == p or (p.endswith("-") and k.startswith(p)) for p in PLACING))


def render(component, args):
    name = "llm"
    return list(derive(component.family, name, parse_args(component.__name__, name, component.family.args_type,
                                                          copy.deepcopy(args))).manifests)


def metadata_blocks(obj):
    """(where, labels or annotations, role of the replicated job or None) of every object-level metadata block."""
    meta = obj["metadata"]
    yield METADATA_LABELS, meta.get("labels") or {}, None
    yield METADATA_ANNOTATIONS, meta.get("annotations") or {}, None
    if obj["kind"] == "JobSet":
        for rj in obj["spec"]["replicatedJobs"]:
            template = rj["template"].get("metadata") or {}
            yield TEMPLATE_LABELS, template.get("labels") or {}, rj["name"]
            yield TEMPLATE_ANNOTATIONS, template.get("annotations") or {}, rj["name"]


def expected_reach(kind, where, key, role):
    """Where the docs say a key the job writes at object level lands (beyond the object itself)."""
    if kind == "JobSet" and where in (METADATA_LABELS, METADATA_ANNOTATIONS):
        return {WORKER}   # read on the JobSet (Kueue's labels, Pulumi's annotations); MultiKueue copies the JobSet
    if kind == "JobSet":   # a replicated job's template: the Job it makes (docs/backends.md)
        return {JOB, POD} if key == EXCLUSIVE_TOPOLOGY and role in GANG_ROLES else {JOB}
    return set()   # a Job's or a PodGroup's own keys stay on it


def pods_by_copy_rules(obj):
    """(role, labels, annotations) of the pods a registered object makes, by COPIES alone."""
    meta = obj["metadata"]
    if obj["kind"] == "Job":
        template = obj["spec"]["template"]["metadata"]
        own = {field: copies.copied("Job", f"metadata.{field}", meta.get(field), POD) for field in ("labels", "annotations")}
        yield (template["labels"].get("trainjobs.io/role"), {**template["labels"], **own["labels"]},
               {**(template.get("annotations") or {}), **own["annotations"]})
    elif obj["kind"] == "JobSet":
        for rj in obj["spec"]["replicatedJobs"]:
            rj_meta = rj["template"].get("metadata") or {}
            template = rj["template"]["spec"]["template"]["metadata"]
            found = {}
            for field, own, held in (("labels", METADATA_LABELS, TEMPLATE_LABELS),
                                     ("annotations", METADATA_ANNOTATIONS, TEMPLATE_ANNOTATIONS)):
                found[field] = {**(template.get(field) or {}), **copies.copied("JobSet", own, meta.get(field), POD),
                                **copies.copied("JobSet", held, rj_meta.get(field), POD)}
            yield rj["name"], found["labels"], found["annotations"]


def on_worker(jobset):
    """The JobSet MultiKueue creates on the worker cluster from the manager's."""
    meta = jobset["metadata"]
    spec = {k: v for k, v in jobset["spec"].items() if k != "managedBy"}
    return {**jobset, "metadata": {"name": meta["name"], "namespace": meta.get("namespace"),
                                   "labels": copies.copied("JobSet", METADATA_LABELS, meta.get("labels"), WORKER),
                                   "annotations": copies.copied("JobSet", METADATA_ANNOTATIONS, meta.get("annotations"),
                                                                WORKER)},
            "spec": spec}


def referenced(pod_spec):
    """The objects a pod names: claim templates, and the ConfigMaps, Secrets and claims it mounts."""
    names = {("ResourceClaimTemplate", c.get("resourceClaimTemplateName")) for c in pod_spec.get("resourceClaims") or ()}
    for volume in pod_spec.get("volumes") or ():
        names |= {("ConfigMap", (volume.get("configMap") or {}).get("name")),
                  ("Secret", (volume.get("secret") or {}).get("secretName")),
                  ("PersistentVolumeClaim", (volume.get("persistentVolumeClaim") or {}).get("claimName"))}
    return {n for n in names if n[1]}


def problems_of(objects, placed, multikueue):
    """What in the rendered objects contradicts the copy rules and the docs."""
    found = []
    for obj in objects:
        for where, values, role in metadata_blocks(obj):
            for key in values:
                unexpected = set(copies.reaches(obj["kind"], where, key)) - expected_reach(obj["kind"], where, key, role)
                if unexpected:
                    found.append(f"{obj['kind']} {where}{f' ({role})' if role else ''} {key} reaches {sorted(unexpected)}")
    workloads = [o for o in objects if o["kind"] in ("Job", "JobSet")]
    if multikueue:
        workloads = [on_worker(o) for o in workloads]
    for obj in workloads:
        for role, labels, annotations in pods_by_copy_rules(obj):
            if role not in GANG_ROLES and placing([*labels, *annotations]):
                found.append(f"{role} pods of {obj['kind']} {obj['metadata']['name']} carry "
                             f"{placing([*labels, *annotations])}")
    # The tools read the pods as the controllers make them (JobSet's child Jobs from the same rules): the same keys.
    for pod_set in pod_sets(objects):
        meta = pod_set.template["metadata"]
        keys = placing([*(meta.get("labels") or {}), *(meta.get("annotations") or {})])
        affinity = (pod_set.pod_spec.get("affinity") or {}).get("podAffinity")
        if pod_set.role not in GANG_ROLES and (keys or affinity):
            found.append(f"{pod_set.role} pods, as the tools read them, carry {keys or affinity}")
        if pod_set.role in GANG_ROLES and placed and placement_of(pod_set, objects) is None:
            found.append(f"{pod_set.role} pods are not placed")
    if multikueue:   # MultiKueue copies the JobSet alone: a pod naming any other object of the job never starts
        behind = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] != "JobSet"}
        for pod_set in pod_sets(objects):
            if referenced(pod_set.pod_spec) & behind:
                found.append(f"{pod_set.role} pods need {sorted(referenced(pod_set.pod_spec) & behind)}, left behind")
    return found


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_initializer_or_extra_role_is_placed_and_every_object_key_lands_where_the_docs_say(family):
    component, base = FAMILIES[family]
    rendered, found = [], []
    for backend in ("jobs", "jobset"):
        for scheduler, scheduling in SCHEDULERS.items():
            for variant, extra in variants(scheduler).items():
                args = {**base, **scheduling, **extra, "backend": backend}
                try:
                    objects = render(component, args)
                except TrainJobError:
                    continue   # a combination refused before anything registers
                rendered.append((backend, scheduler, variant))
                placed = "placement" in args and bool(args["placement"])
                found += [f"{backend}/{scheduler}/{variant}: {p}" for p in
                          problems_of(objects, placed, bool(args.get("multikueue")))]
    assert found == []
    # Each family renders under both backends, with initializers and extra roles, and placed.
    assert {(b, v) for b, _, v in rendered} >= {(b, v) for b in ("jobs", "jobset") for v in ("plain", "initializers")}
    assert ("jobset", "none", "placement") in rendered or family in ("openmpi", "deepspeed", "mlx")
    assert ("jobset", "kueue", "placement") in rendered and ("jobs", "volcano", "placement") in rendered
    if family in ("torch", "jax", "xgboost", "torchtune"):
        assert ("jobset", "kueue", "multikueue") in rendered
    if family == "torch":
        assert {("jobs", "kueue", "elastic"), ("jobs", "kueue", "elastic-slices")} <= set(rendered)


def test_a_placed_jobset_writes_exclusive_placement_on_its_training_jobs_alone():
    objects = render(TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b", "backend": "jobset",
                                         "placement": {"topology": RACK}})
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    assert jobset["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    by_role = {rj["name"]: (rj["template"]["metadata"].get("annotations") or {}) for rj in jobset["spec"]["replicatedJobs"]}
    assert by_role == {"dataset-initializer": {}, "model-initializer": {}, "node": {EXCLUSIVE_TOPOLOGY: RACK}}
    # As the controller makes them: the node Job and its pods carry it, the initializers' nothing.
    for pod_set in pod_sets(objects):
        want = {EXCLUSIVE_TOPOLOGY: RACK} if pod_set.role == "node" else {}
        assert {k: v for k, v in pod_set.template["metadata"]["annotations"].items() if k.startswith("alpha.")} == want
        assert {k: v for k, v in pod_set.job["metadata"]["annotations"].items() if k.startswith("alpha.")} == want


def test_exclusive_placement_on_a_jobsets_own_metadata_reaches_every_job_and_pod():
    """The rule the JobSet backend keeps to: written on the JobSet, the key would place the initializers too."""
    assert copies.reaches("JobSet", METADATA_ANNOTATIONS, EXCLUSIVE_TOPOLOGY) == (JOB, POD, WORKER)
    assert copies.reaches("JobSet", METADATA_ANNOTATIONS, "pulumi.com/skipAwait") == (WORKER,)
    assert copies.reaches("JobSet", TEMPLATE_ANNOTATIONS, EXCLUSIVE_TOPOLOGY) == (JOB, POD)
    assert copies.reaches("JobSet", TEMPLATE_LABELS, "kueue.x-k8s.io/queue-name") == (JOB,)
    assert copies.reaches("Job", METADATA_LABELS, "kueue.x-k8s.io/queue-name") == ()
    assert copies.reaches("Job", METADATA_ANNOTATIONS, "volcano.sh/network-topology-mode") == ("PodGroup",)
    from trainjobs.backends.jobset import child_jobs
    jobset = {"metadata": {"name": "s", "annotations": {EXCLUSIVE_TOPOLOGY: RACK}}, "spec": {"replicatedJobs": [
        {"name": "init", "template": {"spec": {"template": {"metadata": {}, "spec": {}}}}}]}}
    (job,) = child_jobs(jobset)
    assert job["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY] == RACK
    assert job["spec"]["template"]["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY] == RACK


def test_the_ttl_moves_to_the_jobset():
    """A child Job deleted by its own TTL while the JobSet runs would be made again by the controller."""
    objects = render(TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b", "backend": "jobset",
                                         "ttl_seconds_after_finished": 600, "active_deadline_seconds": 7200})
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 600
    specs = {rj["name"]: rj["template"]["spec"] for rj in jobset["spec"]["replicatedJobs"]}
    assert [("ttlSecondsAfterFinished" in s, s.get("activeDeadlineSeconds")) for s in specs.values()] == [
        (False, 7200)] * 3   # the deadline stays on each Job
    jobs = render(TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b", "ttl_seconds_after_finished": 600})
    assert [o["spec"]["ttlSecondsAfterFinished"] for o in jobs if o["kind"] == "Job"] == [600, 600, 600]
