"""Every custom resource trainjobs renders, as the cluster checks it: the CRD schemas of JobSet, Kueue,
Volcano and scheduler-plugins (../shared/crds/, with a field that structural pruning would drop counted as
a failure) and the JobSet and Kueue webhook rules (tests/crd_schemas.py). Over every family, both
backends, every gang scheduler, a PlatformProfile, TrainingNamespace and the example stacks."""

import copy
from pathlib import Path

import pytest

import trainjobs
from trainjobs import PlatformProfile, TrainingNamespace
from trainjobs.testing import run, run_program

from crd_schemas import (PRUNED, cluster_problems, crd_directory, crd_problems, is_custom_resource,
                         jobset_webhook_problems, kueue_webhook_problems, schema_problems, schemas)

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "stacks" / "__main__.py"


@pytest.fixture(autouse=True)
def _crds():
    crd_directory()   # skips (fails under CI=true) without the CRD files


def manifests(result) -> list[dict]:
    return [r.manifest for r in result.kubernetes()]


# The checker itself, on small schemas: each Kubernetes extension, and what pruning would drop.

OBJECT = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "count": {"type": "integer", "format": "int32"},
    "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
    "note": {"type": "string", "nullable": True},
    "name": {"type": "string"},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
             "properties": {"typed": {"type": "boolean"}}},
    "opaque": {"type": "object"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                 "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
}}}}
GOOD = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "labels": {"k": "v"}},
        "spec": {"count": 2, "size": "2Gi", "note": None, "name": "a", "free": {"anything": [1], "typed": True},
                 "labels": {"a": "b"},
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "y"}}}}


def with_spec(**changes):
    obj = copy.deepcopy(GOOD)
    obj["spec"].update(changes)
    return obj


def test_the_checker_accepts_an_object_its_schema_declares():
    assert schema_problems(GOOD, OBJECT) == []


def test_the_checker_reports_an_unknown_field_the_api_server_would_prune():
    assert schema_problems(with_spec(extra=1), OBJECT) == [f"spec.extra: {PRUNED}"]
    assert schema_problems({**GOOD, "status2": {}}, OBJECT) == [f"status2: {PRUNED}"]
    # An object node that declares no fields keeps none.
    assert schema_problems(with_spec(opaque={"a": 1}), OBJECT) == [f"spec.opaque.a: {PRUNED}"]


def test_the_checker_reports_a_wrong_type():
    assert schema_problems(with_spec(count="2"), OBJECT) == ["spec.count: '2' is not of type 'integer'"]
    assert schema_problems(with_spec(name=3), OBJECT) == ["spec.name: 3 is not of type 'string'"]
    assert schema_problems(with_spec(labels={"a": 1}), OBJECT) == ["spec.labels.a: 1 is not of type 'string'"]
    assert schema_problems(with_spec(count=2 ** 31), OBJECT) == [
        "spec.count: 2147483648 is greater than the maximum of 2147483647"]   # format int32


def test_int_or_string_takes_either_and_nothing_else():
    assert schema_problems(with_spec(size=4), OBJECT) == []
    assert schema_problems(with_spec(size=[4]), OBJECT) != []
    assert schema_problems(with_spec(size=None), OBJECT) != []


def test_nullable_takes_null_where_declared_only():
    assert schema_problems(with_spec(note=None), OBJECT) == []
    assert schema_problems(with_spec(name=None), OBJECT) == ["spec.name: None is not of type 'string'"]


def test_preserve_unknown_fields_keeps_unknown_fields_and_still_types_declared_ones():
    assert schema_problems(with_spec(free={"x": {"y": 1}}), OBJECT) == []
    assert schema_problems(with_spec(free={"typed": "yes"}), OBJECT) == [
        "spec.free.typed: 'yes' is not of type 'boolean'"]


