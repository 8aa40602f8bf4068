"""`trainjobs node-agent` on the cluster of `make cluster`: the e2e programs deployed with `pulumi up`, each pod run
by the agent with its real program (torch, a fatal exit code, a preempted worker), its fate decided by the real Job
controller. Each end is compared with what `trainjobs run-local`'s emulation of the Job controller says of the same
program and stack: they must agree.

Each test has Nodes of its own, labelled and tainted trainjobs.dev/agent=<its namespace>, and a namespace of its own
whose pods the API server places on them only (`namespace`): the tests run beside every other test of the cluster,
whose pods land on the kwok Nodes. Needs root (network namespaces) and torch, as the e2e tests do."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from pulumi_cli import REPO, Project, kubectl_json, run
from trainjobs.localrun import host_problems

PROGRAMS = REPO / "tests" / "e2e" / "programs"
WAIT = 600   # generous: a busy 2-core machine alone must never fail a test
AGENT = "trainjobs.dev/agent"   # the label and taint of a test's Nodes, its value the test's namespace
# The namespace annotations by which the API server's admission plugins PodNodeSelector and PodTolerationRestriction
# (enabled in scripts/engine/cluster.sh) add a nodeSelector and tolerations to each pod made in the namespace.
NODE_SELECTOR = "scheduler.alpha.kubernetes.io/node-selector"
DEFAULT_TOLERATIONS = "scheduler.alpha.kubernetes.io/defaultTolerations"


@pytest.fixture(autouse=True)
def runnable() -> None:
    problems = host_problems() + ([] if importlib.util.find_spec("torch") else [f"torch is not installed in {sys.prefix}"])
    if problems:
        if os.environ.get("CI") == "true":
            pytest.fail("; ".join(problems))
        pytest.skip("; ".join(problems))


def kubectl(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["kubectl", *args], REPO, env, check)


@pytest.fixture
def namespace(cluster_env) -> Iterator[str]:
    """A namespace of the test's own, whose pods select and tolerate the test's Nodes (`Agent`): they land there and
    nowhere else, and no other pod lands on those Nodes. Deleted after the test."""
    name = f"agent-{uuid.uuid4().hex[:8]}"
    toleration = {"key": AGENT, "operator": "Equal", "value": name, "effect": "NoSchedule"}
    created = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": {
        NODE_SELECTOR: f"{AGENT}={name}", DEFAULT_TOLERATIONS: json.dumps([toleration])}}}
    subprocess.run(["kubectl", "create", "-f", "-"], input=json.dumps(created), cwd=REPO, env=cluster_env, check=True,
                   capture_output=True, text=True)
    try:
        yield name
    finally:
        kubectl(cluster_env, "delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def env(cluster_env, namespace, tmp_path) -> dict[str, str]:
    """The cluster's env with a kubeconfig whose context's namespace is the test's: kubectl works in it."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubectl(cluster_env, "config", "view", "--raw", "--flatten").stdout)
    env = {**cluster_env, "KUBECONFIG": str(kubeconfig)}
    kubectl(env, "config", "set-context", "--current", "--namespace", namespace)
    return env


