"""`trainjobs import`: published Kubeflow Trainer, MPI Operator and Volcano examples (tests/imports/) become
components whose pods get the training env the source system gives, by the tables the library follows
(docs/deviations.md; Kubeflow Trainer v2.3's torch plugin, the MPI Operator v2beta1 controller, Volcano's
pytorch plugin). Each expected value below is computed from the source manifest by the source system's
rule, not from the library.
"""

import json
import math
import re
from pathlib import Path

import pulumi
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trainjobs
from trainjobs.pipeline.pipeline import derive
from trainjobs.families.torch import TORCH, TorchTrainJobArgs
from trainjobs.tools.cli.main import main
from trainjobs.tools.importer import Document, ImportFailed, Imported, emit, import_documents, import_files
from trainjobs.tools.podview import ObjectIndex, pod_view
from trainjobs.tools.provider.server import TrainJobsProvider
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.testing import run

IMPORTS = Path(__file__).parent / "imports"
SCHEMA = json.loads((Path(__file__).parents[1] / "provider" / "schema.json").read_text())


def imported(*files: str, **options) -> list[Imported]:
    return import_files([str(IMPORTS / f) for f in files], **options)


def objects_of(job: Imported) -> list[dict]:
    component = getattr(trainjobs, job.component)
    return kubernetes_objects(run(lambda: component(job.name, job.args)))


def pods(objects: list[dict], job_name: str) -> list:
    index = ObjectIndex(objects)
    pod_set = index.pod_set(job_name)
    return [pod_view(pod_set, i, index) for i in range(pod_set.count)]


def source(file: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((IMPORTS / file).read_text()) if d]


# ---- Kubeflow Trainer v2.3: the torch plugin's table ---------------------------------------------------------

def kubeflow_torch_env(trainjob: dict, runtime_resources: dict | None, index: int) -> dict[str, str]:
    """PET_* of node pod `index`, by Kubeflow Trainer v2.3's torch plugin (reference §3.3, §3.4)."""
    name, trainer = trainjob["metadata"]["name"], trainjob["spec"].get("trainer") or {}
    res = trainer.get("resourcesPerNode") or runtime_resources or {}
    nproc = str(trainer["numProcPerNode"]) if "numProcPerNode" in trainer else "auto"
    gpu = any("gpu" in k.lower() and float(v) > 0 for side in ("requests", "limits") for k, v in
              (res.get(side) or {}).items())
    if nproc == "auto" and not gpu:
        cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")
        cores = float(cpu[:-1]) / 1000 if str(cpu).endswith("m") else float(cpu or 0)   # Quantity.Value()
        nproc = str(max(1, math.ceil(cores))) if cores else "1"
    return {"PET_NNODES": str(trainer.get("numNodes", 1)), "PET_NPROC_PER_NODE": nproc, "PET_NODE_RANK": str(index),
            "PET_MASTER_ADDR": f"{name}-node-0-0.{name}", "PET_MASTER_PORT": "29500"}


@pytest.mark.parametrize("file", ["kubeflow-multi-node.yaml", "kubeflow-kueue.yaml", "kubeflow-volcano.yaml"])
def test_kubeflow_torch_examples_give_every_node_pod_kubeflows_env_and_hostname(file):
    [job] = imported(file)
    trainjob = next(d for d in source(file) if d["kind"] == "TrainJob")
    assert job.component == "TorchTrainJob" and job.name == trainjob["metadata"]["name"]
    objects = objects_of(job)
    views = pods(objects, f"{job.name}-node-0")
    assert len(views) == trainjob["spec"]["trainer"]["numNodes"]
    for view in views:
        expected = kubeflow_torch_env(trainjob, None, view.index)
        assert {k: view.containers[0].env[k] for k in expected} == expected
        assert view.dns_names[0] == f"{job.name}-node-0-{view.index}.{job.name}"   # as JobSet names the pod
        assert view.containers[0].command == (trainjob["spec"]["trainer"].get("command") or [])
    ports = [p["containerPort"] for p in next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
             ["containers"][0]["ports"]]
    assert ports == [29500]


def test_kubeflow_scheduling_survives_the_import():
    [kueue] = imported("kubeflow-kueue.yaml")
    assert (kueue.args["gang_scheduler"], kueue.args["queue"], kueue.args["namespace"]) == ("kueue", "user-queue",
                                                                                             "default")
    assert "labels" not in kueue.args   # the queue label is the queue argument, not a label
    [volcano] = imported("kubeflow-volcano.yaml")
    assert volcano.args["gang_scheduler"] == "volcano"
    assert volcano.args["runtime"] == {"name": "torch-distributed-volcano",
                                       "node": {"image": "pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime"}}
    image = pods(objects_of(volcano), "volcano-example-node-0")[0].containers[0].image
    assert image == "pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime"


def test_kueue_owns_suspend_so_a_trainjobs_suspend_is_left_to_it(tmp_path):
    [trainjob] = source("kubeflow-kueue.yaml")
    trainjob["spec"]["suspend"] = True   # as Kueue's TrainJob page and Kubeflow's Kueue example set it
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(trainjob))
    [job] = import_files([str(tmp_path / "job.yaml")])
    assert "suspend" not in job.args and job.args["gang_scheduler"] == "kueue"
    assert [n.path for n in job.findings.notes] == ["spec.suspend"]


def test_kubeflow_suspend_and_a_volcano_queue_of_the_runtime_template(tmp_path):
    runtime, trainjob = source("kubeflow-volcano.yaml")
    runtime["spec"]["template"]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": "gpu"}}
    trainjob["spec"]["suspend"] = True
    (tmp_path / "job.yaml").write_text(yaml.safe_dump_all([runtime, trainjob]))
    [job] = import_files([str(tmp_path / "job.yaml")])
    assert (job.args["gang_scheduler"], job.args["queue"], job.args["suspend"]) == ("volcano", "gpu", True)


# ---- the MPI Operator v2beta1 controller's table -------------------------------------------------------------