def test_an_embedded_resource_and_the_root_carry_type_and_object_metadata():
    template = copy.deepcopy(GOOD["spec"]["template"])
    template["metadata"]["bogus"] = 1
    assert schema_problems(with_spec(template=template), OBJECT) == [f"spec.template.metadata.bogus: {PRUNED}"]
    bad_root = {**GOOD, "metadata": {"name": "a", "labels": {"k": 1}}}
    assert schema_problems(bad_root, OBJECT) == ["metadata.labels.k: 1 is not of type 'string'"]


def test_the_real_crds_refuse_what_their_servers_refuse():
    local_queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                   "metadata": {"name": "default", "namespace": "ml"}, "spec": {"clusterQueu": "team"}}
    assert crd_problems(local_queue) == [f"spec.clusterQueu: {PRUNED}"]
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "j"},
             "spec": {"minMember": "2", "queue": "Team_LLM"}}
    problems = crd_problems(group)
    assert len(problems) == 2 and problems[0].startswith("spec.minMember: '2' is not of type 'integer'")
    assert problems[1].startswith("spec.queue: 'Team_LLM' does not match")
    coscheduling = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "j"},
                    "spec": {"minMember": 2, "queue": "q"}}
    assert crd_problems(coscheduling) == [f"spec.queue: {PRUNED}"]   # that PodGroup has no queue
    assert crd_problems({**coscheduling, "apiVersion": "scheduling.x-k8s.io/v1"}) == [
        f"no CRD in {crd_directory()} serves scheduling.x-k8s.io/v1 PodGroup"]


# The webhook rules.

def jobset(**spec):
    rjs = [{"name": n, "replicas": 1, "template": {"spec": {"completionMode": "Indexed", "completions": 2}}}
           for n in ("init", "node")]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": rjs, **spec}}


