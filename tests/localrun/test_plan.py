"""What a local run would start, planned from rendered objects: no root needed."""

import sys
from pathlib import Path

import pytest

from trainjobs import TorchTrainJob
from trainjobs.localrun.plan import PlanError, pod_spec, select
from trainjobs.tools.podview import ObjectIndex
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.testing import run, run_program

REPO = Path(__file__).resolve().parents[2]


def objects(*jobs, extra=()):
    def program():
        import pulumi_kubernetes as k8s
        for name, kind, data in extra:
            if kind == "ConfigMap":
                k8s.core.v1.ConfigMap(name, metadata={"name": name}, data=data)
            else:
                k8s.core.v1.Secret(name, metadata={"name": name}, string_data=data)
        for name, args in jobs:
            TorchTrainJob(name, {"num_nodes": 2, "command": ["sh", "-c", "true"], **args})
    return kubernetes_objects(run(program), redact=False)


def test_example_stack_runs_the_cpu_job_and_skips_the_gpu_job():
    rendered = kubernetes_objects(run_program(REPO / "stacks" / "__main__.py"), redact=False)
    selection = select(rendered)
    assert [j.name for j in selection.jobs] == ["mnist-ddp-node-0"]
    assert selection.skipped == [("llama-finetune-node-0", "needs nvidia.com/gpu: 8, which this machine does not offer")]
    with pytest.raises(PlanError, match="cannot run llama-finetune-node-0 here: needs nvidia.com/gpu: 8"):
        select(rendered, ["llama-finetune"])


def test_a_job_claiming_gpus_through_dra_is_not_runnable_here():
    rendered = objects(("cpu", {}), ("dra", {"devices_per_node": [{"count": 8}]}))
    selection = select(rendered)
    assert [j.name for j in selection.jobs] == ["cpu-node-0"]
    assert selection.skipped == [("dra-node-0", "needs nvidia.com/gpu: 8 (claimed through Dynamic Resource "
                                                "Allocation), which this machine does not offer")]
    # A claim whose devices the rendering cannot tell (its template is not among the objects) blocks it too.
    alone = [o for o in rendered if o["kind"] != "ResourceClaimTemplate"]
    with pytest.raises(PlanError, match="cannot run dra-node-0 here: needs resource claim devices: a DRA driver's "
                                        "devices, which this machine does not offer"):
        select(alone, ["dra"])


def test_jobs_are_named_by_job_or_training_job():
    rendered = objects(("a", {}), ("b", {}))
    assert [j.name for j in select(rendered, ["a"]).jobs] == ["a-node-0"]
    assert [j.name for j in select(rendered, ["b-node-0"]).jobs] == ["b-node-0"]
    with pytest.raises(PlanError, match='no Job or training job "c"; Jobs: a-node-0, b-node-0'):
        select(rendered, ["c"])


def test_pod_spec_resolves_env_command_and_volume_files():
    rendered = objects(("a", {
        "command": ["sh", "-c", "echo $(GREETING) $(PET_NODE_RANK)"],
        "env": {"GREETING": "hi"},
        "volumes": [{"name": "code", "configMap": {"name": "code", "defaultMode": 0o555}},
                    {"name": "key", "secret": {"secretName": "key", "items": [{"key": "k", "path": "id", "mode": 0o600}]}}],
        "volume_mounts": [{"name": "code", "mountPath": "/code"}, {"name": "key", "mountPath": "/root/.ssh"}],
    }), extra=[("code", "ConfigMap", {"run.sh": "echo"}), ("key", "Secret", {"k": "secret"})])
    job = select(rendered).jobs[0]
    slot = job.slots[1]
    slot.ip = "10.1.2.3"
    spec = pod_spec(job, slot, ObjectIndex(rendered), suffix="abcde")
    assert spec.name == "a-node-0-1-abcde"
    main = spec.containers[0]
    assert main.argv == ("sh", "-c", "echo hi 1")
    assert main.env["PET_NODE_RANK"] == main.env["JOB_COMPLETION_INDEX"] == "1"
    assert main.env["HOSTNAME"] == "a-node-0-1" and main.env["HOME"]
    assert main.env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert spec.volumes["code"].files == {"run.sh": (b"echo", 0o555)}
    assert spec.volumes["key"].files == {"id": (b"secret", 0o600)}
    assert spec.volumes["dshm"].kind == "emptyDir" and spec.volumes["dshm"].size_limit == 2**30
    # ConfigMap and Secret volumes are read-only, as in Kubernetes.
    assert {m.path: m.read_only for m in spec.mounts} == {"/code": True, "/root/.ssh": True, "/dev/shm": False}


def test_problems_are_reported_before_anything_runs():
    missing = objects(("a", {"volumes": [{"name": "c", "configMap": {"name": "nope"}}],
                             "volume_mounts": [{"name": "c", "mountPath": "/c"}]}))
    with pytest.raises(PlanError, match='volume "c": ConfigMap "nope" is not in the rendering'):
        select(missing)
    optional = objects(("a", {"volumes": [{"name": "c", "configMap": {"name": "nope", "optional": True}}],
                              "volume_mounts": [{"name": "c", "mountPath": "/c"}]}))
    assert select(optional).jobs
    pvc = objects(("a", {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
                         "volume_mounts": [{"name": "d", "mountPath": "/d"}]}))
    with pytest.raises(PlanError, match='volume "d" uses PersistentVolumeClaim "data", which is not in the rendering'):
        select(pvc)
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {}}
    job = select(pvc + [claim]).jobs[0]
    assert pod_spec(job, job.slots[0], ObjectIndex(pvc + [claim]), "x").volumes["d"].path == "default/data"
    nfs = objects(("a", {"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}],
                         "volume_mounts": [{"name": "n", "mountPath": "/n"}]}))
    with pytest.raises(PlanError, match='volume "n" is a nfs volume; a local run emulates configMap'):
        select(nfs)
    no_command = objects(("a", {"command": None, "args": ["x"]}))
    with pytest.raises(PlanError, match="has no command"):
        select(no_command)


