"""The real JobSet controller and its webhooks (`make cluster-controllers`) against what the project renders and what
its tools show.

Admission: every JobSet the project renders (every family under every gang scheduler, with initializers and extra
roles, placement, an elastic node range, MultiKueue; the example stacks) passes JobSet's webhooks: a server-side
dry run calls them as a creation does (they have no side effects) and the JobSet comes back defaulted by the
mutating one; one JobSet is created for real through `pulumi up`.

The controller's objects: JobSets of torch, torchtune (initializers and exclusive placement), MPI (a launcher),
JAX and XGBoost are created for real, with the rest of their render; kwok's Nodes run the pods. Each child Job the
controller makes, and each of their pods, is compared with what `trainjobs explain` shows (the per-pod views,
trainjobs.tools.podview, read from the render), and their count with the summary's: names, hostnames, subdomain,
labels, annotations, every container's env resolved with the pod's real name, IP and node, and which pods exclusive
placement places. The tools leave out on purpose only what the cluster alone gives: the controllers' UIDs and the
pods' priority (docs/backends.md). A claim is bound through the cluster's default StorageClass.

Skipped unless the JobSet controller runs (its webhook configurations are installed); under CI=true they fail.
"""

import copy
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import trainjobs
from trainjobs.backends.jobset import API_VERSION, JOBSET_NAME
from trainjobs.core.errors import TrainJobError
from trainjobs.scheduling import placement_of
from trainjobs.testing import run, run_program
from trainjobs.tools.cli.summary import summary
from trainjobs.tools.podview import ObjectIndex, PodFacts, pod_view, resolve_env

from apiserver import ApiServer, in_ci
from pulumi_cli import REPO, Project, create_namespace, delete_namespace, kubectl_json

import test_copies

WEBHOOKS = ("jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration")
# Keys whose values the cluster alone gives, which the tools leave out on purpose (docs/backends.md): the UIDs the
# Job and JobSet controllers label their objects with, and the pod's priority, which the API server resolves from
# the cluster's PriorityClasses and JobSet's pod webhook copies into a label. Nothing else may differ.
NOT_SHOWN = ("controller-uid", "batch.kubernetes.io/controller-uid", "jobset.sigs.k8s.io/jobset-uid",
             "jobset.sigs.k8s.io/priority")
# How long the controllers take to make a JobSet's pods on a busy 2-core machine: generous.
PODS_TIMEOUT = 600


@pytest.fixture(scope="module")
def server(cluster_env) -> Iterator[ApiServer]:
    missing = [name for name in WEBHOOKS if subprocess.run(
        ["kubectl", "get", "mutatingwebhookconfiguration" if "mutating" in name else "validatingwebhookconfiguration",
         name], env=cluster_env, capture_output=True).returncode != 0]
    if missing:
        problem = f"the JobSet controller is not running ({', '.join(missing)} missing): run `make cluster-controllers`"
        if in_ci():
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    api = ApiServer(Path(cluster_env["KUBECONFIG"]))
    yield api
    api.close()


def manifests(result) -> list[dict[str, Any]]:
    return [r.manifest for r in result.kubernetes()]


def jobsets(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if (o["apiVersion"], o["kind"]) == (API_VERSION, "JobSet")]


def admitted(server: ApiServer, jobset: dict[str, Any]) -> list[str]:
    """What keeps the webhooks from admitting the JobSet: nothing, or the server's words."""
    server.prepare([jobset])   # its namespace
    verdict = server.dry_run(jobset)
    if not verdict.accepted:
        return [f"{jobset['metadata']['name']}: {verdict.message}"]
    # The mutating webhook ran: it defaults the startup policy, which neither the render nor the CRD sets.
    if verdict.stored["spec"].get("startupPolicy") != {"startupPolicyOrder": "AnyOrder"}:
        return [f"{jobset['metadata']['name']}: not defaulted by the mutating webhook"]
    return []


# --- admission ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", sorted(test_copies.FAMILIES))
def test_every_jobset_of_every_gang_scheduler_and_variant_passes_the_webhooks(server, family):
    component, base = test_copies.FAMILIES[family]
    found, rendered = [], set()
    for scheduler, scheduling in test_copies.SCHEDULERS.items():
        for variant, extra in test_copies.variants(scheduler).items():
            try:
                objects = test_copies.render(component, {**base, **scheduling, **extra, "backend": "jobset",
                                                         "namespace": "admission"})
            except TrainJobError:
                continue   # a combination refused before anything registers
            for jobset in jobsets(objects):
                rendered.add((scheduler, variant))
                found += [f"{scheduler}/{variant}: {p}" for p in admitted(server, jobset)]
    assert found == []
    # Every gang scheduler with initializers and an extra role, and placed where the family can be.
    assert {(s, "initializers") for s in test_copies.SCHEDULERS} <= rendered
    assert ("kueue", "placement") in rendered and ("volcano", "placement") in rendered
    if family in ("torch", "jax", "xgboost", "torchtune"):
        assert {("kueue", "multikueue"), ("none", "placement")} <= rendered
    if family == "torch":
        assert {("kueue", "elastic"), ("none", "elastic")} <= rendered


