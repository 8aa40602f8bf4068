"""The YAML program (stacks/yaml/Pulumi.yaml) through the component provider, on the real CLI, its YAML language
host and the project's Python host running provider/ as a source-based plugin: preview, up, preview
--expect-no-changes, destroy; then nothing of the stack is left but what it keeps by design."""

import base64
import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from pulumi_cli import REPO, kubectl_json, run
from test_stacks import objects_left_after_deletion, pulumi_env  # noqa: F401 (a fixture)

KEY = REPO / "tests" / "mpi_keys" / "ed25519"
# What the preview creates: the components and their Kubernetes objects (type, name).
CREATED = sorted([
    ("trainjobs:index:TrainingNamespace", "team"), ("kubernetes:core/v1:Namespace", "llm"),
    ("kubernetes:core/v1:ServiceAccount", "trainer"), ("kubernetes:core/v1:PersistentVolumeClaim", "checkpoints"),
    ("trainjobs:index:TorchTrainJob", "pretrain"), ("kubernetes:core/v1:Service", "pretrain"),
    ("kubernetes:batch/v1:Job", "pretrain-node-0"),
    ("trainjobs:index:MpiTrainJob", "allreduce"), ("kubernetes:core/v1:Service", "allreduce"),
    ("kubernetes:core/v1:ConfigMap", "allreduce-mpi-hostfile"), ("kubernetes:core/v1:Secret", "allreduce-mpi-ssh-auth"),
    ("kubernetes:batch/v1:Job", "allreduce-launcher-0"), ("kubernetes:batch/v1:Job", "allreduce-node-0"),
])


def yaml_project(dest: Path) -> Path:
    """stacks/yaml and the provider beside it, as in the repository (the program names `../../provider`), the
    provider run with the Python of this test run's virtualenv."""
    shutil.copytree(REPO / "stacks" / "yaml", dest / "stacks" / "yaml")
    shutil.copytree(REPO / "provider", dest / "provider", ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    plugin = dest / "provider" / "PulumiPlugin.yaml"
    meta = yaml.safe_load(plugin.read_text())
    meta["runtime"]["options"]["virtualenv"] = sys.prefix
    plugin.write_text(yaml.safe_dump(meta, sort_keys=False))
    return dest / "stacks" / "yaml"


def test_yaml_program_through_the_component_provider_preview_up_no_changes_destroy(
        pulumi_env, tmp_path):
    work = yaml_project(tmp_path / "repo")
    token = f"hf_{secrets.token_hex(16)}"
    key = KEY.read_text()
    key_body = key.splitlines()[1]
    run(["pulumi", "stack", "init", "dev", "--secrets-provider", "passphrase", "--non-interactive"], work, pulumi_env)
    run(["pulumi", "config", "set", "--secret", "hfToken", token], work, pulumi_env)
    subprocess.run(["pulumi", "config", "set", "--secret", "mpiSshKey"], input=key, cwd=work, env=pulumi_env,
                   check=True, capture_output=True, text=True)

    preview = json.loads(run(["pulumi", "preview", "--json", "--non-interactive"], work, pulumi_env).stdout)
    created = sorted((urn.split("::")[2].split("$")[-1], urn.split("::")[3])
                     for urn in (step["urn"] for step in preview["steps"] if step["op"] == "create"))
    assert created == sorted([("pulumi:pulumi:Stack", "trainjobs-yaml-dev"), *CREATED])
    try:
        run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
        outputs = json.loads(run(["pulumi", "stack", "output", "--json"], work, pulumi_env).stdout)
        assert outputs == {"masterAddr": "pretrain-node-0-0.pretrain",
                           "hosts": ["allreduce-node-0-0.allreduce", "allreduce-node-0-1.allreduce"]}
        for job in ("pretrain-node-0", "allreduce-launcher-0", "allreduce-node-0"):
            run(["kubectl", "wait", "--for=condition=Complete", "--timeout=300s", f"job/{job}", "-n", "llm"], REPO,
                pulumi_env)
        pretrain = kubectl_json(pulumi_env, "get", "job", "pretrain-node-0", "-n", "llm")
        pod = pretrain["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert (env["HF_TOKEN"], env["PET_NNODES"], env["PET_MASTER_ADDR"]) == (
            token, "2", "pretrain-node-0-0.pretrain")
        assert (pod["serviceAccountName"], pretrain["metadata"]["labels"]["team"]) == ("trainer", "llm")
        auth = kubectl_json(pulumi_env, "get", "secret", "allreduce-mpi-ssh-auth", "-n", "llm")
        assert base64.b64decode(auth["data"]["ssh-privatekey"]).decode() == key
        claim = kubectl_json(pulumi_env, "get", "pvc", "checkpoints", "-n", "llm")
        assert claim["spec"]["resources"]["requests"]["storage"] == "2Ti"

        exported = run(["pulumi", "stack", "export"], work, pulumi_env).stdout
        assert token not in exported and key_body not in exported
        run(["pulumi", "preview", "--expect-no-changes", "--non-interactive", "--diff"], work, pulumi_env)
    finally:
        run(["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"], work, pulumi_env)
        try:
            state = json.loads(run(["pulumi", "stack", "export"], work, pulumi_env).stdout)
            assert [r["type"] for r in state["deployment"].get("resources", [])] == []
            # The kept claim keeps its volume.
            kept = ("PersistentVolume of claim llm/checkpoints",)
            assert objects_left_after_deletion(pulumi_env, ["llm"], "jobs,pods,services,configmaps,secrets",
                                               kept) == list(kept)
            accounts = kubectl_json(pulumi_env, "get", "serviceaccounts", "-n", "llm")["items"]
            assert [a["metadata"]["name"] for a in accounts] == ["default"]
            # The team's Namespace and claim outlive the stack (TrainingNamespace's retain_data), unstuck: the
            # claim holds only the finalizer that protects it while a pod uses it.
            assert kubectl_json(pulumi_env, "get", "namespace", "llm")["status"]["phase"] == "Active"
            claim = kubectl_json(pulumi_env, "get", "pvc", "checkpoints", "-n", "llm")["metadata"]
            assert claim["labels"] == {"app.kubernetes.io/managed-by": "trainjobs"}
            assert (claim.get("deletionTimestamp"), claim["finalizers"]) == (None, ["kubernetes.io/pvc-protection"])
        finally:
            # Deleting them by hand (as a team does when its data may go) finishes: nothing holds them.
            run(["kubectl", "delete", "namespace", "llm", "--wait", "--timeout=300s", "--ignore-not-found"], REPO,
                pulumi_env)
    backend = Path(pulumi_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    assert [p for p in backend.rglob("*") if p.is_file() and token in p.read_text(errors="replace")] == []
    assert run(["kubectl", "get", "namespace", "llm", "--ignore-not-found"], REPO, pulumi_env).stdout == ""
    assert objects_left_after_deletion(pulumi_env, ["llm"], "jobs", ()) == []  # the volume went with its claim
