"""What every source system's import shares: the findings it reports, the strict check of a manifest's
fields against its API's schema, and the translation of a Kubernetes pod template into job arguments.

Every field of the source is accounted for: it becomes an argument, it is a value trainjobs already
derives the same way, or it is reported, either as a field the job cannot express or as a place where
the source system behaved differently (a documented deviation, flagged for the user).
"""

import functools
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from trainjobs.core.errors import shown
from trainjobs.scheduling.kueue import PRIORITY_LABEL, QUEUE_LABEL


@dataclass(frozen=True)
class Finding:
    """One field of the source, and what the import says about it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Findings:
    """What one source document's import found, besides the arguments."""

    source: str
    unknown: list[Finding] = field(default_factory=list)
    """Fields the source API does not have (a typo, or another version of the API): always an error."""
    unexpressed: list[Finding] = field(default_factory=list)
    """Fields of the source API the job cannot express: an error unless the user accepts dropping them."""
    notes: list[Finding] = field(default_factory=list)
    """Where the source system behaved differently from the imported job (see docs/deviations.md)."""

    def cannot(self, path: str, message: str) -> None:
        self.unexpressed.append(Finding(path, message))

    def note(self, path: str, message: str) -> None:
        self.notes.append(Finding(path, message))


class SourceError(ValueError):
    """A document that is not one the import reads, or not valid for its own API."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise SourceError(message)


# ---- strict fields -----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def _resolve(node: dict[str, Any], defs: dict[str, Any], value: Any) -> dict[str, Any]:
    """The schema node that describes `value`: references followed, the union branch of its JSON type."""
    while True:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in node or "oneOf" in node:
            options = node.get("anyOf") or node.get("oneOf")
            wanted = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
            matching = [o for o in options if o.get("type") == wanted or "$ref" in o]
            if not matching:
                return {}
            node = matching[0]
        else:
            return node


def unknown_fields(value: Any, model: type[BaseModel], path: str) -> list[str]:
    """Paths of the keys in `value` that `model`'s API schema does not have (the published models keep
    unknown keys quietly out, so a typo would vanish: this finds them first)."""
    schema = _schema(model)
    defs = schema.get("$defs", {})
    found: list[str] = []

    def walk(item: Any, node: dict[str, Any], where: str) -> None:
        node = _resolve(node, defs, item)
        if isinstance(item, dict):
            properties = node.get("properties")
            extra = node.get("additionalProperties")
            for key, sub in item.items():
                sub_path = f"{where}.{key}" if where else str(key)
                if properties is not None:
                    if key not in properties:
                        found.append(sub_path)
                    else:
                        walk(sub, properties[key], sub_path)
                elif isinstance(extra, dict):
                    walk(sub, extra, sub_path)
        elif isinstance(item, list) and isinstance(node.get("items"), dict):
            for i, sub in enumerate(item):
                walk(sub, node["items"], f"{where}[{i}]")

    walk(value, schema, path)
    return found


def metadata_arguments(metadata: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """The source object's namespace, and Kueue's queue and priority labels, as the job's arguments; its
    other labels and its annotations, for the caller to place."""
    args: dict[str, Any] = {}
    if metadata.get("namespace"):
        args["namespace"] = metadata["namespace"]
    labels = dict(metadata.get("labels") or {})
    if QUEUE_LABEL in labels:
        args["gang_scheduler"] = "kueue"
        args["queue"] = labels.pop(QUEUE_LABEL)
    if PRIORITY_LABEL in labels:
        args["priority_class"] = labels.pop(PRIORITY_LABEL)
    return args, labels, dict(metadata.get("annotations") or {})


def checked_spec(findings: Findings, document: dict[str, Any], spec_fields: set[str], api: str) -> dict[str, Any]:
    """The document's spec, its own and the document's fields that `api` does not define reported as unknown."""
    spec = document.get("spec") or {}
    check_keys(findings, document, {"apiVersion", "kind", "metadata", "spec", "status"}, "", api)
    check_keys(findings, spec, spec_fields, "spec", api)
    return spec


def check_keys(findings: Findings, value: Any, known: set[str], path: str, api: str) -> None:
    """Keys of a mapping that `api` does not define, reported as unknown (for the parts of a source API
    that no published model describes)."""
    if not isinstance(value, dict):
        raise SourceError(f"{path}: expected a mapping, got {type(value).__name__}")
    for key in value:
        if key not in known:
            findings.unknown.append(Finding(f"{path}.{key}", f"not a field of {api}"))


def check_pod_template(findings: Findings, template: Any, path: str) -> None:
    """A Kubernetes pod template's unknown fields, from the core models Kubeflow publishes."""
    # Imported here, as the source kinds' modules are: Kubeflow's models take a second of CPU to import.
    from kubeflow_trainer_api.models import IoK8sApiCoreV1PodTemplateSpec

    for where in unknown_fields(template, IoK8sApiCoreV1PodTemplateSpec, path):
        findings.unknown.append(Finding(where, "not a field of a Kubernetes PodTemplateSpec"))