def mpi_operator_launcher_env(mpijob: dict) -> dict[str, str]:
    """The launcher env the MPI Operator gives (reference §13.3), by implementation."""
    slots = str(mpijob["spec"].get("slotsPerWorker", 1))
    implementation = mpijob["spec"].get("mpiImplementation", "OpenMPI")
    return {"OpenMPI": {"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                        "OMPI_MCA_orte_set_default_slots": slots},
            "Intel": {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                      "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10", "I_MPI_PERHOST": slots},
            "MPICH": {"HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                      "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10"}}[implementation] | ({} if mpijob["spec"].get(
        "runLauncherAsWorker") else {"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""})


# Where trainjobs deliberately differs (docs/deviations.md): the ssh options carry more than the operator's
# one option, and MPICH reads HYDRA_LAUNCHER_EXTRA_ARGS, not the HYDRA_LAUNCH_EXTRA_ARGS the operator sets.
SSH_OPTIONS = {"OMPI_MCA_plm_rsh_args", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"}
RENAMED = {"HYDRA_LAUNCH_EXTRA_ARGS": "HYDRA_LAUNCHER_EXTRA_ARGS"}
HOSTFILE_LINE = {"OpenMPI": r"(\S+) slots=(\d+)", "MPICH": r"(\S+):(\d+)", "Intel": r"(\S+):(\d+)"}


@pytest.mark.parametrize("file", ["mpi-pi-openmpi.yaml", "mpi-pi-mpich.yaml"])
def test_mpi_operator_pi_examples_give_the_launcher_the_operators_env_and_hostfile_format(file):
    [job] = imported(file, namespace="default")
    [mpijob] = source(file)
    assert job.component == "MpiTrainJob"
    objects = objects_of(job)
    [launcher] = pods(objects, "pi-launcher-0")
    env = launcher.containers[0].env
    for name, value in mpi_operator_launcher_env(mpijob).items():
        if name in SSH_OPTIONS or name in RENAMED:
            assert env[RENAMED.get(name, name)].startswith(value)
        else:
            assert env[name] == value
    workers = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    hostfile = launcher.files["/etc/mpi/hostfile"].content.decode()
    lines = hostfile.splitlines()
    implementation = mpijob["spec"].get("mpiImplementation", "OpenMPI")
    assert len(lines) == workers
    for i, line in enumerate(lines):
        host, slots = re.fullmatch(HOSTFILE_LINE[implementation], line).groups()
        assert (host, slots) == (f"pi-node-0-{i}.pi", str(mpijob["spec"]["slotsPerWorker"]))
    worker_pods = pods(objects, "pi-node-0")
    assert len(worker_pods) == workers
    worker_template = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    sshd = [*(worker_template.get("command") or []), *worker_template["args"]]
    assert worker_pods[0].containers[0].command[-len(sshd):] == sshd   # the worker's own sshd command
    assert launcher.containers[0].command[-4:] == ["mpirun", "-n", "2", "/home/mpiuser/pi"]
    readiness = next(o for o in objects if o["metadata"]["name"] == "pi-node-0")["spec"]["template"]["spec"][
        "containers"][0]["readinessProbe"]
    assert readiness["tcpSocket"]["port"] == 2222   # the images' sshd port, as the MPICH example's probe says


def test_mpi_operator_settings_survive_and_the_differences_are_flagged():
    [job] = imported("mpi-pi-openmpi.yaml")
    runtime = job.args["runtime"]
    assert (runtime["ssh_auth_mount_path"], runtime["num_proc_per_node"], runtime["mpi_implementation"]) == (
        "/home/mpiuser/.ssh", 1, "OpenMPI")
    assert (job.args["num_nodes"], job.args["ttl_seconds_after_finished"], job.args["backoff_limit"]) == (2, 60, 0)
    assert runtime["launcher"]["security_context"] == {"fsGroup": 1000}
    assert any("fsGroup 1000" in n.message for n in job.findings.notes)
    mpich = imported("mpi-pi-mpich.yaml", namespace="team")[0]
    # The MPICH image's ENTRYPOINT (/entrypoint.sh, kubeflow/mpi-operator build/base) runs the args, as before.
    assert mpich.args["runtime"]["launcher"]["command"] == ["/entrypoint.sh", "mpirun", "-n", "2", "/home/mpiuser/pi"]
    assert any(n.path.endswith("containers[0].args") and "/entrypoint.sh" in n.message for n in mpich.findings.notes)


def test_an_mpijob_with_a_volcano_scheduling_policy_keeps_queue_and_priority(tmp_path):
    [mpijob] = source("mpi-pi-openmpi.yaml")
    mpijob["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "hpc", "priorityClass": "high", "minAvailable": 3}
    for replica in mpijob["spec"]["mpiReplicaSpecs"].values():
        replica["template"]["spec"]["schedulerName"] = "volcano"
    (tmp_path / "pi.yaml").write_text(yaml.safe_dump(mpijob))
    [job] = import_files([str(tmp_path / "pi.yaml")])
    assert {k: job.args[k] for k in ("gang_scheduler", "queue", "priority_class", "scheduler_name")} == {
        "gang_scheduler": "volcano", "queue": "hpc", "priority_class": "high", "scheduler_name": "volcano"}


# ---- Volcano's pytorch plugin --------------------------------------------------------------------------------

def volcano_pytorch_env(job: dict, task: str, index: int, world_counts_every_task: bool) -> dict[str, str]:
    """What Volcano's pytorch plugin gives pod `index` of `task` (reference peers §1.1): MASTER_ADDR, MASTER_PORT
    and WORLD_SIZE to every pod of every task, RANK to master and worker pods. Before volcano-sh/volcano#4281
    WORLD_SIZE counted every task's pods."""
    name = job["metadata"]["name"]
    tasks = {t["name"]: t.get("replicas", 1) for t in job["spec"]["tasks"]}
    world = sum(tasks.values()) if world_counts_every_task else tasks["master"] + tasks["worker"]
    env = {"MASTER_ADDR": f"{name}-master-0.{name}", "MASTER_PORT": "23456", "WORLD_SIZE": str(world)}
    if task in ("master", "worker"):
        env["RANK"] = str(index if task == "master" else index + 1)
    return env


def test_volcano_pytorch_job_gives_the_correct_env_and_flags_the_world_size_bug():
    [job] = imported("volcano-pytorch.yaml", allow_dropped=True)
    [vcjob] = source("volcano-pytorch.yaml")
    assert job.component == "TorchTrainJob" and job.args["torchrun"] is False
    objects = objects_of(job)
    views = pods(objects, "pytorch-job-node-0")
    # Volcano's pods in rank order: master-0, worker-0, worker-1; the imported pods: node indexes 0, 1, 2.
    source_pods = [("master", 0), ("worker", 0), ("worker", 1)]
    master_view = views[0]
    for view, (task, i) in zip(views, source_pods, strict=True):
        expected = volcano_pytorch_env(vcjob, task, i, world_counts_every_task=False)
        env = view.containers[0].env
        assert (env["WORLD_SIZE"], env["RANK"]) == (expected["WORLD_SIZE"], expected["RANK"])
        # MASTER_ADDR names rank 0's pod in both; MASTER_PORT is the port rank 0's container opens.
        assert env["MASTER_ADDR"] == master_view.dns_names[0]
        assert env["MASTER_PORT"] == "29500"
    assert volcano_pytorch_env(vcjob, "worker", 0, world_counts_every_task=True)["WORLD_SIZE"] == "4"
    [tensorboard] = pods(objects, "pytorch-job-tensorboard-0")
    assert not {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"} & set(tensorboard.containers[0].env)
    flagged = [n.message for n in job.findings.notes if n.path == "spec.tasks"]
    assert flagged and "4 instead of 3" in flagged[0] and "volcano-sh/volcano#4281" in flagged[0]
    assert (job.args["gang_scheduler"], job.args["queue"]) == ("volcano", "research")
    assert [f.path for f in job.findings.unexpressed] == ["spec.tasks[1].template (working_dir)"]


def test_volcano_template_difference_is_an_error_unless_dropping_is_allowed():
    with pytest.raises(ImportFailed) as failed:
        imported("volcano-pytorch.yaml")
    assert failed.value.problems == [
        f"{IMPORTS / 'volcano-pytorch.yaml'}: Job pytorch-job: spec.tasks[1].template (working_dir): cannot be "
        'expressed: master and worker pods differ here ("None" and "/home"); every training pod has one template']


# ---- strict fields ------------------------------------------------------------------------------------------

def test_unknown_fields_are_named_and_nothing_is_imported(tmp_path):
    [trainjob] = source("kubeflow-multi-node.yaml")
    trainjob["spec"]["trainer"]["numNode"] = 2
    trainjob["spec"]["runtimePatch"] = []
    [mpijob] = source("mpi-pi-openmpi.yaml")
    mpijob["spec"]["slotPerWorker"] = 2
    mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    [vcjob] = source("volcano-pytorch.yaml")
    vcjob["spec"]["tasks"][0]["replica"] = 1
    files = []
    for i, document in enumerate((trainjob, mpijob, vcjob)):
        (tmp_path / f"{i}.yaml").write_text(yaml.safe_dump(document))
        files.append(str(tmp_path / f"{i}.yaml"))
    with pytest.raises(ImportFailed) as failed:
        import_files(files, allow_dropped=True)
    unknown = sorted(p.split(": ")[2] for p in failed.value.problems)
    assert unknown == ["spec.mpiReplicaSpecs.Worker.template.spec.containers[0].imagePullPolice",
                       "spec.runtimePatch", "spec.slotPerWorker", "spec.tasks[0].replica",
                       "spec.trainer.numNode"]
    assert any(p.endswith("spec.runtimePatch: unknown field: not a field of the v2.3 TrainJob API")
               for p in failed.value.problems)


def test_fields_that_cannot_be_expressed_are_named_or_dropped_on_request(tmp_path):
    [trainjob] = source("kubeflow-multi-node.yaml")
    pod = {"initContainers": [{"name": "warm-cache", "env": [{"name": "A", "value": "1"}]}]}
    trainjob["spec"]["runtimePatches"] = [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    trainjob["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(trainjob))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "job.yaml")])
    patched = ("spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template."
               "spec.initContainers")
    assert [p.split(": ")[2] for p in failed.value.problems] == ["spec.managedBy", patched]
    [job] = import_files([str(tmp_path / "job.yaml")], allow_dropped=True)
    code = emit.python([job], ["job.yaml"])
    assert f"#   dropped: {patched}: no argument of the node pods takes it; give init containers as init_containers" \
        in code
    assert "#   dropped: spec.managedBy:" in code


def test_a_runtime_that_is_neither_given_nor_built_in_or_given_without_its_job(tmp_path):
    [trainjob] = source("kubeflow-multi-node.yaml")
    trainjob["spec"]["runtimeRef"]["name"] = "torch-custom"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(trainjob))
    with pytest.raises(ImportFailed, match="neither in the files given nor a built-in runtime"):
        import_files([str(tmp_path / "job.yaml")])
    runtime, _ = source("kubeflow-volcano.yaml")
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime))
    with pytest.raises(ImportFailed, match="no TrainJob given uses this runtime"):
        import_files([str(tmp_path / "runtime.yaml")])


@pytest.mark.parametrize("runtime, component", [("deepspeed-distributed", "DeepSpeedTrainJob"),
                                                ("mlx-distributed", "MlxTrainJob"),
                                                ("torchtune-llama3.2-1b", "TorchTuneTrainJob"),
                                                ("jax-distributed", "JaxTrainJob"),
                                                ("xgboost-distributed", "XGBoostTrainJob")])
def test_built_in_runtimes_by_name_need_no_file(tmp_path, runtime, component):
    document = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "job"},
                "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 1}}}
    if component in ("DeepSpeedTrainJob", "MlxTrainJob"):
        document["spec"]["trainer"]["command"] = ["mpirun", "python", "train.py"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(document))
    [job] = import_files([str(tmp_path / "job.yaml")])
    assert (job.component, job.args["runtime"]) == (component, runtime)


# ---- the printed programs -----------------------------------------------------------------------------------

ALL = [(f.name,) for f in sorted(IMPORTS.glob("*.yaml"))]


@pytest.mark.parametrize("files", ALL)
def test_the_printed_python_program_registers_the_imported_job(files):
    jobs = imported(*files, allow_dropped=True, namespace="default")
    code = emit.python(jobs, list(files))
    program = run(lambda: exec(compile(code, "imported.py", "exec"), {}))
    direct = run(lambda: [getattr(trainjobs, j.component)(j.name, j.args) for j in jobs])
    assert kubernetes_objects(program) == kubernetes_objects(direct)


@pytest.mark.parametrize("files", ALL)
def test_the_printed_yaml_program_constructs_the_same_objects_through_the_provider(files):
    jobs = imported(*files, allow_dropped=True, namespace="default")
    document = yaml.safe_load(emit.pulumi_yaml(jobs, list(files)))
    provider = TrainJobsProvider()
    schema_inputs = {token: set(r["inputProperties"]) for token, r in SCHEMA["resources"].items()}

    def program():
        for name, resource in document["resources"].items():
            assert set(resource["properties"]) <= schema_inputs[resource["type"]]
            provider.construct(name, resource["type"], resource["properties"], pulumi.ResourceOptions())

    through_provider = run(program)
    direct = run(lambda: [getattr(trainjobs, j.component)(j.name, j.args) for j in jobs])
    assert kubernetes_objects(through_provider) == kubernetes_objects(direct)


def test_the_command_prints_python_or_yaml_and_notes_on_stderr(capsys):
    assert main(["import", str(IMPORTS / "kubeflow-kueue.yaml")]) == 0
    out = capsys.readouterr().out
    assert "from trainjobs import TorchTrainJob" in out and "'queue': 'user-queue'" in out
    assert main(["import", "--to", "yaml", "--allow-dropped", str(IMPORTS / "volcano-pytorch.yaml")]) == 0
    captured = capsys.readouterr()
    assert "type: trainjobs:index:TorchTrainJob" in captured.out and "gangScheduler: volcano" in captured.out
    assert "warning: " in captured.err and "dropped spec.tasks[1].template (working_dir)" in captured.err
    assert "note: " in captured.err and "volcano-sh/volcano#4281" in captured.err


def test_the_command_fails_with_every_problem_and_no_program(capsys, tmp_path):
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    assert main(["import", str(IMPORTS / "volcano-pytorch.yaml"), str(tmp_path / "bad.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = captured.err.splitlines()
    assert errors[0].startswith(f"error: {tmp_path / 'bad.yaml'}: Pod p: apiVersion \"v1\" kind \"Pod\" is not one")
    assert "working_dir" in errors[1] and "--allow-dropped" in errors[2]
    assert main(["import", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read it" in capsys.readouterr().err


def kubeflow_mpi(trainjob: dict, runtime: dict) -> tuple[dict[str, str], list[str]]:
    """Launcher env and hostfile lines by Kubeflow Trainer v2.3's MPI plugin (reference §5, §14): OpenMPI only;
    with runLauncherAsNode the node Job has numNodes - 1 pods and the launcher's line comes last."""
    name, mpi = trainjob["metadata"]["name"], runtime["spec"]["mlPolicy"]["mpi"]
    slots = str(mpi.get("numProcPerNode", 1))
    nodes = trainjob["spec"]["trainer"]["numNodes"] - (1 if mpi.get("runLauncherAsNode") else 0)
    hosts = [f"{name}-node-0-{i}.{name}" for i in range(nodes)]
    if mpi.get("runLauncherAsNode"):
        hosts.append(f"{name}-launcher-0-0.{name}")
    env = {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
           "OMPI_MCA_orte_set_default_slots": slots, "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}
    return env, [f"{host} slots={slots}" for host in hosts]


def test_kubeflow_deepspeed_runtime_file_gives_the_launcher_kubeflows_env_and_hostfile():
    runtime, trainjob = source("kubeflow-deepspeed.yaml")
    [job] = imported("kubeflow-deepspeed.yaml")
    assert job.component == "MpiTrainJob" and job.args["runtime"]["ssh_port"] == 2222
    assert job.args["runtime"]["launcher"]["image"] == "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"
    objects = objects_of(job)
    [launcher] = pods(objects, "t5-launcher-0")
    env, lines = kubeflow_mpi(trainjob, runtime)
    for name, value in env.items():
        assert launcher.containers[0].env[name].startswith(value) if name in SSH_OPTIONS else \
            launcher.containers[0].env[name] == value
    assert launcher.files["/etc/mpi/hostfile"].content.decode().splitlines() == lines
    [node] = pods(objects, "t5-node-0")
    assert node.containers[0].command[-4:] == ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
    assert launcher.containers[0].command[-3:] == ["mpirun", "python", "/workspace/train.py"]


def test_volcano_mpi_job_gets_a_hostfile_of_the_hosts_volcano_lists_in_mpi_host(tmp_path):
    [job] = imported("volcano-mpi.yaml")
    [vcjob] = source("volcano-mpi.yaml")
    assert (job.component, job.args["gang_scheduler"], job.args["num_nodes"]) == ("MpiTrainJob", "volcano", 2)
    objects = objects_of(job)
    [launcher] = pods(objects, "lm-mpi-job-launcher-0")
    # Volcano's mpi plugin: MPI_HOST on the master, one name per worker pod (reference peers §1.2).
    workers = next(t for t in vcjob["spec"]["tasks"] if t["name"] == "mpiworker")["replicas"]
    volcano_hosts = [f"lm-mpi-job-mpiworker-{i}.lm-mpi-job" for i in range(workers)]
    hostfile = launcher.files["/etc/mpi/hostfile"].content.decode().splitlines()
    assert [line.split()[0] for line in hostfile] == [h.replace("mpiworker-", "node-0-") for h in volcano_hosts]
    assert [p["containerPort"] for p in next(o for o in objects if o["metadata"]["name"] == "lm-mpi-job-node-0")
            ["spec"]["template"]["spec"]["containers"][0]["ports"]] == [22]   # the plugin's port, opened once
    # The published command reads Volcano's host list, which the job does not give: named, not dropped quietly.
    published = "MPI_HOST=`cat /etc/volcano/mpiworker.host | tr \"\\n\" \",\"`;\nmpiexec --host ${MPI_HOST} -np 2 x;\n"
    vcjob["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][2] = published
    (tmp_path / "mpi.yaml").write_text(yaml.safe_dump(vcjob))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "mpi.yaml")])
    [problem] = failed.value.problems
    assert problem.endswith("spec.tasks[0].template.spec.containers[0].command: cannot be expressed: the command "
                            "names its hosts itself (--host ${MPI_HOST}, from /etc/volcano/mpiworker.host); the job "
                            "gives mpirun the hostfile /etc/mpi/hostfile (the mpiworker task's pods), which it reads "
                            "by itself: remove --host ${MPI_HOST} and the line that builds it, or pass --hostfile "
                            "/etc/mpi/hostfile")


def test_runtime_fields_that_cannot_be_expressed_are_named_with_the_runtimes_file(tmp_path):
    runtime, trainjob = source("kubeflow-volcano.yaml")
    runtime["spec"]["podGroupPolicy"]["volcano"] = {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    runtime["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 3}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump_all([runtime, trainjob]))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "job.yaml")])
    assert [p.split(": ", 2)[2] for p in failed.value.problems] == [
        "spec.podGroupPolicy.volcano.networkTopology: cannot be expressed: the job's Volcano PodGroup has no network "
        "topology argument",
        "spec.template.spec.failurePolicy: cannot be expressed: JobSet settings have no argument (the job is Indexed "
        "Jobs and a Service, not a JobSet)"]


def test_a_runtime_templates_scheduler_name_is_the_jobs_and_namespace_fills_in_a_missing_one(tmp_path):
    runtime, trainjob = source("kubeflow-volcano.yaml")
    del runtime["spec"]["podGroupPolicy"]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["schedulerName"] = "scheduler-plugins-scheduler"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump_all([runtime, trainjob]))
    [job] = import_files([str(tmp_path / "job.yaml")], namespace="team-a")
    assert (job.args["scheduler_name"], job.args["namespace"]) == ("scheduler-plugins-scheduler", "team-a")
    assert "gang_scheduler" not in job.args and "scheduler_name" not in job.args["runtime"]["node"]
    [view] = pods(objects_of(job), "volcano-example-node-0")[:1]
    assert view.namespace == "team-a"


def test_the_queue_and_the_gang_group_survive_into_the_objects():
    [kueue] = imported("kubeflow-kueue.yaml")
    [job] = [o for o in objects_of(kueue) if o["kind"] == "Job"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"

    # Kubeflow's Volcano plugin: PodGroup named after the TrainJob, minMember the sum of its pod sets (the node
    # pods here), pods annotated scheduling.k8s.io/group-name=<TrainJob> (reference §1, §2).
    [volcano] = imported("kubeflow-volcano.yaml")
    _, trainjob = source("kubeflow-volcano.yaml")
    objects = objects_of(volcano)
    [group] = [o for o in objects if o["kind"] == "PodGroup"]
    assert (group["metadata"]["name"], group["spec"]["minMember"]) == ("volcano-example",
                                                                       trainjob["spec"]["trainer"]["numNodes"])
    pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "volcano-example"
    assert pod["spec"]["schedulerName"] == "volcano"

    # A Volcano Job's queue; its gang holds the training pods (master and worker), not the TensorBoard task.
    [vcjob_import] = imported("volcano-pytorch.yaml", allow_dropped=True)
    objects = objects_of(vcjob_import)
    [group] = [o for o in objects if o["kind"] == "PodGroup"]
    assert (group["spec"]["queue"], group["spec"]["minMember"]) == ("research", 3)
    grouped = {o["metadata"]["name"] for o in objects if o["kind"] == "Job" and "scheduling.k8s.io/group-name" in
               o["spec"]["template"]["metadata"].get("annotations", {})}
    assert grouped == {"pytorch-job-node-0"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.integers(1, 6), nproc=st.none() | st.integers(1, 8),
       cpu=st.none() | st.sampled_from(["500m", "1", "2.5", "3500m", "8"]), gpus=st.sampled_from([None, "1", "4"]),
       cpu_side=st.sampled_from(["requests", "limits"]))
def test_any_torch_trainjob_imports_to_pods_with_kubeflows_pet_env(tmp_path, nodes, nproc, cpu, gpus, cpu_side):
    trainer: dict = {"numNodes": nodes, "command": ["torchrun", "train.py"]}
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    res: dict = {}
    if cpu is not None:
        res.setdefault(cpu_side, {})["cpu"] = cpu
    if gpus is not None:
        res.setdefault("limits", {})["nvidia.com/gpu"] = gpus
    if res:
        trainer["resourcesPerNode"] = res
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "prop"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}
    (tmp_path / "prop.yaml").write_text(yaml.safe_dump(trainjob))
    [job] = import_files([str(tmp_path / "prop.yaml")])
    plan = derive(TORCH, job.name, TorchTrainJobArgs.model_validate(job.args))
    index = ObjectIndex(list(plan.manifests))
    node_job = index.pod_set("prop-node-0")
    assert node_job.count == nodes
    for i in sorted({0, nodes - 1}):
        env = pod_view(node_job, i, index).containers[0].env
        expected = kubeflow_torch_env(trainjob, None, i)
        assert {k: env[k] for k in expected} == expected


@pytest.mark.parametrize("implementation", ["Intel", "MPICH", "OpenMPI"])
@pytest.mark.parametrize("launcher_as_worker", [False, True])
def test_every_mpi_implementation_and_the_launcher_as_worker(tmp_path, implementation, launcher_as_worker):
    [mpijob] = source("mpi-pi-openmpi.yaml")
    mpijob["spec"]["mpiImplementation"] = implementation
    mpijob["spec"]["runLauncherAsWorker"] = launcher_as_worker
    mpijob["spec"]["slotsPerWorker"] = 4
    mpijob["metadata"]["namespace"] = "hpc"
    (tmp_path / "pi.yaml").write_text(yaml.safe_dump(mpijob))
    [job] = import_files([str(tmp_path / "pi.yaml")])
    objects = objects_of(job)
    [launcher] = pods(objects, "pi-launcher-0")
    env = launcher.containers[0].env
    for name, value in mpi_operator_launcher_env(mpijob).items():
        assert env[RENAMED.get(name, name)].startswith(value) if name in SSH_OPTIONS | set(RENAMED) else \
            env[name] == value
    workers = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    lines = launcher.files["/etc/mpi/hostfile"].content.decode().splitlines()
    assert len(lines) == workers + launcher_as_worker   # the MPI Operator's host count
    assert all(re.fullmatch(HOSTFILE_LINE[implementation], line).group(2) == "4" for line in lines)
    if launcher_as_worker:
        assert lines[-1].split()[0].split(":")[0].startswith("pi-launcher-0-0")
        assert any(n.path == "spec.runLauncherAsWorker" for n in job.findings.notes)


@pytest.mark.parametrize("content, says", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not a text file (not UTF-8)"),
    (b"# " + b"x" * (10 * 2**20), "larger than 10 MiB"),
])
def test_a_file_that_is_no_manifest_gives_one_error_line(capsys, tmp_path, content, says):
    (tmp_path / "job.yaml").write_bytes(content)
    assert main(["import", str(tmp_path / "job.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"error: {tmp_path / 'job.yaml'}: {says}; give the YAML file of the job"]


def test_the_help_names_every_source_the_import_reads(capsys):
    from trainjobs.tools.importer import SOURCES

    def help_text(argv: list[str]) -> str:
        assert main(argv) == 0
        return re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))   # argparse wraps at hyphens

    top, command = help_text(["--help"]), help_text(["import", "--help"])
    for system in ("Kubeflow Trainer", "training-operator v1", "the MPI Operator", "Volcano"):
        assert system in top
    for _, kind in SOURCES:
        assert kind.removeprefix("Cluster") in command
    assert "PyTorchJobs, MPIJobs, XGBoostJobs and JAXJobs (kubeflow.org/v1), MPIJobs (kubeflow.org/v2beta1)" in command


def test_an_unreadable_file_gives_one_error_line(capsys, tmp_path):
    assert main(["import", str(tmp_path)]) == 2   # a directory: read() fails
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {tmp_path}: cannot read it: ")


def big_trainjob(entries: int) -> str:
    """A TrainJob of `entries` env variables of about 100 bytes each."""
    env = [{"name": f"VAR_{i:05d}", "value": "v" * 80} for i in range(entries)]
    return yaml.safe_dump({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                           "metadata": {"name": "big", "namespace": "ml"},
                           "spec": {"runtimeRef": {"name": "torch-distributed"},
                                    "trainer": {"numNodes": 2, "env": env}}})


def test_a_5_mb_trainjob_is_refused_as_too_big_for_the_api_server(capsys, tmp_path):
    (tmp_path / "big.yaml").write_text(big_trainjob(50_000))
    assert main(["import", str(tmp_path / "big.yaml")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"error: {tmp_path / 'big.yaml'}: TrainJob big: the imported TorchTrainJob is refused: "
                        r"Job/big-node-0: the object is \d+ bytes; the API server cannot store objects over 1572864 "
                        r"bytes \(etcd's default request limit\)", line)


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml reads at its own pace")
def test_a_large_manifest_is_read_in_a_fraction_of_pyyamls_pure_python_time(tmp_path):
    """CPU time, both measured in this process, so a busy machine slows both alike."""
    import time
    from trainjobs.tools.importer import read_files

    (tmp_path / "big.yaml").write_text(text := big_trainjob(10_000))
    start = time.process_time()
    expected = list(yaml.safe_load_all(text))
    pure_python = time.process_time() - start
    start = time.process_time()
    [document] = read_files([str(tmp_path / "big.yaml")])
    assert time.process_time() - start < pure_python / 2
    assert [document.body] == expected


def test_manifests_read_as_yaml_safe_load_reads_them(tmp_path):
    """Every manifest of the corpus, and the YAML forms read the slow way (numbers, merge keys, anchors)."""
    from trainjobs.tools.importer import read_files

    for path in sorted(IMPORTS.glob("*.yaml")):
        assert [d.body for d in read_files([str(path)])] == [d for d in yaml.safe_load_all(path.read_text()) if d]
    text = "a: &x {k: [1, 2.5, true, null, '3', 2024-01-02]}\nb: *x\nc: {<<: *x, d: !!binary aGk=}\ne: {1: one}\n"
    (tmp_path / "forms.yaml").write_text(text)
    [document] = read_files([str(tmp_path / "forms.yaml")])
    assert document.body == yaml.safe_load(text)
    assert document.body["a"] is document.body["b"]   # an alias is the anchored value, built once
    (tmp_path / "loop.yaml").write_text("kind: TrainJob\nspec: &x {trainer: *x}\n")
    with pytest.raises(ImportFailed, match="loop.yaml: not YAML: found unconstructable recursive node"):
        read_files([str(tmp_path / "loop.yaml")])


def test_without_the_import_extra_the_command_says_what_to_install(tmp_path):
    """Kubeflow's API models come with the `import` extra; without them the command says so in one line."""
    blocked = ("import sys; sys.modules['kubeflow_trainer_api'] = None; from trainjobs.tools.cli.main import main; "
               f"sys.exit(main(['import', {str(IMPORTS / 'kubeflow-kueue.yaml')!r}]))")
    done = __import__("subprocess").run([__import__("sys").executable, "-c", blocked], capture_output=True, text=True,
                                        timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["error: trainjobs import reads manifests with Kubeflow's API models, which are "
                                        "not installed: pip install 'trainjobs[import]'"]


def test_a_missing_namespace_names_the_flag_that_gives_it(capsys, tmp_path):
    """Intel MPI reaches the launcher by its short hostname, so the job needs a namespace; a source applied with
    `kubectl apply -n` has none, and the import's flag gives it."""
    [mpijob] = source("mpi-pi-openmpi.yaml")
    mpijob["spec"]["mpiImplementation"] = "Intel"
    mpijob["metadata"].pop("namespace", None)
    (tmp_path / "pi.yaml").write_text(yaml.safe_dump(mpijob))
    assert main(["import", str(tmp_path / "pi.yaml")]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if "namespace" in x]
    assert line.endswith("(the source names no namespace: pass it as --namespace NAME, or set the source's "
                         "metadata.namespace)")
    assert main(["import", "--namespace", "hpc", str(tmp_path / "pi.yaml")]) == 0


# ---- Kubeflow runtime patches, and their older spellings -----------------------------------------------------

def pod_set_of(objects: list[dict], name: str):
    return ObjectIndex(objects).pod_set(name)


def test_kubeflow_runtime_patches_reach_the_training_pods_without_dropping_anything():
    [job] = imported("kubeflow-runtime-patches.yaml")   # no allow_dropped: every patched field has an argument
    [trainjob] = source("kubeflow-runtime-patches.yaml")
    [patch] = trainjob["spec"]["runtimePatches"]
    jobset = patch["trainingRuntimeSpec"]["template"]
    [node] = jobset["spec"]["replicatedJobs"]
    pod_spec = node["template"]["spec"]["template"]["spec"]
    objects = objects_of(job)
    template = pod_set_of(objects, "patched-node-0").job["spec"]["template"]
    assert template["spec"]["serviceAccountName"] == pod_spec["serviceAccountName"]
    assert template["spec"]["nodeSelector"] == pod_spec["nodeSelector"]
    assert template["spec"]["tolerations"] == pod_spec["tolerations"]
    views = pods(objects, "patched-node-0")
    assert len(views) == trainjob["spec"]["trainer"]["numNodes"]
    for view in views:
        assert jobset["metadata"]["labels"].items() <= view.labels.items()
        assert jobset["metadata"]["annotations"].items() <= view.annotations.items()
        expected = kubeflow_torch_env(trainjob, None, view.index)
        assert {k: view.containers[0].env[k] for k in expected} == expected
    assert not job.findings.unexpressed
    assert {n.path for n in job.findings.notes} >= {"spec.runtimePatches[0].manager",
                                                    "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.labels"}


def test_kubeflow_v2_1_pod_template_overrides_are_read_with_a_note_for_each_target():
    [job] = imported("kubeflow-pod-template-overrides.yaml")
    [trainjob] = source("kubeflow-pod-template-overrides.yaml")
    node_override, initializer_override = trainjob["spec"]["podTemplateOverrides"]
    assert [n.path for n in job.findings.notes if "v2.1" in n.message] == ["spec.podTemplateOverrides[0]",
                                                                            "spec.podTemplateOverrides[1]"]
    objects = objects_of(job)
    node = pod_set_of(objects, "legacy-node-0").job["spec"]["template"]
    assert node["spec"]["serviceAccountName"] == node_override["spec"]["serviceAccountName"]
    assert node["spec"]["nodeSelector"] == node_override["spec"]["nodeSelector"]
    assert node["spec"]["tolerations"] == node_override["spec"]["tolerations"]
    assert node_override["metadata"]["labels"].items() <= node["metadata"]["labels"].items()
    [initializer] = [s for s in ObjectIndex(objects).pod_sets if "dataset" in s.name]
    assert initializer.job["spec"]["template"]["spec"]["nodeSelector"] == initializer_override["spec"]["nodeSelector"]


def test_patched_fields_without_an_argument_are_named_exactly(tmp_path):
    [trainjob] = source("kubeflow-runtime-patches.yaml")
    replicated = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    replicated[0]["template"]["metadata"] = {"labels": {"tier": "gold"}}
    replicated[0]["template"]["spec"]["template"]["spec"]["containers"] = [
        {"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        {"name": "log-shipper", "env": [{"name": "LEVEL", "value": "info"}]}]
    replicated[0]["template"]["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    replicated.append({"name": "evaluator", "template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}})
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(trainjob))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "job.yaml")])
    base = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs"
    assert [p.split(": ")[2] for p in failed.value.problems] == [
        f"{base}[0].template.metadata.labels", f"{base}[0].template.spec.template.spec.containers[1]",
        f"{base}[1].template.spec.template"]
    [job] = import_files([str(tmp_path / "job.yaml")], allow_dropped=True)
    assert job.args["volume_mounts"] == [{"name": "data", "mountPath": "/data"}]
    assert job.args["volumes"] == [{"name": "data", "emptyDir": {}}]


# ---- training-operator v1 ------------------------------------------------------------------------------------

def v1_replicas(job: dict) -> list[tuple[str, int]]:
    """(role, index) of every pod, in v1's rank order: Master first, then the Workers."""
    spec = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    return [(role, i) for role in ("Master", "Worker") if role in spec for i in range(spec[role].get("replicas", 1))]


def v1_pytorch_env(job: dict, role: str, index: int) -> dict[str, str]:
    """What training-operator v1.9 gave a PyTorchJob pod (reference §13.1): with a Master, MASTER_* and PET_MASTER_*
    naming the master's Service by its short name and port, WORLD_SIZE = pods x nprocPerNode (auto as 1), RANK and
    PET_NODE_RANK master 0 / worker i + 1, PET_NNODES the pods, PET_NPROC_PER_NODE nprocPerNode (defaulted to auto
    since v1.7); PYTHONUNBUFFERED."""
    name, spec = job["metadata"]["name"], job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(r.get("replicas", 1) for r in replicas.values())
    ports = replicas["Master"]["template"]["spec"]["containers"][0].get("ports") or []
    port = str(next((p["containerPort"] for p in ports if p.get("name") == "pytorchjob-port"), 23456))
    nproc = spec.get("nprocPerNode")
    rank = str(index if role == "Master" else index + 1)
    env = {"PYTHONUNBUFFERED": "1", "MASTER_PORT": port, "PET_MASTER_PORT": port, "MASTER_ADDR": f"{name}-master-0",
           "PET_MASTER_ADDR": f"{name}-master-0", "WORLD_SIZE": str(total * (int(nproc) if str(nproc).isdigit() else 1)),
           "RANK": rank, "PET_NODE_RANK": rank, "PET_NNODES": str(total), "PET_NPROC_PER_NODE": str(nproc or "auto")}
    return env


def noted_variables(job: Imported) -> set[str]:
    return {v.strip() for n in job.findings.notes if n.path.startswith("env ") for v in n.path[4:].split(",")}


@pytest.mark.parametrize("file", ["v1-pytorch-master-workers.yaml", "v1-pytorch-mnist.yaml"])
def test_a_v1_pytorchjob_is_one_indexed_set_with_v1s_ranks_and_every_env_difference_noted(file):
    [job] = imported(file)
    [source_job] = source(file)
    assert job.component == "TorchTrainJob"
    views = pods(objects_of(job), f"{job.name}-node-0")
    order = v1_replicas(source_job)
    assert len(views) == len(order) == job.args["num_nodes"]
    differing = set()
    for view, (role, i) in zip(views, order, strict=True):
        v1 = v1_pytorch_env(source_job, role, i)
        env = view.containers[0].env
        differing |= {k for k, v in v1.items() if env.get(k) != v}
        rank = env.get("PET_NODE_RANK", env.get("RANK"))
        assert rank == v1["RANK"]                                   # the master is rank 0, worker i is i + 1
        if "PET_NNODES" in env:
            assert env["PET_NNODES"] == v1["PET_NNODES"]
    assert differing and differing <= noted_variables(job)          # every difference from v1 is said
    assert "PYTHONUNBUFFERED" not in differing


def test_the_master_and_3_workers_pytorchjob_gets_pet_nnodes_4_and_ranks_0_to_3():
    [job] = imported("v1-pytorch-master-workers.yaml")
    views = pods(objects_of(job), "resnet-node-0")
    assert [v.containers[0].env["PET_NODE_RANK"] for v in views] == ["0", "1", "2", "3"]
    assert {v.containers[0].env["PET_NNODES"] for v in views} == {"4"}
    assert {v.containers[0].env["PET_NPROC_PER_NODE"] for v in views} == {"2"}
    assert noted_variables(job) >= {"PET_MASTER_ADDR", "PET_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE",
                                    "RANK", "PYTHONUNBUFFERED"}
    [port] = [n.message for n in job.findings.notes if n.path == "env PET_MASTER_PORT"]
    assert port == "29500 (v1: 23456, the master's pytorchjob-port)"
    assert job.args["backoff_limit"] == 3 and "spec.runPolicy.cleanPodPolicy" in {n.path for n in job.findings.notes}


def test_an_elastic_pytorchjob_becomes_a_torch_job_with_its_node_range():
    """v1's elasticPolicy is torchrun's node range over c10d: PET_NNODES=MIN:MAX, the Indexed Job sized for MAX,
    v1's maxRestarts as PET_MAX_RESTARTS; torchrun, not the pod index, then gives the ranks."""
    [job] = imported("v1-pytorch-elastic.yaml")
    [pytorchjob] = source("v1-pytorch-elastic.yaml")
    policy = pytorchjob["spec"]["elasticPolicy"]
    assert (job.args["num_nodes"], job.args["min_nodes"], job.args["rendezvous"]) == (
        policy["maxReplicas"], policy["minReplicas"], "c10d")
    assert "torchrun" not in job.args   # python -m torch.distributed.run is torchrun
    views = pods(objects_of(job), "echo-node-0")
    assert len(views) == policy["maxReplicas"]
    for view in views:
        env = view.containers[0].env
        assert env["PET_NNODES"] == f"{policy['minReplicas']}:{policy['maxReplicas']}"   # as v1 set it
        assert env["PET_MAX_RESTARTS"] == str(policy["maxRestarts"])
        assert env["PET_RDZV_BACKEND"] == "c10d" and "PET_NODE_RANK" not in env
    assert "spec.elasticPolicy.minReplicas" in {n.path for n in job.findings.notes}
    assert job.findings.unexpressed == []


def elastic_with_a_master() -> dict:
    [pytorchjob] = source("v1-pytorch-elastic.yaml")
    replicas = pytorchjob["spec"]["pytorchReplicaSpecs"]
    replicas["Master"] = {**replicas["Worker"], "replicas": 1}
    return pytorchjob


@pytest.mark.parametrize("file", ["v1-pytorch-master-workers.yaml", "v1-pytorch-mnist.yaml", "v1-pytorch-elastic.yaml",
                                  "v1-pytorch-elastic-imagenet.yaml", "elastic with a master", "v1-xgboost.yaml",
                                  "v1-lightgbm.yaml", "v1-jax.yaml"])
def test_a_note_on_a_variable_says_it_is_set_only_where_every_pod_has_it(file):
    """A note on `env X` that begins "not" says the pods lack X; any other says they have it."""
    document = elastic_with_a_master() if file == "elastic with a master" else source(file)[0]
    [job] = import_documents([Document(file, 0, document)])
    views = pods(objects_of(job), f"{job.name}-node-0")
    for note in job.findings.notes:
        if note.path.startswith("env "):
            variables = [v.strip() for v in note.path[4:].split(",")]
            present = [all(v in view.containers[0].env for view in views) for v in variables]
            assert present == [not note.message.startswith("not")] * len(variables), note


@pytest.mark.parametrize("document", ["v1-pytorch-elastic-imagenet.yaml", "elastic with a master"])
def test_an_elastic_pytorchjobs_notes_give_the_rendezvous_it_gets_and_v1s_auto_processes(document):
    """v1.9's elastic env: PET_RDZV_ENDPOINT rdzvHost (default <job>-worker-0) : rdzvPort (default the workers'
    pytorchjob-port); with a Master also MASTER_*, PET_MASTER_*, PET_NODE_RANK, WORLD_SIZE and RANK, which the
    job's c10d rendezvous does without; nprocPerNode defaulted to auto, which torchrun resolves itself."""
    pytorchjob = elastic_with_a_master() if document == "elastic with a master" else source(document)[0]
    [job] = import_documents([Document("elastic.yaml", 0, pytorchjob)])
    name = pytorchjob["metadata"]["name"]
    views = pods(objects_of(job), f"{name}-node-0")
    notes = {n.path: n.message for n in job.findings.notes}
    endpoint = views[0].containers[0].env["PET_RDZV_ENDPOINT"]
    assert endpoint == f"{views[0].dns_names[0]}:29500"
    assert notes["env PET_RDZV_ENDPOINT"].startswith(f"{endpoint}, ")
    assert notes["env PET_RDZV_ENDPOINT"].endswith(f"(v1: {name}-worker-0:23456)")
    assert job.args["num_proc_per_node"] == "auto"
    assert "(v1: auto, nprocPerNode's default since v1.7" in notes["env PET_NPROC_PER_NODE"]
    requests = pytorchjob["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].get(
        "resources", {}).get("requests", {})
    assert {v.containers[0].env["PET_NPROC_PER_NODE"] for v in views} == {str(requests.get("cpu", 1))}
    for view in views:
        assert not {"PET_MASTER_ADDR", "PET_NODE_RANK", "MASTER_ADDR", "RANK"} & set(view.containers[0].env)


def test_an_imported_elastic_policy_gets_the_store_a_growing_job_needs():
    """v1 left TORCH_DISABLE_SHARE_RDZV_TCP_STORE to the user; without it a grown job's new pod never starts."""
    [job] = imported("v1-pytorch-elastic.yaml")
    assert {v.containers[0].env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] for v in pods(objects_of(job), "echo-node-0")} == {"1"}


def test_what_an_elastic_policy_cannot_carry_is_named():
    [pytorchjob] = source("v1-pytorch-elastic.yaml")
    pytorchjob["spec"]["elasticPolicy"].update(rdzvBackend="etcd", metrics=[{"type": "Resource"}])
    with pytest.raises(ImportFailed) as failed:
        import_documents([Document("elastic.yaml", 0, pytorchjob)])
    assert sorted(p.split(": ")[2] for p in failed.value.problems) == ["spec.elasticPolicy.metrics",
                                                                       "spec.elasticPolicy.rdzvBackend"]


def test_a_v1_mpijob_reaches_its_workers_by_ssh_and_says_so():
    [job] = imported("v1-mpijob-horovod.yaml")
    [mpijob] = source("v1-mpijob-horovod.yaml")
    assert job.component == "MpiTrainJob"
    objects = objects_of(job)
    [launcher] = pods(objects, "horovod-mnist-launcher-0")
    slots = mpijob["spec"]["slotsPerWorker"]
    workers = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    # v1's hostfile: horovod-mnist-worker-<i> slots=N (reference §13.2); the job's names its node pods.
    v1_hosts = [f"horovod-mnist-worker-{i} slots={slots}" for i in range(workers)]
    lines = launcher.files["/etc/mpi/hostfile"].content.decode().splitlines()
    assert lines == [h.replace("worker-", "node-0-").replace(" ", ".horovod-mnist ") for h in v1_hosts]
    assert launcher.containers[0].command[-10:] == ["mpirun", *mpijob["spec"]["mpiReplicaSpecs"]["Launcher"][
        "template"]["spec"]["containers"][0]["args"]]
    [node] = pods(objects, "horovod-mnist-node-0")[:1]
    assert node.containers[0].command[-2:] == ["/usr/sbin/sshd", "-De"]   # v1 ran `sleep 365d` and kubectl exec
    assert "OMPI_MCA_plm_rsh_agent" in noted_variables(job)
    assert any("kubectl exec" in n.message and "SSH replaces it" in n.message for n in job.findings.notes)


def run_discover_hosts(launcher, tmp_path: Path, resolving: set[str]) -> list[str]:
    """The launcher's discover_hosts.sh run as horovodrun runs it (no arguments), over the launcher's hostfile,
    with a getent that resolves only `resolving`."""
    import subprocess

    script = launcher.files["/etc/mpi/discover_hosts.sh"]
    assert script.mode == 0o555   # as the operators mount it
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "hostfile").write_bytes(launcher.files["/etc/mpi/hostfile"].content)
    (tmp_path / "discover_hosts.sh").write_text(script.content.decode().replace("/etc/mpi/hostfile",
                                                                                 str(tmp_path / "hostfile")))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "getent").write_text("#!/bin/sh\ncase \" $RESOLVING \" in *\" $2 \"*) echo \"10.0.0.9 $2\";; "
                                             "*) exit 2;; esac\n")
    (tmp_path / "bin" / "getent").chmod(0o755)
    (tmp_path / "discover_hosts.sh").chmod(0o755)
    done = subprocess.run([str(tmp_path / "discover_hosts.sh")], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "RESOLVING": " ".join(resolving)})
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_an_elastic_horovod_launcher_finds_the_operators_discover_hosts_script(tmp_path):
    """training-operator v1.9 updateDiscoverHostsInConfigMap: `echo <pod>:<slotsPerWorker>` for each Running
    worker, sorted by name, mounted 0555 at /etc/mpi/discover_hosts.sh; the job's lists the hosts that resolve."""
    [job] = imported("v1-mpijob-horovod-elastic.yaml")
    [mpijob] = source("v1-mpijob-horovod-elastic.yaml")
    objects = objects_of(job)
    [launcher] = pods(objects, "tensorflow-mnist-elastic-launcher-0")
    assert "/etc/mpi/discover_hosts.sh" in launcher.containers[0].command
    hosts = [view.dns_names[0] for view in pods(objects, "tensorflow-mnist-elastic-node-0")]
    slots = mpijob["spec"]["slotsPerWorker"]
    assert len(hosts) == mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert run_discover_hosts(launcher, tmp_path, set(hosts)) == [f"{host}:{slots}" for host in hosts]
    assert run_discover_hosts(launcher, tmp_path / "one", {hosts[1]}) == [f"{hosts[1]}:{slots}"]   # one is up
    assert run_discover_hosts(launcher, tmp_path / "none", set()) == []
    assert any(n.message.startswith("/etc/mpi/discover_hosts.sh: the job's launcher has it") for n in job.findings.notes)


def test_discover_hosts_reads_hydras_hostfile_and_the_launcher_as_a_host(tmp_path):
    [mpijob] = source("mpi-pi-intel.yaml")
    mpijob["spec"]["runLauncherAsWorker"] = True
    [job] = import_documents([Document("pi.yaml", 0, mpijob)], namespace="default")
    [launcher] = pods(objects_of(job), "pi-launcher-0")
    lines = launcher.files["/etc/mpi/hostfile"].content.decode().splitlines()   # host:slots already
    assert run_discover_hosts(launcher, tmp_path, {line.split(":")[0] for line in lines}) == lines


@pytest.mark.parametrize("limits, blank", [({"cpu": "1"}, True), ({"cpu": "1", "nvidia.com/gpu": "1"}, False),
                                           ({"amd.com/gpu": "1"}, False)])
def test_a_v1_launcher_without_gpu_limits_gets_nvidia_visible_devices_blank(limits, blank):
    """training-operator v1.9 newLauncher: NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES "" unless a limit
    of the launcher's names a GPU (a name ending in .com/gpu or holding "gpu")."""
    [mpijob] = source("v1-mpijob-horovod.yaml")
    mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"]["limits"] = limits
    [job] = import_documents([Document("mpi.yaml", 0, mpijob)])
    [launcher] = pods(objects_of(job), "horovod-mnist-launcher-0")
    env = launcher.containers[0].env
    blanked = {name: env.get(name) for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")}
    assert blanked == ({"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""} if blank else
                       {"NVIDIA_VISIBLE_DEVICES": None, "NVIDIA_DRIVER_CAPABILITIES": None})
    for node in pods(objects_of(job), "horovod-mnist-node-0"):
        assert "NVIDIA_VISIBLE_DEVICES" not in node.containers[0].env


def test_an_mpi_operator_launcher_that_is_a_worker_keeps_its_gpus():
    [mpijob] = source("mpi-pi-openmpi.yaml")
    mpijob["spec"]["runLauncherAsWorker"] = True
    [job] = import_documents([Document("pi.yaml", 0, mpijob)])
    [launcher] = pods(objects_of(job), "pi-launcher-0")
    assert "NVIDIA_VISIBLE_DEVICES" not in launcher.containers[0].env


# The lines of upstream's v1 example scripts that read the env (kubeflow/training-operator v1.9 examples/), as
# written there: xgboost-dist/utils.py extract_xgbooost_cluster_env, lightgbm-dist/main.py main, and
# jax/cpu-demo/train.py _main (jax-dist-spmd-mnist reads the same four).
XGBOOST_DIST_READS = """
master_addr = os.environ.get("MASTER_ADDR", "{}")
master_port = int(os.environ.get("MASTER_PORT", "{}"))
rank = int(os.environ.get("RANK", "{}"))
world_size = int(os.environ.get("WORLD_SIZE", "{}"))
"""
LIGHTGBM_DIST_READS = """
master_addr = os.environ["MASTER_ADDR"]
master_port = os.environ["MASTER_PORT"]
worker_addrs = os.environ["WORKER_ADDRS"]
worker_port = os.environ["WORKER_PORT"]
world_size = int(os.environ["WORLD_SIZE"])
rank = int(os.environ["RANK"])
"""
JAX_CPU_DEMO_READS = """
process_id = int(os.getenv("PROCESS_ID"))
num_processes = int(os.getenv("NUM_PROCESSES"))
coordinator_address = os.getenv("COORDINATOR_ADDRESS")
coordinator_port = int(os.getenv("COORDINATOR_PORT"))
coordinator_address = f"{coordinator_address}:{coordinator_port}"
"""


def script_reads(lines: str, env: dict[str, str]) -> dict:
    """What the script's lines read from the env of a pod: its variables after running them."""
    class Os:
        environ = env
        getenv = staticmethod(env.get)
    scope = {"os": Os}
    exec(lines, scope)
    return {k: v for k, v in scope.items() if k not in ("os", "__builtins__")}


def declared_port(objects: list[dict], job_name: str) -> int:
    """The one port the Job's training container declares (what a listener on pod 0 is reached at)."""
    [job] = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == job_name]
    [port] = job["spec"]["template"]["spec"]["containers"][0]["ports"]
    return port["containerPort"]


@pytest.mark.parametrize("file", ["v1-xgboost.yaml", "v1-lightgbm.yaml"])
def test_upstreams_xgboost_and_lightgbm_scripts_find_v1s_env_on_every_pod(file):
    """training-operator v1.9 xgboost.SetPodEnv: RANK master 0, worker i i + 1; WORLD_SIZE every replica; the
    master's address and port; with workers, WORKER_ADDRS (worker 0 first) and WORKER_PORT."""
    [job] = imported(file)
    [xgb_source] = source(file)
    assert job.component == "XGBoostTrainJob"
    objects = objects_of(job)
    views, port = pods(objects, f"{job.name}-node-0"), declared_port(objects, f"{job.name}-node-0")
    order = v1_replicas(xgb_source)
    hosts = [view.dns_names[0] for view in views]
    for view, (role, i) in zip(views, order, strict=True):
        env = view.containers[0].env
        rank = i if role == "Master" else i + 1
        assert script_reads(XGBOOST_DIST_READS, env) == {
            "master_addr": hosts[0], "master_port": port, "rank": rank, "world_size": len(order)}
        lightgbm = script_reads(LIGHTGBM_DIST_READS, env)
        assert lightgbm["worker_addrs"].split(",") == hosts[1:]       # the machine list: master, then workers
        assert lightgbm["worker_port"] == lightgbm["master_port"] == str(port)   # each pod's local_listen_port
        assert (env["DMLC_TASK_ID"], env["DMLC_NUM_WORKER"], env["PYTHONUNBUFFERED"]) == (str(rank), str(len(order)), "1")
        assert view.containers[0].args == xgb_source["spec"]["xgbReplicaSpecs"][role]["template"]["spec"][
            "containers"][0]["args"]   # still run by the image's ENTRYPOINT
    assert noted_variables(job) == {"MASTER_ADDR", "MASTER_PORT", "WORKER_ADDRS", "WORKER_PORT", "PYTHONUNBUFFERED",
                                    "DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}


def test_upstreams_jax_script_finds_v1s_env_on_every_pod():
    """training-operator v1.9 jax setPodEnv: PROCESS_ID the worker's index, NUM_PROCESSES every replica, the
    coordinator worker 0."""
    [job] = imported("v1-jax.yaml")
    objects = objects_of(job)
    views, port = pods(objects, "jax-demo-node-0"), declared_port(objects, "jax-demo-node-0")
    for i, view in enumerate(views):
        env = view.containers[0].env
        assert script_reads(JAX_CPU_DEMO_READS, env) == {
            "process_id": i, "num_processes": len(views), "coordinator_port": port,
            "coordinator_address": f"{views[0].dns_names[0]}:{port}"}
        assert (env["JAX_PROCESS_ID"], env["JAX_NUM_PROCESSES"]) == (str(i), str(len(views)))
    assert noted_variables(job) == {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "PYTHONUNBUFFERED",
                                    "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"}


def test_v1s_variables_replace_the_templates_own_and_an_xgboostjob_needs_its_master():
    [xgb] = source("v1-xgboost.yaml")
    for role in ("Master", "Worker"):
        xgb["spec"]["xgbReplicaSpecs"][role]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "RANK", "value": "7"}, {"name": "OTHER", "value": "x"}]
    [job] = import_documents([Document("xgb.yaml", 0, xgb)])
    views = pods(objects_of(job), "iris-node-0")
    assert [(v.containers[0].env["RANK"], v.containers[0].env["OTHER"]) for v in views] == [
        ("0", "x"), ("1", "x"), ("2", "x")]
    assert any(n.path == "env" and n.message.startswith("RANK given in the template") for n in job.findings.notes)
    del xgb["spec"]["xgbReplicaSpecs"]["Master"]
    with pytest.raises(ImportFailed, match=r"spec.xgbReplicaSpecs.Master: must be present"):
        import_documents([Document("xgb.yaml", 0, xgb)])


# ---- Volcano MPI jobs by ssh and svc; images that need their entrypoint --------------------------------------

def test_a_volcano_mpi_job_by_ssh_and_svc_gets_a_hostfile_of_the_worker_tasks_hosts():
    [job] = imported("volcano-ssh-mpi.yaml")
    [vcjob] = source("volcano-ssh-mpi.yaml")
    assert (job.component, job.args["gang_scheduler"]) == ("MpiTrainJob", "volcano")
    workers = next(t for t in vcjob["spec"]["tasks"] if t["name"] == "mpiworker")["replicas"]
    # Volcano's svc plugin: /etc/volcano/mpiworker.host lists <job>-mpiworker-<i>.<job> (reference peers §1.4).
    volcano_hosts = [f"hello-mpi-mpiworker-{i}.hello-mpi" for i in range(workers)]
    objects = objects_of(job)
    [launcher] = pods(objects, "hello-mpi-launcher-0")
    lines = launcher.files["/etc/mpi/hostfile"].content.decode().splitlines()
    assert [line.split()[0] for line in lines] == [h.replace("mpiworker-", "node-0-") for h in volcano_hosts]
    assert "--hostfile /etc/mpi/hostfile -np 3 mpi_hello_world" in launcher.containers[0].command[-1]
    assert any(n.path == "spec.tasks[0].dependsOn" for n in job.findings.notes)


def test_a_volcano_mpi_job_naming_its_hosts_says_what_to_change():
    with pytest.raises(ImportFailed) as failed:
        imported("volcano-horovod.yaml")
    assert [p.split(": ", 2)[2] for p in failed.value.problems] == [
        "spec.policies: cannot be expressed: a Volcano Job setting without an argument",
        "spec.tasks[0].template.spec.containers[0].command: cannot be expressed: the command names its hosts itself "
        "(--host ${WORKER_HOST}, from /etc/volcano/worker.host); the job gives mpirun the hostfile /etc/mpi/hostfile "
        "(the worker task's pods), which it reads by itself: remove --host ${WORKER_HOST} and the line that builds "
        "it, or pass --hostfile /etc/mpi/hostfile"]


def test_the_intel_mpi_pi_launcher_still_runs_intels_environment_set_up():
    [job] = imported("mpi-pi-intel.yaml")
    [mpijob] = source("mpi-pi-intel.yaml")
    objects = objects_of(job)
    [launcher] = pods(objects, "pi-launcher-0")
    given = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    # mpioperator/intel: ENTRYPOINT ["/entrypoint.sh"], which sources /opt/intel/oneapi/setvars.sh, then execs "$@".
    assert launcher.containers[0].command[-len(given) - 1:] == ["/entrypoint.sh", *given]
    for name, value in mpi_operator_launcher_env(mpijob).items():
        env = launcher.containers[0].env
        assert env[name].startswith(value) if name in SSH_OPTIONS else env[name] == value
    [node] = pods(objects, "pi-node-0")[:1]
    sshd = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert node.containers[0].command[-len(sshd) - 1:] == ["/entrypoint.sh", *sshd]


def test_args_without_a_command_on_an_unknown_image_say_which_command_to_give(tmp_path):
    [mpijob] = source("mpi-pi-intel.yaml")
    mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["image"] = "example/pi:1"
    (tmp_path / "pi.yaml").write_text(yaml.safe_dump(mpijob))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "pi.yaml")])
    [problem] = failed.value.problems
    assert problem.endswith("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].args: cannot be expressed: no "
                            'command: the source runs the ENTRYPOINT of "example/pi:1" with these args, and the job '
                            "runs its own entrypoint before the command; give the container command: [<the image's "
                            "ENTRYPOINT>, mpirun, -n, 2, /home/mpiuser/pi] (or command: ['mpirun', '-n', '2', "
                            "'/home/mpiuser/pi'] if the image has no ENTRYPOINT)")


