"""How `pulumi up` awaits a job, on the real CLI and Kubernetes provider: by default it returns once the Jobs are
created; with `wait_for_completion` it returns when they complete, fails with the Job's reason when they fail, and
fails at `wait_timeout_seconds` when they do not finish. kwok plays the pods: it completes them, keeps them running
or fails them as their annotations and labels ask (scripts/engine/cluster.sh)."""

import contextlib
from typing import Any, Iterator

import pytest

from pulumi_cli import REPO, Project, create_namespace, delete_namespace, kubectl_json

# kwok's pod stages: a pod that completes after a delay (a Go duration, its jitter the same), one that runs past
# any test, one that fails.
def completes_after(delay: str) -> dict[str, str]:
    return {"pod-complete.stage.kwok.x-k8s.io/delay": delay, "pod-complete.stage.kwok.x-k8s.io/jitter-delay": delay}


NEVER_COMPLETES = completes_after("3600s")
FAILS = {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}
FAILS_WITH = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code"


@contextlib.contextmanager
def deployed(tmp_path, cluster_env, name: str, backend: str, **args: Any) -> Iterator[tuple[Project, str]]:
    """A stack of the example program with one TorchTrainJob `name` in a namespace of its own; destroyed after."""
    namespace = f"await-{name}"
    project = Project.create(tmp_path, cluster_env, f"await-{name}", "trainjobs-examples",
                             {"stacks/__main__.py": REPO / "stacks" / "__main__.py"}, main="stacks/")
    project.set_config({"trainjobs-examples:jobs": [
        {"kind": "TorchTrainJob", "name": name, "namespace": namespace, "image": "pytorch/pytorch:2.13.0",
         "num_nodes": 2, "command": ["torchrun", "-m", "train"], "backend": backend, **args}]})
    create_namespace(cluster_env, namespace)
    try:
        yield project, namespace
    finally:
        project.pulumi("destroy", "--yes", "--skip-preview", check=False)
        delete_namespace(cluster_env, namespace)


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"}


def test_up_returns_once_the_jobs_are_created(tmp_path, cluster_env):
    with deployed(tmp_path, cluster_env, "created", "jobs", annotations=NEVER_COMPLETES) as (project, namespace):
        project.up()
        job = kubectl_json(project.env, "get", "job", "created-node-0", "-n", namespace)
        assert job["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.metadata.uid}"
        assert not conditions(job).keys() & {"Complete", "Failed"}


def test_up_waits_for_the_jobs_to_complete(tmp_path, cluster_env):
    """The pods complete 20 s after they run: `up` returned after that, as the Job is complete when it returns."""
    with deployed(tmp_path, cluster_env, "waits", "jobs", wait_for_completion=True,
                  annotations=completes_after("20s")) as (project, namespace):
        project.up()
        job = kubectl_json(project.env, "get", "job", "waits-node-0", "-n", namespace)
        assert not {"pulumi.com/skipAwait", "pulumi.com/waitFor"} & job["metadata"]["annotations"].keys()
        assert "Complete" in conditions(job)
        assert job["status"]["succeeded"] == 2


def test_a_failed_job_fails_up_with_its_reason(tmp_path, cluster_env):
    with deployed(tmp_path, cluster_env, "fails", "jobs", wait_for_completion=True, labels=FAILS,
                  annotations={FAILS_WITH: "1"}) as (project, namespace):
        done = project.up(check=False)
        printed = done.stdout + done.stderr
        assert done.returncode != 0, printed
        job = kubectl_json(project.env, "get", "job", "fails-node-0", "-n", namespace)
        failed = conditions(job)["Failed"]
        assert failed["reason"] in printed, printed


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_a_job_that_does_not_finish_fails_up_at_its_timeout(tmp_path, cluster_env, backend):
    """Pods that never complete, so neither does their Job or JobSet."""
    with deployed(tmp_path, cluster_env, f"times-out-{backend}", backend, wait_for_completion=True,
                  wait_timeout_seconds=20, annotations=NEVER_COMPLETES) as (project, namespace):
        done = project.up(check=False)
        printed = done.stdout + done.stderr
        assert done.returncode != 0, printed
        assert "timed out" in printed.lower(), printed


def test_a_jobset_without_wait_returns_once_created(tmp_path, cluster_env):
    """Pods that never complete, so the JobSet never does: `up` returns all the same."""
    with deployed(tmp_path, cluster_env, "jobset-created", "jobset",
                  annotations=NEVER_COMPLETES) as (project, namespace):
        project.up()
        jobset = kubectl_json(project.env, "get", "jobsets.jobset.x-k8s.io", "jobset-created", "-n", namespace)
        assert jobset["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert not conditions(jobset).keys() & {"Completed", "Failed"}