# ---- pod templates -----------------------------------------------------------------------------------------

# PodSpec fields with an argument of their own (the rest go to pod_spec_overrides).
_POD_ARGUMENTS = {
    "volumes": "volumes", "nodeSelector": "node_selector", "tolerations": "tolerations", "affinity": "affinity",
    "serviceAccountName": "service_account_name", "serviceAccount": "service_account_name",
    "priorityClassName": "priority_class_name", "securityContext": "security_context",
    "initContainers": "init_containers", "schedulerName": "scheduler_name",
}
# Container fields with an argument of their own (the rest go to container_overrides).
_CONTAINER_ARGUMENTS = {
    "image": "image", "imagePullPolicy": "image_pull_policy", "command": "command", "args": "args",
    "env": "env", "envFrom": "env_from", "workingDir": "working_dir", "volumeMounts": "volume_mounts",
    "securityContext": "container_security_context", "ports": "ports",
}


def quantity(value: Any) -> str:
    """A Kubernetes quantity as the string Kubernetes prints (YAML may give `1` or `0.5`)."""
    return value if isinstance(value, str) else str(value)


def resources(value: dict[str, Any], findings: Findings, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("requests", "limits"):
        if value.get(side):
            out[side] = {name: quantity(amount) for name, amount in value[side].items()}
    for key in value:
        if key not in ("requests", "limits"):
            findings.cannot(f"{path}.{key}", "resource claims have no argument; give the pods their devices "
                                             "by requests and limits")
    return out


def env_argument(env: list[dict[str, Any]]) -> Any:
    """Env as the job takes it: a mapping when every variable is a plain value, else the Kubernetes list."""
    if all(set(var) <= {"name", "value"} for var in env):
        return {var["name"]: var.get("value", "") for var in env}
    return env


def appended_env(fields: dict[str, Any], variables: list[dict[str, Any]], findings: Findings) -> None:
    """Variables the source system appended to the container's env, as env arguments: the source's values win
    over the template's own (of a name given twice, the later entry counts)."""
    names = {var["name"] for var in variables}
    env = fields.get("env") or {}
    given = [{"name": k, "value": v} for k, v in env.items()] if isinstance(env, dict) else list(env)
    replaced = sorted({var.get("name") for var in given} & names)
    if replaced:
        findings.note("env", f"{', '.join(replaced)} given in the template: the source system set its own value "
                             "after it, and so does the job")
    fields["env"] = env_argument([var for var in given if var.get("name") not in names] + variables)


def note_host_discovery(launcher: dict[str, Any], name: str, findings: Findings, path: str) -> None:
    """A launcher running Horovod's elastic mode reads its hosts from the operator's discover_hosts.sh, which the
    job's launcher has too: said where the command names it, with how the two differ."""
    from trainjobs.families.mpi import DISCOVER_HOSTS, HOSTFILE_DIR

    script = f"{HOSTFILE_DIR}/{DISCOVER_HOSTS}"
    if any(script in str(word) for word in [*(launcher.get("command") or []), *(launcher.get("args") or [])]):
        findings.note(path, f"{script}: the job's launcher has it (mode 0555, from the hostfile ConfigMap): it "
                            f"prints host:slots for each hostfile host whose name resolves ({name}-node-0-<i>.{name}, "
                            "a pod that is up), where the operator listed its Running worker pods by name; the node "
                            "Job starts its num_nodes pods at once and the launcher waits for all of them, so "
                            "horovodrun finds at most num_nodes hosts (--max-np beyond them is not reached)")


def launcher_off_gpus(launcher: dict[str, Any], findings: Findings, path: str, when: str) -> None:
    """The MPI Operator's blank NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES on the launcher (`when`
    says on which): with them blank, the NVIDIA container runtime gives the container no GPU, where a CUDA
    image's own NVIDIA_VISIBLE_DEVICES=all would give it every GPU of its node."""
    appended_env(launcher, [{"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""}], findings)
    findings.note(f"{path} NVIDIA_VISIBLE_DEVICES", f"blank, with NVIDIA_DRIVER_CAPABILITIES, as the source system "
                                                    f"set them on {when}, so it sees none of its node's GPUs (the "
                                                    "names reach mpirun's ranks too, where the container runtime "
                                                    "no longer reads them)")


@dataclass
class PodArguments:
    """A Kubernetes pod template as the job's pod arguments."""

    fields: dict[str, Any]
    """Pod arguments (image, command, env, resources_per_node, volumes, ...)."""
    overrides: dict[str, dict[str, Any]]
    """pod_spec_overrides and container_overrides."""
    restart_policy: str | None
    container_name: str | None


def pod_arguments(template: dict[str, Any], findings: Findings, path: str,
                  main: str | None = None) -> PodArguments:
    """The pod arguments of a pod template; `main` names the training container (default: the first).

    Other containers become sidecars (run as native sidecars, so the Job ends when training does).
    """
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    containers = spec.get("containers") or []
    require(bool(containers), f"{path}.spec.containers: a pod template needs a container")
    names = [c.get("name") for c in containers]
    index = names.index(main) if main is not None and main in names else 0
    require(main is None or main in names,
            f"{path}.spec.containers: no container named {shown(main)} (the one the source system trains in); "
            f"containers: {', '.join(map(str, names))}")
    container = containers[index]
    fields: dict[str, Any] = {}
    overrides: dict[str, dict[str, Any]] = {}
    where = f"{path}.spec.containers[{index}]"
    for key, value in container.items():
        if key == "name":
            continue
        if key == "resources":
            fields["resources_per_node"] = resources(value or {}, findings, f"{where}.resources")
        elif key == "env":
            fields["env"] = env_argument(value or [])
        elif key in _CONTAINER_ARGUMENTS:
            if value is not None:
                fields[_CONTAINER_ARGUMENTS[key]] = value
        else:
            overrides.setdefault("container_overrides", {})[key] = value
    others = [c for i, c in enumerate(containers) if i != index]
    if others:
        fields["sidecars"] = others
        findings.note(f"{path}.spec.containers", f"{', '.join(shown(c.get('name')) for c in others)} run as native "
                                                 "sidecars (restartPolicy: Always init containers), so the Job "
                                                 "completes when the training container ends")
    restart_policy = None
    for key, value in spec.items():
        if key == "containers":
            continue
        if key == "restartPolicy":
            restart_policy = value
        elif key in ("hostname", "subdomain"):
            findings.cannot(f"{path}.spec.{key}", "pod DNS names are derived from the job name "
                                                  "(<job>-<role>-0-<index>.<job>); remove it")
        elif key == "imagePullSecrets":
            fields["image_pull_secrets"] = [s["name"] for s in value or []]
        elif key in _POD_ARGUMENTS:
            fields[_POD_ARGUMENTS[key]] = value
        else:
            overrides.setdefault("pod_spec_overrides", {})[key] = value
    if metadata.get("labels"):
        fields["pod_labels"] = dict(metadata["labels"])
    if metadata.get("annotations"):
        fields["pod_annotations"] = dict(metadata["annotations"])
    for key in metadata:
        if key not in ("labels", "annotations"):
            findings.cannot(f"{path}.metadata.{key}", "a pod template takes only labels and annotations here")
    return PodArguments(fields, overrides, restart_policy, container.get("name"))


def note_restart_policy(findings: Findings, policy: str | None, path: str) -> None:
    """trainjobs pods never restart in place; retries are the Job's backoff_limit."""
    if policy not in (None, "Never"):
        findings.note(path, f"restartPolicy {policy}: trainjobs pods use restartPolicy Never and fail fast "
                            "(backoff_limit 0: one failed pod fails the job); set backoff_limit to retry")


# The MPI Operator's images (kubeflow/mpi-operator build/base, examples/v2beta1/pi): the Intel MPI and MPICH
# images run /entrypoint.sh, which execs its arguments after setting up (Intel's sources
# /opt/intel/oneapi/setvars.sh, Intel MPI's environment; on the operator's launcher both wait until the
# hostfile's hosts resolve); the base and OpenMPI images have no ENTRYPOINT.
OPERATOR_ENTRYPOINTS: dict[str, list[str]] = {
    "mpioperator/base": [], "mpioperator/openmpi": [], "mpioperator/mpi-pi:openmpi": [],
    "mpioperator/intel": ["/entrypoint.sh"], "mpioperator/mpi-pi:intel": ["/entrypoint.sh"],
    "mpioperator/mpich": ["/entrypoint.sh"], "mpioperator/mpi-pi:mpich": ["/entrypoint.sh"],
}


def known_entrypoint(image: Any) -> list[str] | None:
    """The ENTRYPOINT of an image whose layout is known (the MPI Operator's), else None."""
    if not isinstance(image, str):
        return None
    reference = image.removeprefix("docker.io/").split("@")[0]
    repository, _, tag = reference.rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    return OPERATOR_ENTRYPOINTS.get(f"{repository}:{tag}", OPERATOR_ENTRYPOINTS.get(repository))


def entrypoint_command(fields: dict[str, Any], findings: Findings, path: str) -> None:
    """A container with args but no command runs the image's ENTRYPOINT with them. The MPI family runs its
    own entrypoint first and then the command, so the command must name the image's entrypoint too: kept
    in front of the args where the image is known, else refused with the command to give."""
    if fields.get("command") or not fields.get("args"):
        return
    args = fields.pop("args")
    image = fields.get("image")
    entrypoint = known_entrypoint(image)
    if entrypoint is None:
        fields["command"] = args
        findings.cannot(f"{path}.args", f"no command: the source runs the ENTRYPOINT of {shown(image)} with these "
                                        "args, and the job runs its own entrypoint before the command; give the "
                                        f"container command: [<the image's ENTRYPOINT>, {', '.join(map(str, args))}] "
                                        f"(or command: {list(map(str, args))} if the image has no ENTRYPOINT)")
    elif entrypoint:
        fields["command"] = [*entrypoint, *args]
        findings.note(f"{path}.args", f"no command: {image} runs its ENTRYPOINT {' '.join(entrypoint)} first (the "
                                      "MPI Operator's image; Intel's sets up Intel MPI's environment), so the "
                                      f"command is {' '.join(entrypoint)} followed by the args")
    else:
        fields["command"] = args
        findings.note(f"{path}.args", f"no command: {image} has no ENTRYPOINT (the MPI Operator's OpenMPI "
                                      "images), so the args are the command")


def same_template(first: dict[str, Any], second: dict[str, Any], findings: Findings, path: str,
                  roles: tuple[str, str] = ("master", "worker")) -> dict[str, Any]:
    """One template for every training pod: where the two roles differ, the second's (the most pods)."""
    for key in sorted(set(first) | set(second)):
        if first.get(key) != second.get(key):
            findings.cannot(f"{path} ({key})", f"{roles[0]} and {roles[1]} pods differ here ({shown(first.get(key))} "
                                               f"and {shown(second.get(key))}); every training pod has one template")
    return second


SCHEDULING_POLICY_FIELDS = {"minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds"}
RUN_POLICY_FIELDS = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
                     "schedulingPolicy", "suspend", "managedBy"}


def run_policy_arguments(run_policy: dict[str, Any], args: dict[str, Any], findings: Findings, controller: str,
                         operator: str) -> None:
    """The `runPolicy` that training-operator v1 jobs and MPIJob v2beta1 share, as job arguments.

    `controller` is the source's own managedBy value; `operator` names the source operator in messages."""
    path = "spec.runPolicy"
    for key, argument in (("ttlSecondsAfterFinished", "ttl_seconds_after_finished"),
                          ("activeDeadlineSeconds", "active_deadline_seconds"), ("backoffLimit", "backoff_limit"),
                          ("suspend", "suspend")):
        if run_policy.get(key) is not None:
            args[argument] = run_policy[key]
    policy = run_policy.get("cleanPodPolicy")
    if policy is not None:
        findings.note(f"{path}.cleanPodPolicy", f"{policy}: no controller deletes pods: the pods of a finished Job "
                                                "stay until the Job goes (ttl_seconds_after_finished), and when the "
                                                "job fails Kubernetes stops its running pods")
    if run_policy.get("managedBy") not in (None, controller):
        findings.cannot(f"{path}.managedBy", f"{shown(run_policy['managedBy'])}: no controller manages the imported "
                                             "job; MultiKueue dispatch has no equivalent")
    scheduling = run_policy.get("schedulingPolicy") or {}
    if scheduling:
        gang = args.get("gang_scheduler") or ("volcano" if args.get("scheduler_name") == "volcano" else None)
        if gang is None:
            findings.cannot(f"{path}.schedulingPolicy", f"the gang scheduler is the {operator}'s --gang-scheduling "
                                                        "flag, not in the job (and a queue needs one); give the job "
                                                        "gang_scheduler, queue and priority_class yourself")
            scheduling = {}
        args["gang_scheduler"] = gang
        if scheduling.get("queue"):
            args["queue"] = scheduling["queue"]
        if scheduling.get("priorityClass"):
            args["priority_class"] = scheduling["priorityClass"]
        if scheduling.get("scheduleTimeoutSeconds") is not None:
            args["schedule_timeout_seconds"] = scheduling["scheduleTimeoutSeconds"]
        if scheduling.get("minAvailable") is not None:
            findings.note(f"{path}.schedulingPolicy.minAvailable", "the gang is every pod of the job")
        if scheduling.get("minResources"):
            findings.note(f"{path}.schedulingPolicy.minResources", "derived from the pods' requests")
    elif args.get("scheduler_name") == "volcano":
        args["gang_scheduler"] = "volcano"
    if args.get("gang_scheduler") is None:
        args.pop("gang_scheduler", None)
    kueue_owns_suspend(args, findings, f"{path}.suspend")
    if args.get("queue") and not args.get("gang_scheduler"):
        raise SourceError("a queue is named but no gang scheduler; give the job gang_scheduler yourself")


def kueue_owns_suspend(args: dict[str, Any], findings: Findings, path: str) -> None:
    """Under Kueue the job leaves `suspend` to Kueue (its webhook suspends the Jobs, admission resumes them),
    which is what a TrainJob or MPIJob's `suspend: true` asked Kueue for."""
    if args.get("gang_scheduler") == "kueue" and "suspend" in args:
        value = args.pop("suspend")
        findings.note(path, f"suspend: {str(value).lower()} left out: Kueue suspends the Jobs and resumes them on "
                            "admission (see docs/scheduling.md)")