class Agent:
    """A `trainjobs node-agent` process with `nodes` Nodes of the test's own (named, labelled and tainted after its
    namespace), stopped (SIGTERM) at the end of the test."""

    def __init__(self, env: dict[str, str], run_dir: Path, namespace: str, *args: str, nodes: int = 2):
        self.env, self.run_dir, self.namespace = env, run_dir, namespace
        self.nodes = [f"{namespace}-{i}" for i in range(nodes)]
        self.output = run_dir / "agent.out"
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {**env, "PYTHONPATH": str(REPO / "components")}
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "trainjobs.tools.cli", "node-agent", "--nodes", str(nodes), "--node-prefix",
                 namespace, "--node-labels", f"{AGENT}={namespace}", "--register-with-taints",
                 f"{AGENT}={namespace}:NoSchedule", "--run-dir", str(run_dir), *args],
                env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not self.ready():
            assert self.process.poll() is None, self.text()
            assert time.monotonic() < deadline, f"the agent's Nodes did not become Ready:\n{self.text()}"
            time.sleep(0.5)

    def ready(self) -> bool:
        listed = kubectl(self.env, "get", "nodes", "-l", f"{AGENT}={self.namespace}", "-o", "json").stdout
        ready = {n["metadata"]["name"] for n in json.loads(listed)["items"]
                 if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
        return set(self.nodes) <= ready

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def agent(env, namespace, tmp_path) -> Iterator:
    """Starts the agent with the given flags, its Nodes the test's own."""
    started: list[Agent] = []

    def start(*args: str) -> Agent:
        started.append(Agent(env, tmp_path / "agent", namespace, *args))
        return started[-1]

    try:
        yield start
    finally:
        for a in started:
            a.stop()


def deploy(tmp_path: Path, env: dict[str, str], namespace: str, program: str, stack: str, **config: str) -> Project:
    """`pulumi up` of an e2e program's stack (its config, and `config` over it), into `namespace`: the provider's
    default namespace (`kubernetes:namespace`), as the programs set none; destroyed by the caller."""
    source = PROGRAMS / program
    name = next(line.split(": ", 1)[1] for line in (source / "Pulumi.yaml").read_text().splitlines()
                if line.startswith("name: "))
    project = Project.create(tmp_path / "project", env, stack, name, {f.name: f for f in source.glob("*.py")})
    stack_config = yaml.safe_load((source / f"Pulumi.{stack}.yaml").read_text())["config"]
    project.set_config({**stack_config, **{f"{name}:{key}": value for key, value in config.items()},
                        "kubernetes:namespace": namespace})
    project.up()
    placed = {f"{r['outputs']['kind']}/{r['outputs']['metadata']['name']}": r["outputs"]["metadata"].get("namespace")
              for r in json.loads(project.pulumi("stack", "export").stdout)["deployment"]["resources"]
              if r["type"].startswith("kubernetes:")}
    assert placed and set(placed.values()) == {namespace}, placed
    return project


def finished(env: dict[str, str], job: str) -> dict[str, Any]:
    """The Job once it has a Complete or Failed condition."""
    deadline = time.monotonic() + WAIT
    while True:
        found = kubectl_json(env, "get", "job", job)
        done = {c["type"]: c for c in found.get("status", {}).get("conditions", []) if c["status"] == "True"}
        if done.keys() & {"Complete", "Failed"}:
            return found
        assert time.monotonic() < deadline, f"Job {job} did not finish: {found.get('status')}"
        time.sleep(1)


def pods(env: dict[str, str], job: str) -> list[dict[str, Any]]:
    """The Job's pods, oldest first."""
    listed = kubectl_json(env, "get", "pods", "-l", f"batch.kubernetes.io/job-name={job}")["items"]
    return sorted(listed, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in job["status"].get("conditions", []) if c["type"] == kind and c["status"] == "True"), None)


def reports(env: dict[str, str], pod: dict[str, Any], marker: str) -> list[dict[str, Any]]:
    """The JSON reports a pod printed after `marker `, read with `kubectl logs` (through the API server)."""
    logs = kubectl(env, "logs", pod["metadata"]["name"]).stdout
    return [json.loads(line.split(f"{marker} ", 1)[1]) for line in logs.splitlines() if f"{marker} " in line]


def emulated(tmp_path: Path, program: str, stack: str, *args: str) -> dict[str, Any]:
    """The summary of `trainjobs run-local` of the same program and stack: run-local's emulation of the controllers."""
    run_dir = tmp_path / "emulated"
    run_dir.mkdir()
    done = subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", "run-local", str(PROGRAMS / program / "__main__.py"),
                           "--stack", stack, "--run-dir", str(run_dir), "--timeout", "500", "--quiet", *args],
                          env={**os.environ, "PYTHONPATH": str(REPO / "components")}, capture_output=True, text=True,
                          timeout=WAIT)
    (summary,) = run_dir.glob("trainjobs-*/summary.json")
    return json.loads(summary.read_text()) | {"output": done.stdout + done.stderr}