def test_the_jobset_webhook_rules():
    assert jobset_webhook_problems(jobset()) == []
    rule = {"name": "fatal_exit_code", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    assert jobset_webhook_problems(jobset(failurePolicy={"rules": [rule]})) == []
    named = lambda *names: jobset(failurePolicy={"rules": [{**rule, "name": n} for n in names]})
    for bad in ("fatal-exit-code", "", "_x", "x,", "1x", "x" * 129):
        assert len(jobset_webhook_problems(named(bad))) == 1, bad
    assert jobset_webhook_problems(named("a:b,c_", "A1")) == []
    assert jobset_webhook_problems(named("same", "same")) == ["failurePolicy.rules: the name 'same' is not unique"]
    assert jobset_webhook_problems(jobset(failurePolicy={"rules": [
        {**rule, "targetReplicatedJobs": ["launcher"], "onJobFailureReasons": ["OOMKilled"]}]})) == [
        "failurePolicy.rules[0].targetReplicatedJobs: launcher is not a replicated job",
        "failurePolicy.rules[0].onJobFailureReasons: OOMKilled is not a Job failure reason"]
    assert jobset_webhook_problems(jobset(successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]})) == [
        "successPolicy.targetReplicatedJobs: x is not a replicated job"]
    first_depends = jobset()
    first_depends["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "node", "status": "Ready"}]
    assert jobset_webhook_problems(first_depends) == [
        "replicatedJobs[0] (init): the first replicated job cannot have dependsOn",
        "replicatedJobs[0] (init): dependsOn node is not an earlier replicated job"]
    long = jobset()
    long["metadata"]["name"] = "j" * 48   # j*48-node-0 is 55 characters, its pod j*48-node-0-1-abcde 63
    assert jobset_webhook_problems(long) == []
    long["metadata"]["name"] = "j" * 49
    assert jobset_webhook_problems(long) == [
        f"replicatedJobs[{i}] ({rj}): pod name {'j' * 49}-{rj}-0-1-abcde is not a DNS-1035 label of at most 63 "
        "characters" for i, rj in ((0, "init"), (1, "node")) if len(f"{'j' * 49}-{rj}-0-1-abcde") > 63]


def test_the_kueue_webhook_wants_a_dns_subdomain_as_queue_name():
    job = {"kind": "Job", "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "team-llm.a"}}}
    assert kueue_webhook_problems(job) == []
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Team_LLM"
    assert kueue_webhook_problems(job) == [
        "metadata.labels[kueue.x-k8s.io/queue-name]: 'Team_LLM' is not a DNS-1123 subdomain"]


# What the library renders.

GPU = {"limits": {"nvidia.com/gpu": 4, "cpu": "8", "memory": "32Gi"}}
INITIALIZER = {"storage_uri": "hf://tatsu-lab/alpaca"}
FAMILIES = {
    "TorchTrainJob": {"image": "t:1", "num_nodes": 2, "resources_per_node": GPU, "dataset_initializer": INITIALIZER,
                      "extra_roles": {"tensorboard": {"image": "tb:1"}}},
    "TorchTuneTrainJob": {"runtime": "torchtune-llama3.2-1b"},
    "JaxTrainJob": {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2, "resources_per_node": GPU},
    "XGBoostTrainJob": {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 3},
    "MpiTrainJob": {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 3, "resources_per_node": GPU,
                    "model_initializer": {"storage_uri": "hf://org/model"}},
    "DeepSpeedTrainJob": {"command": ["mpirun", "python", "train.py"], "num_nodes": 2},
    "MlxTrainJob": {"command": ["mpirun", "python", "train.py"], "num_nodes": 2},
}
# An MPI job's launcher and nodes are two Jobs, which Kueue would admit separately under `jobs` (refused:
# tests/test_scheduling.py); its one-host form is a single Job there.
ONE_MPI_HOST = {"num_nodes": 1, "run_launcher_as_node": True}
SCHEDULERS = {
    None: {"scheduler_name": "custom-scheduler", "suspend": True},
    "kueue": {"queue": "team-llm", "priority_class": "research"},
    "volcano": {"queue": "team-llm", "priority_class": "research"},
    "coscheduling": {"schedule_timeout_seconds": 120},
}


def job_args(family: str, backend: str, scheduler: str | None) -> dict:
    args = {**FAMILIES[family], **SCHEDULERS[scheduler], "backend": backend, "gang_scheduler": scheduler,
            "namespace": "ml", "labels": {"team": "llm"}, "annotations": {"owner": "llm@example.com"},
            "failure_policy": {"fatal_exit_codes": [3], **({"max_restarts": 2} if backend == "jobset" else {})},
            "ttl_seconds_after_finished": 600}
    if scheduler == "kueue" and backend == "jobs" and family in ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob"):
        args.update(ONE_MPI_HOST)
    return args


CASES = [pytest.param(f, b, s, id=f"{f}-{b}-{s}") for f in FAMILIES for b in ("jobs", "jobset")
         for s in SCHEDULERS]
# The custom resources each case must render, so that no case passes by rendering none.
EXPECTED = {None: set(), "kueue": set(), "volcano": {"scheduling.volcano.sh/v1beta1 PodGroup"},
            "coscheduling": {"scheduling.x-k8s.io/v1alpha1 PodGroup"}}


@pytest.mark.parametrize("family,backend,scheduler", CASES)
def test_every_custom_resource_of_every_family_backend_and_gang_scheduler_is_accepted(family, backend, scheduler):
    component = getattr(trainjobs, family)
    objects = manifests(run(lambda: component("job", job_args(family, backend, scheduler))))
    kinds = {f"{o['apiVersion']} {o['kind']}" for o in objects if is_custom_resource(o)}
    assert kinds == EXPECTED[scheduler] | ({"jobset.x-k8s.io/v1alpha2 JobSet"} if backend == "jobset" else set())
    assert cluster_problems(objects) == []


# Placements, as each gang scheduler (or backend, without one) renders them; coscheduling has none.
PLACEMENTS = {
    None: {"topology": "example.com/rack"},
    "kueue": {"topology": "example.com/block", "slice_topology": "example.com/rack", "slice_size": 1},
    "volcano": {"tier": 2, "mode": "preferred"},
}
PLACED = [pytest.param(f, b, s, id=f"{f}-{b}-{s}") for f in FAMILIES for b in ("jobs", "jobset") for s in PLACEMENTS]


def kueue_placeable(family: str, args: dict) -> dict:
    """Kueue places only pod sets that request a resource: GPUs for the training pods that have none, a CPU for an
    MPI launcher apart from its nodes (DeepSpeed's and MLX's runtimes run it as a node)."""
    args = {**args, "resources_per_node": args.get("resources_per_node") or GPU}
    if family == "MpiTrainJob" and not args.get("run_launcher_as_node"):
        args["runtime"] = {"name": "mpi-distributed", "launcher": {"resources": {"requests": {"cpu": "1"}}}}
    return args


@pytest.mark.parametrize("family,backend,scheduler", PLACED)
def test_every_placement_of_every_family_backend_and_gang_scheduler_is_accepted(family, backend, scheduler):
    args = {**job_args(family, backend, scheduler), "placement": PLACEMENTS[scheduler]}
    mpi = family in ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob")
    if mpi and (scheduler, backend) in ((None, "jobset"), ("kueue", "jobs")):
        args.update(ONE_MPI_HOST)   # the launcher apart from its nodes: refused (tests/test_placement.py)
    if mpi and scheduler == "kueue" and not args.get("run_launcher_as_node"):
        args["placement"] = {"topology": "example.com/block"}   # Kueue groups the launcher and nodes, unsliced
    if scheduler == "kueue":
        args = kueue_placeable(family, args)
    component = getattr(trainjobs, family)
    objects = manifests(run(lambda: component("job", args)))
    assert cluster_problems(objects) == []


def test_the_kueue_webhook_rules_on_topology_annotations():
    def job(annotations, pods=4):
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"parallelism": pods, "completions": pods,
                         "template": {"metadata": {"annotations": annotations}, "spec": {}}}}
    tas = "kueue.x-k8s.io/podset-"
    assert kueue_webhook_problems(job({tas + "required-topology": "example.com/rack"})) == []
    assert kueue_webhook_problems(job({tas + "required-topology": "r", tas + "preferred-topology": "r"})) != []
    assert kueue_webhook_problems(job({tas + "slice-required-topology": "r", tas + "slice-size": "5"})) != []
    assert kueue_webhook_problems(job({tas + "slice-size": "2"})) != []
    assert kueue_webhook_problems(job({tas + "required-topology": "r", tas + "group-name": "g"})) != []   # group of 1