# ---- every field of every source kind is accounted for --------------------------------------------------------

# Fields of the kinds no Python model describes, written from their published types: training-operator v1.9
# (pkg/apis/kubeflow.org/v1: common_types.go RunPolicy/SchedulingPolicy/ReplicaSpec, pytorch_types.go with
# ElasticPolicy, xgboost_types.go, jax_types.go, mpi_types.go), the MPI Operator (pkg/apis/kubeflow/v2beta1
# types.go) and Volcano (batch.volcano.sh/v1alpha1 JobSpec and TaskSpec). A pod template is a Kubernetes
# PodTemplateSpec, whose every field becomes an argument or an override (tested above).
RUN_POLICY = {"spec.runPolicy.cleanPodPolicy": "All", "spec.runPolicy.ttlSecondsAfterFinished": 600,
              "spec.runPolicy.activeDeadlineSeconds": 3600, "spec.runPolicy.backoffLimit": 4,
              "spec.runPolicy.schedulingPolicy.minAvailable": 1, "spec.runPolicy.schedulingPolicy.queue": "q",
              "spec.runPolicy.schedulingPolicy.minResources": {"cpu": "1"},
              "spec.runPolicy.schedulingPolicy.priorityClass": "high",
              "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds": 60, "spec.runPolicy.suspend": True,
              "spec.runPolicy.managedBy": "kueue.x-k8s.io/multikueue"}


