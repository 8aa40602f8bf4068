"""The example stacks through the real Pulumi CLI and Kubernetes provider on the local control plane: preview, up,
preview --expect-no-changes, destroy; then nothing of the stack is left in the cluster. And a secret config value
reaches the cluster but never the stack's state in plaintext."""

import json
import secrets
import shutil
import subprocess
import sys
import time
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


def objects_left(env: dict[str, str], namespaces: list[str], kinds: str = OBJECT_KINDS) -> list[str]:
    """Every object of these kinds in the stack's namespaces, but the cluster's own; stuck finalizers named."""
    left = []
    for ns in namespaces:
        for item in kubectl_json(env, "get", kinds, "-n", ns)["items"]:
            name = item["metadata"]["name"]
            if name in ("kubernetes", "kube-root-ca.crt"):
                continue
            stuck = item["metadata"].get("finalizers") if item["metadata"].get("deletionTimestamp") else None
            left.append(f"{item['kind']} {ns}/{name}" + (f" (stuck on finalizers {stuck})" if stuck else ""))
    return left


@pytest.fixture
def dev_platform(cluster_env):
    """What the dev stack expects of the cluster's platform: namespace ml and PriorityClass training-high."""
    manifest = """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-high}
value: 1000
"""
    subprocess.run(["kubectl", "apply", "-f", "-"], input=manifest, env=cluster_env, check=True,
                   capture_output=True, text=True)
    yield
    subprocess.run(["kubectl", "delete", "--wait", "--timeout=300s", "-f", "-"], input=manifest, env=cluster_env,
                   capture_output=True, text=True)


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


def preview_up_no_changes_destroy(work: Path, env: dict[str, str]) -> tuple[list[tuple[str, str]], str]:
    """preview, up, preview --expect-no-changes, destroy; the (type, name) of every resource the preview
    creates and the state of the stack after up, as `pulumi stack export` prints it."""
    preview = json.loads(run(["pulumi", "preview", "--json", "--non-interactive"], work, env).stdout)
    created = sorted((urn.split("::")[2].split("$")[-1], urn.split("::")[3])
                     for urn in (step["urn"] for step in preview["steps"] if step["op"] == "create"))
    try:
        run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], work, env)
        exported = run(["pulumi", "stack", "export"], work, env).stdout
        run(["pulumi", "preview", "--expect-no-changes", "--non-interactive", "--diff"], work, env)
    finally:
        run(["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"], work, env)
    state = json.loads(run(["pulumi", "stack", "export"], work, env).stdout)
    assert [r["type"] for r in state["deployment"].get("resources", [])] == []
    return created, exported


def objects_left_after_deletion(env: dict[str, str], namespaces: list[str], kinds: str) -> list[str]:
    """What objects_left finds once deletions under way are done: pulumi does not await a skipAwait Job's
    deletion, whose pods the garbage collector removes first (foregroundDeletion). Polls for up to 5 minutes,
    generous for a busy machine; what is still there then is stuck."""
    for _ in range(150):
        left = objects_left(env, namespaces, kinds)
        if not left:
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
