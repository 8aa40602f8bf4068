"""Kueue's own controller and webhooks on what the project renders: the cluster of `make cluster-controllers`
(TRAINJOBS_CLUSTER_CONTROLLERS with kueue, scripts/engine/cluster.sh), on the kwok Nodes of its own pool, those of
the ResourceFlavor kueue-tests, labelled and tainted trainjobs.dev/pool=kueue-tests (no other pod goes there), which
carry the levels of the Topology gpu-topology (example.com/block, example.com/rack, kubernetes.io/hostname). The
example stack's test uses the fixtures of the stack: flavor h100 and the other kwok Nodes.

Every Job and JobSet of every family is created through Kueue's webhooks and gets a Workload; with room the gang is
admitted whole, without room it waits suspended with Kueue's reason until room is made; a placed job's pods land in
one domain of its level; an elastic job starts with what fits. Each test has a namespace and a ClusterQueue of its
own (its LocalQueue is team-llm, the queue the jobs name), sized for what it shows."""

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

import trainjobs
from trainjobs.testing import run, run_program

from test_cluster import until

TIMEOUT = 300
ROOT = Path(__file__).resolve().parents[2]
QUEUE = "team-llm"
FLAVOR = "kueue-tests"   # the pool of kwok Nodes of these tests alone (cluster.sh test_pool_nodes)
# The jobs tolerate the pool's taint themselves, though the flavor's tolerations would let them there: Kueue v0.17.0's
# node-failure handling (TASReplaceNodeOnNodeTaints) reads only the Workload's own tolerations, and evicts a placed
# Workload from a healthy Node tainted so until its pods are bound (kubernetes-sigs/kueue#11152; docs/scheduling.md).
POOL_TOLERATION = {"key": "trainjobs.dev/pool", "operator": "Equal", "value": FLAVOR, "effect": "NoSchedule"}
RACK, HOST = "example.com/rack", "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
GPUS = {"limits": {GPU: 4, "cpu": "8", "memory": "32Gi"}}
WHOLE_NODE = {"limits": {GPU: 8, "cpu": "32", "memory": "256Gi"}}   # a fake Node has 8 GPUs
FAMILIES = {
    "TorchTrainJob": {"image": "t:1", "num_nodes": 2, "resources_per_node": GPUS,
                      "dataset_initializer": {"storage_uri": "hf://tatsu-lab/alpaca"},
                      "extra_roles": {"tensorboard": {"image": "tb:1"}}},
    "TorchTuneTrainJob": {"runtime": "torchtune-llama3.2-1b"},
    "JaxTrainJob": {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2, "resources_per_node": GPUS},
    "XGBoostTrainJob": {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 3},
    "MpiTrainJob": {"image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 3, "resources_per_node": GPUS},
    "DeepSpeedTrainJob": {"command": ["mpirun", "python", "train.py"], "num_nodes": 2},
    "MlxTrainJob": {"command": ["mpirun", "python", "train.py"], "num_nodes": 2},
}
# Under `jobs` an MPI launcher and its nodes would be two Workloads (refused); its one-host form is one Job.
ONE_MPI_HOST = {"num_nodes": 1, "run_launcher_as_node": True}
MPI = ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob")


def kubectl(env, *args, stdin=None) -> str:
    done = subprocess.run(["kubectl", *args], input=stdin, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT + 60)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def get(env, *args) -> dict:
    return json.loads(kubectl(env, "get", *args, "-o", "json"))


@pytest.fixture(scope="module")
def env(cluster_env):
    if "kueue" not in cluster_env.get("TRAINJOBS_CLUSTER_CONTROLLERS", "").split(","):
        pytest.skip("the cluster runs no Kueue controller: start it with `make cluster-controllers`")
    return cluster_env


class Queue:
    """A namespace whose LocalQueue team-llm draws from a ClusterQueue of its own, of `gpus` GPUs of flavor h100."""

    def __init__(self, env, name: str):
        self.env, self.namespace, self.cluster_queue = env, name, name

    def create(self, gpus: int) -> None:
        cluster_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                         "metadata": {"name": self.cluster_queue},
                         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                                  "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [
                                      {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                                                     {"name": "memory", "nominalQuota": "100Ti"},
                                                                     {"name": GPU, "nominalQuota": str(gpus)}]}]}]}}
        local_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": QUEUE, "namespace": self.namespace},
                       "spec": {"clusterQueue": self.cluster_queue}}
        kubectl(self.env, "create", "namespace", self.namespace)
        apply(self.env, [cluster_queue, local_queue])

    def set_gpus(self, gpus: int) -> None:
        patch = [{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota",
                  "value": str(gpus)}]
        kubectl(self.env, "patch", "clusterqueue", self.cluster_queue, "--type=json", "-p", json.dumps(patch))

    def delete(self) -> None:
        kubectl(self.env, "delete", "namespace", self.namespace, "--wait", f"--timeout={TIMEOUT}s",
                "--ignore-not-found")
        kubectl(self.env, "delete", "clusterqueue", self.cluster_queue, "--wait", f"--timeout={TIMEOUT}s",
                "--ignore-not-found")