def replica_fields(field: str, role: str) -> dict:
    return {f"spec.{field}.{role}.replicas": 5, f"spec.{field}.{role}.restartPolicy": "ExitCode",
            f"spec.{field}.{role}.template.metadata.labels": {"extra": "yes"}}


SOURCE_FIELDS = {
    "v1-pytorch-master-workers.yaml": {
        **RUN_POLICY, "spec.nprocPerNode": "4", **replica_fields("pytorchReplicaSpecs", "Worker"),
        **{f"spec.elasticPolicy.{k}": v for k, v in {
            "minReplicas": 1, "maxReplicas": 6, "rdzvBackend": "etcd", "rdzvPort": 2379, "rdzvHost": "etcd",
            "rdzvId": "x", "rdzvConf": [{"key": "timeout", "value": "90"}], "standalone": True, "nProcPerNode": 2,
            "maxRestarts": 3, "metrics": [{"type": "Resource"}]}.items()}},
    "v1-xgboost.yaml": {**RUN_POLICY, **replica_fields("xgbReplicaSpecs", "Worker")},
    "v1-jax.yaml": {**RUN_POLICY, **replica_fields("jaxReplicaSpecs", "Worker")},
    "v1-mpijob-horovod.yaml": {**RUN_POLICY, "spec.slotsPerWorker": 4, "spec.cleanPodPolicy": "All",
                               "spec.mainContainer": "mpi", **replica_fields("mpiReplicaSpecs", "Worker")},
    "mpi-pi-openmpi.yaml": {**RUN_POLICY, "spec.slotsPerWorker": 4, "spec.runLauncherAsWorker": True,
                            "spec.sshAuthMountPath": "/home/u/.ssh", "spec.launcherCreationPolicy": "AtStartup",
                            "spec.mpiImplementation": "Intel", **replica_fields("mpiReplicaSpecs", "Worker")},
    "volcano-ssh-mpi.yaml": {
        "spec.schedulerName": "other", "spec.minAvailable": 2, "spec.volumes": [{"mountPath": "/d"}],
        "spec.policies": [{"event": "PodEvicted", "action": "RestartJob"}], "spec.plugins.env": [],
        "spec.plugins.tensorflow": [], "spec.runningEstimate": "1h", "spec.queue": "q", "spec.maxRetry": 3,
        "spec.ttlSecondsAfterFinished": 60, "spec.priorityClassName": "high", "spec.minSuccess": 1,
        "spec.networkTopology": {"mode": "hard"},
        **{f"spec.tasks[1].{k}": v for k, v in {
            "replicas": 5, "policies": [{"event": "PodFailed", "action": "AbortJob"}], "topologyPolicy": "best-effort",
            "minAvailable": 1, "maxRetry": 2, "dependsOn": {"name": ["mpimaster"]},
            "partitionPolicy": {"totalPartitions": 1}}.items()}},
    "volcano-pytorch.yaml": {"spec.plugins.ssh": [], "spec.plugins.svc": [], "spec.plugins.env": []},
}


