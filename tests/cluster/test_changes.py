"""The change list `trainjobs render` prints over a previous render is the engine's: for one change of each class,
`pulumi preview` on the real CLI and Kubernetes provider lists exactly the objects created, updated in place,
replaced and deleted that the render lists, and the render marks TRAINING RESTARTS exactly on the Jobs and JobSets
the engine replaces. Then `pulumi up` makes that change in the cluster, replacements included.

One stack per backend holds one job per change class (so one preview and one update cover every class); each
class's objects are those named after its job."""

import subprocess
from typing import Any

import pytest
import yaml

from pulumi_cli import (REPO, WORKLOAD_KINDS, Project, create_namespace, delete_namespace, engine_changes,
                        kubectl_json, render_changes)

IMAGE = "pytorch/pytorch:2.13.0"
CODE_BEFORE = "print('train, first version')\n"
CODE_AFTER = "print('train, second version')\n"
TOLERATION = {"key": "example.com/pool", "operator": "Equal", "effect": "NoSchedule"}
# Each class: its job's arguments before and after the change (the `code` class changes the shipped file instead).
CLASSES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "num_nodes": ({"num_nodes": 2}, {"num_nodes": 3}),
    "image": ({"image": IMAGE}, {"image": "pytorch/pytorch:2.14.0"}),
    "env": ({"env": {"LR": "0.1"}}, {"env": {"LR": "0.2"}}),
    "labels": ({"labels": {"team": "vision"}}, {"labels": {"team": "speech"}}),
    "failure_policy": ({"failure_policy": {"fatal_exit_codes": [2]}}, {"failure_policy": {"fatal_exit_codes": [3]}}),
    "backend": ({}, {}),   # the other backend after: see entries()
    "run": ({"run": "1"}, {"run": "2"}),
    "code": ({"code": {"files": ["train.py"], "mount_path": "/workspace"}},
             {"code": {"files": ["train.py"], "mount_path": "/workspace"}}),
    "profile": ({"profile": {"tolerations": [{**TOLERATION, "value": "a"}]}},
                {"profile": {"tolerations": [{**TOLERATION, "value": "b"}]}}),
    "active_deadline_seconds": ({"active_deadline_seconds": 3600}, {"active_deadline_seconds": 7200}),
}
JOB_NAMES = {change: change.replace("_", "-") for change in CLASSES}
OTHER_BACKEND = {"jobs": "jobset", "jobset": "jobs"}


def entries(backend: str, namespace: str, after: bool) -> list[dict[str, Any]]:
    """The stack's `jobs`: one TorchTrainJob per class, before or after its change."""
    jobs = []
    for change, versions in CLASSES.items():
        entry = {"kind": "TorchTrainJob", "name": JOB_NAMES[change], "namespace": namespace, "image": IMAGE,
                 "num_nodes": 2, "command": ["torchrun", "/workspace/train.py"], "backend": backend,
                 **versions[after]}
        if change == "backend" and after:
            entry["backend"] = OTHER_BACKEND[backend]
            if backend == "jobset":   # the Jobs' names are the JobSet's Jobs' (docs/backends.md): a new run
                entry["run"] = "2"
        jobs.append(entry)
    return jobs


def of_class(change: str, objects: dict[tuple[str, str], Any] | set[tuple[str, str]]) -> Any:
    """The objects (by (kind, name)) of the class's job: those named after it."""
    job = JOB_NAMES[change]
    mine = {key for key in objects if key[1] == job or key[1].startswith(job + "-")}
    return {key: objects[key] for key in mine} if isinstance(objects, dict) else mine