@pytest.fixture
def queue(env):
    made = Queue(env, f"kueue-{uuid.uuid4().hex[:8]}")
    yield made
    made.delete()


def apply(env, objects: list[dict]) -> None:
    kubectl(env, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def rendered(family: str, args: dict) -> list[dict]:
    return [r.manifest for r in run(lambda: getattr(trainjobs, family)("job", args)).kubernetes()]


def job_args(family: str, backend: str, namespace: str, **more) -> dict:
    args = {**FAMILIES[family], "backend": backend, "gang_scheduler": "kueue", "queue": QUEUE,
            "priority_class": "research", "namespace": namespace, "tolerations": [POOL_TOLERATION], **more}
    if backend == "jobs" and family in MPI:
        args.update(ONE_MPI_HOST)
    return args


def holders(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] in ("Job", "JobSet")]


def pod_count(holder: dict) -> int:
    """The pods a Job or JobSet runs at once: what Kueue must admit together."""
    if holder["kind"] == "Job":
        return holder["spec"]["parallelism"]
    return sum(r.get("replicas", 1) * r["template"]["spec"].get("parallelism", 1)
               for r in holder["spec"]["replicatedJobs"])


def workloads(env, namespace: str) -> dict[tuple[str, str], dict]:
    """The namespace's Workloads by their owner (kind, name)."""
    found = {}
    for workload in get(env, "workloads.kueue.x-k8s.io", "-n", namespace)["items"]:
        for owner in workload["metadata"].get("ownerReferences") or []:
            found[(owner["kind"], owner["name"])] = workload
    return found


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def admitted(workload: dict) -> bool:
    """Admitted, or already finished after its admission (kwok completes a Job's pods within seconds)."""
    return condition(workload, "Admitted").get("status") == "True" or condition(workload, "Finished").get(
        "status") == "True"


def admitted_counts(workload: dict) -> int:
    return sum(a["count"] for a in workload["status"]["admission"]["podSetAssignments"])


def resource(kind: str) -> str:
    """kubectl's name of a Job's or JobSet's resource."""
    return kind.lower() + (".jobset.x-k8s.io" if kind == "JobSet" else "")


def resumed(env, resource: str, name: str, namespace: str) -> dict:
    """The Job or JobSet once Kueue's job controller has unsuspended it (it does so after it admits the Workload)."""
    return until(lambda: (lambda live: live if live["spec"]["suspend"] is False else None)(
        get(env, resource, name, "-n", namespace)), f"{resource} {name} unsuspended")


def pods_of_job(env, namespace: str, job: str, count: int) -> list[dict]:
    """The Job's pods, once `count` of them are out of Kueue's scheduling gates and, but those that mount a
    PersistentVolumeClaim (the cluster binds none), bound to a Node."""
    def started():
        pods = get(env, "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}")["items"]
        ready = [p for p in pods if not p["spec"].get("schedulingGates")
                 and (p["spec"].get("nodeName") or claims(p))]
        return ready if len(ready) >= count else None
    return until(started, f"{count} pods of Job {job} ungated and bound to Nodes")


def claims(pod: dict) -> bool:
    return any("persistentVolumeClaim" in v for v in pod["spec"].get("volumes") or [])


def controllers(env) -> set[str]:
    return set(env.get("TRAINJOBS_CLUSTER_CONTROLLERS", "").split(","))


# --- every family, both backends: through the webhooks, one Workload each, admitted whole --------------------

