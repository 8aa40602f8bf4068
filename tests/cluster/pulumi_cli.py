"""The real Pulumi CLI and `trainjobs render` driven from a test, on one program: a project in a temp dir whose
runtime is this test run's virtualenv, with this work tree's trainjobs first on the program's path; what each
says a change does to each object, in one shape, so a test compares them."""

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# The engine's start, the program and the provider's calls take a while on a busy machine: generous, so that a
# slow machine alone never fails a test.
TIMEOUT = 900
# What the engine's steps for one object mean, in the render's words (a replacement is several steps).
_REPLACE_OPS = {"replace", "create-replacement", "delete-replaced", "discard-replaced"}
_ENGINE_CHANGES = {"create": "created", "delete": "deleted", "update": "updated in place"}
_RENDER_LINE = re.compile(r"^  [-+~!] (\S+) (\S+): (created|deleted|replaced|updated in place)\b")
# Kinds whose replacement restarts training: what runs the pods.
WORKLOAD_KINDS = ("Job", "JobSet")


def run(args: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


@dataclass
class Project:
    """A Pulumi project in `dir` with one stack, run with `env` (the cluster's, a backend of the test's own)."""

    dir: Path
    env: dict[str, str]
    stack: str

    @classmethod
    def create(cls, dir: Path, cluster_env: dict[str, str], stack: str, name: str, files: dict[str, str | Path],
               main: str | None = None) -> "Project":
        env = dict(cluster_env)
        (dir / "backend").mkdir(parents=True)
        env["PULUMI_BACKEND_URL"] = f"file://{dir / 'backend'}"
        env["PULUMI_HOME"] = str(dir / "pulumi-home")
        env["PYTHONPATH"] = str(REPO / "components")
        work = dir / "project"
        work.mkdir()
        meta = {"name": name, "runtime": {"name": "python", "options": {"virtualenv": sys.prefix}},
                **({"main": main} if main else {})}
        (work / "Pulumi.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        for path, content in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(content.read_text() if isinstance(content, Path) else content)
        project = cls(work, env, stack)
        project.pulumi("stack", "init", stack, "--secrets-provider", "passphrase")
        return project

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run(["pulumi", *args, "--non-interactive"], self.dir, self.env, check)

    def set_config(self, config: dict[str, Any]) -> None:
        """The stack's config in `Pulumi.<stack>.yaml`, which both the CLI and `trainjobs render --stack` read."""
        self.write_stack_file(yaml.safe_dump({"config": config}, sort_keys=False))

    def write_stack_file(self, text: str) -> None:
        """`Pulumi.<stack>.yaml` as `text`, with the encryption salt `stack init` wrote: without it the CLI adds a
        new one and writes the file out again, its values as it read them."""
        path = self.dir / f"Pulumi.{self.stack}.yaml"
        salt = yaml.safe_load(path.read_text())["encryptionsalt"]
        path.write_text(f"{text}encryptionsalt: {salt}\n")

    def up(self, check: bool = True) -> subprocess.CompletedProcess:
        return self.pulumi("up", "--yes", "--skip-preview", check=check)

    def preview(self) -> dict[str, Any]:
        """`pulumi preview --json`: the engine's steps."""
        return json.loads(self.pulumi("preview", "--json").stdout)

    def destroy(self) -> None:
        self.pulumi("destroy", "--yes", "--skip-preview")

    def render(self, program: str, out: Path) -> subprocess.CompletedProcess:
        """`trainjobs render PROGRAM --stack STACK --out OUT` of this work tree, as a user runs it."""
        return run([sys.executable, "-m", "trainjobs.tools.cli", "render", program, "--stack", self.stack,
                    "--out", str(out)], self.dir, self.env)


def engine_changes(preview: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(kind, name) -> created, deleted, replaced or updated in place, for each Kubernetes object the engine's
    preview changes. A child's logical name is its Kubernetes name (trainjobs.pipeline.component)."""
    ops: dict[str, set[str]] = {}
    for step in preview.get("steps", []):
        ops.setdefault(step["urn"], set()).add(step["op"])
    found = {}
    for urn, done in ops.items():
        type_, name = urn.split("::")[-2:]
        type_ = type_.rsplit("$", 1)[-1]
        if not type_.startswith("kubernetes:") or done == {"same"}:
            continue
        kind = type_.rsplit(":", 1)[-1]
        if done & _REPLACE_OPS:
            found[kind, name] = "replaced"
        else:
            (op,) = done
            found[kind, name] = _ENGINE_CHANGES[op]
    return found


def render_changes(printed: str) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """The change list `trainjobs render` prints over a previous render: (kind, name) -> its change, and the
    objects it marks TRAINING RESTARTS."""
    _, found, listed = printed.partition("\nchanges since the previous render in ")
    assert found, printed
    changes, restarts = {}, set()
    for line in listed.splitlines()[1:]:
        match = _RENDER_LINE.match(line)
        if match:
            kind, name, change = match.groups()
            changes[kind, name] = change
            if "TRAINING RESTARTS" in line:
                restarts.add((kind, name))
    return changes, restarts


def kubectl_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    return json.loads(run(["kubectl", *args, "-o", "json"], REPO, env).stdout)


def create_namespace(env: dict[str, str], name: str) -> None:
    run(["kubectl", "create", "namespace", name], REPO, env)


def delete_namespace(env: dict[str, str], name: str) -> None:
    run(["kubectl", "delete", "namespace", name, "--wait", "--timeout=300s", "--ignore-not-found"], REPO, env,
        check=False)
