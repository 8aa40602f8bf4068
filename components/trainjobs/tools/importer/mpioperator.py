"""MPI Operator (kubeflow.org/v2beta1 MPIJob), OpenMPI, Intel MPI or MPICH, as an MpiTrainJob.

The launcher and worker templates become the job's own runtime (each keeps its image, command and
resources), so what differs between them survives; the MPI policy (implementation, slots, mount path,
launcher as worker) becomes the runtime's. No Python model of the MPIJob API is published, so its
fields are checked against the v2beta1 API's field lists here, and its pod templates against
Kubernetes' models.
"""

from typing import Any

from trainjobs.core.errors import shown
from trainjobs.scheduling.volcano import QUEUE_ANNOTATION
from trainjobs.tools.importer.common import (checked_spec, RUN_POLICY_FIELDS, SCHEDULING_POLICY_FIELDS, Findings, check_keys,
                                             check_pod_template, entrypoint_command, launcher_off_gpus,
                                             metadata_arguments, note_host_discovery, note_restart_policy,
                                             pod_arguments, require, run_policy_arguments)

API = "the v2beta1 MPIJob API"
SPEC_FIELDS = {"slotsPerWorker", "runLauncherAsWorker", "runPolicy", "mpiReplicaSpecs", "sshAuthMountPath",
               "launcherCreationPolicy", "mpiImplementation"}
REPLICA_FIELDS = {"replicas", "template", "restartPolicy"}
IMPLEMENTATIONS = {"OpenMPI": "OpenMPI", "Intel": "IntelMPI", "MPICH": "MPICH"}
# The MPI Operator's example images run sshd from this config, listening on 2222.
OPERATOR_SSHD_CONFIG = "/home/mpiuser/.sshd_config"
OPERATOR_SSHD_PORT = 2222


def _ssh_port(worker: dict[str, Any], findings: Findings, path: str) -> int | None:
    """The workers' sshd port: their readiness probe's (which trainjobs derives from it), else `-p`, else the
    MPI Operator images' convention; the MPIJob itself does not say it (the image's ssh_config does)."""
    overrides = worker.get("container_overrides") or {}
    probe = overrides.pop("readinessProbe", None)
    if probe is not None and "tcpSocket" not in probe:
        overrides["readinessProbe"] = probe
    if probe and "tcpSocket" in probe:
        return int(probe["tcpSocket"]["port"])
    command = [*(worker["fields"].get("command") or []), *(worker["fields"].get("args") or [])]
    if "-p" in command[:-1]:
        return int(command[command.index("-p") + 1])
    if OPERATOR_SSHD_CONFIG in command:
        findings.note(f"{path}.command", f"sshd runs from {OPERATOR_SSHD_CONFIG}, which in the MPI Operator's images "
                                         f"listens on {OPERATOR_SSHD_PORT}: the runtime's ssh_port is "
                                         f"{OPERATOR_SSHD_PORT} (readiness probe and ssh use it)")
        return OPERATOR_SSHD_PORT
    return None


