"""Placement and MultiKueue: the exact annotations, PodGroup fields and affinities each gang scheduler (and
each backend without one) renders for a job's placement; the same pods under both backends but for the
placement; the objects a MultiKueue job registers; every refused combination naming its argument, as a
dict and as typed Args (tests/corpus/placement.yaml feeds them through `--config` too); and what explain
and the summary show, read back from the rendered objects."""

import copy

import kubernetes_validate
import pytest

import trainjobs
from trainjobs import (JaxTrainJob, MpiTrainJob, TorchTrainJob, TorchTrainJobArgs, TrainJobError, XGBoostTrainJob)
from trainjobs.backends import controller_jobs, pod_sets
from trainjobs.scheduling import placement_of
from trainjobs.testing import run
from trainjobs.testing.checks import manifest_problems
from trainjobs.tools.cli.render import kubernetes_objects, ranks_text
from trainjobs.tools.cli.summary import summary

from crd_schemas import cluster_problems, crd_directory

RACK = "example.com/rack"
BLOCK = "example.com/block"
TORCH = {"image": "t:1", "num_nodes": 16, "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}}
MPI_REQUESTING_NOTHING = {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 3}
# The launcher and nodes request resources: Kueue places only pod sets that request one.
MPI = {**MPI_REQUESTING_NOTHING, "resources_per_node": {"limits": {"nvidia.com/gpu": 4}},
       "runtime": {"name": "mpi-distributed", "launcher": {"resources": {"requests": {"cpu": "1"}}}}}
KUEUE = {"gang_scheduler": "kueue", "queue": "team-llm"}
VOLCANO = {"gang_scheduler": "volcano", "queue": "team-llm"}
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def rendered(component, args, name="llm"):
    return kubernetes_objects(run(lambda: component(name, copy.deepcopy(args))), redact=False)


def sets(objects):
    return {s.role: s for s in pod_sets(objects)}


def annotations(pod_set):
    return pod_set.template["metadata"].get("annotations") or {}


def kind(objects, wanted):
    return [o for o in objects if o["kind"] == wanted]


def accepted(objects):
    """The cluster takes every object: CRDs and webhooks (when the CRD files are here), and the Jobs that
    run against the API server's rules and Kubernetes' schema."""
    running = controller_jobs(objects)
    assert manifest_problems(running) == []
    for obj in running:
        if obj["kind"] != "PodGroup":
            kubernetes_validate.validate(obj, "1.31.0", strict=True)
    return objects


# --- Kueue --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_a_16_node_torch_job_in_one_rack_carries_kueues_required_topology_on_its_training_pods(backend):
    objects = accepted(rendered(TorchTrainJob, {**TORCH, **KUEUE, "backend": backend, "placement": {"topology": RACK},
                                                "dataset_initializer": {"storage_uri": "hf://org/data"}}))
    found = sets(objects)
    assert found["node"].count == 16
    assert {k: v for k, v in annotations(found["node"]).items() if k.startswith("kueue.")} == {REQUIRED: RACK}
    # The initializer is no part of the gang: Kueue's implicit default places it.
    assert not any(k.startswith("kueue.") for k in annotations(found["dataset-initializer"]))


def test_an_mpi_job_on_a_jobset_under_kueue_places_its_launcher_and_nodes_in_one_group():
    objects = accepted(rendered(MpiTrainJob, {**MPI, **KUEUE, "backend": "jobset", "placement": {"topology": BLOCK}}))
    (jobset,) = kind(objects, "JobSet")
    by_role = {rj["name"]: rj for rj in jobset["spec"]["replicatedJobs"]}
    for role, pods in (("launcher", 1), ("node", 3)):
        template = by_role[role]["template"]["spec"]["template"]
        assert {k: v for k, v in template["metadata"]["annotations"].items() if k.startswith("kueue.")} == {
            REQUIRED: BLOCK, GROUP: "llm"}
        assert by_role[role]["template"]["spec"]["parallelism"] == pods


def test_preferred_and_slices_are_kueues_annotations():
    objects = accepted(rendered(TorchTrainJob, {**TORCH, **KUEUE, "backend": "jobset", "placement": {
        "topology": BLOCK, "mode": "preferred", "slice_topology": RACK, "slice_size": 4}}))
    assert {k: v for k, v in annotations(sets(objects)["node"]).items() if k.startswith("kueue.")} == {
        PREFERRED: BLOCK, "kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "4"}


def test_slices_alone_need_no_outer_level():
    objects = rendered(TorchTrainJob, {**TORCH, **KUEUE, "placement": {"slice_topology": RACK, "slice_size": 8}})
    assert {k: v for k, v in annotations(sets(objects)["node"]).items() if k.startswith("kueue.")} == {
        "kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "8"}


# --- Volcano ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["jobs", "jobset"])
@pytest.mark.parametrize("component,args", [(TorchTrainJob, TORCH), (MpiTrainJob, MPI)], ids=["torch", "mpi"])
def test_under_volcano_the_podgroup_carries_the_network_topology(component, args, backend):
    objects = accepted(rendered(component, {**args, **VOLCANO, "backend": backend, "placement": {"tier": 1}}))
    (group,) = kind(objects, "PodGroup")
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_a_preferred_placement_by_tier_name_is_soft():
    objects = rendered(TorchTrainJob, {**TORCH, **VOLCANO, "placement": {"tier_name": "spine", "mode": "preferred"}})
    (group,) = kind(objects, "PodGroup")
    assert group["spec"]["networkTopology"] == {"mode": "soft", "highestTierName": "spine"}


# --- without a gang scheduler ---------------------------------------------------------------------------

def affinity_term(roles, name="llm"):
    return {"labelSelector": {"matchLabels": {"trainjobs.io/job-name": name},
                              "matchExpressions": [{"key": "trainjobs.io/role", "operator": "In", "values": roles}]},
            "topologyKey": RACK}


def test_without_a_gang_scheduler_the_jobs_backend_uses_pod_affinity_among_the_training_pods():
    user = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}}
    objects = accepted(rendered(MpiTrainJob, {**MPI, "affinity": user, "placement": {"topology": RACK},
                                              "extra_roles": {"tensorboard": {"image": "tb:1"}}}))
    found = sets(objects)
    for role in ("launcher", "node"):
        assert found[role].pod_spec["affinity"] == {**user, "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(["launcher", "node"])]}}
    assert "affinity" not in found["tensorboard"].pod_spec


def test_a_preferred_placement_is_a_preferred_pod_affinity():
    objects = rendered(TorchTrainJob, {**TORCH, "placement": {"topology": RACK, "mode": "preferred"}})
    assert sets(objects)["node"].pod_spec["affinity"] == {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": affinity_term(["node"])}]}}


def test_without_a_gang_scheduler_a_jobset_places_each_training_job_exclusively():
    objects = accepted(rendered(TorchTrainJob, {**TORCH, "backend": "jobset", "placement": {"topology": RACK},
                                                "model_initializer": {"storage_uri": "hf://org/model"}}))
    (jobset,) = kind(objects, "JobSet")
    by_role = {rj["name"]: rj for rj in jobset["spec"]["replicatedJobs"]}
    assert by_role["node"]["template"]["metadata"]["annotations"] == {EXCLUSIVE: RACK}
    assert EXCLUSIVE not in (by_role["model-initializer"]["template"]["metadata"].get("annotations") or {})
    # The controller copies it onto the child Job's pods, where its pod webhook reads it.
    assert annotations(sets(objects)["node"])[EXCLUSIVE] == RACK
    assert "affinity" not in sets(objects)["node"].pod_spec


def strip_placement(template):
    """A pod template without what places it, and without the JobSet controller's own stamps."""
    template = copy.deepcopy(template)
    meta = template["metadata"]
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                           if k != EXCLUSIVE and not k.startswith("jobset.sigs.k8s.io/")}
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("jobset.sigs.k8s.io/")}
    template["spec"].pop("affinity", None)
    return template


@pytest.mark.parametrize("scheduler", [None, "kueue", "volcano"])
@pytest.mark.parametrize("component,args", [(TorchTrainJob, TORCH), (MpiTrainJob, MPI)], ids=["torch", "mpi"])
def test_the_same_pods_under_both_backends_but_for_the_placement(component, args, scheduler):
    extra = {None: {"placement": {"topology": RACK}}, "kueue": {**KUEUE, "placement": {"topology": RACK}},
             "volcano": {**VOLCANO, "placement": {"tier": 2}}}[scheduler]
    if component is MpiTrainJob and scheduler in (None, "kueue"):
        # Kueue would admit the launcher and node Jobs apart under `jobs`; JobSet's exclusive placement would
        # keep them apart: the launcher as the only host is one pod set.
        extra = {**extra, "num_nodes": 1, "run_launcher_as_node": True}
    both = {b: sets(rendered(component, {**args, **extra, "backend": b})) for b in ("jobs", "jobset")}
    assert set(both["jobs"]) == set(both["jobset"])
    for role, pod_set in both["jobs"].items():
        assert strip_placement(both["jobset"][role].template) == strip_placement(pod_set.template), role
        objects = rendered(component, {**args, **extra, "backend": "jobs"})
        jobset_objects = rendered(component, {**args, **extra, "backend": "jobset"})
        assert placement_of(pod_set, objects) is not None
        assert placement_of(both["jobset"][role], jobset_objects) is not None
    if scheduler == "kueue":   # Kueue's annotations are the same on both
        assert [annotations(s).get(REQUIRED) for s in both["jobs"].values()] == [RACK] * len(both["jobs"])


# --- explain and the summary ------------------------------------------------------------------------

@pytest.mark.parametrize("extra,shown", [
    ({**KUEUE, "backend": "jobset", "placement": {"topology": RACK}}, f"required {RACK}, group llm (Kueue)"),
    ({**VOLCANO, "placement": {"tier": 1}}, "hard, highest tier 1 (Volcano)"),
    ({"placement": {"topology": RACK}}, f"required {RACK} (pod affinity)"),
], ids=["kueue", "volcano", "affinity"])
def test_explain_and_the_summary_show_each_pod_sets_placement(extra, shown):
    result = run(lambda: MpiTrainJob("llm", {**MPI, **extra}))
    objects = kubernetes_objects(result, redact=False)
    text = ranks_text(objects)
    for job in ("llm-launcher-0", "llm-node-0"):
        heading = next(line for line in text.splitlines() if line.startswith(f"Job {job}:"))
        after = text.splitlines()[text.splitlines().index(heading) + 1]
        assert after == f"  placement: {shown}"
    (line,) = [line for line in summary(result).splitlines() if line.startswith("Placement: ")]
    assert sorted(line.removeprefix("Placement: ").removesuffix(".").split("; ")) == [
        f"`llm-launcher-0` {shown}", f"`llm-node-0` {shown}"]


def test_explain_shows_the_jobset_exclusive_placement():
    objects = rendered(TorchTrainJob, {**TORCH, "num_nodes": 2, "backend": "jobset", "placement": {"topology": RACK}})
    assert f"  placement: exclusive {RACK} (JobSet)" in ranks_text(objects).splitlines()


def test_a_job_without_placement_shows_none():
    result = run(lambda: TorchTrainJob("llm", {**TORCH, **KUEUE}))
    assert "placement" not in ranks_text(kubernetes_objects(result))
    assert "Placement" not in summary(result)


# --- MultiKueue ---------------------------------------------------------------------------------------

MULTIKUEUE = {"multikueue": True, "queue": "team-llm", "backend": "jobset"}


@pytest.mark.parametrize("component,args", [
    (TorchTrainJob, {"image": "t:1", "num_nodes": 4}),
    (JaxTrainJob, {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2}),
    (XGBoostTrainJob, {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 3}),
], ids=["torch", "jax", "xgboost"])
def test_a_multikueue_job_is_one_jobset_managed_by_multikueue_and_nothing_left_behind(component, args):
    objects = accepted(rendered(component, {**args, **MULTIKUEUE}))
    # The JobSet alone: MultiKueue copies it to the worker; a Service here would stay behind.
    assert [o["kind"] for o in objects] == ["JobSet"]
    (jobset,) = objects
    assert jobset["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-llm"
    # The controller on the worker creates the headless Service named after the subdomain: the name the
    # job's own Service has, in which every pod's DNS name (and so the env) already lies.
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "llm", "publishNotReadyAddresses": True}
    assert {s.pod_spec["subdomain"] for s in pod_sets(objects)} == {"llm"}
    without = rendered(component, {**args, "backend": "jobset", "gang_scheduler": "kueue", "queue": "team-llm"})
    assert [o["metadata"]["name"] for o in without if o["kind"] == "Service"] == ["llm"]
    assert sets(objects)["node"].template == sets(without)["node"].template


def test_multikueue_with_placement_and_initializers_on_shared_storage():
    objects = accepted(rendered(TorchTrainJob, {
        **TORCH, **MULTIKUEUE, "placement": {"topology": RACK},
        "dataset_initializer": {"storage_uri": "hf://org/data"},
        "workspace_volume": {"nfs": {"server": "nfs.example.com", "path": "/ws"}}}))
    assert [o["kind"] for o in objects] == ["JobSet"]
    assert annotations(sets(objects)["node"])[REQUIRED] == RACK


def test_the_multikueue_jobset_passes_the_crds():
    crd_directory()
    objects = rendered(TorchTrainJob, {**TORCH, **MULTIKUEUE, "placement": {"topology": RACK}})
    assert cluster_problems(objects) == []


# --- refused combinations, each naming its argument -----------------------------------------------------

REFUSED = [
    ("coscheduling has no topology", TorchTrainJob,
     {**TORCH, "gang_scheduler": "coscheduling", "placement": {"topology": RACK}}, "placement"),
    ("kueue jobs backend mpi launcher", MpiTrainJob, {**MPI, **KUEUE, "placement": {"topology": RACK}}, "placement"),
    ("kueue tier", TorchTrainJob, {**TORCH, **KUEUE, "placement": {"tier": 1}}, "placement.tier"),
    ("kueue tier beside topology", TorchTrainJob, {**TORCH, **KUEUE, "placement": {"topology": RACK, "tier_name": "x"}},
     "placement.tier_name"),
    ("kueue slice over the pod count", TorchTrainJob,
     {**TORCH, **KUEUE, "placement": {"slice_topology": RACK, "slice_size": 17}}, "placement.slice_size"),
    ("kueue slices of a group", MpiTrainJob,
     {**MPI, **KUEUE, "backend": "jobset", "placement": {"topology": BLOCK, "slice_topology": RACK, "slice_size": 1}},
     "placement.slice_topology"),
    ("kueue group needs a topology", MpiTrainJob,
     {**MPI, **KUEUE, "backend": "jobset", "placement": {"slice_topology": RACK, "slice_size": 1}}, "placement.topology"),
    ("volcano needs a tier", TorchTrainJob, {**TORCH, **VOLCANO, "placement": {"topology": RACK}}, "placement.tier"),
    ("volcano refuses a label level", TorchTrainJob,
     {**TORCH, **VOLCANO, "placement": {"topology": RACK, "tier": 1}}, "placement.topology"),
    ("volcano refuses slices", TorchTrainJob,
     {**TORCH, **VOLCANO, "placement": {"tier": 1, "slice_topology": RACK, "slice_size": 2}}, "placement.slice_topology"),
    ("no scheduler tier", TorchTrainJob, {**TORCH, "placement": {"tier": 1}}, "placement.tier"),
    ("no scheduler slices", TorchTrainJob,
     {**TORCH, "placement": {"topology": RACK, "slice_topology": RACK, "slice_size": 2}}, "placement.slice_topology"),
    ("kueue places no launcher that requests nothing", MpiTrainJob,
     {**MPI_REQUESTING_NOTHING, **KUEUE, "resources_per_node": {"limits": {"nvidia.com/gpu": 4}}, "backend": "jobset",
      "placement": {"topology": BLOCK}},
     "runtime.launcher.resources"),
    ("kueue places no training pods that request nothing", XGBoostTrainJob,
     {"image": "x:1", "num_nodes": 2, **KUEUE, "placement": {"topology": RACK}}, "resources_per_node"),
    ("exclusive is required only", TorchTrainJob,
     {**TORCH, "backend": "jobset", "placement": {"topology": RACK, "mode": "preferred"}}, "placement.mode"),
    ("exclusive keeps the launcher apart", MpiTrainJob,
     {**MPI, "backend": "jobset", "placement": {"topology": RACK}}, "placement"),
    ("a level is a label key", TorchTrainJob, {**TORCH, **KUEUE, "placement": {"topology": "rack level"}},
     "placement.topology"),
    ("slices need a size", TorchTrainJob, {**TORCH, **KUEUE, "placement": {"slice_topology": RACK}},
     "placement.slice_size"),
    ("a placement needs a level", TorchTrainJob, {**TORCH, **KUEUE, "placement": {"mode": "preferred"}},
     "placement.topology"),
    ("one volcano tier", TorchTrainJob, {**TORCH, **VOLCANO, "placement": {"tier": 1, "tier_name": "s"}},
     "placement.tier_name"),
    ("multikueue jobs backend", TorchTrainJob, {**TORCH, "multikueue": True, "queue": "q"}, "backend"),
    ("multikueue mpi", MpiTrainJob, {**MPI, **MULTIKUEUE}, "multikueue"),
    ("multikueue workspace pvc", TorchTrainJob,
     {**TORCH, **MULTIKUEUE, "dataset_initializer": {"storage_uri": "hf://org/data"}}, "workspace_volume"),
    ("multikueue extra role", TorchTrainJob,
     {**TORCH, **MULTIKUEUE, "extra_roles": {"tensorboard": {"image": "tb:1"}}}, "extra_roles.tensorboard"),
    ("multikueue is kueue's", TorchTrainJob, {**TORCH, **MULTIKUEUE, "gang_scheduler": "volcano"}, "multikueue"),
    ("multikueue needs a queue", TorchTrainJob, {**TORCH, "multikueue": True, "backend": "jobset"}, "queue"),
    ("multikueue device claims", TorchTrainJob,
     {**TORCH, **MULTIKUEUE, "resources_per_node": None, "devices_per_node": [{"count": 8}]}, "devices_per_node"),
    ("multikueue initializer device claims", TorchTrainJob,
     {**TORCH, **MULTIKUEUE, "workspace_volume": {"nfs": {"server": "nfs.example.com", "path": "/ws"}},
      "dataset_initializer": {"storage_uri": "hf://org/data", "devices": [{"count": 1}]}}, "dataset_initializer.devices"),
]


@pytest.mark.parametrize("what,component,args,field", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_combination_names_its_argument_as_a_dict(what, component, args, field):
    with pytest.raises(TrainJobError) as caught:
        component("llm", copy.deepcopy(args))
    assert field in [issue.field for issue in caught.value.issues], str(caught.value)


@pytest.mark.parametrize("what,component,args,field", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_combination_names_its_argument_as_typed_args(what, component, args, field):
    args_type = getattr(trainjobs, f"{component.__name__}Args")
    with pytest.raises(TrainJobError) as caught:
        component("llm", args_type(**copy.deepcopy(args)))
    assert field in [issue.field for issue in caught.value.issues], str(caught.value)


def test_the_mpi_refusal_says_what_multikueue_leaves_behind():
    with pytest.raises(TrainJobError) as caught:
        MpiTrainJob("llm", {**MPI, **MULTIKUEUE})
    (message,) = [i.message for i in caught.value.issues if i.field == "multikueue"]
    assert "Secret llm-mpi-ssh-auth and ConfigMap llm-mpi-hostfile" in message


def test_the_device_claim_refusal_names_the_template_multikueue_leaves_behind_and_the_fix():
    with pytest.raises(TrainJobError) as caught:
        TorchTrainJob("llm", {"image": "t:1", "num_nodes": 2, **MULTIKUEUE, "devices_per_node": [{"count": 8}]})
    (message,) = [i.message for i in caught.value.issues if i.field == "devices_per_node"]
    assert "ResourceClaimTemplate llm-node-devices, which MultiKueue does not copy to the worker cluster" in message
    assert "as a device resource in resources_per_node" in message
    # Without multikueue the same job renders, with its claim template.
    objects = rendered(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "backend": "jobset", "gang_scheduler": "kueue",
                                       "queue": "team-llm", "devices_per_node": [{"count": 8}]})
    assert [o["metadata"]["name"] for o in kind(objects, "ResourceClaimTemplate")] == ["llm-node-devices"]


def test_placement_is_a_typed_argument():
    args = TorchTrainJobArgs(image="t:1", placement={"topology": RACK}, multikueue=False)
    assert args.placement.topology == RACK and args.placement.mode == "required"


def test_a_platform_profile_places_every_job_and_a_job_overrides_its_mode():
    profile = trainjobs.PlatformProfile(gang_scheduler="kueue", queue="team-llm",
                                        placement={"topology": RACK})
    objects = rendered(TorchTrainJob, {**TORCH, "profile": profile})
    assert annotations(sets(objects)["node"])[REQUIRED] == RACK
    objects = rendered(TorchTrainJob, {**TORCH, "profile": profile,
                                       "placement": {"topology": BLOCK, "mode": "preferred"}})
    assert {k: v for k, v in annotations(sets(objects)["node"]).items() if k.startswith("kueue.")} == {PREFERRED: BLOCK}