def kubeflow_fields(model, root: str, samples: dict) -> dict:
    """Every field of a Kubeflow API model's spec, down to the Kubernetes types it embeds, with a value."""
    schema = model.model_json_schema()
    defs = schema["$defs"]
    fields: dict = {}

    def ref(node):
        for option in [node, node.get("items") or {}, *node.get("anyOf", []),
                       *((o.get("items") or {}) for o in node.get("anyOf", []))]:
            if "$ref" in option:
                return option["$ref"].rsplit("/", 1)[1], node.get("type") == "array" or any(
                    o.get("type") == "array" for o in node.get("anyOf", []))
        return None, False

    def walk(node, path):
        for key, sub in (node.get("properties") or {}).items():
            name, array = ref(sub)
            where = f"{path}.{key}" + ("[0]" if array else "")
            if name and name.startswith(("Trainer", "Jobset")):
                walk(defs[name], where)
            else:
                fields[where] = samples.get(where, samples.get(key, samples.get(name)))

    walk(defs[root], "spec")
    return fields


def set_path(document: dict, path: str, value) -> None:
    """Set a field by its path (`a.b[1].c`), making the mappings and list items on the way."""
    parts = [int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"[^.\[\]]+|\[\d+\]", path)]
    node = document
    for part, following in zip(parts, parts[1:]):
        if isinstance(part, int):
            while len(node) <= part:
                node.append({} if not isinstance(following, int) else [])
            if not isinstance(node[part], (dict, list)):
                node[part] = {}
            node = node[part]
        else:
            wanted = list if isinstance(following, int) else dict
            if not isinstance(node.get(part), wanted):
                node[part] = wanted()
            node = node[part]
    if isinstance(parts[-1], int):
        while len(node) <= parts[-1]:
            node.append(None)
    node[parts[-1]] = value