def test_torch_static_2x2_completes_under_the_job_controller(tmp_path, env, namespace, agent):
    running = agent()
    project = deploy(tmp_path, env, namespace, "torch", "static")
    try:
        job = finished(env, "e2e-static-node-0")
        assert condition(job, "Complete"), (job["status"], running.text())
        assert job["status"]["succeeded"] == 2 and not job["status"].get("failed")
        found = pods(env, "e2e-static-node-0")
        assert [(p["spec"]["hostname"], p["status"]["phase"]) for p in found] == [
            ("e2e-static-node-0-0", "Succeeded"), ("e2e-static-node-0-1", "Succeeded")]
        assert {p["spec"]["nodeName"] for p in found} <= set(running.nodes)
        for pod in found:
            (main,) = pod["status"]["containerStatuses"]
            assert main["state"]["terminated"]["exitCode"] == 0 and main["state"]["terminated"]["reason"] == "Completed"
            assert pod["status"]["podIP"]
        ranks = sorted((r for p in found for r in reports(env, p, "E2E-RANK")), key=lambda r: r["rank"])
        assert [r["rank"] for r in ranks] == [0, 1, 2, 3], running.text()
        assert {(r["world_size"], r["master_addr"], r["all_reduce"]) for r in ranks} == {
            (4, "e2e-static-node-0-0.e2e-static", 10.0)}
    finally:
        project.destroy()
    local = emulated(tmp_path, "torch", "static")
    (local_job,) = local["jobs"]
    assert (local_job["state"], local_job["succeeded"], local_job["failed_pods"]) == ("Complete", [0, 1], 0), local["output"]


def test_torch_c10d_2x2_completes_under_the_job_controller(tmp_path, env, namespace, agent):
    running = agent()
    addresses = [f"e2e-c10d-node-0-{i}.e2e-c10d.{namespace}.svc.cluster.local" for i in (0, 1)]
    project = deploy(tmp_path, env, namespace, "torch", "c10d", expect_master_addr=",".join(addresses))
    try:
        job = finished(env, "e2e-c10d-node-0")
        assert condition(job, "Complete"), (job["status"], running.text())
        found = pods(env, "e2e-c10d-node-0")
        assert [p["status"]["phase"] for p in found] == ["Succeeded", "Succeeded"]
        ranks = sorted((r for p in found for r in reports(env, p, "E2E-RANK")), key=lambda r: r["rank"])
        assert [r["rank"] for r in ranks] == [0, 1, 2, 3], running.text()
        leader = next(r for r in ranks if r["rank"] == 0)   # c10d: the FQDN of the pod whose agent leads
        assert {(r["world_size"], r["master_addr"], r["all_reduce"]) for r in ranks} == {
            (4, addresses[leader["pod_index"]], 10.0)}
    finally:
        project.destroy()
    local = emulated(tmp_path, "torch", "c10d")
    (local_job,) = local["jobs"]
    assert (local_job["state"], local_job["succeeded"], local_job["failed_pods"]) == ("Complete", [0, 1], 0), local["output"]


def test_openmpi_3_hosts_completes_under_the_job_controller(tmp_path, env, namespace, agent):
    """mpirun over SSH from the launcher's pod to 3 worker pods x 2 slots, with Debian's OpenMPI 4."""
    venv = Path(os.environ.get("TRAINJOBS_MPI_ENVS", "/var/cache/trainjobs-e2e/mpi")) / "ompi4"
    if not (venv / "bin" / "python").exists() or not Path("/usr/sbin/sshd").exists():
        pytest.skip(f"no OpenMPI environment at {venv} or no sshd: scripts/mpi-e2e-envs sets it up (`make test` does)")
    running = agent()
    config = {"mpi_venv": str(venv), "launcher": "mpirun"}
    project = deploy(tmp_path, env, namespace, "mpi", "three-hosts", **config,
                     ssh_private_key=(REPO / "tests" / "mpi_keys" / "ed25519").read_text())
    try:
        jobs = {name: finished(env, name) for name in ("three-launcher-0", "three-node-0")}
        for name, job in jobs.items():
            assert condition(job, "Complete"), (name, job["status"], running.text())
        (launcher,) = pods(env, "three-launcher-0")
        reported = reports(env, launcher, "E2E-MPI")
        assert len(reported) == 1, running.text()
        seen = reported[0]
        assert seen["size"] == 6 and seen["allreduce"] == seen["expected"], seen
        assert sorted(r["hostname"] for r in seen["ranks"]) == sorted(f"three-node-0-{i}" for i in range(3) for _ in "ab")
        assert all(p["status"]["phase"] == "Succeeded" for p in pods(env, "three-node-0"))
    finally:
        project.destroy()
    local = emulated(tmp_path, "mpi", "three-hosts", *(a for k, v in config.items() for a in ("--config", f"{k}={v}")))
    assert {(j["name"], j["state"]) for j in local["jobs"]} == {("three-launcher-0", "Complete"),
                                                                ("three-node-0", "Complete")}, local["output"]


