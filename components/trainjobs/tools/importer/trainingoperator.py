"""Training-operator v1 (kubeflow.org/v1): PyTorchJob, MPIJob, XGBoostJob and JAXJob.

- PyTorchJob: Master and Worker become one indexed set, as Kubeflow Trainer v2 does (the master is
  index 0, worker i is index i + 1, as v1 ranked them), a TorchTrainJob: with torchrun when the command
  runs it (PET_* env), else one process per pod (`torchrun: false`: MASTER_ADDR, MASTER_PORT,
  WORLD_SIZE, RANK);
- XGBoostJob (Master and Worker) and JAXJob (Worker) likewise, as XGBoostTrainJob and JaxTrainJob,
  whose pods also get v1's own variables (MASTER_ADDR, RANK, ...; COORDINATOR_ADDRESS, PROCESS_ID, ...),
  which their scripts read, beside the runtime's DMLC_* and JAX_*;
- MPIJob v1: an MpiTrainJob; v1 ran workers idle and reached them with `kubectl exec`, the job with SSH.

Where v1's env differs from the job's (the port, host names without the subdomain, PYTHONUNBUFFERED,
WORLD_SIZE counted in processes, names the runtime adds), a note says so, variable by variable
(reference: the training-operator v1.9 controllers). No Python model of the v1 API is published: its fields are
checked against its types' field lists here, its pod templates against Kubernetes' models.
"""

import re
import shlex
from dataclasses import dataclass
from typing import Any

from trainjobs.core.naming import pod_dns_name
from trainjobs.families import jax, xgboost
from trainjobs.kube.manifests import completion_index_env
from trainjobs.scheduling.volcano import QUEUE_ANNOTATION
from trainjobs.tools.importer.common import (checked_spec, RUN_POLICY_FIELDS, SCHEDULING_POLICY_FIELDS, Finding, Findings,
                                             appended_env, check_keys, check_pod_template, entrypoint_command,
                                             launcher_off_gpus, metadata_arguments, note_host_discovery,
                                             note_restart_policy, pod_arguments, require, run_policy_arguments,
                                             same_template)

API_VERSION = "kubeflow.org/v1"
API = "the training-operator v1 API"
CONTROLLER = "kubeflow.org/training-operator"
REPLICA_FIELDS = {"replicas", "template", "restartPolicy"}
ELASTIC_FIELDS = {"minReplicas", "maxReplicas", "rdzvBackend", "rdzvPort", "rdzvHost", "rdzvId", "rdzvConf",
                  "standalone", "nProcPerNode", "maxRestarts", "metrics"}


@dataclass(frozen=True)
class Kind:
    """What v1 defines for one kind: its replica specs' field, roles, main container and port."""

    component: str
    replicas_field: str
    spec_fields: set[str]
    roles: tuple[str, ...]
    container: str
    port_name: str
    port: int


