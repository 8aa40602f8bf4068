"""Volcano (batch.volcano.sh/v1alpha1 Job) with the pytorch plugin, the mpi plugin, or the ssh and svc
plugins running mpirun.

- pytorch: master and worker tasks become one TorchTrainJob of one process per pod (`torchrun:
  false`: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, as the plugin gives them); any other task is an
  extra role, which gets no training env and is not counted in WORLD_SIZE (Volcano counted every task
  before volcano-sh/volcano#4281, and still gives other tasks MASTER_ADDR, WORLD_SIZE and the port:
  flagged);
- mpi (with ssh): the master task is the launcher, the worker task the MPI hosts of an MpiTrainJob;
- ssh and svc without a framework plugin (most of Volcano's published MPI jobs): the task whose command
  runs mpirun or mpiexec is the launcher, the other task the MPI hosts; Volcano's host lists of that task
  (`/etc/volcano/<task>.host`, `VC_<TASK>_HOSTS`) are the job's hostfile;
- schedulerName volcano: gang_scheduler "volcano" with the Job's queue and priority class.

No Python model of the Volcano Job API is published: its fields are checked against the v1alpha1 API's
field lists here, its pod templates against Kubernetes' models.
"""

import re
import shlex
from typing import Any

from trainjobs.core.errors import shown
from trainjobs.tools.importer.common import (checked_spec, Findings, check_keys, check_pod_template, entrypoint_command,
                                             note_restart_policy, pod_arguments, require, same_template)

API = "the v1alpha1 Volcano Job API"
SPEC_FIELDS = {"schedulerName", "minAvailable", "volumes", "tasks", "policies", "plugins", "runningEstimate", "queue",
               "maxRetry", "ttlSecondsAfterFinished", "priorityClassName", "minSuccess", "networkTopology"}
TASK_FIELDS = {"name", "replicas", "template", "policies", "topologyPolicy", "minAvailable", "maxRetry", "dependsOn",
               "partitionPolicy"}
PLUGINS = {"pytorch", "mpi", "ssh", "svc", "env", "tensorflow", "ray", "hcclrank"}
PYTORCH_DEFAULTS = {"master": "master", "worker": "worker", "port": "23456"}
MPI_DEFAULTS = {"master": "master", "worker": "worker", "port": "22"}


def plugin_flags(arguments: list[str], defaults: dict[str, str], findings: Findings, path: str) -> dict[str, str]:
    """A plugin's Go-flag arguments (`--master=master`) over its defaults."""
    flags = dict(defaults)
    for i, argument in enumerate(arguments or []):
        key, sep, value = str(argument).lstrip("-").partition("=")
        if key in defaults and sep:
            flags[key] = value
        else:
            findings.cannot(f"{path}[{i}]", f"{shown(argument)}: the import reads {', '.join(f'--{k}' for k in defaults)}")
    return flags


MPI_COMMAND = re.compile(r"(^|[\s;&|`(])(mpirun|mpiexec|mpiexec\.hydra|horovodrun)(\s|$)")
HOSTFILE_OPTION = r"(--?(?:hostfile|machinefile))(\s+|=)"
MPI_HOSTFILE = "/etc/mpi/hostfile"


def _words(pods: dict[str, Any]) -> str:
    return " ".join(shlex.quote(str(w)) for w in [*(pods.get("command") or []), *(pods.get("args") or [])])