def test_a_fatal_exit_code_fails_the_job_at_once(tmp_path, env, namespace, agent):
    """podFailurePolicy FailJob on exit code 42: the Job fails with its first failed pod, backoff_limit 3 aside."""
    running = agent()
    project = deploy(tmp_path, env, namespace, "resilience", "fatal")
    try:
        job = finished(env, "fatal-node-0")
        failed = condition(job, "Failed")
        assert failed and failed["reason"] == "PodFailurePolicy", (job["status"], running.text())
        found = pods(env, "fatal-node-0")
        (culprit,) = [p for p in found if p["metadata"]["annotations"][   # no second attempt of index 1
            "batch.kubernetes.io/job-completion-index"] == "1"]
        assert failed["message"] == (f"Container node for pod {namespace}/{culprit['metadata']['name']} failed with "
                                     "exit code 42 matching FailJob rule at index 1")
        (main,) = culprit["status"]["containerStatuses"]
        assert (main["state"]["terminated"]["exitCode"], main["state"]["terminated"]["reason"]) == (42, "Error")
        # The culprit and pod 0, which the controller deleted as the Job failed: both count as failed.
        assert job["status"]["failed"] == 2
    finally:
        project.destroy()
    local = emulated(tmp_path, "resilience", "fatal")
    (local_job,) = local["jobs"]
    assert (local_job["state"], local_job["failed_pods"]) == ("Failed", 2)
    local_culprit = next(p["name"] for p in local["pods"] if p["exit_code"] == 42)
    assert local_job["reason"] == (f"PodFailurePolicy: Container node for pod default/{local_culprit} failed with "
                                   "exit code 42 matching FailJob rule at index 1")


def test_a_preempted_worker_is_not_counted_and_training_resumes(tmp_path, env, namespace, agent):
    """backoff_limit 0: the preempted pod (DisruptionTarget) is ignored by the default failure policy, replaced, and
    training resumes from its checkpoint on the claim."""
    running = agent("--disrupt", "pre-node-0-1@output:E2E-STEP 4 ")
    project = deploy(tmp_path, env, namespace, "resilience", "preempt")
    try:
        job = finished(env, "pre-node-0")
        assert condition(job, "Complete"), (job["status"], running.text())
        assert not job["status"].get("failed")
        found = pods(env, "pre-node-0")
        assert [(p["spec"]["hostname"], p["status"]["phase"]) for p in found] == [
            ("pre-node-0-0", "Succeeded"), ("pre-node-0-1", "Failed"), ("pre-node-0-1", "Succeeded")]
        preempted = found[1]
        disruption = next(c for c in preempted["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "TerminationByKubelet")
        assert preempted["status"]["reason"] == "Preempting"
        done = sorted((r for p in (found[0], found[2]) for r in reports(env, p, "E2E-DONE")),
                      key=lambda r: r["pod_index"])
        assert [r["weight"] for r in done] == [36.0, 36.0], running.text()   # no step lost, none done twice
        assert done[0]["resumed_from"] == done[1]["resumed_from"] >= 4      # from the checkpoint, not step 0
    finally:
        project.destroy()
    local = emulated(tmp_path, "resilience", "preempt", "--disrupt", "pre-node-0-1@output:E2E-STEP 4 ")
    (local_job,) = local["jobs"]
    assert (local_job["state"], local_job["failed_pods"], local_job["ignored_failed_pods"]) == ("Complete", 0, 1)
    assert [(p["hostname"], p["phase"]) for p in local["pods"]] == [
        ("pre-node-0-0", "Succeeded"), ("pre-node-0-1", "Failed"), ("pre-node-0-1", "Succeeded")]