CASES = [pytest.param(f, b, id=f"{f}-{b}") for f in FAMILIES for b in ("jobs", "jobset")]


@pytest.mark.parametrize("family,backend", CASES)
def test_every_job_and_jobset_gets_a_workload_and_is_admitted_whole(env, queue, family, backend):
    queue.create(gpus=64)
    objects = rendered(family, job_args(family, backend, queue.namespace))
    apply(env, objects)   # through Kueue's mutating and validating webhooks (failurePolicy Fail)
    expected = holders(objects)
    assert expected and all(h["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE for h in expected)
    keys = {(h["kind"], h["metadata"]["name"]) for h in expected}
    found = until(lambda: (lambda w: w if set(w) == keys and all(map(admitted, w.values())) else None)(
        workloads(env, queue.namespace)), f"a Workload admitted for each of {sorted(keys)}")
    for holder in expected:
        kind, name = holder["kind"], holder["metadata"]["name"]
        workload = found[(kind, name)]
        assert workload["spec"]["queueName"] == QUEUE
        assert workload["spec"]["priority"] == 100   # WorkloadPriorityClass research
        assert sum(p["count"] for p in workload["spec"]["podSets"]) == pod_count(holder)
        assert admitted_counts(workload) == pod_count(holder)   # the whole gang, not part of it
        # Kueue's webhook suspended it; admission resumes it, a moment after the Workload's Admitted condition.
        resumed(env, resource(kind), name, queue.namespace)
        if kind == "Job":
            assert len(pods_of_job(env, queue.namespace, name, pod_count(holder))) == pod_count(holder)
        elif "jobset" in controllers(env):
            jobs = until(lambda: (lambda j: j if sum(x["spec"]["parallelism"] for x in j) == pod_count(holder) else None)(
                get(env, "jobs", "-n", queue.namespace, "-l", f"jobset.sigs.k8s.io/jobset-name={name}")["items"]),
                f"the Jobs of JobSet {name}")
            for job in jobs:
                pods_of_job(env, queue.namespace, job["metadata"]["name"], job["spec"]["parallelism"])


# --- without room: suspended with Kueue's reason, admitted when room is made ----------------------------------

# Kueue names a Job's one pod set main, and a JobSet's pod sets after its replicated Jobs.
@pytest.mark.parametrize("family,backend,pod_set", [("TorchTrainJob", "jobs", "main"), ("MpiTrainJob", "jobset", "node")])
def test_a_job_without_room_waits_suspended_with_kueues_reason_until_room_is_made(env, queue, family, backend, pod_set):
    queue.create(gpus=4)
    args = {**job_args(family, backend, queue.namespace), "num_nodes": 2, "resources_per_node": GPUS}
    args.pop("dataset_initializer", None)
    args.pop("extra_roles", None)
    objects = rendered(family, args)
    apply(env, objects)
    (holder,) = holders(objects)
    kind, name = holder["kind"], holder["metadata"]["name"]
    key = (kind, name)
    pending = until(lambda: (lambda w: w if w and condition(w, "QuotaReserved").get("reason") == "Pending" else None)(
        workloads(env, queue.namespace).get(key)), f"the Workload of {kind} {name} pending")
    reserved = condition(pending, "QuotaReserved")
    assert reserved["status"] == "False"
    # Two nodes of 4 GPUs, against 4 (an MPI launcher asks for none).
    assert reserved["message"] == (f"couldn't assign flavors to pod set {pod_set}: insufficient quota for {GPU} in "
                                   f"flavor {FLAVOR}, previously considered podsets requests (0) + current podset "
                                   "request (8) > maximum capacity (4)")
    assert not admitted(pending)
    assert get(env, resource(kind), name, "-n", queue.namespace)["spec"]["suspend"] is True
    assert get(env, "pods", "-n", queue.namespace)["items"] == []
    queue.set_gpus(8)
    until(lambda: admitted(workloads(env, queue.namespace)[key]), f"the Workload of {kind} {name} admitted")
    resumed(env, resource(kind), name, queue.namespace)
    if kind == "Job":
        pods_of_job(env, queue.namespace, name, 2)


# --- placement: the pods in one domain of the level asked for --------------------------------------------------

def node_labels(env) -> dict[str, dict]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(env, "nodes", "-l", "type=kwok")["items"]}


def test_a_placed_jobs_pods_land_in_one_rack(env, queue):
    """Two pods of a whole Node each, required in one rack (two Nodes a rack): Kueue assigns the rack and its
    hosts, and its pods are bound there."""
    queue.create(gpus=64)
    args = job_args("TorchTrainJob", "jobs", queue.namespace, num_nodes=2, resources_per_node=WHOLE_NODE,
                    placement={"topology": RACK})
    args.pop("dataset_initializer")
    args.pop("extra_roles")
    objects = rendered("TorchTrainJob", args)
    apply(env, objects)
    (job,) = holders(objects)
    pods = pods_of_job(env, queue.namespace, job["metadata"]["name"], 2)
    labels = node_labels(env)
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert len(nodes) == 2
    assert len({labels[n][RACK] for n in nodes}) == 1, f"pods on {sorted(nodes)}, in racks " \
                                                       f"{sorted(labels[n][RACK] for n in nodes)}"


def test_a_placement_no_domain_can_hold_waits_with_kueues_reason(env, queue):
    """Three pods of a whole Node each cannot share a rack of two Nodes: Kueue does not admit the job, though the
    quota has room."""
    queue.create(gpus=64)
    args = job_args("TorchTrainJob", "jobs", queue.namespace, num_nodes=3, resources_per_node=WHOLE_NODE,
                    placement={"topology": RACK})
    args.pop("dataset_initializer")
    args.pop("extra_roles")
    objects = rendered("TorchTrainJob", args)
    apply(env, objects)
    (job,) = holders(objects)
    key = ("Job", job["metadata"]["name"])
    pending = until(lambda: (lambda w: w if w and condition(w, "QuotaReserved").get("reason") == "Pending" else None)(
        workloads(env, queue.namespace).get(key)), "the Workload pending")
    # How many fit depends on what else runs on the Nodes (then the message goes on with the Nodes excluded, and why).
    assert re.fullmatch(r'couldn\'t assign flavors to pod set main: topology "gpu-topology" allows to fit only [0-2] '
                        r"out of 3 pod\(s\)(\. .*)?", condition(pending, "QuotaReserved")["message"])
    assert get(env, "jobs", job["metadata"]["name"], "-n", queue.namespace)["spec"]["suspend"] is True


LAUNCHER_CPU = {"runtime": {"name": "mpi-distributed", "launcher": {"resources": {"requests": {"cpu": "1"}}}}}


def placed_mpi_jobset(env, queue) -> dict:
    """An MPI JobSet of 3 nodes of 4 GPUs and a launcher requesting a CPU, placed in one rack: its Workload."""
    queue.create(gpus=64)
    args = job_args("MpiTrainJob", "jobset", queue.namespace, placement={"topology": RACK}, **LAUNCHER_CPU)
    objects = rendered("MpiTrainJob", args)
    apply(env, objects)
    (jobset,) = holders(objects)
    key = ("JobSet", jobset["metadata"]["name"])
    return until(lambda: (lambda w: w if w and admitted(w) else None)(workloads(env, queue.namespace).get(key)),
                 "the JobSet's Workload admitted")


def test_an_mpi_jobsets_launcher_and_nodes_are_placed_in_one_rack(env, queue):
    """On the JobSet backend the launcher and its nodes are two pod sets of one Workload, grouped: Kueue assigns
    both hosts of one rack (and, with the JobSet controller running, their pods are bound there)."""
    workload = placed_mpi_jobset(env, queue)
    labels = node_labels(env)
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    assert set(assignments) == {"launcher", "node"}
    hosts = set()
    for assignment in assignments.values():
        hosts |= assigned_hosts(assignment["topologyAssignment"])
    assert len({labels[h][RACK] for h in hosts}) == 1, sorted(hosts)
    if "jobset" in controllers(env):
        for job in until(lambda: (lambda j: j if len(j) == 2 else None)(get(env, "jobs", "-n", workload["metadata"][
                "namespace"])["items"]), "the JobSet's two Jobs"):
            for pod in pods_of_job(env, workload["metadata"]["namespace"], job["metadata"]["name"],
                                   job["spec"]["parallelism"]):
                assert pod["spec"]["nodeName"] in hosts


def test_kueue_admits_a_placed_pod_set_that_requests_nothing_without_placing_it(env, queue):
    """Why the project refuses a Kueue placement of pods that request no resource (trainjobs.scheduling.kueue):
    the same JobSet with the launcher's request removed is admitted, its launcher with no flavor and no place."""
    queue.create(gpus=64)
    args = job_args("MpiTrainJob", "jobset", queue.namespace, placement={"topology": RACK}, **LAUNCHER_CPU)
    objects = rendered("MpiTrainJob", args)
    (jobset,) = holders(objects)
    (launcher,) = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "launcher"]
    for container in launcher["template"]["spec"]["template"]["spec"]["containers"]:
        container.pop("resources")
    apply(env, objects)
    key = ("JobSet", jobset["metadata"]["name"])
    workload = until(lambda: (lambda w: w if w and admitted(w) else None)(workloads(env, queue.namespace).get(key)),
                     "the JobSet's Workload admitted")
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    assert "topologyAssignment" in assignments["node"]
    assert assignments["launcher"] == {"count": 1, "name": "launcher"}