def import_mpijob(document: dict[str, Any], findings: Findings) -> tuple[str, str, dict]:
    metadata = document.get("metadata") or {}
    name = metadata["name"]
    spec = checked_spec(findings, document, SPEC_FIELDS, API)
    run_policy = spec.get("runPolicy") or {}
    check_keys(findings, run_policy, RUN_POLICY_FIELDS, "spec.runPolicy", API)
    scheduling = run_policy.get("schedulingPolicy") or {}
    check_keys(findings, scheduling, SCHEDULING_POLICY_FIELDS, "spec.runPolicy.schedulingPolicy", API)
    replicas = spec.get("mpiReplicaSpecs") or {}
    check_keys(findings, replicas, {"Launcher", "Worker"}, "spec.mpiReplicaSpecs", API)
    require("Launcher" in replicas, "spec.mpiReplicaSpecs.Launcher: an MPIJob needs a launcher")
    for role, replica in replicas.items():
        check_keys(findings, replica, REPLICA_FIELDS, f"spec.mpiReplicaSpecs.{role}", API)
        check_pod_template(findings, replica.get("template") or {}, f"spec.mpiReplicaSpecs.{role}.template")
    if findings.unknown:
        return "MpiTrainJob", name, {}

    args, labels, annotations = metadata_arguments(metadata)
    if labels:
        args["labels"] = labels
    if annotations.get(QUEUE_ANNOTATION):
        args["queue"] = annotations.pop(QUEUE_ANNOTATION)
    if annotations:
        args["annotations"] = annotations

    implementation = spec.get("mpiImplementation", "OpenMPI")
    require(implementation in IMPLEMENTATIONS, f"spec.mpiImplementation: {shown(implementation)} is not one of "
                                               f"{', '.join(IMPLEMENTATIONS)}")
    launcher_as_worker = bool(spec.get("runLauncherAsWorker", False))
    runtime: dict[str, Any] = {"name": name, "mpi_implementation": IMPLEMENTATIONS[implementation],
                               "num_proc_per_node": spec.get("slotsPerWorker", 1),
                               "ssh_auth_mount_path": spec.get("sshAuthMountPath", "/root/.ssh"),
                               "run_launcher_as_node": launcher_as_worker}
    overrides: dict[str, Any] = {}
    templates: dict[str, dict[str, Any]] = {}
    for role, key in (("Launcher", "launcher"), ("Worker", "node")):
        replica = replicas.get(role)
        if replica is None:
            continue
        path = f"spec.mpiReplicaSpecs.{role}.template"
        pod = pod_arguments(replica.get("template") or {}, findings, path)
        note_restart_policy(findings, replica.get("restartPolicy") or pod.restart_policy,
                            f"spec.mpiReplicaSpecs.{role}.restartPolicy")
        fields = pod.fields
        entrypoint_command(fields, findings, f"{path}.spec.containers[0]")
        if key == "launcher":
            note_host_discovery(fields, name, findings, f"{path}.spec.containers[0].command")
        if "resources_per_node" in fields:
            fields["resources"] = fields.pop("resources_per_node")
        if "scheduler_name" in fields:
            scheduler = fields.pop("scheduler_name")
            args.setdefault("scheduler_name", scheduler)
            if args["scheduler_name"] != scheduler:
                findings.cannot(f"{path}.spec.schedulerName", "the launcher and workers name different schedulers")
        templates[key] = {"fields": fields, "container_overrides": pod.overrides.get("container_overrides")}
        if pod.overrides.get("pod_spec_overrides"):
            if overrides.setdefault("pod_spec_overrides", pod.overrides["pod_spec_overrides"]) != \
                    pod.overrides["pod_spec_overrides"]:
                findings.cannot(f"{path}.spec", "PodSpec fields without an argument differ between launcher and "
                                                "workers; the job sets one set for every pod")
    workers = (replicas.get("Worker") or {}).get("replicas", 0) if "Worker" in replicas else 0
    require((replicas["Launcher"].get("replicas", 1)) == 1, "spec.mpiReplicaSpecs.Launcher.replicas: must be 1")
    if "node" in templates:
        port = _ssh_port(templates["node"], findings, "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]")
        if port is not None:
            runtime["ssh_port"] = port
    for key, template in templates.items():
        if template["container_overrides"]:
            findings.cannot(f"spec.mpiReplicaSpecs.{'Launcher' if key == 'launcher' else 'Worker'}.template",
                            f"container fields without an argument ({', '.join(template['container_overrides'])}); "
                            "the job derives the containers' probes and entrypoints")
        fields = template["fields"]
        user = (fields.get("container_security_context") or {}).get("runAsUser")
        if user not in (None, 0) and "fsGroup" not in (fields.get("security_context") or {}):
            group = (fields.get("container_security_context") or {}).get("runAsGroup", user)
            fields["security_context"] = {**(fields.get("security_context") or {}), "fsGroup": group}
            findings.note(f"spec.mpiReplicaSpecs.{'Launcher' if key == 'launcher' else 'Worker'}.template.spec",
                          f"fsGroup {group} added: trainjobs mounts the private key 0640 for a non-root user, who "
                          "reads it through the pod's group (the MPI Operator mounts it world-readable)")
        runtime[key] = fields
    args["runtime"] = runtime
    args["num_nodes"] = workers + (1 if launcher_as_worker else 0)
    require(args["num_nodes"] >= 1, "spec.mpiReplicaSpecs.Worker: no MPI host (no worker, launcher not a worker)")
    if launcher_as_worker:
        findings.note("spec.runLauncherAsWorker", "the launcher's hostfile line comes last (the MPI Operator lists it "
                                                  "first, Kubeflow Trainer v2.3 last): rank order changes")
    if not launcher_as_worker:
        launcher_off_gpus(runtime["launcher"], findings, "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env",
                          "a launcher that is not a worker")
    findings.note("spec.mpiReplicaSpecs", "no K_MPI_JOB_ROLE env (the pods' role is the trainjobs.io/role label)")
    findings.note("spec.mpiReplicaSpecs", f"hostfile names are <job>-node-0-<i>.<job> (the MPI Operator's "
                                          f"<job>-worker-<i>.<job>.<namespace>.svc); the format is "
                                          f"{IMPLEMENTATIONS[implementation]}'s")
    args.update(overrides)
    run_policy_arguments(run_policy, args, findings, "kubeflow.org/mpi-operator", "MPI Operator")
    if spec.get("launcherCreationPolicy") == "AtStartup":
        findings.note("spec.launcherCreationPolicy", "AtStartup: the launcher starts at once but waits until every "
                                                     "host resolves and accepts SSH before running mpirun")
    return "MpiTrainJob", name, args
