"""What pods get of the images they name: known images' files and users, stand-ins, sshd's directory."""

from pathlib import Path

import pytest

from trainjobs.localrun import images
from trainjobs.localrun.plan import PlanError, pod_spec, select
from trainjobs.tools.podview import ObjectIndex
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.testing import run_program

REPO = Path(__file__).resolve().parents[2]


def hpc_pods(monkeypatch, tmp_path):
    """The hpc example's pods, with this machine's account files replaced by small known ones."""
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\nother:x:1000:1000::/home/other:/bin/sh\n"
                      "mpiuser:x:1001:1001::/home/mpiuser:/bin/bash\n")
    group.write_text("root:x:0:\nother:x:1000:\nmpiuser:x:1001:\n")
    monkeypatch.setattr(images, "PASSWD", str(passwd))
    monkeypatch.setattr(images, "GROUP", str(group))
    rendered = kubernetes_objects(run_program(REPO / "stacks" / "__main__.py", stack="hpc"), redact=False)
    selection = select(rendered)
    index = ObjectIndex(rendered)
    return selection, {job.name: pod_spec(job, job.slots[0], index, suffix="abcde") for job in selection.jobs}


def test_image_references_name_a_repository_and_tag():
    assert images.repository("mpioperator/mpi-pi:openmpi") == ("mpioperator/mpi-pi", "openmpi")
    assert images.repository("docker.io/library/python:3.11") == ("python", "3.11")
    assert images.repository("localhost:5000/team/img") == ("localhost:5000/team/img", "")
    assert images.repository("ghcr.io/kubeflow/trainer/mlx-runtime@sha256:00ff") == (
        "ghcr.io/kubeflow/trainer/mlx-runtime", "")
    assert images.known("index.docker.io/mpioperator/openmpi:v0.8.0") is images.MPI_OPERATOR
    assert images.known("mpioperator/mpi-pi:openmpi") is images.MPI_PI
    assert images.known("mpioperator/mpi-pi:mpich") is images.MPI_OPERATOR  # no stand-in for its program
    assert images.known("pytorch/pytorch:2.13.0") is None
    assert images.known(object()) is None  # not plain data: unknown, never a crash


def test_the_mpi_pi_image_gives_its_layout_users_and_a_stand_in_for_its_program(monkeypatch, tmp_path):
    selection, pods = hpc_pods(monkeypatch, tmp_path)
    assert selection.images == [
        "image mpioperator/mpi-pi:openmpi (Jobs pi-launcher-0, pi-node-0): mpi-operator's base image: /run/sshd, "
        "ssh and sshd on port 2222 without host key checks, user mpiuser (1000) with ~/.sshd_config",
        "  /home/mpiuser/pi: the image's compiled MPI program (Monte Carlo pi) is replaced by trainjobs' stand-in: "
        "the same computation and output in Python over mpi4py"]
    layer = pods["pi-launcher-0"].image
    entries = {e.path: e for e in layer.entries}
    assert list(entries) == ["/run/sshd", "/etc/ssh/ssh_config", "/etc/ssh/sshd_config", "/home/mpiuser",
                             "/home/mpiuser/.sshd_config", "/home/mpiuser/pi", "/etc/passwd", "/etc/group"]
    assert (entries["/run/sshd"].content, entries["/run/sshd"].mode) == (None, 0o755)
    assert (entries["/home/mpiuser"].mode, entries["/home/mpiuser"].uid, entries["/home/mpiuser"].gid) == (
        0o755, 1000, 1000)
    assert entries["/home/mpiuser/.sshd_config"].content == (
        b"PidFile /home/mpiuser/sshd.pid\nHostKey /home/mpiuser/.ssh/id_rsa\nStrictModes no\nPort 2222\n")
    assert b"\nPort 2222\nStrictModes no\n" in entries["/etc/ssh/sshd_config"].content
    assert b"    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    Port 2222\n" in (
        entries["/etc/ssh/ssh_config"].content)
    pi = entries["/home/mpiuser/pi"]
    assert pi.content.startswith(b"#!/usr/bin/python3\n") and b"from mpi4py import MPI" in pi.content
    assert (pi.mode, pi.uid) == (0o755, 0)
    # The image's mpiuser takes uid 1000 and the name over this machine's accounts.
    assert entries["/etc/passwd"].content == (b"root:x:0:0:root:/root:/bin/bash\n"
                                              b"mpiuser:x:1000:1000::/home/mpiuser:/bin/sh\n")
    assert entries["/etc/group"].content == b"root:x:0:\nmpiuser:x:1000:\n"
    assert pods["pi-node-0"].image.entries == layer.entries
    # The example runs as root: HOME is root's.
    launcher = next(c for c in pods["pi-launcher-0"].containers if c.kind == "main")
    assert launcher.user is None and launcher.env["HOME"] != "/home/mpiuser"