def _runs_mpi(task: dict[str, Any]) -> bool:
    containers = ((task.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    words = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]
    return any(MPI_COMMAND.search(str(word)) for word in words)


def _host_lists(pods: dict[str, Any], worker: str, findings: Findings, path: str) -> None:
    """Volcano's list of the worker task's hosts, as the command uses it: a hostfile option naming
    /etc/volcano/<worker>.host becomes the job's hostfile (same hosts, the job's names); a command that
    names its hosts itself (--host from that file, VC_<TASK>_HOSTS or MPI_HOST) is named with what to change."""
    volcano_file = f"/etc/volcano/{worker}.host"
    pattern = re.compile(HOSTFILE_OPTION + re.escape(volcano_file))
    for key in ("command", "args"):
        if pods.get(key) and any(pattern.search(str(w)) for w in pods[key]):
            pods[key] = [pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MPI_HOSTFILE}", str(w)) for w in pods[key]]
            findings.note(f"{path}.{key}", f"{volcano_file} is the job's hostfile {MPI_HOSTFILE}: it lists the {worker} "
                                           "task's pods (under the job's names, with their slots)")
    words = _words(pods)
    hosts = re.search(r"(--host|-host|-H)(\s+|=)(\S+)", words)
    lists = sorted(set(re.findall(r"/etc/volcano/[\w.-]+\.host|VC_\w+_HOSTS", words)))
    if not lists and re.search(r"\$\{?MPI_HOST\b", words) and "MPI_HOST=" not in words:
        lists = ["MPI_HOST"]   # the mpi plugin's env on the master
    if hosts or lists:
        given = f"{hosts.group(1)} {hosts.group(3)}" if hosts else ""
        origin = f", from {', '.join(lists)}" if given and lists else ""
        change = (f"remove {given}{' and the line that builds it' if lists else ''}" if given
                  else f"stop reading {', '.join(lists)}")
        findings.cannot(f"{path}.command", f"the command names its hosts itself ({given or ', '.join(lists)}{origin}); "
                                           f"the job gives mpirun the hostfile {MPI_HOSTFILE} (the {worker} task's "
                                           f"pods), which it reads by itself: {change}, or pass --hostfile "
                                           f"{MPI_HOSTFILE}")


def _pods(task: dict[str, Any], findings: Findings, path: str) -> dict[str, Any]:
    pod = pod_arguments(task.get("template") or {}, findings, f"{path}.template")
    note_restart_policy(findings, pod.restart_policy, f"{path}.template.spec.restartPolicy")
    for i, policy in enumerate(task.get("policies") or []):
        if policy.get("event") == "TaskCompleted" and policy.get("action") == "CompleteJob":
            findings.note(f"{path}.policies[{i}]", "the job completes when every training pod has completed")
        else:
            findings.cannot(f"{path}.policies[{i}]", "Volcano lifecycle policies have no equivalent; failures follow "
                                                     "backoff_limit")
    if task.get("dependsOn") is not None and _runs_mpi(task):
        findings.note(f"{path}.dependsOn", "the launcher waits until every host resolves and accepts SSH before "
                                           "running its command")
    for key in ("topologyPolicy", "minAvailable", "maxRetry", "dependsOn", "partitionPolicy"):
        if task.get(key) is not None and not (key == "dependsOn" and _runs_mpi(task)):
            findings.cannot(f"{path}.{key}", "a task setting without an argument")
    return {**pod.fields, **pod.overrides}


def _without_port(pods: dict[str, Any], port: str) -> dict[str, Any]:
    """The plugin's own port left out: the job opens its trainer or ssh port itself."""
    ports = [p for p in pods.get("ports") or [] if str(p.get("containerPort")) != port]
    if ports:
        pods["ports"] = ports
    else:
        pods.pop("ports", None)
    return pods


def import_job(document: dict[str, Any], findings: Findings) -> tuple[str, str, dict]:
    metadata = document.get("metadata") or {}
    name = metadata["name"]
    spec = checked_spec(findings, document, SPEC_FIELDS, API)
    plugins = spec.get("plugins") or {}
    check_keys(findings, plugins, PLUGINS, "spec.plugins", API)
    tasks = spec.get("tasks") or []
    for i, task in enumerate(tasks):
        check_keys(findings, task, TASK_FIELDS, f"spec.tasks[{i}]", API)
        check_pod_template(findings, task.get("template") or {}, f"spec.tasks[{i}].template")
    if findings.unknown:
        return "", name, {}
    by_name = {task.get("name"): (i, task) for i, task in enumerate(tasks)}

    args: dict[str, Any] = {}
    if metadata.get("namespace"):
        args["namespace"] = metadata["namespace"]
    if metadata.get("labels"):
        args["labels"] = dict(metadata["labels"])
    if metadata.get("annotations"):
        args["annotations"] = dict(metadata["annotations"])
    if spec.get("schedulerName") == "volcano":
        args["gang_scheduler"] = "volcano"
        if spec.get("queue"):
            args["queue"] = spec["queue"]
        if spec.get("priorityClassName"):
            args["priority_class"] = spec["priorityClassName"]
    elif spec.get("schedulerName"):
        args["scheduler_name"] = spec["schedulerName"]
        if spec.get("queue"):
            findings.cannot("spec.queue", "a Volcano queue without the volcano scheduler")
    if spec.get("ttlSecondsAfterFinished") is not None:
        args["ttl_seconds_after_finished"] = spec["ttlSecondsAfterFinished"]
    for key in ("volumes", "policies", "runningEstimate", "minSuccess", "networkTopology"):
        if spec.get(key):
            findings.cannot(f"spec.{key}", "a Volcano Job setting without an argument")
    if spec.get("maxRetry") is not None:
        findings.note("spec.maxRetry", "Volcano restarts the whole job; the imported job retries failed pods up to "
                                       "backoff_limit (0)")
    frameworks = [p for p in ("pytorch", "mpi") if p in plugins]
    launchers = [t.get("name") for t in tasks if _runs_mpi(t)]
    by_ssh = not frameworks and "ssh" in plugins and len(launchers) == 1 and len(tasks) == 2
    if "svc" in plugins:
        hosts = (f"Volcano's host list of the hosts' task is the job's hostfile {MPI_HOSTFILE}; " if by_ssh or
                 "mpi" in frameworks else "")
        findings.note("spec.plugins.svc", f"a headless Service is always made; {hosts}no VC_<TASK>_HOSTS env or "
                                          "/etc/volcano host files")
    if "env" in plugins:
        findings.note("spec.plugins.env", "no VC_TASK_INDEX env (JOB_COMPLETION_INDEX is set by Kubernetes)")
    if "ssh" in plugins and "pytorch" in plugins:
        findings.note("spec.plugins.ssh", "the torch job's pods reach each other by the trainer port, without SSH "
                                          "(not needed)")
    for plugin in ("tensorflow", "ray", "hcclrank"):
        if plugin in plugins:
            findings.cannot(f"spec.plugins.{plugin}", "a framework trainjobs has no component for")
    require(len(frameworks) == 1 or by_ssh,
            "spec.plugins: the import reads a Job with the pytorch plugin, the mpi plugin, or the ssh plugin (with svc) "
            "and two tasks, one of which runs mpirun or mpiexec (the launcher) and the other the MPI hosts; "
            f"here: plugins {', '.join(plugins) or 'none'}, tasks running mpirun: {', '.join(map(str, launchers)) or 'none'}"
            f" of {len(tasks)}")
    if by_ssh:
        framework = "mpi"
        worker_name = next(t.get("name") for t in tasks if t.get("name") != launchers[0])
        flags = {"master": launchers[0], "worker": worker_name, "port": "22"}
        findings.note("spec.plugins", f"no framework plugin: task {launchers[0]} runs mpirun, so it is the launcher, "
                                      f"and task {worker_name} the MPI hosts")
    else:
        framework = frameworks[0]
        flags = plugin_flags(plugins[framework], PYTORCH_DEFAULTS if framework == "pytorch" else MPI_DEFAULTS,
                             findings, f"spec.plugins.{framework}")
    require(flags["master"] in by_name, f"spec.tasks: no task named {shown(flags['master'])} (the {framework} "
                                        "plugin's master)")
    master_index, master = by_name[flags["master"]]
    worker_index, worker = by_name.get(flags["worker"], (None, None))
    master_pods = _without_port(_pods(master, findings, f"spec.tasks[{master_index}]"), flags["port"])
    worker_pods = (_without_port(_pods(worker, findings, f"spec.tasks[{worker_index}]"), flags["port"])
                   if worker is not None else None)
    master_count = master.get("replicas", 1)
    worker_count = worker.get("replicas", 1) if worker is not None else 0
    others = {t["name"]: (i, t) for t_name, (i, t) in by_name.items() if t_name not in (flags["master"], flags["worker"])}
    total = sum(t.get("replicas", 1) for t in tasks)

    if framework == "pytorch":
        require(master_count == 1, f"spec.tasks[{master_index}].replicas: the pytorch plugin gives every master "
                                   "RANK=0; one master")
        component = "TorchTrainJob"
        template = master_pods if worker_pods is None else same_template(
            master_pods, worker_pods, findings, f"spec.tasks[{worker_index}].template")
        args.update(template)
        args["torchrun"] = False
        args["num_nodes"] = master_count + worker_count
        if flags["port"] != "29500":
            findings.note("spec.plugins.pytorch", f"MASTER_PORT is 29500 (the trainer port), not {flags['port']}; "
                                                   "training code reading MASTER_PORT is unaffected")
        if others:
            extra = {}
            for task_name, (i, task) in others.items():
                role = _pods(task, findings, f"spec.tasks[{i}]")
                role["num_pods"] = task.get("replicas", 1)
                role.pop("pod_spec_overrides", None) and findings.cannot(
                    f"spec.tasks[{i}].template.spec", "an extra role takes no PodSpec overrides")
                role.pop("container_overrides", None) and findings.cannot(
                    f"spec.tasks[{i}].template.spec.containers[0]", "an extra role takes no container overrides")
                if "resources_per_node" in role:
                    role["resources"] = role.pop("resources_per_node")
                for key in ("scheduler_name",):
                    role.pop(key, None)
                extra[task_name] = role
            args["extra_roles"] = extra
            findings.note("spec.tasks", f"Volcano's pytorch plugin counted every task in WORLD_SIZE before "
                                        f"volcano-sh/volcano#4281 ({total} instead of {args['num_nodes']}) and still "
                                        f"gives {', '.join(others)} MASTER_ADDR, MASTER_PORT, WORLD_SIZE and its port; "
                                        f"here WORLD_SIZE is {args['num_nodes']} and extra roles get none of them")
    else:
        require(worker is not None, f"spec.tasks: no task named {shown(flags['worker'])} (the mpi plugin's worker)")
        require(master_count == 1, f"spec.tasks[{master_index}].replicas: one MPI master (launcher)")
        component = "MpiTrainJob"
        entrypoint_command(master_pods, findings, f"spec.tasks[{master_index}].template.spec.containers[0]")
        entrypoint_command(worker_pods, findings, f"spec.tasks[{worker_index}].template.spec.containers[0]")
        runtime: dict[str, Any] = {"name": name, "run_launcher_as_node": False}
        ssh = plugin_flags(plugins.get("ssh") or [], {"ssh-key-file-path": "/root/.ssh", "ssh-port": flags["port"]},
                           findings, "spec.plugins.ssh")
        runtime["ssh_auth_mount_path"] = ssh["ssh-key-file-path"]
        runtime["ssh_port"] = int(ssh["ssh-port"])
        for key, pods in (("launcher", master_pods), ("node", worker_pods)):
            for target in ("pod_spec_overrides", "container_overrides"):
                if pods.pop(target, None):
                    findings.cannot(f"spec.tasks[{master_index if key == 'launcher' else worker_index}].template",
                                    f"{target.replace('_', ' ')} of an MPI role")
            if "resources_per_node" in pods:
                pods["resources"] = pods.pop("resources_per_node")
            pods.pop("scheduler_name", None)
            runtime[key] = pods
        _host_lists(runtime["launcher"], flags["worker"], findings,
                    f"spec.tasks[{master_index}].template.spec.containers[0]")
        args["runtime"] = runtime
        args["num_nodes"] = worker_count
        if others:
            findings.cannot("spec.tasks", f"tasks {', '.join(others)} beside master and worker")
        findings.note("spec.plugins.ssh", "an ECDSA P-521 key pair generated once and kept in Pulumi state (Volcano: "
                                          "RSA 2048 per job), with no ssh config file")
    training_pods = master_count + worker_count
    if args.get("gang_scheduler") and spec.get("minAvailable", training_pods) != training_pods:
        findings.note("spec.minAvailable", f"{spec.get('minAvailable')}: the gang holds all {training_pods} training "
                                           "pods, not a minimum")
    return component, name, args
