"""The example stacks through the real Pulumi CLI and Kubernetes provider on the local control plane: preview, up,
preview --expect-no-changes, destroy; then nothing of the stack is left in the cluster. And a secret config value
reaches the cluster but never the stack's state in plaintext."""

import json
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# A run waits for its Jobs to complete (kwok completes the pods in seconds); on a busy machine the engine's start
# and the provider's await take a while: generous, so the test never fails on a slow machine alone.
TIMEOUT = 900


def run(args: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def kubectl_json(env: dict[str, str], *args: str) -> dict:
    return json.loads(run(["kubectl", *args, "-o", "json"], REPO, env).stdout)


@pytest.fixture
def pulumi_env(cluster_env, tmp_path) -> dict[str, str]:
    """The cluster's environment with a backend and a Pulumi home of this test's own, and this work tree's
    trainjobs first on the program's path."""
    env = dict(cluster_env)
    (tmp_path / "backend").mkdir()
    env["PULUMI_BACKEND_URL"] = f"file://{tmp_path / 'backend'}"
    env["PULUMI_HOME"] = str(tmp_path / "pulumi-home")
    env["PYTHONPATH"] = str(REPO / "components")
    return env


def project(src_files: dict[str, Path | str], dest: Path) -> Path:
    """A copy of a Pulumi project whose runtime is the Python of this test run's virtualenv."""
    dest.mkdir()
    for name, src in src_files.items():
        if isinstance(src, Path) and src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif isinstance(src, Path):
            shutil.copy(src, dest / name)
        else:
            (dest / name).write_text(src)
    meta = yaml.safe_load((dest / "Pulumi.yaml").read_text())
    meta["runtime"] = {"name": "python", "options": {"virtualenv": sys.prefix}}
    (dest / "Pulumi.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return dest


OBJECT_KINDS = "jobs,pods,services,configmaps,secrets,persistentvolumeclaims"


CLUSTER_OWN = {("Service", "kubernetes"), ("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


def described(item: dict, name: str) -> str:
    """An object as `Kind name`, with the finalizers it is stuck on if it is being deleted."""
    stuck = item["metadata"].get("finalizers") if item["metadata"].get("deletionTimestamp") else None
    return f"{item['kind']} {name}" + (f" (stuck on finalizers {stuck})" if stuck else "")


def objects_left(env: dict[str, str], namespaces: list[str], kinds: str = OBJECT_KINDS) -> list[str]:
    """Every object of these kinds in the stack's namespaces, but the cluster's own, and every PersistentVolume
    bound to a claim of these namespaces (named by its claim); stuck finalizers named."""
    left = []
    for ns in namespaces:
        for item in kubectl_json(env, "get", kinds, "-n", ns)["items"]:
            if (item["kind"], item["metadata"]["name"]) not in CLUSTER_OWN:
                left.append(described(item, f"{ns}/{item['metadata']['name']}"))
    for item in kubectl_json(env, "get", "persistentvolumes")["items"]:
        claim = item["spec"].get("claimRef") or {}
        if claim.get("namespace") in namespaces:
            left.append(described(item, f"of claim {claim['namespace']}/{claim['name']}"))
    return left


@contextmanager
def platform_objects(env: dict[str, str], manifest: str) -> Iterator[None]:
    """Objects a stack expects of the cluster's platform, there while the test runs. Those made here are deleted
    after it; those the cluster has already (the controllers cluster's Kueue fixtures: namespace ml, its LocalQueue,
    the flavor and its Topology, the WorkloadPriorityClass) are left as they are, for tests running meanwhile use
    them."""
    made = []
    try:
        for doc in manifest.split("\n---\n"):
            done = subprocess.run(["kubectl", "create", "-f", "-"], input=doc, env=env, capture_output=True, text=True)
            if done.returncode == 0:
                made.append(doc)
            else:
                assert "(AlreadyExists)" in done.stderr, done.stderr
        yield
    finally:
        if made:
            subprocess.run(["kubectl", "delete", "--wait", "--timeout=300s", "-f", "-"], input="\n---\n".join(made),
                           env=env, capture_output=True, text=True)


@pytest.fixture
def dev_platform(cluster_env):
    """What the dev stack expects of the cluster's platform: namespace ml and PriorityClass training-high."""
    with platform_objects(cluster_env, """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-high}
value: 1000
"""):
        yield


def test_dev_stack_preview_up_no_changes_destroy(pulumi_env, dev_platform, tmp_path):
    work = project({"Pulumi.yaml": REPO / "Pulumi.yaml", "Pulumi.dev.yaml": REPO / "Pulumi.dev.yaml",
                    "stacks": REPO / "stacks"}, tmp_path / "project")
    run(["pulumi", "stack", "init", "dev", "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)

    preview = json.loads(run(["pulumi", "preview", "--json", "--non-interactive"], work, pulumi_env).stdout)
    types_names = [(urn.split("::")[2].split("$")[-1], urn.split("::")[3])
                   for urn in (step["urn"] for step in preview["steps"] if step["op"] == "create")]
    created = sorted([kind, name] for kind, name in types_names if kind.startswith("kubernetes:"))
    assert created == sorted([
        ["kubernetes:batch/v1:Job", "llama-finetune-node-0"], ["kubernetes:batch/v1:Job", "mnist-ddp-node-0"],
        ["kubernetes:core/v1:ConfigMap", "mnist-ddp-code"], ["kubernetes:core/v1:Service", "llama-finetune"],
        ["kubernetes:core/v1:Service", "mnist-ddp"]])

    try:
        run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
        # The stack's Jobs are awaited only until they exist (pulumi.com/waitFor): kwok completes their pods in seconds.
        run(["kubectl", "wait", "--for=condition=Complete", "--timeout=300s", "job/mnist-ddp-node-0", "-n", "default"],
            REPO, pulumi_env)
        run(["kubectl", "wait", "--for=condition=Complete", "--timeout=300s", "job/llama-finetune-node-0", "-n", "ml"],
            REPO, pulumi_env)
        mnist = kubectl_json(pulumi_env, "get", "job", "mnist-ddp-node-0", "-n", "default")
        llama = kubectl_json(pulumi_env, "get", "job", "llama-finetune-node-0", "-n", "ml")
        assert (mnist["spec"]["completions"], mnist["status"].get("succeeded")) == (2, 2)
        assert (llama["spec"]["completions"], llama["status"].get("succeeded")) == (4, 4)
        env = {e["name"]: e.get("value") for e in mnist["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert (env["PET_NNODES"], env["PET_MASTER_ADDR"]) == ("2", "mnist-ddp-node-0-0.mnist-ddp")
        code = kubectl_json(pulumi_env, "get", "configmap", "mnist-ddp-code", "-n", "default")
        assert code["data"]["train.py"] == (REPO / "stacks" / "train.py").read_text()

        run(["pulumi", "preview", "--expect-no-changes", "--non-interactive"], work, pulumi_env)
    finally:
        run(["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
    assert objects_left(pulumi_env, ["default", "ml"]) == []
    state = json.loads(run(["pulumi", "stack", "export"], work, pulumi_env).stdout)
    assert [r["type"] for r in state["deployment"].get("resources", [])] == []


SECRET_PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s
from trainjobs import TorchTrainJob, TorchTrainJobArgs

config = pulumi.Config()
ns = k8s.core.v1.Namespace("team", metadata={"name": "llm"})
job = TorchTrainJob("pretrain", TorchTrainJobArgs(
    namespace=ns.metadata.name,
    image="ghcr.io/acme/train:2026.11",
    env={"HF_TOKEN": config.require_secret("hfToken")},
    command=["torchrun", "-m", "train.pretrain"],
    num_nodes=4,
    resources_per_node={"limits": {"nvidia.com/gpu": "8"}},
))
pulumi.export("master_addr", job.master_addr)
"""


def test_secret_config_value_is_never_plaintext_in_state(pulumi_env, tmp_path):
    """The README's example, its token set as a secret config value: the pods get it, the state only its
    ciphertext."""
    work = project({"Pulumi.yaml": "name: secret-env\nruntime: python\n", "__main__.py": SECRET_PROGRAM},
                   tmp_path / "project")
    token = f"hf_{secrets.token_hex(16)}"
    run(["pulumi", "stack", "init", "dev", "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)
    run(["pulumi", "config", "set", "--secret", "hfToken", token], work, pulumi_env)
    assert token not in (work / "Pulumi.dev.yaml").read_text()
    try:
        run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
        job = kubectl_json(pulumi_env, "get", "job", "pretrain-node-0", "-n", "llm")
        env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["HF_TOKEN"] == token

        exported = run(["pulumi", "stack", "export"], work, pulumi_env).stdout
        assert token not in exported
        assert token in run(["pulumi", "stack", "export", "--show-secrets"], work, pulumi_env).stdout
        backend = Path(pulumi_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
        state_files = [p for p in backend.rglob("*") if p.is_file()]
        assert any(p.suffix == ".json" and "pretrain-node-0" in p.read_text() for p in state_files)
        assert [p for p in state_files if token in p.read_text(errors="replace")] == []
    finally:
        run(["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
    assert objects_left(pulumi_env, ["llm"]) == []


def ssh_key(tmp_path: Path) -> str:
    """A fresh unencrypted private key, as `ssh-keygen` writes it."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test-mpi", "-f", str(tmp_path / "mpi_key")],
                   check=True, capture_output=True)
    return (tmp_path / "mpi_key").read_text()


def preview_up_no_changes_destroy(work: Path, env: dict[str, str], after_up: Callable[[], None] = lambda: None,
                                  ) -> tuple[list[tuple[str, str]], str]:
    """preview, up, `after_up()`, preview --expect-no-changes, destroy; the (type, name) of every resource the
    preview creates and the state of the stack after up, as `pulumi stack export` prints it."""
    preview = json.loads(run(["pulumi", "preview", "--json", "--non-interactive"], work, env).stdout)
    created = sorted((urn.split("::")[2].split("$")[-1], urn.split("::")[3])
                     for urn in (step["urn"] for step in preview["steps"] if step["op"] == "create"))
    try:
        run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], work, env)
        exported = run(["pulumi", "stack", "export"], work, env).stdout
        after_up()
        run(["pulumi", "preview", "--expect-no-changes", "--non-interactive", "--diff"], work, env)
    finally:
        run(["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"], work, env)
    state = json.loads(run(["pulumi", "stack", "export"], work, env).stdout)
    assert [r["type"] for r in state["deployment"].get("resources", [])] == []
    return created, exported


def objects_left_after_deletion(env: dict[str, str], namespaces: list[str], kinds: str,
                                kept: tuple[str, ...] = ()) -> list[str]:
    """What objects_left finds, sorted, once deletions under way are done: pulumi does not await a skipAwait
    Job's deletion, whose pods the garbage collector removes first (foregroundDeletion). Polls until only the
    objects `kept` are left, for up to 5 minutes, generous for a busy machine; what is still there then is stuck."""
    for _ in range(150):
        left = sorted(objects_left(env, namespaces, kinds))
        if left == sorted(kept):
            return left
        time.sleep(2)
    return left


def test_hpc_stack_with_secret_mpi_key_preview_up_no_changes_destroy(pulumi_env, tmp_path):
    """The MPI jobs' key is the stack's secret mpiSshKey: no pulumi-tls, and the key never plaintext in state."""
    work = project({"Pulumi.yaml": REPO / "Pulumi.yaml", "Pulumi.hpc.yaml": REPO / "Pulumi.hpc.yaml",
                    "stacks": REPO / "stacks"}, tmp_path / "project")
    run(["pulumi", "stack", "init", "hpc", "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)
    key = ssh_key(tmp_path)
    subprocess.run(["pulumi", "config", "set", "--secret", "mpiSshKey"], input=key, cwd=work, env=pulumi_env,
                   check=True, capture_output=True, text=True)
    key_body = key.splitlines()[1]
    assert key_body not in (work / "Pulumi.hpc.yaml").read_text()

    created, exported = preview_up_no_changes_destroy(work, pulumi_env)
    assert [kind for kind, _ in created if kind.startswith("tls:")] == []
    assert sorted(name for kind, name in created if kind == "kubernetes:batch/v1:Job") == [
        "ds-finetune-launcher-0", "ds-finetune-node-0", "pi-launcher-0", "pi-node-0"]
    assert key_body not in exported
    backend = Path(pulumi_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    assert [p for p in backend.rglob("*") if p.is_file() and key_body in p.read_text(errors="replace")] == []
    assert objects_left_after_deletion(pulumi_env, ["default"], OBJECT_KINDS) == []


# What Pulumi.kueue.yaml's jobs expect of a Kueue cluster: namespace ml, its LocalQueue team-llm, the ClusterQueue
# behind it over a GPU ResourceFlavor with a rack and block Topology, and WorkloadPriorityClass research. Stored as
# plain objects: Kueue's controller does not run here, so nothing is suspended or admitted.
KUEUE_PLATFORM = """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: gpu-topology}
spec:
  levels: [{nodeLabel: example.com/block}, {nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100-SXM}
  topologyName: gpu-topology
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: llm}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/gpu]
      flavors:
        - name: h100
          resources:
            - {name: cpu, nominalQuota: 384}
            - {name: memory, nominalQuota: 4Ti}
            - {name: nvidia.com/gpu, nominalQuota: 32}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-llm, namespace: ml}
spec: {clusterQueue: llm}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: research}
value: 1000
"""

# What Pulumi.volcano.yaml's jobs expect of a Volcano cluster: namespace ml, Volcano Queue team-llm, and the
# PriorityClass research its PodGroups name. The cluster's kube-scheduler places pods of schedulerName volcano.
VOLCANO_PLATFORM = """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-llm}
spec: {weight: 1}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: research}
value: 1000
"""

QUEUED_JOBS = ["finetune-dataset-initializer-0", "finetune-model-initializer-0", "finetune-node-0",
               "pretrain-node-0"]


@pytest.mark.parametrize("stack, platform, created_kinds, left_kinds", [
    ("kueue", KUEUE_PLATFORM, {
        "kubernetes:batch/v1:Job": QUEUED_JOBS,
        "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": ["allreduce"],
        "kubernetes:core/v1:PersistentVolumeClaim": ["finetune-initializer"],
    }, OBJECT_KINDS + ",jobsets.jobset.x-k8s.io"),
    ("volcano", VOLCANO_PLATFORM, {
        "kubernetes:batch/v1:Job": sorted(QUEUED_JOBS + ["allreduce-launcher-0", "allreduce-node-0"]),
        "kubernetes:scheduling.volcano.sh/v1beta1:PodGroup": ["allreduce", "finetune", "pretrain"],
        "kubernetes:core/v1:PersistentVolumeClaim": ["finetune-initializer"],
    }, OBJECT_KINDS + ",podgroups.scheduling.volcano.sh"),
], ids=["kueue", "volcano"])
def test_queued_stack_preview_up_no_changes_destroy(stack, platform, created_kinds, left_kinds, cluster_env,
                                                    pulumi_env, tmp_path):
    """The kueue and volcano stacks: the fine-tune's ReadWriteMany workspace claim is bound by the cluster's default
    StorageClass, its initializers complete before its trainer runs on the claim, nothing changes on a second
    preview, and destroy leaves no object and no volume."""
    work = project({"Pulumi.yaml": REPO / "Pulumi.yaml", f"Pulumi.{stack}.yaml": REPO / f"Pulumi.{stack}.yaml",
                    "stacks": REPO / "stacks"}, tmp_path / "project")
    run(["pulumi", "stack", "init", stack, "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)
    subprocess.run(["pulumi", "config", "set", "--secret", "mpiSshKey"], input=ssh_key(tmp_path), cwd=work,
                   env=pulumi_env, check=True, capture_output=True, text=True)

    def after_up():
        claim = kubectl_json(pulumi_env, "get", "pvc", "finetune-initializer", "-n", "ml")
        assert (claim["status"]["phase"], claim["status"]["accessModes"]) == ("Bound", ["ReadWriteMany"])
        run(["kubectl", "wait", "--for=condition=Complete", "--timeout=300s", "job/finetune-node-0", "-n", "ml"],
            REPO, pulumi_env)

    with platform_objects(cluster_env, platform):
        created, _ = preview_up_no_changes_destroy(work, pulumi_env, after_up)
        assert {kind: sorted(name for k, name in created if k == kind) for kind in created_kinds} == created_kinds
        assert objects_left_after_deletion(pulumi_env, ["ml"], left_kinds) == []


# The stack that builds images, as far as the platform stack sees it; a program without config, as many are.
IMAGES_PROGRAM = """
import pulumi
pulumi.export("trainerImage", "ghcr.io/acme/train:2026.11")
"""


@pytest.fixture
def training_priorities(cluster_env):
    """The PriorityClasses the platform stack's jobs name: training, and batch for evaluation. Afterwards the
    namespace llm is deleted too, which the stack's destroy keeps."""
    with platform_objects(cluster_env, """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch}
value: 100
"""):
        yield
    subprocess.run(["kubectl", "delete", "namespace", "llm", "--ignore-not-found", "--wait", "--timeout=300s"],
                   env=cluster_env, capture_output=True, text=True)


def test_platform_stack_preview_up_no_changes_destroy(pulumi_env, training_priorities, tmp_path):
    """stacks/platform, configured as Pulumi.prod.yaml says, its image from a stack `images` of the same backend:
    the namespace it makes, its checkpoints claim bound, the token Secret never plaintext in state; a second
    preview changes nothing. Destroy keeps the Namespace and its checkpoints claim (TrainingNamespace's
    retain_data) and nothing else; deleting the Namespace on purpose then leaves no object and no volume."""
    images = project({"Pulumi.yaml": "name: images\nruntime: python\n", "__main__.py": IMAGES_PROGRAM},
                     tmp_path / "images")
    run(["pulumi", "stack", "init", "prod", "--secrets-provider", "passphrase", "--non-interactive"], images,
        pulumi_env)
    run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], images, pulumi_env)

    work = project({"Pulumi.yaml": REPO / "stacks" / "platform" / "Pulumi.yaml",
                    "__main__.py": REPO / "stacks" / "platform" / "__main__.py"}, tmp_path / "platform")
    token = f"hf_{secrets.token_hex(16)}"
    run(["pulumi", "stack", "init", "prod", "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)
    run(["pulumi", "config", "set", "team", "llm"], work, pulumi_env)
    run(["pulumi", "config", "set", "imagesStack", "organization/images/prod"], work, pulumi_env)
    run(["pulumi", "config", "set", "--secret", "hfToken", token], work, pulumi_env)

    def after_up():
        pretrain = kubectl_json(pulumi_env, "get", "job", "pretrain-node-0", "-n", "llm")
        assert pretrain["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/acme/train:2026.11"
        for name in ("checkpoints", "finetune-initializer"):
            claim = kubectl_json(pulumi_env, "get", "pvc", name, "-n", "llm")
            assert (claim["status"]["phase"], claim["status"]["accessModes"]) == ("Bound", ["ReadWriteMany"])
        run(["kubectl", "wait", "--for=condition=Complete", "--timeout=300s", "job/finetune-node-0",
             "job/evaluate-node-0", "-n", "llm"], REPO, pulumi_env)

    created, exported = preview_up_no_changes_destroy(work, pulumi_env, after_up)
    assert sorted(name for kind, name in created if kind == "kubernetes:batch/v1:Job") == [
        "evaluate-node-0", "finetune-dataset-initializer-0", "finetune-node-0", "pretrain-node-0"]
    assert token not in exported
    kept = ("PersistentVolume of claim llm/checkpoints", "PersistentVolumeClaim llm/checkpoints")
    assert objects_left_after_deletion(pulumi_env, ["llm"], OBJECT_KINDS + ",serviceaccounts", kept) == list(kept)
    assert kubectl_json(pulumi_env, "get", "namespace", "llm")["status"]["phase"] == "Active"

    run(["kubectl", "delete", "namespace", "llm", "--wait", "--timeout=300s"], REPO, pulumi_env)
    assert objects_left_after_deletion(pulumi_env, ["llm"], OBJECT_KINDS + ",serviceaccounts") == []
