"""MPI family: objects, counts, hostfiles, launcher env, SSH material and validation."""

import pytest

from trainjobs import (DeepSpeedTrainJob, MlxTrainJob, MpiRuntime, MpiTrainJob, PodTemplate, TrainJobError)
from trainjobs.testing import attempt, run

SSH = ("-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
       "-o LogLevel=ERROR -i /root/.ssh/id_rsa")
BASE = {"image": "mpi:1", "command": ["mpirun", "python", "/app/hello.py"]}


def mpi(args, cls=MpiTrainJob, name="pi"):
    return run(lambda: cls(name, {**BASE, **args}))


def hostfile(result, name="pi"):
    return result.get("ConfigMap", f"{name}-mpi-hostfile").manifest["data"]["hostfile"]


def pod_spec(result, job):
    return result.get("Job", job).manifest["spec"]["template"]["spec"]


def env(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("num_nodes, launcher_is_node, node_pods, hosts", [
    (1, False, 1, ["pi-node-0-0.pi"]),
    (3, False, 3, ["pi-node-0-0.pi", "pi-node-0-1.pi", "pi-node-0-2.pi"]),
    (1, True, 0, ["pi-launcher-0-0.pi"]),
    (2, True, 1, ["pi-node-0-0.pi", "pi-launcher-0-0.pi"]),
    (4, True, 3, ["pi-node-0-0.pi", "pi-node-0-1.pi", "pi-node-0-2.pi", "pi-launcher-0-0.pi"]),
])
def test_host_counts_and_order(num_nodes, launcher_is_node, node_pods, hosts):
    result = mpi({"num_nodes": num_nodes, "run_launcher_as_node": launcher_is_node})
    assert hostfile(result) == "".join(f"{h} slots=1\n" for h in hosts)
    jobs = {r.name: r.manifest["spec"] for r in result.find(kind="Job")}
    assert jobs["pi-launcher-0"]["completions"] == jobs["pi-launcher-0"]["parallelism"] == 1
    if node_pods:
        assert jobs["pi-node-0"]["completions"] == jobs["pi-node-0"]["parallelism"] == node_pods
    else:
        assert "pi-node-0" not in jobs
    assert sorted(r.kind + "/" + r.name for r in result.kubernetes()) == sorted([
        "Service/pi", "Secret/pi-mpi-ssh-auth", "ConfigMap/pi-mpi-hostfile", "Job/pi-launcher-0"] + (
        ["Job/pi-node-0"] if node_pods else []))


@pytest.mark.parametrize("implementation, line", [
    ("OpenMPI", "pi-node-0-0.pi slots=4\n"), ("IntelMPI", "pi-node-0-0.pi:4\n"), ("MPICH", "pi-node-0-0.pi:4\n")])
def test_hostfile_format_per_implementation(implementation, line):
    result = mpi({"mpi_implementation": implementation, "num_proc_per_node": 4, "namespace": "hpc"})
    assert hostfile(result) == line


def test_slots_default_to_gpu_count_when_one():
    result = mpi({"num_nodes": 2, "resources_per_node": {"limits": {"nvidia.com/gpu": 4}}})
    assert hostfile(result) == "pi-node-0-0.pi slots=4\npi-node-0-1.pi slots=4\n"
    result = mpi({"num_nodes": 2, "num_proc_per_node": 1, "resources_per_node": {"limits": {"nvidia.com/gpu": 4}}})
    assert hostfile(result) == "pi-node-0-0.pi slots=1\npi-node-0-1.pi slots=1\n"



@pytest.mark.parametrize("gpus, slots", [(4, 4), (0, 1)])
def test_auto_slots_are_derived_as_when_unset(gpus, slots):
    """"auto", as a torch job takes it: the GPU count where a node has several, else the runtime's 1."""
    resources = {"resources_per_node": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
    auto = mpi({"num_nodes": 2, "num_proc_per_node": "auto", **resources})
    assert hostfile(auto) == hostfile(mpi({"num_nodes": 2, **resources})) == (
        f"pi-node-0-0.pi slots={slots}\npi-node-0-1.pi slots={slots}\n")


def test_openmpi_launcher_env_has_orte_and_prrte_names():
    result = mpi({"num_nodes": 2, "num_proc_per_node": 2, "env": {"OMP_NUM_THREADS": "1"}})
    launcher = pod_spec(result, "pi-launcher-0")["containers"][0]
    assert list(env(launcher).items()) == [
        ("OMP_NUM_THREADS", "1"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_set_default_slots", "2"),
        ("OMPI_MCA_plm_rsh_args", SSH),
        ("PRTE_MCA_prte_default_hostfile", "/etc/mpi/hostfile"),
        # false: with true, PRRTE does not see the launcher's own hostfile line as itself and ssh's to it.
        ("PRTE_MCA_prte_keep_fqdn_hostnames", "false"),
        ("PRTE_MCA_prte_set_default_slots", "2"),
        ("PRTE_MCA_plm_ssh_args", SSH),
        ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        # Ranks started over ssh get sshd's env; OpenMPI 4 and 5 forward these names from mpirun's.
        ("OMPI_MCA_mca_base_env_list", "OMP_NUM_THREADS;PATH"),
    ]
    worker = pod_spec(result, "pi-node-0")["containers"][0]
    assert env(worker) == {"OMP_NUM_THREADS": "1"}   # no MPI env on workers


def launcher_env_list(result, name="pi"):
    return env(pod_spec(result, f"{name}-launcher-0")["containers"][0]).get("OMPI_MCA_mca_base_env_list")


def test_openmpi_forwards_the_job_env_and_path_to_every_rank():
    """`NAME` forwards mpirun's value. OpenMPI cuts a forwarded value at its first `=` (the part before
    becoming the name), so a value with one goes whole as `NAME=$(NAME)`, which the kubelet expands;
    one with `;` too cannot be carried by the `;`-separated list."""
    result = mpi({"num_nodes": 2, "runtime": MpiRuntime(name="r", launcher=PodTemplate(env={"FROM_RUNTIME": "r"})),
                  "env": {"PYTHONPATH": "/app", "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
                          "NCCL_SOCKET_IFNAME": "eth0;eth1", "BOTH": "a=b;c", "LD_LIBRARY_PATH": "/opt/lib"}})
    assert launcher_env_list(result) == ("FROM_RUNTIME;PYTHONPATH;XLA_FLAGS=$(XLA_FLAGS);NCCL_SOCKET_IFNAME;"
                                         "LD_LIBRARY_PATH;PATH")
    # The job's PATH is forwarded where it stands; without one, the container's (image or default) is.
    assert launcher_env_list(mpi({"env": {"A": "1", "PATH": "/venv/bin:/usr/bin", "B": "2"}})) == "A;PATH;B"
    assert launcher_env_list(mpi({})) == "PATH"


def test_forwarded_references_and_what_is_left_out():
    """Secret and ConfigMap keys are the same on every pod and may hold `=`: forwarded as
    `NAME=$(NAME)`. Left out: optional keys (maybe unset: OpenMPI 5's mpirun fails on a listed
    name that is not set), per-pod values (every rank would get the launcher's)."""
    result = mpi({"env": [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
        {"name": "SETTINGS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "settings"}}},
        {"name": "MAYBE", "valueFrom": {"secretKeyRef": {"name": "s", "key": "other", "optional": True}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "PLAIN", "value": ""}]})
    assert launcher_env_list(result) == "TOKEN=$(TOKEN);SETTINGS=$(SETTINGS);PLAIN;PATH"
    # The kubelet expands $(NAME) from the variables before it: the list comes after the job's env.
    names = [e["name"] for e in pod_spec(result, "pi-launcher-0")["containers"][0]["env"]]
    assert names.index("OMPI_MCA_mca_base_env_list") > names.index("SETTINGS")


@pytest.mark.parametrize("command", [
    ["mpirun", "-x", "NCCL_DEBUG=INFO", "python", "train.py"],
    ["/bin/bash", "-c", "mpirun -np 4 --x LD_LIBRARY_PATH python train.py"],
    ["deepspeed", "--hostfile", "/etc/mpi/hostfile", "--launcher", "openmpi", "train.py"],
])
def test_a_command_that_forwards_with_x_gets_no_list(command):
    """OpenMPI 4 aborts when given both `-x` and mca_base_env_list ("Open MPI does not support mixing
    these two methods"): a command passing `-x` (DeepSpeed's OpenMPI launcher does) forwards alone."""
    result = mpi({"command": command, "env": {"A": "1"}})
    assert launcher_env_list(result) is None
    assert "OMPI_MCA_plm_rsh_args" in env(pod_spec(result, "pi-launcher-0")["containers"][0])


@pytest.mark.parametrize("command", [
    ["/bin/sh", "-c", "set -x; mpirun python train.py"],
    ["mpirun", "python", "train.py"],
    ["deepspeed", "train.py"],
])
def test_x_elsewhere_keeps_the_list(command):
    assert launcher_env_list(mpi({"command": command, "env": {"A": "1"}})) == "A;PATH"


def test_hydra_forwards_env_itself():
    for implementation in ("IntelMPI", "MPICH"):
        result = mpi({"mpi_implementation": implementation, "namespace": "hpc", "env": {"A": "1"}})
        assert launcher_env_list(result) is None


def test_a_forwarded_list_over_the_linux_limit_is_rejected():
    """Linux refuses to exec with one env string over 128 KiB (the container would not start)."""
    big = "--flag=" + "x" * 131_072
    with pytest.raises(TrainJobError, match=r"env: OMPI_MCA_mca_base_env_list \(the job's env forwarded to every "
                                            r"rank, values with `=` in full\) would be 131115 bytes, over the 131071"):
        mpi({"env": {"BIG": big}})
    assert launcher_env_list(mpi({"env": {"BIG": "x" * 131_000}})) == "BIG;PATH"   # by name: short


def test_intel_and_mpich_launcher_env():
    intel = pod_spec(mpi({"mpi_implementation": "IntelMPI", "num_proc_per_node": 3, "namespace": "hpc"}), "pi-launcher-0")
    assert env(intel["containers"][0]) == {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                                           "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": SSH, "I_MPI_PERHOST": "3"}
    mpich = pod_spec(mpi({"mpi_implementation": "MPICH", "namespace": "hpc"}), "pi-launcher-0")
    assert env(mpich["containers"][0]) == {"HYDRA_HOST_FILE": "/etc/mpi/hostfile", "HYDRA_LAUNCHER_EXTRA_ARGS": SSH}
    assert mpich["dnsConfig"] == {"searches": ["pi.hpc.svc.cluster.local"]}


@pytest.mark.parametrize("implementation, names", [
    ("OpenMPI", "OMPI_MCA_plm_rsh_args PRTE_MCA_plm_ssh_args"), ("IntelMPI", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"),
    ("MPICH", "HYDRA_LAUNCHER_EXTRA_ARGS")])
def test_the_launcher_script_is_told_which_env_carries_mpiruns_ssh_options(implementation, names):
    launcher = pod_spec(mpi({"mpi_implementation": implementation, "namespace": "hpc"}), "pi-launcher-0")["containers"][0]
    assert launcher["command"][4:] == ["/var/run/trainjobs", SSH, "/etc/mpi/hostfile", "pi-launcher-0-0"
                                       + (".pi" if implementation == "OpenMPI" else ""), names, *BASE["command"]]
    assert all(env(launcher)[name] == SSH for name in names.split())


@pytest.mark.parametrize("implementation", ["IntelMPI", "MPICH"])
def test_hydra_names_the_launcher_as_its_hostname_does(implementation):
    """Hydra forks its proxy on a host only when the hostfile names it as gethostname() does; the
    bare name resolves on the workers through the DNS search domain the pods get."""
    result = mpi({"mpi_implementation": implementation, "namespace": "hpc", "num_nodes": 3,
                  "run_launcher_as_node": True})
    assert hostfile(result) == "pi-node-0-0.pi:1\npi-node-0-1.pi:1\npi-launcher-0-0:1\n"
    launcher = pod_spec(result, "pi-launcher-0")
    assert launcher["dnsConfig"] == {"searches": ["pi.hpc.svc.cluster.local"]}
    # The launcher's own name, as the hostfile gives it, is the one host the wait does not log in to.
    assert launcher["initContainers"][0]["command"][7:] == ["pi-launcher-0-0", "/etc/mpi/hostfile"]
    assert launcher["containers"][0]["command"][6:8] == ["/etc/mpi/hostfile", "pi-launcher-0-0"]


def test_hydra_implementations_need_the_namespace():
    with pytest.raises(TrainJobError, match="namespace: IntelMPI connects back to the launcher"):
        mpi({"mpi_implementation": "IntelMPI"})


def test_reserved_mpi_env_is_rejected():
    with pytest.raises(TrainJobError) as info:
        mpi({"env": {"OMPI_MCA_orte_default_hostfile": "/x", "PRTE_MCA_plm_ssh_args": "-v",
                     "OMPI_MCA_mca_base_env_list": "A"}})
    assert ("env: must not have reserved envs, invalid envs configured: "
            "[OMPI_MCA_mca_base_env_list, OMPI_MCA_orte_default_hostfile, PRTE_MCA_plm_ssh_args]") in str(info.value)
    assert "OMPI_MCA_mca_base_env_list comes from the job's env (the names forwarded to every rank)" in str(info.value)
    assert [issue.field for issue in info.value.issues] == ["env"]   # once for the job, as Kubeflow reports it


def test_reserved_env_of_every_template_is_reported_once():
    runtime = MpiRuntime(name="rt", launcher={"image": "m:1"},
                         node={"image": "m:1", "command": ["/usr/sbin/sshd", "-De"], "env": {"I_MPI_PERHOST": "1"}})
    with pytest.raises(TrainJobError) as info:
        mpi({"runtime": runtime, "env": {"OMPI_MCA_plm_rsh_args": "x", "OMPI_MCA_orte_default_hostfile": "y"}})
    assert [issue.field for issue in info.value.issues] == ["env"]
    assert info.value.issues[0].message.startswith(
        "must not have reserved envs, invalid envs configured: "
        "[I_MPI_PERHOST, OMPI_MCA_orte_default_hostfile, OMPI_MCA_plm_rsh_args]. ")


@pytest.mark.parametrize("missing", ["launcher", "node"])
def test_launcher_as_node_needs_both_templates_for_more_than_one_host(missing):
    runtime = MpiRuntime(name="partial", run_launcher_as_node=True, **{missing: None})
    with pytest.raises(TrainJobError) as info:
        mpi({"num_nodes": 2, "runtime": runtime})
    message = str(info.value)
    assert ("num_nodes: must have 1 when MPI runtime with enabled run_launcher_as_node does not have either "
            "launcher and node") in message
    assert f'runtime "partial" has no {missing} template' in message
    if missing == "node":   # one host: the launcher alone is enough
        assert mpi({"num_nodes": 1, "runtime": runtime}).find(kind="Job", name="pi-node-0") == []


def test_launcher_as_node_without_a_node_template_registers_nothing():
    error, result = attempt(lambda: MpiTrainJob("pi", {**BASE, "num_nodes": 2, "run_launcher_as_node": True,
                                                      "runtime": MpiRuntime(name="no-node", node=None)}))
    assert isinstance(error, TrainJobError)
    assert "must have 1 when MPI runtime with enabled run_launcher_as_node" in str(error)
    assert result.resources == []


def test_a_test_run_makes_no_key_unless_asked(monkeypatch):
    import trainjobs.tools.engine as engine
    made = []
    monkeypatch.setattr(engine, "_ssh_key_pair", lambda *a: made.append(a))
    secret = mpi({"num_nodes": 2}).get("Secret", "pi-mpi-ssh-auth").manifest
    assert made == []   # nothing logs in with it; pulumi-tls makes the real key at deploy time
    assert secret["stringData"] == {"ssh-privatekey": engine.PLACEHOLDER_KEY, "ssh-publickey": engine.PLACEHOLDER_KEY}


def test_ssh_secret_and_key_pair():
    result = run(lambda: MpiTrainJob("pi", {**BASE, "num_nodes": 2}), real_keys=True)
    secret = result.get("Secret", "pi-mpi-ssh-auth")
    key = result.get(type="tls:index/privateKey:PrivateKey")
    assert key.name == "pi-ssh-key"
    assert key.inputs == {"algorithm": "ECDSA", "ecdsaCurve": "P521"}
    assert result.parent_chain(key)[0].type == "trainjobs:index:MpiTrainJob"
    manifest = secret.manifest
    assert (manifest["type"], manifest["immutable"]) == ("kubernetes.io/ssh-auth", True)
    assert manifest["stringData"]["ssh-privatekey"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert manifest["stringData"]["ssh-publickey"].startswith("ecdsa-sha2-nistp521 ")
    assert secret.redacted_manifest["stringData"] == {"ssh-privatekey": "[secret]", "ssh-publickey": "[secret]"}


def test_ed25519_option():
    key = mpi({"ssh_key_algorithm": "ED25519"}).get(type="tls:index/privateKey:PrivateKey")
    assert key.inputs == {"algorithm": "ED25519"}


def ssh_items(spec):
    volume = next(v for v in spec["volumes"] if v["name"] == "mpi-ssh-auth")["secret"]
    return {i["path"]: (i["key"], i["mode"]) for i in volume["items"]}


def test_key_modes_for_root_and_non_root():
    root = pod_spec(mpi({"num_nodes": 2}), "pi-node-0")
    assert ssh_items(root) == {"id_rsa": ("ssh-privatekey", 0o600), "id_rsa.pub": ("ssh-publickey", 0o644),
                               "authorized_keys": ("ssh-publickey", 0o644)}
    user = pod_spec(mpi({"num_nodes": 2, "ssh_auth_mount_path": "/home/mpiuser/.ssh",
                         "security_context": {"runAsUser": 1000, "fsGroup": 1000}}), "pi-node-0")
    assert ssh_items(user)["id_rsa"] == ("ssh-privatekey", 0o640)
    mount = next(m for m in user["containers"][0]["volumeMounts"] if m["name"] == "mpi-ssh-auth")
    assert mount == {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh", "readOnly": True}


def test_non_root_without_fs_group_is_rejected():
    with pytest.raises(TrainJobError, match="security_context: a non-root MPI job needs security_context.fsGroup"):
        mpi({"ssh_auth_mount_path": "/home/u/.ssh", "security_context": {"runAsUser": 1000}})


def test_root_with_fs_group_is_rejected():
    """With an fsGroup the kubelet adds group read to Secret files (0600 -> 0640); root's ssh then
    refuses its key (seen in the emulated pods: the launcher's wait never gets a login)."""
    with pytest.raises(TrainJobError, match="an MPI job running as root must not set security_context.fsGroup"):
        mpi({"security_context": {"fsGroup": 2000}})


def test_job_image_goes_to_launcher_and_workers_workers_keep_sshd():
    result = mpi({"num_nodes": 2, "image": "my/train:2"})
    launcher = pod_spec(result, "pi-launcher-0")
    worker = pod_spec(result, "pi-node-0")
    assert launcher["containers"][0]["image"] == worker["containers"][0]["image"] == "my/train:2"
    assert launcher["initContainers"][0]["image"] == "my/train:2"
    assert launcher["containers"][0]["command"][-3:] == ["mpirun", "python", "/app/hello.py"]
    assert worker["containers"][0]["command"][-2:] == ["/usr/sbin/sshd", "-De"]
    assert worker["containers"][0]["readinessProbe"] == {"tcpSocket": {"port": 22}, "periodSeconds": 2}


def test_hostfile_mounted_on_launcher_only():
    result = mpi({"num_nodes": 2})
    launcher, worker = pod_spec(result, "pi-launcher-0"), pod_spec(result, "pi-node-0")
    assert {"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": True} in launcher["containers"][0]["volumeMounts"]
    assert not any(v["name"] == "mpi-hostfile" for v in worker["volumes"])


def test_launcher_waits_for_every_host_of_its_hostfile_with_a_deadline():
    result = mpi({"num_nodes": 3, "run_launcher_as_node": True, "launcher_wait_timeout_seconds": 45})
    wait = pod_spec(result, "pi-launcher-0")["initContainers"][0]
    assert wait["name"] == "wait-for-hosts"
    assert wait["command"][3:] == ["wait-for-hosts", "/var/run/trainjobs", "45", SSH, "pi-launcher-0-0.pi",
                                   "/etc/mpi/hostfile"]
    assert {"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": True} in wait["volumeMounts"]


def test_a_failed_wait_runs_in_a_shell_and_names_every_unreachable_host(tmp_path):
    """The wait as rendered, on the hostfile as rendered, with stand-ins for getent and ssh: one host
    has no DNS name, one refuses SSH; the deadline passes, both are named with their reason, the
    reachable one is told."""
    import os
    import subprocess

    # The script counts whole seconds (`date +%s`): with a 5 s deadline, at least 4 s are left for the first
    # round however late in its second it starts, so each host is checked before the deadline, even when busy.
    result = mpi({"num_nodes": 3, "launcher_wait_timeout_seconds": 5})
    wait = pod_spec(result, "pi-launcher-0")["initContainers"][0]
    (tmp_path / "hostfile").write_text(hostfile(result))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "getent").write_text('#!/bin/sh\n[ "$2" != pi-node-0-1.pi ]\n')
    (bin_dir / "ssh").write_text('#!/bin/sh\necho "$*" >> "$SSH_LOG"\n'
                                 'case "$*" in *pi-node-0-2.pi*) echo "ssh: connect to host pi-node-0-2.pi '
                                 'port 22: Connection refused" >&2; exit 255;; esac\n')
    for tool in ("getent", "ssh"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SSH_LOG": str(tmp_path / "ssh.log")}
    done = subprocess.run([*wait["command"][:-1], str(tmp_path / "hostfile")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "MPI hosts not reachable within 5s: pi-node-0-1.pi pi-node-0-2.pi",
        "  pi-node-0-1.pi: the name does not resolve",
        "  pi-node-0-2.pi: ssh: connect to host pi-node-0-2.pi port 22: Connection refused"]
    told = [line for line in (tmp_path / "ssh.log").read_text().splitlines() if "exit-code" in line]
    assert len(told) == 1 and "pi-node-0-0.pi echo 1 > /var/run/trainjobs/exit-code" in told[0]


def test_launcher_tells_the_workers_of_its_hostfile_its_exit_code():
    launcher = pod_spec(mpi({"num_nodes": 2}), "pi-launcher-0")["containers"][0]
    assert launcher["command"][:2] == ["/bin/sh", "-c"]
    assert launcher["command"][3:8] == ["mpi-launcher", "/var/run/trainjobs", SSH, "/etc/mpi/hostfile",
                                        "pi-launcher-0-0.pi"]


def test_the_launcher_job_is_the_same_size_whatever_the_host_count():
    """The host list is in the hostfile only: the launcher Job of 4096 hosts is the one of 64."""
    import json

    def launcher_job(nodes):
        return json.dumps(mpi({"num_nodes": nodes}).get("Job", "pi-launcher-0").manifest, sort_keys=True)

    small, large = launcher_job(64), launcher_job(4096)
    assert large == small
    assert "pi-node-0-1" not in large


def test_workers_end_with_the_launchers_exit_code(tmp_path):
    """The worker wrapper in a shell: it runs sshd (here a sleep) until the launcher's exit code
    arrives, then stops it and exits with that code."""
    import subprocess
    import time

    worker = pod_spec(mpi({"num_nodes": 2}), "pi-node-0")["containers"][0]
    assert worker["command"][3:5] == ["mpi-node", "/var/run/trainjobs"]
    process = subprocess.Popen(["/bin/sh", "-c", worker["command"][2], "mpi-node", str(tmp_path), "sleep", "60"],
                               stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert process.poll() is None   # sshd runs while the launcher works
    (tmp_path / "exit-code").write_text("0\n")
    assert process.wait(timeout=10) == 0
    assert "the MPI launcher finished with exit code 0: stopping sshd" in process.stderr.read()


def test_resources_go_to_every_mpi_host_not_to_a_pure_launcher():
    result = mpi({"num_nodes": 2, "resources_per_node": {"limits": {"nvidia.com/gpu": 2}}})
    assert "resources" not in pod_spec(result, "pi-launcher-0")["containers"][0]
    assert pod_spec(result, "pi-node-0")["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    result = mpi({"num_nodes": 2, "run_launcher_as_node": True, "resources_per_node": {"limits": {"nvidia.com/gpu": 2}}})
    assert pod_spec(result, "pi-launcher-0")["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


@pytest.mark.parametrize("cls, runtime", [(DeepSpeedTrainJob, "deepspeed-distributed"), (MlxTrainJob, "mlx-distributed")])
def test_deepspeed_and_mlx_use_kubeflow_runtimes(cls, runtime):
    result = run(lambda: cls("ds", {"command": ["mpirun", "python", "train.py"], "num_nodes": 2}))
    component = result.get(type=f"trainjobs:index:{cls.__name__}")
    assert component.name == "ds"
    assert hostfile(result, "ds") == "ds-node-0-0.ds slots=1\nds-launcher-0-0.ds slots=1\n"
    worker = pod_spec(result, "ds-node-0")
    assert worker["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    assert worker["containers"][0]["command"][-4:] == ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
    assert ssh_items(worker)["id_rsa"] == ("ssh-privatekey", 0o640)
    launcher_env = env(pod_spec(result, "ds-launcher-0")["containers"][0])
    assert launcher_env["OMPI_MCA_plm_rsh_args"].endswith("-i /home/mpiuser/.ssh/id_rsa -p 2222")
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in launcher_env
    assert result.get("Job", "ds-launcher-0").manifest["metadata"]["labels"]["app.kubernetes.io/name"] == runtime


def test_launcher_needs_a_command():
    with pytest.raises(TrainJobError, match="command: the launcher needs a command"):
        run(lambda: MpiTrainJob("pi", {"image": "mpi:1"}))


def test_outputs():
    import pulumi

    def program():
        job = MpiTrainJob("pi", {**BASE, "num_nodes": 2, "num_proc_per_node": 2})
        for key in ("job_name", "node_job_name", "hosts", "slots", "ssh_secret_name", "mpi_implementation"):
            pulumi.export(key, getattr(job, key))

    assert run(program).outputs == {
        "job_name": "pi-launcher-0", "node_job_name": "pi-node-0", "hosts": ["pi-node-0-0.pi", "pi-node-0-1.pi"],
        "slots": 2, "ssh_secret_name": "pi-mpi-ssh-auth", "mpi_implementation": "OpenMPI"}