# JobSet shapes beyond the families' defaults: a launcher that is also a host, a launcher that is the only
# host (no node replicated job, no dependsOn), both initializers before a c10d torch job with an extra role.
VARIANTS = {
    "intelmpi-launcher-node": ("MpiTrainJob", {
        "image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 2, "mpi_implementation": "IntelMPI",
        "run_launcher_as_node": True, "namespace": "hpc"}),
    "mpich-one-host": ("MpiTrainJob", {
        "image": "mpi:1", "command": ["mpiexec", "hostname"], "mpi_implementation": "MPICH",
        "run_launcher_as_node": True, "namespace": "hpc"}),
    "torch-c10d-initializers": ("TorchTrainJob", {
        "image": "t:1", "num_nodes": 3, "rendezvous": "c10d", "dataset_initializer": INITIALIZER,
        "model_initializer": {"storage_uri": "hf://org/model"}, "extra_roles": {"evaluator": {"image": "e:1"}}}),
    "torch-dra-gpus": ("TorchTrainJob", {   # pods that claim their GPUs through Dynamic Resource Allocation
        "image": "t:1", "num_nodes": 2, "devices_per_node": [{"count": 8}], "namespace": "ml",
        "extra_roles": {"evaluator": {"image": "e:1", "devices": [{"device_class": "mig.nvidia.com"}]}}}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
def test_every_jobset_shape_is_accepted(variant, scheduler):
    family, args = VARIANTS[variant]
    component = getattr(trainjobs, family)
    objects = manifests(run(lambda: component("job", {
        **args, **SCHEDULERS[scheduler], "backend": "jobset", "gang_scheduler": scheduler,
        "failure_policy": {"max_restarts": 1, "fatal_exit_codes": [2, 3]}})))
    assert [o["kind"] for o in objects if is_custom_resource(o)].count("JobSet") == 1
    assert cluster_problems(objects) == []


def test_a_wait_for_completion_jobset_is_accepted():
    objects = manifests(run(lambda: trainjobs.TorchTrainJob("job", {
        "image": "t:1", "num_nodes": 2, "backend": "jobset", "wait_for_completion": True, "wait_timeout_seconds": 60,
        "run": "r1"})))
    assert [o["kind"] for o in objects if is_custom_resource(o)] == ["JobSet"]
    assert cluster_problems(objects) == []


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
@pytest.mark.parametrize("scheduler", ["kueue", "volcano", "coscheduling"])
def test_jobs_from_a_platform_profile_are_accepted(scheduler, backend):
    profile = PlatformProfile(namespace="ml", gang_scheduler=scheduler, backend=backend, labels={"team": "llm"},
                              failure_policy={"fatal_exit_codes": [2]},
                              **({"queue": "team-llm"} if scheduler != "coscheduling" else {}))

    def program():
        trainjobs.TorchTrainJob("pretrain", {"profile": profile, "image": "t:1", "num_nodes": 4})
        trainjobs.MpiTrainJob("allreduce", {"profile": profile, "image": "mpi:1", "command": ["mpirun", "hostname"],
                                            "num_nodes": 2, **(ONE_MPI_HOST if (scheduler, backend) == ("kueue", "jobs")
                                                               else {})})

    objects = manifests(run(program))
    custom = [o for o in objects if is_custom_resource(o)]
    assert len(custom) == (2 if backend == "jobset" else 0) + (0 if scheduler == "kueue" else 2)
    assert cluster_problems(objects) == []


def test_a_training_namespace_and_its_profiles_jobs_are_accepted():
    def program():
        team = TrainingNamespace("llm", {"kueue_cluster_queue": "gpus", "local_queue_name": "team-llm",
                                         "checkpoints_size": "1Ti", "labels": {"team": "llm"}})
        profile = team.profile(backend="jobset")
        trainjobs.MpiTrainJob("allreduce", {"profile": profile, "image": "mpi:1", "command": ["mpirun", "hostname"],
                                            "num_nodes": 3})
        trainjobs.TorchTrainJob("pretrain", {"profile": profile, "image": "t:1", "num_nodes": 2,
                                             "failure_policy": {"fatal_exit_codes": [3]}})

    objects = manifests(run(program))
    assert sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects if is_custom_resource(o)) == [
        "JobSet/allreduce", "JobSet/pretrain", "LocalQueue/team-llm"]
    assert cluster_problems(objects) == []


@pytest.mark.parametrize("stack", ["dev", "hpc", "kueue", "volcano"])
def test_the_example_stacks_are_accepted(stack):
    objects = manifests(run_program(PROGRAM, stack=stack))
    assert cluster_problems(objects) == []


def test_the_kueue_example_renders_a_jobset_the_cluster_accepts():
    """Its failure-policy rule was once named `fatal-exit-code`, which the JobSet webhook refuses."""
    (allreduce,) = [o for o in manifests(run_program(PROGRAM, stack="kueue")) if o["kind"] == "JobSet"]
    assert [r["name"] for r in allreduce["spec"]["failurePolicy"]["rules"]] == ["fatal_exit_code"]
    assert crd_problems(allreduce) == [] and jobset_webhook_problems(allreduce) == []
    assert kueue_webhook_problems(allreduce) == []


def test_every_crd_file_is_read():
    assert {kind for _, kind in schemas()} == {"JobSet", "LocalQueue", "ClusterQueue", "ResourceFlavor",
                                               "WorkloadPriorityClass", "PodGroup", "Queue"}
