"""Families, backends and gang schedulers each have one registry, and a member defined outside the
package (here, in a test) registers itself and is used like a built-in one."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trainjobs
from trainjobs import MpiTrainJob, TorchTrainJob, backends, scheduling
from trainjobs.core.args import TrainJobArgs, parse_args
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.descriptions import field_description
from trainjobs.core.errors import TrainJobError
from trainjobs.pipeline.pipeline import derive
from trainjobs.families import FAMILIES, components
from trainjobs.scheduling import Gang, GangScheduler, Reads, set_labels

from pods_backend import NAME, PodsBackend

MPI_COMMAND = {"command": ["mpirun", "python", "train.py"]}


def plan(component, args, name="train"):
    return derive(component.family, name, parse_args(component.__name__, name, component.family.args_type, args))


def problems(component, args):
    with pytest.raises(TrainJobError) as caught:
        plan(component, args)
    return {issue.field: issue.message for issue in caught.value.issues}


# --- families -------------------------------------------------------------------------------------

def test_the_package_exports_the_family_registry_and_editors_see_the_same_names():
    registered = {name for names in FAMILIES.values() for name in names}
    assert registered <= set(trainjobs.__all__)
    source = ast.parse(open(trainjobs.__file__).read())
    guarded = next(node for node in source.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in guarded.body for alias in node.names}
    assert {name: module for name, module in seen.items() if module.startswith("trainjobs.families.")} == {
        name: f"trainjobs.families.{module}" for module, names in FAMILIES.items() for name in names}


def test_every_component_of_a_family_module_is_registered_in_order():
    found = components()
    assert [c.__name__ for c in found] == ["TorchTrainJob", "TorchTuneTrainJob", "JaxTrainJob", "MpiTrainJob",
                                           "DeepSpeedTrainJob", "MlxTrainJob", "XGBoostTrainJob"]
    defined = {value for module in FAMILIES for value in vars(__import__(f"trainjobs.families.{module}",
                                                                         fromlist=["_"])).values()
               if isinstance(value, type) and issubclass(value, TrainJobComponent) and value is not TrainJobComponent}
    assert set(found) == defined


# --- a backend defined outside the package (tests/pods_backend.py): every pod as a bare Pod ------------

@pytest.fixture
def pods_backend():
    backends.register(NAME, PodsBackend())
    yield
    backends.unregister(NAME)


def test_a_registered_backend_builds_the_pods(pods_backend):
    built = plan(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "backend": "pods"})
    pods = {m["metadata"]["name"]: m for m in built.manifests if m["kind"] == "Pod"}
    assert sorted(pods) == ["train-node-0-0", "train-node-0-1"]
    assert pods["train-node-0-1"]["spec"]["hostname"] == "train-node-0-1"
    assert pods["train-node-0-1"]["spec"]["subdomain"] == "train"
    env = {e["name"]: e.get("value") for e in pods["train-node-0-0"]["spec"]["containers"][0]["env"]}
    assert env["PET_MASTER_ADDR"] == "train-node-0-0.train"
    assert [m["kind"] for m in built.manifests] == ["Service", "Pod", "Pod"]


def test_a_registered_backend_without_placement_of_its_own_gets_pod_affinity_and_no_multikueue(pods_backend):
    built = plan(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "backend": "pods",
                                 "placement": {"topology": "example.com/rack"}})
    pod = next(m for m in built.manifests if m["kind"] == "Pod")
    (term,) = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "example.com/rack"
    assert problems(TorchTrainJob, {"image": "t:1", "backend": "pods", "multikueue": True,
                                    "queue": "q"}).keys() >= {"backend"}


def test_a_registered_backend_is_an_allowed_value_and_is_described(pods_backend):
    assert '"pods" (a bare Pod per pod)' in field_description(TrainJobArgs, "backend")
    assert problems(TorchTrainJob, {"image": "t:1", "backend": "pod"})["backend"].endswith(
        "use one of jobs, jobset, pods")
    assert problems(TorchTrainJob, {"image": "t:1", "backend": "pods", "failure_policy": {"max_restarts": 1}}) == {
        "failure_policy.max_restarts": 'bare Pods are never restarted: remove max_restarts, or use backend "jobset"'}


def test_kueue_asks_the_backend_which_objects_hold_the_gang(pods_backend):
    found = problems(TorchTrainJob, {"image": "t:1", "num_nodes": 2, "backend": "pods", "gang_scheduler": "kueue",
                                     "queue": "q"})
    assert "train-node-0-0, train-node-0-1" in found["gang_scheduler"]
    one = plan(TorchTrainJob, {"image": "t:1", "backend": "pods", "gang_scheduler": "kueue", "queue": "q"})
    pod = next(m for m in one.manifests if m["kind"] == "Pod")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert dict(one.ignore_changes) == {"train-node-0-0": ("spec.suspend",)}


def test_a_backend_that_keeps_no_start_order_counts_every_member_at_once(pods_backend):
    args = {**MPI_COMMAND, "image": "m:1", "num_nodes": 2, "run_launcher_as_node": False,
            "gang_scheduler": "coscheduling"}
    def min_member(backend):
        built = plan(MpiTrainJob, {**args, "backend": backend})
        return next(m for m in built.manifests if m["kind"] == "PodGroup")["spec"]["minMember"]
    assert (min_member("pods"), min_member("jobs"), min_member("jobset")) == (3, 3, 2)


# --- a gang scheduler defined here ----------------------------------------------------------------

class Labelling(GangScheduler):
    summary = "a label on the gang's pods"
    reads = {"schedule_timeout_seconds": Reads("the labelling timeout", "only labelling reads a timeout")}

    def decorate(self, gang: Gang) -> None:
        for pod_set in gang.members():
            set_labels(pod_set.template["metadata"], {"example.com/gang": f"{gang.name}-{gang.min_member()}"})


@pytest.fixture
def labelling():
    scheduling.register("labelling", Labelling())
    yield
    scheduling.unregister("labelling")


def test_a_registered_gang_scheduler_decorates_the_gang(labelling):
    assert '"labelling" (a label on the gang\'s pods)' in field_description(TrainJobArgs, "gang_scheduler")
    built = plan(TorchTrainJob, {"image": "t:1", "num_nodes": 3, "gang_scheduler": "labelling",
                                 "schedule_timeout_seconds": 5})
    job = next(m for m in built.manifests if m["kind"] == "Job")
    assert job["spec"]["template"]["metadata"]["labels"]["example.com/gang"] == "train-3"


def test_the_arguments_a_scheduler_reads_come_from_its_declaration(labelling):
    found = problems(TorchTrainJob, {"image": "t:1", "schedule_timeout_seconds": 5})
    assert found["schedule_timeout_seconds"].startswith(
        "is the coscheduling PodGroup's timeout or the labelling timeout, and no gang scheduler reads it")
    found = problems(TorchTrainJob, {"image": "t:1", "gang_scheduler": "kueue", "queue": "q",
                                     "schedule_timeout_seconds": 5})
    assert found["schedule_timeout_seconds"] == ("only the coscheduling PodGroup has a schedule timeout; only "
                                                 "labelling reads a timeout; kueue has none: remove "
                                                 "schedule_timeout_seconds")


def test_the_registries_list_the_built_in_members_in_their_order_whatever_is_imported_first():
    program = ("import trainjobs.scheduling.coscheduling, trainjobs.backends.jobset\n"
               "from trainjobs import backends, scheduling\n"
               "scheduling.register('early', scheduling.GangScheduler())\n"
               "print(backends.names(), scheduling.names())\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(trainjobs.__file__).parents[1])})
    assert done.stdout.strip() == "('jobs', 'jobset') ('kueue', 'volcano', 'coscheduling', 'early')"