KUBEFLOW_SAMPLES = {
    "IoK8sApiCoreV1EnvVar": {"name": "EXTRA", "value": "1"}, "IoK8sApiCoreV1LocalObjectReference": {"name": "s"},
    "IoK8sApimachineryPkgApisMetaV1ObjectMeta": {"labels": {"extra": "yes"}},
    "IoK8sApiCoreV1Affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}},
    "IoK8sApiCoreV1SecurityContext": {"runAsUser": 1000}, "IoK8sApiCoreV1PodSecurityContext": {"fsGroup": 1000},
    "IoK8sApiCoreV1VolumeMount": {"name": "data", "mountPath": "/data"},
    "IoK8sApiCoreV1PodSchedulingGate": {"name": "wait"},
    "IoK8sApiCoreV1Toleration": {"key": "k", "operator": "Exists"},
    "IoK8sApiCoreV1Volume": {"name": "data", "emptyDir": {}},
    "IoK8sApiCoreV1ResourceRequirements": {"limits": {"cpu": "3"}},
    "IoK8sApiCoreV1PersistentVolumeClaim": {"metadata": {"name": "data"}},
    "SchedulingV1beta1NetworkTopologySpec": {"mode": "hard"},
    "activeDeadlineSeconds": 600, "storageUri": "hf://a/b", "managedBy": "kueue.x-k8s.io/multikueue",
    "manager": "team", "time": "2026-01-01T00:00:00Z", "name": "x", "nodeSelector": {"a": "b"},
    "serviceAccountName": "sa", "terminationGracePeriodSeconds": 5, "apiGroup": "example.com", "kind": "Other",
    "suspend": True, "args": ["--x"], "command": ["python", "x.py"], "image": "example/x:1", "numNodes": 5,
    "numProcPerNode": 3, "mpiImplementation": "Intel", "runLauncherAsNode": False, "sshAuthMountPath": "/home/u/.ssh",
    "containerNames": ["sidecar"], "jobName": "node", "scheduleTimeoutSeconds": 60, "jax": {}, "xgboost": {},
    "jobIndex": 0, "podIndex": 0, "replicatedJob": "node", "maxRestarts": 3, "restartStrategy": "Recreate",
    "action": "FailJobSet", "onJobFailureMessagePatterns": ["x"], "onJobFailureReasons": ["BackoffLimitExceeded"],
    "targetReplicatedJobs": ["node"], "enableDNSHostnames": False, "publishNotReadyAddresses": False,
    "subdomain": "other", "status": "Ready", "groupName": "g", "replicas": 2, "startupPolicyOrder": "InOrder",
    "operator": "Any", "ttlSecondsAfterFinished": 60, "whenDeleted": "Delete",
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name": "model-initializer",
    "spec.template.spec.replicatedJobs[0].template": {"spec": {"template": {"spec": {"containers": [
        {"name": "node", "image": "example/x:1"}]}}}},
}