def test_a_missing_stand_in_requirement_is_reported_before_anything_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(images.StandIn, "missing", lambda self: True)
    with pytest.raises(PlanError, match=r"Job pi-launcher-0 runs /home/mpiuser/pi: .* which needs "
                                        r"/usr/lib/python3/dist-packages/mpi4py/__init__.py \(Debian package "
                                        r"python3-mpi4py\): apt-get install python3-mpi4py"):
        hpc_pods(monkeypatch, tmp_path)


def test_kubeflow_runtime_images_run_as_their_mpiuser_without_a_privilege_directory(monkeypatch, tmp_path):
    from trainjobs import DeepSpeedTrainJob
    from trainjobs.testing import run

    monkeypatch.setattr(images, "PASSWD", str(tmp_path / "none"))
    monkeypatch.setattr(images, "GROUP", str(tmp_path / "none"))
    rendered = kubernetes_objects(run(lambda: DeepSpeedTrainJob("ds", {"num_nodes": 2, "command": ["mpirun", "x"]})),
                                  redact=False)
    job = next(j for j in select(rendered).jobs if j.name == "ds-node-0")
    spec = pod_spec(job, job.slots[0], ObjectIndex(rendered), suffix="abcde")
    sshd = next(c for c in spec.containers if c.kind == "main")
    assert (sshd.user.uid, sshd.user.gid, sshd.user.groups) == (1000, 1000, ())
    assert sshd.env["HOME"] == "/home/mpiuser"
    paths = [e.path for e in spec.image.entries]
    assert images.PRIVSEP_DIR not in paths  # their sshd runs as mpiuser, which needs none
    assert paths == ["/etc/ssh/ssh_config", "/etc/ssh/sshd_config", "/home/mpiuser", "/home/mpiuser/.sshd_config",
                     "/home/mpiuser/.cache", "/home/mpiuser/.local", "/etc/passwd", "/etc/group"]
    assert spec.image.entries[-2].content == b"mpiuser:x:1000:1000::/home/mpiuser:/bin/sh\n"


def test_an_unknown_image_gets_sshds_directory_only_when_its_pod_runs_sshd():
    sshd = images.layer(["registry.example/mine:1"], [("/bin/sh", "-c", "exec /usr/sbin/sshd -De")])
    assert [(e.path, e.content, e.mode) for e in sshd.entries] == [("/run/sshd", None, 0o755)]
    assert not sshd.users and not sshd.env and not sshd.stand_ins
    assert images.layer(["registry.example/mine:1"], [("python", "train.py")]).entries == []


def test_the_hpc_examples_mpi_operator_pods_are_probed_and_reached_on_the_port_their_sshd_listens_on():
    """A readiness probe on another port would keep the workers unready on a cluster, and the launcher,
    which waits for them, would never start."""
    objects = {o["metadata"]["name"]: o for o in kubernetes_objects(run_program(REPO / "stacks" / "__main__.py",
                                                                                  stack="hpc"), redact=False)}
    node = objects["pi-node-0"]["spec"]["template"]["spec"]["containers"][0]
    assert images.known(node["image"]) is images.MPI_PI
    assert node["readinessProbe"]["tcpSocket"]["port"] == node["ports"][0]["containerPort"] == images.SSH_PORT
    launcher_env = {e["name"]: e.get("value") for e in
                    objects["pi-launcher-0"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert launcher_env["OMPI_MCA_plm_rsh_args"].endswith(f" -p {images.SSH_PORT}")