def assigned_hosts(assignment: dict) -> set[str]:
    """The hosts of a Workload's topology assignment (its lowest level is the hostname)."""
    assert assignment["levels"][-1] == HOST, assignment
    hosts = set()
    for piece in assignment["slices"]:
        values = piece["valuesPerLevel"][-1]
        if "universal" in values:
            hosts.add(values["universal"])
        else:
            each = values["individual"]
            hosts |= {each.get("prefix", "") + root + each.get("suffix", "") for root in each["roots"]}
    return hosts


# --- an elastic job under partial admission starts with what fits ----------------------------------------------

def test_an_elastic_job_starts_with_the_nodes_that_fit(env, queue):
    """num_nodes "2:4" with room for 3 Nodes' GPUs: Kueue admits 3 pods, rewrites the Job to 3, and 3 run."""
    queue.create(gpus=24)
    args = job_args("TorchTrainJob", "jobs", queue.namespace, num_nodes="2:4", rendezvous="c10d",
                    resources_per_node=WHOLE_NODE)
    args.pop("dataset_initializer")
    args.pop("extra_roles")
    objects = rendered("TorchTrainJob", args)
    apply(env, objects)
    (job,) = holders(objects)
    name = job["metadata"]["name"]
    assert job["spec"]["parallelism"] == 4
    workload = until(lambda: (lambda w: w if w and admitted(w) else None)(
        workloads(env, queue.namespace).get(("Job", name))), "the elastic Job's Workload admitted")
    assert admitted_counts(workload) == 3
    live = get(env, "jobs", name, "-n", queue.namespace)
    assert (live["spec"]["parallelism"], live["spec"]["completions"]) == (3, 3)
    assert len(pods_of_job(env, queue.namespace, name, 3)) == 3