def test_the_example_stacks_jobset_passes_the_webhooks(server):
    """The kueue stack's `allreduce` (the other example stacks run Indexed Jobs), in namespace `admission` rather
    than the stack's ml: the webhooks' verdict does not depend on the namespace's name."""
    (found,) = jobsets(manifests(run_program(REPO / "stacks" / "__main__.py", stack="kueue")))
    found["metadata"]["namespace"] = "admission"
    assert admitted(server, found) == []


def test_the_webhooks_refuse_what_they_refuse(server):
    """The dry runs above ask the webhooks: a JobSet only the validating webhook refuses is refused."""
    (jobset,) = jobsets(manifests(run(lambda: trainjobs.MpiTrainJob("refused", {
        "image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 2, "backend": "jobset"}))))
    assert admitted(server, jobset) == []
    jobset = copy.deepcopy(jobset)
    jobset["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "node", "status": "Ready"}]
    assert admitted(server, jobset) == [
        "refused: admission webhook \"vjobset.kb.io\" denied the request: JobSet.jobset.x-k8s.io \"refused\" is "
        "invalid: <nil>: Internal error: DependsOn can't be set for the first ReplicatedJob"]


def test_a_jobset_created_through_pulumi_up_is_admitted_and_run(tmp_path, cluster_env, server):
    namespace = "jobset-up"
    project = Project.create(tmp_path, cluster_env, "jobset-up", "trainjobs-examples",
                             {"stacks/__main__.py": REPO / "stacks" / "__main__.py"}, main="stacks/")
    project.set_config({"trainjobs-examples:jobs": [
        {"kind": "TorchTrainJob", "name": "placed", "namespace": namespace, "image": "pytorch/pytorch:2.13.0",
         "num_nodes": 2, "command": ["torchrun", "-m", "train"], "backend": "jobset",
         "placement": {"topology": "kubernetes.io/hostname"}}]})
    create_namespace(cluster_env, namespace)
    try:
        project.up()
        jobset = kubectl_json(cluster_env, "get", "jobset", "placed", "-n", namespace)
        assert jobset["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}   # the mutating webhook's
        pods = wait_for_pods(cluster_env, namespace, "placed", {("placed-node-0", 0), ("placed-node-0", 1)})
        assert sorted(p["spec"]["hostname"] for p in pods) == ["placed-node-0-0", "placed-node-0-1"]
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False)
        delete_namespace(cluster_env, namespace)


# --- the controller's objects vs the tools ---------------------------------------------------------------------

HOST = "kubernetes.io/hostname"   # each kwok Node is a domain of its own
MPI = {"image": "mpi:1", "command": ["mpirun", "hostname"]}
COMPARED = {
    "torch": (trainjobs.TorchTrainJob, {"image": "t:1", "num_nodes": 2}),
    "torchtune": (trainjobs.TorchTuneTrainJob, {"runtime": "torchtune-llama3.2-1b", "placement": {"topology": HOST}}),
    "mpi": (trainjobs.MpiTrainJob, {**MPI, "num_nodes": 2}),
    "jax": (trainjobs.JaxTrainJob, {"image": "jax:1", "command": ["python", "train.py"], "num_nodes": 2}),
    "xgboost": (trainjobs.XGBoostTrainJob, {"image": "x:1", "command": ["python", "train.py"], "num_nodes": 2}),
}


def wait_for_pods(env: dict[str, str], namespace: str, jobset: str, wanted: set[tuple[str, int]]) -> list[dict]:
    """The pods of a JobSet once every (Job, completion index) wanted has one (those that completed stay)."""
    deadline = time.monotonic() + PODS_TIMEOUT
    while True:
        pods = kubectl_json(env, "get", "pods", "-n", namespace, "-l", f"{JOBSET_NAME}={jobset}")["items"]
        seen = {(p["metadata"]["labels"].get("job-name"),
                 int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])) for p in pods}
        if wanted <= seen:
            return pods
        if time.monotonic() > deadline:
            events = subprocess.run(["kubectl", "get", "events", "-n", namespace], env=env, capture_output=True,
                                    text=True).stdout
            pytest.fail(f"JobSet {jobset}: pods {sorted(wanted - seen)} not created in {PODS_TIMEOUT} s\n{events}")
        time.sleep(2)


def shown(values: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (values or {}).items() if k not in NOT_SHOWN}


def differences(what: str, real: Any, tools: Any) -> list[str]:
    """The controller's value against the tools'; for maps, only the keys whose values differ."""
    if real == tools:
        return []
    if isinstance(real, dict) and isinstance(tools, dict):
        real, tools = ({k: v for k, v in m.items() if real.get(k) != tools.get(k)} for m in (real, tools))
    return [f"{what}: the controller's {json.dumps(real, sort_keys=True)}, "
            f"the tools' {json.dumps(tools, sort_keys=True)}"]


def compare_pod(pod: dict[str, Any], index: ObjectIndex) -> list[str]:
    """How a pod the controllers made differs from the tools' view of it."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    job = meta["labels"]["job-name"]
    completion = int(meta["annotations"]["batch.kubernetes.io/job-completion-index"])
    pod_set = index.pod_set(job)
    if pod_set is None:
        return [f"pod {meta['name']}: its Job {job} is not in the tools' view"]
    suffix = meta["name"].rsplit("-", 1)[-1]
    facts = PodFacts(pod_name_suffix=suffix, pod_ip=status.get("podIP", ""), node_name=spec.get("nodeName", ""),
                     host_ip=status.get("hostIP", ""))
    view = pod_view(pod_set, completion, index, reveal=True, facts=facts)
    where = f"pod {meta['name']}"
    found = differences(f"{where} name", meta["name"], f"{view.hostname}-{suffix}") if len(suffix) == 5 else [
        f"{where}: no 5-character suffix"]
    found += differences(f"{where} hostname", spec.get("hostname"), view.hostname)
    found += differences(f"{where} subdomain", spec.get("subdomain"), view.subdomain)
    found += differences(f"{where} labels", shown(meta.get("labels")), view.labels)
    found += differences(f"{where} annotations", shown(meta.get("annotations")), view.annotations)
    real = {"name": meta["name"], "namespace": meta["namespace"], "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {}, "serviceAccountName": spec.get("serviceAccountName"),
            "facts": facts}
    envs = {c.name: c.env for c in view.init_containers + view.containers}
    for container in spec.get("initContainers", []) + spec["containers"]:
        env, _ = resolve_env(container, real, index, True, completion)
        found += differences(f"{where} container {container['name']} env", env, envs.get(container["name"]))
    return found


def compare_job(job: dict[str, Any], index: ObjectIndex) -> list[str]:
    """How a child Job the controller made differs from the Job the tools read the JobSet into."""
    meta = job["metadata"]
    pod_set = index.pod_set(meta["name"])
    if pod_set is None:
        return [f"Job {meta['name']} is not in the tools' view"]
    tools = pod_set.job["metadata"]
    where = f"Job {meta['name']}"
    return (differences(f"{where} labels", shown(meta.get("labels")), tools.get("labels") or {})
            + differences(f"{where} annotations", shown(meta.get("annotations")), tools.get("annotations") or {}))


@pytest.mark.parametrize("case", sorted(COMPARED))
def test_the_controllers_jobs_and_pods_are_the_ones_the_tools_show(server, cluster_env, case):
    component, args = COMPARED[case]
    namespace = f"compare-{case}"
    result = run(lambda: component(case, {**args, "backend": "jobset", "namespace": namespace}), real_keys=True)
    objects = manifests(result)
    index = ObjectIndex(objects)
    (jobset,) = jobsets(objects)
    create_namespace(cluster_env, namespace)
    try:
        for obj in objects:
            server.create(obj)  # a claim binds through the cluster's default StorageClass
        wanted = {(s.name, i) for s in index.pod_sets for i in range(s.count)}
        pods = wait_for_pods(cluster_env, namespace, case, wanted)
        jobs = kubectl_json(cluster_env, "get", "jobs", "-n", namespace, "-l", f"{JOBSET_NAME}={case}")["items"]
        # The summary's count of the JobSet's pods.
        assert re.search(rf"JobSet {case}<br/>(\d+) pods?\b", summary(result)).group(1) == str(len(pods))
        assert sorted(j["metadata"]["name"] for j in jobs) == sorted(s.name for s in index.pod_sets)
        found = [p for job in jobs for p in compare_job(job, index)]
        found += [p for pod in pods for p in compare_pod(pod, index)]
        # Exclusive placement: JobSet's pod webhook places the pods the tools say are placed, and no other.
        placed = {p["metadata"]["labels"]["job-name"] for p in pods
                  if HOST in json.dumps([p["spec"].get("affinity"), p["spec"].get("nodeSelector")])}
        found += differences("placed Jobs", sorted(placed),
                             sorted(s.name for s in index.pod_sets if placement_of(s, objects)))
        # The job's own headless Service stands: the controller makes none when one of its subdomain exists.
        services = kubectl_json(cluster_env, "get", "services", "-n", namespace)["items"]
        assert [s["metadata"]["name"] for s in services] == [jobset["spec"]["network"]["subdomain"]]
        assert found == [], "\n".join(found)
    finally:
        delete_namespace(cluster_env, namespace)