def test_pods_get_dns_names_only_through_a_headless_service_that_selects_them():
    rendered = objects(("a", {}))
    job = select(rendered).jobs[0]
    assert [s.dns_names()[0] for s in job.slots] == ["a-node-0-0.a", "a-node-0-1.a"]
    without_service = [o for o in rendered if o["kind"] != "Service"]
    selection = select(without_service)
    assert not any(s.published for s in selection.jobs[0].slots)
    assert selection.warnings == ['pods of Job a-node-0 get no DNS name a-node-0-0.a: there is no Service "a" '
                                  "in namespace default"]


def test_volume_files_keep_binary_content_and_modes():
    from trainjobs.tools.podview import volume_files
    index = ObjectIndex([
        {"kind": "Secret", "metadata": {"name": "s"}, "data": {"blob": "AP8Q"}, "stringData": {"text": "t"}},
        {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AAE="}},
    ])
    assert volume_files({"name": "v", "secret": {"secretName": "s", "defaultMode": 0o400}}, index) == {
        "blob": (b"\x00\xff\x10", 0o400), "text": (b"t", 0o400)}
    assert volume_files({"name": "v", "configMap": {"name": "c"}}, index) == {"a": (b"1", 0o644), "b": (b"\x00\x01", 0o644)}
    assert volume_files({"name": "v", "emptyDir": {}}, index) is None


def test_security_context_sets_the_user_groups_and_home_and_fs_group_owns_the_volumes():
    import os
    import pwd

    account = next((a for a in pwd.getpwall() if a.pw_uid >= 1000 and os.path.isdir(a.pw_dir)), None)
    if account is None:
        pytest.skip("no unprivileged account with a home directory on this machine")
    found = objects(("secure", {"security_context": {"runAsUser": account.pw_uid, "runAsGroup": 4242,
                                                     "fsGroup": 4343, "supplementalGroups": [4444]},
                                "env": {"A": "1"}}))
    selection = select(found)
    job = selection.jobs[0]
    spec = pod_spec(job, job.slots[0], ObjectIndex(found), suffix="abcde")
    node = next(c for c in spec.containers if c.kind == "main")
    assert (node.user.uid, node.user.gid) == (account.pw_uid, 4242)
    assert node.user.groups[:2] == (4343, 4444)
    assert node.env["HOME"] == account.pw_dir
    assert spec.fs_group == 4343
    plain = objects(("plain", {}))
    job = select(plain).jobs[0]
    root = pod_spec(job, job.slots[0], ObjectIndex(plain), suffix="abcde")
    assert all(c.user is None for c in root.containers) and root.fs_group is None


def fake_mpirun(directory: Path, version: str) -> Path:
    """An `mpirun` that answers `--version` as an implementation's does (its first line)."""
    directory.mkdir()
    program = directory / "mpirun"
    program.write_text(f"#!/bin/sh\necho '{version}'\n")
    program.chmod(0o755)
    return program


@pytest.mark.parametrize("implementation, wanted", [("IntelMPI", "Intel MPI"), ("MPICH", "MPICH")])
def test_a_launcher_for_another_mpi_than_this_machines_mpirun_is_named(tmp_path, implementation, wanted):
    open_mpi = fake_mpirun(tmp_path / "ompi", "mpirun (Open MPI) 4.1.4")
    intel = fake_mpirun(tmp_path / "impi", "Intel(R) MPI Library for Linux* OS, Version 2021.18.1")

    def rendered(path: Path) -> list[dict]:
        from trainjobs import MpiTrainJob
        return kubernetes_objects(run(lambda: MpiTrainJob("pi", {
            "num_nodes": 2, "namespace": "hpc", "mpi_implementation": implementation, "image": "mpi:1",
            "command": ["mpirun", "hostname"],
            "env": [{"name": "PATH", "value": f"{path.parent}:/usr/bin:/bin"}]})), redact=False)

    [warning] = [w for w in select(rendered(open_mpi)).warnings if "set up for" in w]
    assert warning == (f"Job pi-launcher-0 is set up for {wanted} (its launcher's env), but mpirun here is Open MPI's "
                       f"({open_mpi}), which reads none of that env: put {wanted}'s bin directory first on PATH to run "
                       "it as the cluster would")
    matching = [w for w in select(rendered(intel)).warnings if "set up for" in w]
    assert matching == ([] if implementation == "IntelMPI" else [warning.replace(f"Open MPI's ({open_mpi})",
                                                                              f"Intel MPI's ({intel})")])


def test_a_jobset_without_the_jobs_service_is_published_by_the_service_its_controller_makes():
    """A MultiKueue job registers the JobSet alone: the JobSet controller creates the headless Service."""
    rendered = kubernetes_objects(run(lambda: TorchTrainJob("mk", {
        "image": "t:1", "num_nodes": 2, "command": ["python", "train.py"], "backend": "jobset", "multikueue": True,
        "queue": "team-llm"})), redact=False)
    assert [o["kind"] for o in rendered] == ["JobSet"]
    selection = select(rendered)
    assert selection.warnings == []
    assert [s.dns_names()[0] for s in selection.jobs[0].slots] == ["mk-node-0-0.mk", "mk-node-0-1.mk"]
    assert all(s.published for s in selection.jobs[0].slots)