KINDS = {
    "PyTorchJob": Kind("TorchTrainJob", "pytorchReplicaSpecs",
                       {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"},
                       ("Master", "Worker"), "pytorch", "pytorchjob-port", 23456),
    "XGBoostJob": Kind("XGBoostTrainJob", "xgbReplicaSpecs", {"runPolicy", "xgbReplicaSpecs"},
                       ("Master", "Worker"), "xgboost", "xgboostjob-port", 9999),
    "JAXJob": Kind("JaxTrainJob", "jaxReplicaSpecs", {"runPolicy", "jaxReplicaSpecs"}, ("Worker",), "jax",
                   "jaxjob-port", 6666),
    "MPIJob": Kind("MpiTrainJob", "mpiReplicaSpecs",
                   {"slotsPerWorker", "cleanPodPolicy", "mpiReplicaSpecs", "mainContainer", "runPolicy"},
                   ("Launcher", "Worker"), "mpi", "mpi-port", 9999),
}
TORCHRUN = re.compile(r"(^|[\s/'\"])(torchrun|torch\.distributed\.run|torch\.distributed\.launch)(\s|$|['\"])")
TRAINER_PORT = 29500


def _check(document: dict[str, Any], kind: Kind, findings: Findings) -> dict[str, dict[str, Any]]:
    """Unknown fields, and the replica specs by role (v1 accepts role names in any case), each with its
    path in the source as `_path`."""
    spec = checked_spec(findings, document, kind.spec_fields, API)
    run_policy = spec.get("runPolicy") or {}
    check_keys(findings, run_policy, RUN_POLICY_FIELDS, "spec.runPolicy", API)
    check_keys(findings, run_policy.get("schedulingPolicy") or {}, SCHEDULING_POLICY_FIELDS,
               "spec.runPolicy.schedulingPolicy", API)
    if spec.get("elasticPolicy") is not None:
        check_keys(findings, spec["elasticPolicy"], ELASTIC_FIELDS, "spec.elasticPolicy", API)
    given = spec.get(kind.replicas_field) or {}
    require(isinstance(given, dict) and given, f"spec.{kind.replicas_field}: a {document['kind']} needs replica specs")
    replicas: dict[str, dict[str, Any]] = {}
    for role, replica in given.items():
        path = f"spec.{kind.replicas_field}.{role}"
        canonical = next((r for r in kind.roles if r.lower() == str(role).lower()), None)
        if canonical is None:
            findings.unknown.append(Finding(path, f"not a replica type of this kind ({', '.join(kind.roles)})"))
            continue
        check_keys(findings, replica or {}, REPLICA_FIELDS, path, API)
        check_pod_template(findings, (replica or {}).get("template") or {}, f"{path}.template")
        replicas[canonical] = {**(replica or {}), "_path": path}
    return replicas


def _pods(replica: dict[str, Any], kind: Kind, findings: Findings, main: str | None) -> tuple[dict[str, Any], int]:
    """A replica's pod arguments (without v1's own port) and that port."""
    path = f"{replica['_path']}.template"
    pods = pod_arguments(replica.get("template") or {}, findings, path, main=main)
    note_restart_policy(findings, replica.get("restartPolicy") or pods.restart_policy,
                        f"{replica['_path']}.restartPolicy")
    fields = {**pods.fields, **pods.overrides}
    port = kind.port
    ports = []
    for item in fields.get("ports") or []:
        if item.get("name") == kind.port_name:
            port = int(item["containerPort"])
        else:
            ports.append(item)
    if ports:
        fields["ports"] = ports
    else:
        fields.pop("ports", None)
    return fields, port


def _words(fields: dict[str, Any]) -> str:
    return " ".join(shlex.quote(str(w)) for w in [*(fields.get("command") or []), *(fields.get("args") or [])])


def _unbuffered(args: dict[str, Any], findings: Findings, path: str) -> None:
    """v1 gave every container PYTHONUNBUFFERED=1; the job keeps it as an env argument of the training
    container."""
    _env(args, "PYTHONUNBUFFERED", "1")
    findings.note(f"{path} PYTHONUNBUFFERED", "v1 set PYTHONUNBUFFERED=1 on every container; the job sets it as an "
                                              "env argument on the training container only")


def _elastic_policy(elastic: dict[str, Any], args: dict[str, Any], findings: Findings) -> None:
    """A PyTorchJob's elasticPolicy as the job's node range: torchrun rendezvouses over MIN:MAX pods through
    c10d, on an Indexed Job sized for MAX (docs/failures.md, "Node ranges")."""
    replicas = args.get("num_nodes")
    most = elastic.get("maxReplicas") or replicas
    least = elastic.get("minReplicas") or most
    backend = elastic.get("rdzvBackend") or "c10d"
    if backend != "c10d":
        findings.cannot("spec.elasticPolicy.rdzvBackend", f"{backend}: the job's node range rendezvouses through "
                                                          "torchrun's c10d on its first pod; an etcd rendezvous has no "
                                                          "argument")
    args["rendezvous"] = "c10d"
    args["num_nodes"] = most
    if least < most:
        args["min_nodes"] = least
    findings.note("spec.elasticPolicy.minReplicas", f"the job's node range is {least}:{most} (PET_NNODES), its "
                                                    f"Indexed Job sized for {most} pods (v1 ran the {replicas} replicas "
                                                    "given and let its HPA or a user resize them); under Kueue it "
                                                    "starts with as few as the minimum (elastic_admission)")
    if elastic.get("maxRestarts") is not None:
        _env(args, "PET_MAX_RESTARTS", str(elastic["maxRestarts"]))
    if elastic.get("rdzvConf"):
        _env(args, "PET_RDZV_CONF", ",".join(f"{c.get('key')}={c.get('value')}" for c in elastic["rdzvConf"]))
    for key in ("rdzvHost", "rdzvPort", "rdzvId"):
        if elastic.get(key) is not None:
            findings.note(f"spec.elasticPolicy.{key}", "derived: the rendezvous endpoint is the job's first pod, "
                                                       "PET_RDZV_ENDPOINT=<job>-node-0-0.<job>:29500, and its id the "
                                                       "job's name")
    if elastic.get("standalone") is not None:
        findings.note("spec.elasticPolicy.standalone", "not needed: a node range rendezvouses through c10d on the "
                                                       "job's first pod (v1 set PET_STANDALONE to an empty value, "
                                                       "which torchrun cannot parse)")
    if elastic.get("metrics"):
        findings.cannot("spec.elasticPolicy.metrics", "the HorizontalPodAutoscaler v1 made from these metrics has no "
                                                      "equivalent: the job is resized by Kueue's elastic Jobs "
                                                      '(elastic_admission "slices") or by changing its Job\'s '
                                                      "parallelism")


def _env(args: dict[str, Any], name: str, value: str) -> None:
    """An env argument of the training container, kept if the source sets it already."""
    env = args.get("env")
    if isinstance(env, dict) or env is None:
        args["env"] = {**(env or {}), name: (env or {}).get(name, value)}
    elif not any(var.get("name") == name for var in env):
        args["env"] = [*env, {"name": name, "value": value}]


def _torch(spec: dict[str, Any], replicas: dict[str, dict[str, Any]], name: str, args: dict[str, Any],
           ports: dict[str, int], findings: Findings) -> None:
    """nprocPerNode, elasticPolicy, torchrun or not, and v1's env, variable by variable. Each note on a variable
    begins with the job's value, or says it is not set."""
    master = "Master" in replicas
    workers = args["num_nodes"] - (1 if master else 0)
    port = ports.get("Master", ports.get("Worker"))
    elastic = spec.get("elasticPolicy")
    # v1 (since v1.7) defaults nprocPerNode to auto, unless an elastic policy gives nProcPerNode.
    nproc = str((elastic or {}).get("nProcPerNode") or spec.get("nprocPerNode") or "auto")
    v1_nnodes = args["num_nodes"]
    if elastic is not None:
        _elastic_policy(elastic, args, findings)
    torchrun = bool(TORCHRUN.search(_words(args)))
    v1_master = f"{name}-master-0"
    new_master = f"{name}-node-0-0.{name}"
    numeric = int(nproc) if nproc.isdigit() else 1
    differences: dict[str, str] = {}
    if torchrun:
        args["num_proc_per_node"] = nproc
        if nproc == "auto":
            differences["PET_NPROC_PER_NODE"] = (
                "auto where the pod has GPUs (one process per GPU, as in v1), else the pod's CPU request (or limit) "
                "rounded up, else 1 (v1: auto, nprocPerNode's default since v1.7, which torchrun resolves on a pod "
                "without GPUs to the CPUs of its node, os.cpu_count()); to start as many processes as v1 on CPU "
                "pods, give num_proc_per_node that count")
        if elastic is not None:
            rdzv_host = elastic.get("rdzvHost") or f"{name}-worker-0"
            rdzv_port = elastic.get("rdzvPort") or ports.get("Worker")
            differences["PET_RDZV_ENDPOINT"] = (f"{new_master}:{TRAINER_PORT}, the job's first pod (v1: "
                                                f"{rdzv_host}:{rdzv_port})")
            differences["PET_RDZV_ID"] = f"{name}, the job's name (v1: {elastic.get('rdzvId') or 'not set'})"
            if "min_nodes" not in args:
                most = args["num_nodes"]
                differences["PET_NNODES"] = f"{most} (v1: {most}:{most}, the same)"
            if elastic.get("maxRestarts") is None:
                differences["PET_MAX_RESTARTS"] = ("the job's default for its node range (v1: not set, torchrun's "
                                                   "default 0)")
            if master:
                differences["PET_MASTER_ADDR, PET_MASTER_PORT, PET_NODE_RANK, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, "
                            "RANK"] = (f"not set: the c10d rendezvous at PET_RDZV_ENDPOINT ranks the nodes (v1 set "
                                       f"them from the Master, {v1_master}:{port}, and torchrun ignores them with a "
                                       "c10d rendezvous); torchrun sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE "
                                       "for each process it starts")
        elif master:
            differences.update({
                "PET_MASTER_ADDR": f"{new_master} (v1: {v1_master}, the Service name without the subdomain)",
                "PET_MASTER_PORT": f"{TRAINER_PORT} (v1: {port}, the master's {KINDS['PyTorchJob'].port_name})",
                "MASTER_ADDR, MASTER_PORT": f"not on the pod (v1: {v1_master} and {port}); torchrun sets them for "
                                            "the processes it starts",
                "WORLD_SIZE": f"not on the pod (v1: {v1_nnodes * numeric}, pods x nprocPerNode with auto counted as "
                              "1); torchrun sets it for each process, counted in processes",
                "RANK": "not on the pod (v1: the pod's node rank); torchrun sets each process's global rank; the "
                        "node rank is PET_NODE_RANK, as in v1 (master 0, worker i is i + 1)",
            })
    else:
        args["torchrun"] = False
        if numeric != 1:
            findings.cannot("spec.nprocPerNode", f"{nproc}: the command does not run torchrun, so each pod runs one "
                                                 "process; give the command torchrun to run several")
        if master:
            differences.update({
                "MASTER_ADDR": f"{new_master} (v1: {v1_master}, the Service name without the subdomain)",
                "MASTER_PORT": f"{TRAINER_PORT} (v1: {port}, the master's {KINDS['PyTorchJob'].port_name})",
                "WORLD_SIZE": f"{args['num_nodes']}, one process per pod (v1: {args['num_nodes'] * numeric}, pods x "
                              "nprocPerNode)",
                "PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT": (
                    "not set: the command does not run torchrun (v1 set them on every pod)"),
            })
    if not master:
        findings.note("spec.pytorchReplicaSpecs", "no Master: v1 gave the pods no MASTER_ADDR, RANK or WORLD_SIZE "
                                                  + ("(only the elastic policy's PET_RDZV_*, its endpoint worker 0); "
                                                     "so does the job, its endpoint pod 0" if elastic is not None else
                                                     "; the job gives worker 0 the master's role and every pod the "
                                                     "env above"))
    for variable, message in differences.items():
        findings.note(f"env {variable}", message)
    if master:
        ranks = "the rendezvous ranks them" if elastic is not None else "with v1's ranks"
        findings.note("spec.pytorchReplicaSpecs.Master", f"one indexed set of {args['num_nodes']} pods: the master is "
                                                         f"index 0 ({new_master}), the {workers} workers indexes 1 "
                                                         f"to {workers}, {ranks}; v1's init-pytorch init container "
                                                         "(waiting for the master's name) is not made")


def _xgboost(name: str, replicas: dict[str, dict[str, Any]], args: dict[str, Any], ports: dict[str, int],
             findings: Findings) -> None:
    """v1's env (xgboost.SetPodEnv), which upstream's XGBoost and LightGBM examples read: MASTER_ADDR and
    MASTER_PORT (the master, index 0, whose code runs the tracker), WORLD_SIZE (every pod), RANK (the pod's
    index: v1 ranked the master 0 and worker i i + 1), and for LightGBM WORKER_ADDRS and WORKER_PORT."""
    require("Master" in replicas, "spec.xgbReplicaSpecs.Master: must be present (v1's webhook requires it: the "
                                  "master's code runs the tracker)")
    total = args["num_nodes"]
    master, workers = xgboost.tracker_uri(name), [pod_dns_name(name, xgboost.ROLE, i) for i in range(1, total)]
    port = str(xgboost.TRACKER_PORT)
    env = [{"name": "MASTER_ADDR", "value": master}, {"name": "MASTER_PORT", "value": port},
           {"name": "WORLD_SIZE", "value": str(total)}, completion_index_env("RANK")]
    if total > 1:
        env += [{"name": "WORKER_PORT", "value": port}, {"name": "WORKER_ADDRS", "value": ",".join(workers)}]
    appended_env(args, env, findings)
    v1_workers = ",".join(f"{name}-worker-{i}" for i in range(total - 1))
    for variable, message in {
        "MASTER_ADDR": f"{master} (v1: {name}-master-0, the Service name without the subdomain)",
        "MASTER_PORT": f"{port}, the job's tracker port (v1: {ports['Master']}, the master's "
                       f"{KINDS['XGBoostJob'].port_name})",
        **({"WORKER_ADDRS": f"{','.join(workers)} (v1: {v1_workers})",
            "WORKER_PORT": f"{port} (v1: {ports.get('Worker')}, the workers' {KINDS['XGBoostJob'].port_name})"}
           if total > 1 else {}),
        ", ".join(xgboost.RESERVED_ENV): "added by the XGBoost runtime (Kubeflow Trainer v2's names for xgboost's "
                                         f"collective: the tracker at {master}:{port}, DMLC_TASK_ID = RANK, "
                                         "DMLC_NUM_WORKER the pods times their GPUs); v1 did not set them",
    }.items():
        findings.note(f"env {variable}", message)


def _jax(name: str, args: dict[str, Any], ports: dict[str, int], findings: Findings) -> None:
    """v1's env (jax setPodEnv), which upstream's JAX examples pass to jax.distributed.initialize:
    COORDINATOR_ADDRESS and COORDINATOR_PORT (worker 0), NUM_PROCESSES (every pod), PROCESS_ID (the pod's
    index)."""
    coordinator, port = pod_dns_name(name, jax.ROLE, 0), str(jax.COORDINATOR_PORT)
    appended_env(args, [{"name": "COORDINATOR_ADDRESS", "value": coordinator},
                        {"name": "COORDINATOR_PORT", "value": port},
                        {"name": "NUM_PROCESSES", "value": str(args["num_nodes"])},
                        completion_index_env("PROCESS_ID")], findings)
    for variable, message in {
        "COORDINATOR_ADDRESS": f"{coordinator} (v1: {name}-worker-0, the Service name without the subdomain)",
        "COORDINATOR_PORT": f"{port}, the job's coordinator port (v1: {ports['Worker']}, the workers' "
                            f"{KINDS['JAXJob'].port_name})",
        ", ".join(jax.RESERVED_ENV): "added by the JAX runtime (Kubeflow Trainer v2's names: the same count "
                                     f"and index, and JAX_COORDINATOR_ADDRESS={coordinator}:{port}, which "
                                     "jax.distributed.initialize() reads by itself); v1 did not set them",
    }.items():
        findings.note(f"env {variable}", message)


def _mpi(spec: dict[str, Any], replicas: dict[str, dict[str, Any]], name: str, args: dict[str, Any],
         findings: Findings) -> None:
    """Launcher and Worker templates as the runtime's; kubectl exec becomes SSH."""
    require("Launcher" in replicas, "spec.mpiReplicaSpecs.Launcher: an MPIJob needs a launcher")
    require(replicas["Launcher"].get("replicas", 1) == 1, "spec.mpiReplicaSpecs.Launcher.replicas: must be 1")
    main = spec.get("mainContainer")
    runtime: dict[str, Any] = {"name": name, "mpi_implementation": "OpenMPI",
                               "num_proc_per_node": spec.get("slotsPerWorker", 1)}
    for role, key in (("Launcher", "launcher"), ("Worker", "node")):
        if role not in replicas:
            continue
        path = f"{replicas[role]['_path']}.template"
        pods = pod_arguments(replicas[role].get("template") or {}, findings, path, main=main)
        note_restart_policy(findings, replicas[role].get("restartPolicy") or pods.restart_policy,
                            f"{replicas[role]['_path']}.restartPolicy")
        fields = pods.fields
        where = f"{path}.spec.containers[0]"
        if key == "node" and (fields.get("command") or fields.get("args")):
            findings.cannot(f"{where}.command", "v1 workers ran this command and were reached by kubectl exec; the "
                                                "job's workers run sshd (/usr/sbin/sshd -De), reached by SSH: remove it")
            fields.pop("command", None)
            fields.pop("args", None)
        if key == "launcher":
            entrypoint_command(fields, findings, where)
            note_host_discovery(fields, name, findings, f"{where}.command")
        if "resources_per_node" in fields:
            fields["resources"] = fields.pop("resources_per_node")
        scheduler = fields.pop("scheduler_name", None)
        if scheduler is not None and args.setdefault("scheduler_name", scheduler) != scheduler:
            findings.cannot(f"{path}.spec.schedulerName", "the launcher and workers name different schedulers")
        for target, values in pods.overrides.items():
            findings.cannot(path, f"{target.replace('_', ' ')} of an MPI role ({', '.join(values)})")
        limits = (fields.get("resources") or {}).get("limits") or {}
        if key == "launcher" and not any("gpu" in str(resource) for resource in limits):   # v1's isGPULauncher
            launcher_off_gpus(fields, findings, f"{where}.env", "a launcher without GPU limits")
        runtime[key] = fields
    workers = replicas.get("Worker", {}).get("replicas", 0) if "Worker" in replicas else 0
    require(workers >= 1, "spec.mpiReplicaSpecs.Worker: no MPI host (no worker)")
    args["runtime"] = runtime
    args["num_nodes"] = workers
    if spec.get("cleanPodPolicy") is not None:
        findings.note("spec.cleanPodPolicy", f"{spec['cleanPodPolicy']} (v1's older place for runPolicy's): no "
                                             "controller deletes pods; the pods of a finished Job stay until the Job "
                                             "goes (ttl_seconds_after_finished)")
    if main:
        findings.note("spec.mainContainer", f"{main} is the training container (v1 ran kubectl exec into it)")
    findings.note("spec.mpiReplicaSpecs", "v1 ran workers idle (sleep 365d) and reached them with kubectl exec "
                                          "(/etc/mpi/kubexec.sh); SSH replaces it: the workers run sshd (the image "
                                          "needs it), the launcher's mpirun reaches them with a generated key pair "
                                          f"mounted at {runtime.get('ssh_auth_mount_path', '/root/.ssh')}")
    for variable, message in {
        "OMPI_MCA_plm_rsh_agent": "ssh (v1: /etc/mpi/kubexec.sh)",
        "I_MPI_HYDRA_BOOTSTRAP, I_MPI_HYDRA_BOOTSTRAP_EXEC": "not set: the job is OpenMPI (v1 set Intel MPI's rsh "
                                                             "bootstrap to kubexec.sh too); for Intel MPI set the "
                                                             "runtime's mpi_implementation IntelMPI",
        "hostfile": f"{name}-node-0-<i>.{name} slots=N (v1: {name}-worker-<i> slots=N, and the launcher when it has "
                    "a GPU)",
    }.items():
        findings.note(f"env {variable}" if variable != "hostfile" else "/etc/mpi/hostfile", message)


def import_v1(document: dict[str, Any], findings: Findings) -> tuple[str, str, dict]:
    """(component, job name, arguments) of a training-operator v1 job."""
    metadata = document.get("metadata") or {}
    name = metadata["name"]
    spec = document.get("spec") or {}
    kind = KINDS[document["kind"]]
    replicas = _check(document, kind, findings)
    if findings.unknown:
        return kind.component, name, {}
    args, labels, annotations = metadata_arguments(metadata)
    if annotations.get(QUEUE_ANNOTATION):
        args["queue"] = annotations.pop(QUEUE_ANNOTATION)
    if labels:
        args["labels"] = labels
        findings.note("metadata.labels", "the labels reach every object and pod of the job (v1 kept them on the job)")
    if annotations:
        args["annotations"] = annotations
        findings.note("metadata.annotations", "the annotations reach every object and pod of the job")
    for key in metadata:
        if key not in ("name", "namespace", "labels", "annotations"):
            findings.cannot(f"metadata.{key}", "set by the API server; remove it")

    if document["kind"] == "MPIJob":
        _mpi(spec, replicas, name, args, findings)
    else:
        master = replicas.get("Master")
        require(master is None or master.get("replicas", 1) == 1, f"{(master or {}).get('_path')}.replicas: must be 1")
        templates = {role: _pods(replica, kind, findings, kind.container) for role, replica in replicas.items()}
        ports = {role: port for role, (_, port) in templates.items()}
        template = (templates.get("Master") or templates["Worker"])[0]
        if len(templates) == 2:   # one template for the one indexed set: where they differ, the workers'
            template = same_template(templates["Master"][0], templates["Worker"][0], findings,
                                     f"{replicas['Worker']['_path']}.template")
        scheduler = template.pop("scheduler_name", None)
        if scheduler is not None:
            args["scheduler_name"] = scheduler
        args.update(template)
        args["num_nodes"] = sum(replica.get("replicas", 1) for replica in replicas.values())
        _unbuffered(args, findings, "env")
        if document["kind"] == "PyTorchJob":
            _torch(spec, replicas, name, args, ports, findings)
        elif document["kind"] == "XGBoostJob":
            _xgboost(name, replicas, args, ports, findings)
        else:
            _jax(name, args, ports, findings)
    run_policy_arguments(spec.get("runPolicy") or {}, args, findings, CONTROLLER, "training-operator")
    return kind.component, name, args