def cluster_objects(env: dict[str, str], namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The namespace's objects of the kinds the stack makes, by (kind, name), but the cluster's own and those a
    controller made (a JobSet's Jobs)."""
    found = {}
    for item in kubectl_json(env, "get", "jobs.batch,services,configmaps,jobsets.jobset.x-k8s.io",
                             "-n", namespace)["items"]:
        if item["metadata"]["name"] != "kube-root-ca.crt" and not item["metadata"].get("ownerReferences"):
            found[item["kind"], item["metadata"]["name"]] = item
    return found


class Outcome:
    """One backend's stack taken through the change: what the render and the engine said, and the cluster
    before and after `pulumi up` made it."""

    render: dict[tuple[str, str], str]
    restarts: set[tuple[str, str]]
    engine: dict[tuple[str, str], str]
    before: dict[tuple[str, str], dict[str, Any]]
    after: dict[tuple[str, str], dict[str, Any]]
    rendered: dict[tuple[str, str], dict[str, Any]]
    up: subprocess.CompletedProcess
    backend: str


@pytest.fixture(scope="module", params=["jobs", "jobset"])
def outcome(request, cluster_env, tmp_path_factory) -> Outcome:
    backend = request.param
    namespace = f"changes-{backend}"
    tmp = tmp_path_factory.mktemp(f"changes-{backend}")
    program = {"stacks/__main__.py": REPO / "stacks" / "__main__.py", "stacks/train.py": CODE_BEFORE}
    project = Project.create(tmp, cluster_env, f"changes-{backend}", "trainjobs-examples", program, main="stacks/")
    out = tmp / "rendered"
    create_namespace(cluster_env, namespace)
    result = Outcome()
    result.backend = backend
    try:
        project.set_config({"trainjobs-examples:jobs": entries(backend, namespace, after=False)})
        project.render("stacks", out)
        project.up()
        result.before = cluster_objects(project.env, namespace)

        project.set_config({"trainjobs-examples:jobs": entries(backend, namespace, after=True)})
        (project.dir / "stacks" / "train.py").write_text(CODE_AFTER)
        result.render, result.restarts = render_changes(project.render("stacks", out).stdout)
        result.engine = engine_changes(project.preview())
        result.up = project.up(check=False)
        result.after = cluster_objects(project.env, namespace)
        result.rendered = {}
        for path in out.glob("*.yaml"):
            obj = yaml.safe_load(path.read_text())
            result.rendered[obj["kind"], obj["metadata"]["name"]] = obj
        yield result
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False)
        delete_namespace(cluster_env, namespace)


@pytest.mark.parametrize("change", CLASSES)
def test_the_engine_lists_what_the_render_lists(outcome, change):
    engine, render = of_class(change, outcome.engine), of_class(change, outcome.render)
    assert engine, f"the change of {change} changes nothing in the engine's preview"
    assert render == engine


@pytest.mark.parametrize("change", CLASSES)
def test_training_restarts_exactly_on_the_replaced_workloads(outcome, change):
    replaced = {key for key, op in of_class(change, outcome.engine).items()
                if op == "replaced" and key[0] in WORKLOAD_KINDS}
    assert of_class(change, outcome.restarts) == replaced


@pytest.mark.parametrize("change", CLASSES)
def test_up_makes_the_change(outcome, change):
    """Created objects exist, deleted ones are gone, replaced ones are new objects, updated ones the same
    objects; and each holds what the render wrote."""
    assert outcome.up.returncode == 0, outcome.up.stdout + outcome.up.stderr
    before, after = of_class(change, outcome.before), of_class(change, outcome.after)
    assert set(after) == set(of_class(change, outcome.rendered))
    for key, op in of_class(change, outcome.engine).items():
        if op == "created":
            assert key in after and key not in before, key
        elif op == "deleted":
            assert key in before and key not in after, key
        else:
            same = before[key]["metadata"]["uid"] == after[key]["metadata"]["uid"]
            assert same == (op == "updated in place"), (key, op)
    for key, obj in of_class(change, outcome.rendered).items():
        live = after[key]
        for field in ("spec", "data"):
            if field in obj and key[0] != "Service":
                assert _subset(obj[field], live[field]), (key, field)
        assert obj["metadata"].get("labels", {}).items() <= live["metadata"].get("labels", {}).items(), key


def _subset(want: Any, have: Any) -> bool:
    """Whether the live value holds every field the render wrote (the API server adds defaults)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_subset, want, have))
    return want == have or str(want) == str(have)