# --- the example stack's Kueue config, against the cluster's fixtures ------------------------------------------

def test_the_kueue_example_stacks_jobs_are_admitted_from_the_clusters_queues(env):
    objects = [r.manifest for r in run_program(ROOT / "stacks" / "__main__.py", stack="kueue").kubernetes()]
    expected = holders(objects)
    assert {h["metadata"]["namespace"] for h in expected} == {"ml"}
    keys = {(h["kind"], h["metadata"]["name"]) for h in expected}
    try:
        apply(env, objects)
        found = until(lambda: (lambda w: w if keys <= set(w) and all(admitted(w[k]) for k in keys) else None)(
            workloads(env, "ml")), f"a Workload admitted for each of {sorted(keys)}")
        labels = node_labels(env)
        placed = 0
        for key in keys:
            workload = found[key]
            assert workload["spec"]["queueName"] == QUEUE
            assert workload["spec"]["priority"] == 100
            # A placed job's pod sets (pretrain in a rack; allreduce's launcher and nodes in a block) in one domain.
            levels = {(p.get("topologyRequest") or {}).get("required") for p in workload["spec"]["podSets"]} - {None}
            if levels:
                (level,) = levels
                hosts = set()
                for assignment in workload["status"]["admission"]["podSetAssignments"]:
                    hosts |= assigned_hosts(assignment["topologyAssignment"])
                assert len({labels[h][level] for h in hosts}) == 1, (key, sorted(hosts))
                placed += 1
        assert placed == 2
    finally:
        kubectl(env, "delete", "-f", "-", "--ignore-not-found", "--wait", f"--timeout={TIMEOUT}s",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