def kubeflow_source_fields():
    from kubeflow_trainer_api.models import TrainerV1alpha1ClusterTrainingRuntime, TrainerV1alpha1TrainJob

    trainjob = kubeflow_fields(TrainerV1alpha1TrainJob, "TrainerV1alpha1TrainJobSpec", KUBEFLOW_SAMPLES)
    runtime = kubeflow_fields(TrainerV1alpha1ClusterTrainingRuntime, "TrainerV1alpha1TrainingRuntimeSpec",
                              KUBEFLOW_SAMPLES)
    return trainjob, runtime


# List items the API requires a field of (a container patch its name, an envInjection target its job and
# containers): set before the field under test.
REQUIRED_WITH = {"containers[0]": {"name": "node"}, "initContainers[0]": {"name": "warm-up"},
                 "targets[0]": {"jobName": "node", "containerNames": ["sidecar"]}}


def problems_or_findings(documents: list[dict], tmp_path, name: str):
    (tmp_path / name).write_text(yaml.safe_dump_all(documents))
    try:
        [job] = import_files([str(tmp_path / name)], allow_dropped=True, namespace="default")
    except ImportFailed as failed:
        return failed.problems, None
    return None, job


def unaccounted(file: str, index: int, fields: dict, tmp_path) -> list[str]:
    """The fields whose value changes nothing: not an argument, not named by a note, not in the refusal."""
    base = source(file)
    _, before = problems_or_findings(base, tmp_path, "base.yaml")
    said_before = {str(f) for f in before.findings.notes + before.findings.unexpressed}
    silent = []
    for path, value in fields.items():
        assert value is not None, f"{path}: give the field a sample value"
        documents = source(file)
        for item, required in REQUIRED_WITH.items():
            if f".{item}." in path:
                head = path[:path.index(f".{item}.") + len(item) + 1]
                for key, sample in required.items():
                    if not path.startswith(f"{head}.{key}"):
                        set_path(documents[index], f"{head}.{key}", sample)
        set_path(documents[index], path, value)
        problems, job = problems_or_findings(documents, tmp_path, "changed.yaml")
        parents = [p for p in (path[:m.start()] for m in re.finditer(r"[.\[]", path)) if p.count(".") >= 1] + [path]
        if problems is not None:
            if any(": unknown field:" in p for p in problems):
                silent.append(f"{path} (refused as unknown)")
            elif not any(p_ in problem for problem in problems for p_ in parents) and not any(
                    "the imported" in problem for problem in problems):
                silent.append(f"{path} (refused without naming it: {problems})")
            continue
        said = {str(f) for f in job.findings.notes + job.findings.unexpressed} - said_before
        named = any(f.path.split(" ")[0] in parents or f.path.startswith(path)
                    for f in job.findings.notes + job.findings.unexpressed if str(f) in said)
        if job.args == before.args and not named:
            silent.append(path)
    return silent


@pytest.mark.parametrize("file", sorted(SOURCE_FIELDS))
def test_every_field_of_the_operators_and_volcanos_kinds_is_accounted_for(file, tmp_path):
    assert unaccounted(file, 0, SOURCE_FIELDS[file], tmp_path) == []


def test_every_field_of_kubeflows_trainjob_and_runtime_is_accounted_for(tmp_path):
    trainjob, runtime = kubeflow_source_fields()
    assert len(trainjob) > 30 and len(runtime) > 30   # the models' whole spec, down to Kubernetes types
    silent = unaccounted("kubeflow-runtime-patches.yaml", 0, trainjob, tmp_path)
    mpi = {k: v for k, v in runtime.items() if ".mpi." in k}
    silent += unaccounted("kubeflow-volcano.yaml", 0, {k: v for k, v in runtime.items() if k not in mpi}, tmp_path)
    silent += unaccounted("kubeflow-deepspeed.yaml", 0, mpi, tmp_path)
    assert silent == []


def test_the_command_imports_a_v1_job_and_lists_every_env_difference_on_stderr(capsys):
    assert main(["import", "--to", "yaml", str(IMPORTS / "v1-pytorch-master-workers.yaml")]) == 0
    captured = capsys.readouterr()
    assert "type: trainjobs:index:TorchTrainJob" in captured.out and "numNodes: 4" in captured.out
    notes = [line for line in captured.err.splitlines() if ": env " in line]
    assert f"note: {IMPORTS / 'v1-pytorch-master-workers.yaml'}: PyTorchJob resnet: env PET_MASTER_PORT: 29500 (v1: " \
           "23456, the master's pytorchjob-port)" in notes
    assert len(notes) == len({line.split(": env ")[1].split(":")[0] for line in notes}) == 6


def test_a_volcano_job_with_ssh_but_no_mpirun_task_says_what_the_import_reads(tmp_path):
    [vcjob] = source("volcano-ssh-mpi.yaml")
    vcjob["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"] = ["/bin/sh", "-c", "./run.sh"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(vcjob))
    with pytest.raises(ImportFailed) as failed:
        import_files([str(tmp_path / "job.yaml")])
    [problem] = failed.value.problems
    assert problem.endswith("spec.plugins: the import reads a Job with the pytorch plugin, the mpi plugin, or the ssh "
                            "plugin (with svc) and two tasks, one of which runs mpirun or mpiexec (the launcher) and "
                            "the other the MPI hosts; here: plugins ssh, svc, tasks running mpirun: none of 2")


def test_a_launcher_patch_of_a_given_mpi_runtime_reaches_the_launcher_pod(tmp_path):
    runtime, trainjob = source("kubeflow-deepspeed.yaml")
    pod = {"nodeSelector": {"pool": "cpu"}, "tolerations": [{"key": "spot", "operator": "Exists"}]}
    trainjob["spec"]["runtimePatches"] = [{"manager": "ops", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "launcher", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump_all([runtime, trainjob]))
    [job] = import_files([str(tmp_path / "job.yaml")])
    objects = objects_of(job)
    launcher = pod_set_of(objects, "t5-launcher-0").job["spec"]["template"]["spec"]
    node = pod_set_of(objects, "t5-node-0").job["spec"]["template"]["spec"]
    assert (launcher["nodeSelector"], launcher["tolerations"]) == (pod["nodeSelector"], pod["tolerations"])
    assert "nodeSelector" not in node
    trainjob["spec"]["runtimeRef"]["name"] = "deepspeed-distributed"   # the built-in, by name: no template to patch
    (tmp_path / "builtin.yaml").write_text(yaml.safe_dump(trainjob))
    with pytest.raises(ImportFailed, match=r"runtimePatches\[0\].*: cannot be expressed: a patch of the MPI launcher "
                                           r"pods alone needs the runtime's file"):
        import_files([str(tmp_path / "builtin.yaml")])
