"""Kubeflow Trainer (trainer.kubeflow.org/v1alpha1): a TrainJob with its ClusterTrainingRuntime or
TrainingRuntime, read with Kubeflow's published API models (kubeflow-trainer-api, the v2.3 API).

A runtime comes from the files given with the TrainJob, or, by name, from the library's built-in
runtimes, which mirror Kubeflow's (torch-distributed, deepspeed-distributed, mlx-distributed,
jax-distributed, xgboost-distributed, torchtune-*).
"""

from dataclasses import dataclass
from typing import Any

import pydantic
from kubeflow_trainer_api.models import (TrainerV1alpha1ClusterTrainingRuntime, TrainerV1alpha1TrainingRuntime,
                                         TrainerV1alpha1TrainJob)

from trainjobs.core.errors import shown
from trainjobs.scheduling.volcano import QUEUE_ANNOTATION
from trainjobs.tools.importer.common import (Finding, Findings, SourceError, env_argument, kueue_owns_suspend,
                                             metadata_arguments, note_restart_policy, pod_arguments, require,
                                             resources, unknown_fields)

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER, LAUNCHER = "trainer", "launcher"
INITIALIZERS = {"dataset-initializer": "dataset_initializer", "model-initializer": "model_initializer"}
_MODELS = {"TrainJob": TrainerV1alpha1TrainJob, "ClusterTrainingRuntime": TrainerV1alpha1ClusterTrainingRuntime,
           "TrainingRuntime": TrainerV1alpha1TrainingRuntime}
# TrainJob fields of earlier Trainer APIs (v2.0, v2.1), gone from v2.2 on, which the import still reads.
OLDER_SPELLINGS = {
    "spec.podTemplateOverrides": "Kubeflow Trainer v2.1's spelling of runtimePatches",
    "spec.podSpecOverrides": "Kubeflow Trainer v2.0's spelling of runtimePatches",
    "spec.labels": "a Kubeflow Trainer v2.0/v2.1 field (the JobSet's labels)",
    "spec.annotations": "a Kubeflow Trainer v2.0/v2.1 field (the JobSet's annotations)",
}
# Other fields of earlier Trainer APIs, with what replaces them.
_REMOVED = {
    "spec.mlPolicy.torch.numProcPerNode": "removed in Kubeflow Trainer v2.2; give trainer.numProcPerNode in the "
                                          "TrainJob (unset means auto)",
    "spec.mlPolicy.torch.elasticPolicy": "removed in Kubeflow Trainer v2.2 (it was never implemented)",
}


def builtin_component(runtime: str) -> str | None:
    """The component whose built-in runtime has this name."""
    from trainjobs.families import jax, mpi, torch, torchtune, xgboost

    for component, runtimes in (("TorchTuneTrainJob", torchtune.BUILTIN_RUNTIMES),
                                ("TorchTrainJob", torch.BUILTIN_RUNTIMES), ("JaxTrainJob", jax.BUILTIN_RUNTIMES),
                                ("XGBoostTrainJob", xgboost.BUILTIN_RUNTIMES)):
        if runtime in runtimes:
            return component
    return {mpi.DEEPSPEED_DISTRIBUTED.name: "DeepSpeedTrainJob", mpi.MLX_DISTRIBUTED.name: "MlxTrainJob",
            mpi.MPI_DISTRIBUTED.name: "MpiTrainJob"}.get(runtime)


def check_document(document: dict[str, Any], findings: Findings) -> None:
    """Unknown fields (with what replaced a field of an older API), then the API's own types. A TrainJob's
    older spellings of runtime patches, labels and annotations (v2.0, v2.1) are read (`import_trainjob`)."""
    model = _MODELS[document["kind"]]
    older = set(OLDER_SPELLINGS) if document["kind"] == "TrainJob" else set()
    for path in unknown_fields(document, model, ""):
        if path not in older:
            findings.unknown.append(Finding(path, _REMOVED.get(path, f"not a field of the v2.3 {document['kind']} "
                                                                     "API")))
    if findings.unknown:
        return
    current = {**document, "spec": {k: v for k, v in (document.get("spec") or {}).items()
                                    if f"spec.{k}" not in older}}
    try:
        model.from_dict(current)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise SourceError(f"not a valid {document['kind']}: {problems}") from None


class Runtime:
    """A (Cluster)TrainingRuntime as the job's runtime argument and the job arguments it decides."""

    def __init__(self, component: str, runtime: Any, job_args: dict[str, Any], num_nodes: int | None) -> None:
        self.component, self.runtime, self.job_args, self.num_nodes = component, runtime, job_args, num_nodes


def _template(argument: dict[str, Any]) -> dict[str, Any]:
    """Pod arguments as a runtime's PodTemplate (`resources` rather than `resources_per_node`)."""
    out = dict(argument)
    if "resources_per_node" in out:
        out["resources"] = out.pop("resources_per_node")
    return out


def runtime_from_document(document: dict[str, Any], findings: Findings) -> Runtime:
    name = document["metadata"]["name"]
    spec = document.get("spec") or {}
    policy = spec.get("mlPolicy") or {}
    job_args: dict[str, Any] = {}
    frameworks = [key for key in ("torch", "mpi", "jax", "xgboost", "flux") if policy.get(key) is not None]
    require(len(frameworks) <= 1, f"runtime {name}: spec.mlPolicy sets {' and '.join(frameworks)}; Kubeflow allows one")
    framework = frameworks[0] if frameworks else None
    if framework in (None, "flux"):
        raise SourceError(f"runtime {name}: spec.mlPolicy {'has no framework' if framework is None else 'flux'}; "
                          "trainjobs imports torch, mpi, jax and xgboost runtimes")
    component = {"torch": "TorchTrainJob", "mpi": "MpiTrainJob", "jax": "JaxTrainJob",
                 "xgboost": "XGBoostTrainJob"}[framework]
    runtime: dict[str, Any] = {"name": name}
    torch = policy.get("torch") or {}
    if torch.get("envInjection"):
        job_args["env_injection"] = sorted({c for t in torch["envInjection"].get("targets") or []
                                            for c in t.get("containerNames") or []})
        findings.note("spec.mlPolicy.torch.envInjection", "env_injection names containers of the trainer pods; "
                                                          "other Jobs' containers cannot get the torch env")
    mpi = policy.get("mpi") or {}
    for key, argument in (("mpiImplementation", "mpi_implementation"), ("numProcPerNode", "num_proc_per_node"),
                          ("runLauncherAsNode", "run_launcher_as_node"), ("sshAuthMountPath", "ssh_auth_mount_path")):
        if mpi.get(key) is not None:
            runtime[argument] = mpi[key]

    groups = spec.get("podGroupPolicy") or {}
    if "coscheduling" in groups:
        job_args["gang_scheduler"] = "coscheduling"
        timeout = (groups["coscheduling"] or {}).get("scheduleTimeoutSeconds")
        if timeout is not None:
            job_args["schedule_timeout_seconds"] = timeout
        findings.note("spec.podGroupPolicy.coscheduling", "Kubeflow counts initializer pods in the PodGroup's "
                                                          "minMember too; so does the imported job")
    if "volcano" in groups:
        job_args["gang_scheduler"] = "volcano"
        if (groups["volcano"] or {}).get("networkTopology"):
            findings.cannot("spec.podGroupPolicy.volcano.networkTopology", "the job's Volcano PodGroup has no "
                                                                           "network topology argument")

    template = spec.get("template") or {}
    metadata = template.get("metadata") or {}
    labels, annotations = dict(metadata.get("labels") or {}), dict(metadata.get("annotations") or {})
    if QUEUE_ANNOTATION in annotations:
        job_args["queue"] = annotations.pop(QUEUE_ANNOTATION)
    if labels:
        runtime["labels"] = labels
    if annotations:
        runtime["annotations"] = annotations
    jobset = template.get("spec") or {}
    for key, value in jobset.items():
        if key == "replicatedJobs":
            continue
        if key == "network" and all(value.get(k, True) is True for k in ("enableDNSHostnames",
                                                                          "publishNotReadyAddresses")):
            require(not value.get("subdomain"), f"runtime {name}: spec.template.spec.network.subdomain: pod DNS "
                                                "names use the job name as subdomain")
            require(set(value) <= {"enableDNSHostnames", "publishNotReadyAddresses", "subdomain"},
                    f"runtime {name}: spec.template.spec.network: only DNS hostnames and not-ready addresses, which "
                    "the job's headless Service always has")
            continue
        if key == "successPolicy" and framework == "mpi":
            findings.note(f"spec.template.spec.{key}", "the MPI job ends when its launcher ends: the launcher tells "
                                                       "the workers its exit code")
            continue
        findings.cannot(f"spec.template.spec.{key}", "JobSet settings have no argument (the job is Indexed Jobs "
                                                     "and a Service, not a JobSet)")
    overrides: dict[str, Any] = {}
    for i, replicated in enumerate(jobset.get("replicatedJobs") or []):
        path = f"spec.template.spec.replicatedJobs[{i}]"
        job_template = replicated.get("template") or {}
        role = ((job_template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR) or replicated.get("name")
        rjob_name = replicated.get("name")
        if replicated.get("replicas", 1) != 1:
            findings.cannot(f"{path}.replicas", "several Jobs of one replicated Job: each role is one Indexed Job")
        if replicated.get("groupName"):
            findings.cannot(f"{path}.groupName", "JobSet's replicated Job groups have no argument")
        if replicated.get("dependsOn"):
            order = ("the MPI launcher starts once every host resolves and accepts SSH" if framework == "mpi"
                     else "training pods start once the initializers complete")
            findings.note(f"{path}.dependsOn", f"the job keeps this order without the runtime's dependsOn: {order}")
        for key, value in (job_template.get("spec") or {}).items():
            if key not in ("template", "parallelism", "completions"):
                findings.cannot(f"{path}.template.spec.{key}", "Job settings of a runtime have no argument here; "
                                                               "give them to the job (e.g. backoff_limit)")
        pod = (job_template.get("spec") or {}).get("template") or {}
        if role == TRAINER and rjob_name not in ("node", LAUNCHER):
            findings.note(f"{path}.name", f"the trainer pods are named <job>-node-0-<i> (Kubeflow: "
                                          f"<job>-{rjob_name}-0-<i>; its PET_MASTER_ADDR names node pods either way)")
        if framework == "mpi" and rjob_name in ("node", LAUNCHER):   # MPI: the launcher is the trainer ancestor
            key, main = rjob_name, "node"
        elif framework != "mpi" and (role == TRAINER or rjob_name == "node"):
            key, main = "node", "node"
        elif role in INITIALIZERS:
            key, main = INITIALIZERS[role], role
        else:
            findings.cannot(path, f"replicated Job {shown(rjob_name)} is not a trainer, launcher or initializer; "
                                  "give such pods to the job as extra_roles")
            continue
        pod_path = f"{path}.template.spec.template"
        arguments = pod_arguments(pod, findings, pod_path, main=main)
        note_restart_policy(findings, arguments.restart_policy, f"{pod_path}.spec.restartPolicy")
        fields = _template(arguments.fields)
        scheduler = fields.pop("scheduler_name", None)
        if scheduler is not None and not (scheduler == "volcano" and job_args.get("gang_scheduler") == "volcano"):
            if job_args.setdefault("scheduler_name", scheduler) != scheduler:
                findings.cannot(f"{pod_path}.spec.schedulerName", "the roles name different schedulers")
        if key == "node" and framework == "mpi":
            probe = (arguments.overrides.get("container_overrides") or {}).pop("readinessProbe", None)
            if probe and "tcpSocket" in probe:
                runtime["ssh_port"] = probe["tcpSocket"]["port"]
            elif probe:
                arguments.overrides["container_overrides"]["readinessProbe"] = probe
            if not arguments.overrides.get("container_overrides"):
                arguments.overrides.pop("container_overrides", None)
        for target, values in arguments.overrides.items():
            if key in INITIALIZERS.values():
                findings.cannot(pod_path, f"{target} of an initializer: the job's overrides are for training pods")
            elif overrides.setdefault(target, values) != values:
                findings.cannot(f"{pod_path}", f"{target} differ between roles; the job sets one for every "
                                               "training pod")
        runtime[key] = fields
    if framework == "mpi" and "launcher" not in runtime:
        runtime["launcher"] = None
    job_args.update(overrides)
    return Runtime(component, runtime, job_args, policy.get("numNodes"))


def import_trainjob(document: dict[str, Any], runtimes: dict[tuple[str, str], dict[str, Any]],
                    findings: Findings, runtime_findings: dict[tuple[str, str], Findings]) -> tuple[str, str, dict]:
    """(component, job name, arguments) of a TrainJob."""
    metadata = document.get("metadata") or {}
    name = metadata["name"]
    spec = document.get("spec") or {}
    args, labels, annotations = metadata_arguments(metadata)
    if labels:
        args["labels"] = labels
        findings.note("metadata.labels", "the labels reach every object and pod of the job (Kubeflow keeps "
                                         "TrainJob labels on the TrainJob)")
    if annotations:
        args["annotations"] = annotations
        findings.note("metadata.annotations", "the annotations reach every object and pod of the job")
    for key in metadata:
        if key not in ("name", "namespace", "labels", "annotations"):
            findings.cannot(f"metadata.{key}", "set by the API server; remove it")

    ref = spec["runtimeRef"]
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    require(ref.get("apiGroup") in (None, "trainer.kubeflow.org"),
            f"spec.runtimeRef.apiGroup: {shown(ref.get('apiGroup'))} is not trainer.kubeflow.org")
    require(kind in RUNTIME_KINDS, f"spec.runtimeRef.kind: {shown(kind)} is not one of {', '.join(RUNTIME_KINDS)}")
    given = runtimes.get((kind, ref["name"]))
    if given is not None:
        runtime = runtime_from_document(given, runtime_findings[(kind, ref["name"])])
        component, num_nodes = runtime.component, runtime.num_nodes
        args["runtime"] = runtime.runtime
        for key, value in runtime.job_args.items():
            args.setdefault(key, value)
        if kind == "TrainingRuntime" and given["metadata"].get("namespace") not in (None, metadata.get("namespace")):
            findings.cannot("spec.runtimeRef", f"TrainingRuntime {ref['name']} is in another namespace")
    else:
        component = builtin_component(ref["name"])
        if component is None:
            raise SourceError(f"spec.runtimeRef: {kind} {shown(ref['name'])} is neither in the files given nor a "
                              "built-in runtime; give its file too")
        args["runtime"] = ref["name"]
        num_nodes = None

    trainer = spec.get("trainer")
    if trainer is None:
        findings.note("spec.trainer", "Kubeflow injects no distributed env when spec.trainer is omitted "
                                      "(kubeflow/trainer#4076); the imported job always gets it")
        trainer = {}
    if trainer.get("command") == ["tune", "run"] and component == "TorchTrainJob":
        raise SourceError(f"spec.trainer.command: tune run needs a torchtune runtime (e.g. torchtune-llama3.2-1b), "
                          f"not {ref['name']}")
    if component == "TorchTuneTrainJob" and trainer.get("command") not in (None, ["tune", "run"]):
        findings.note("spec.trainer.command", "Kubeflow runs the runtime's command unchanged when the command is "
                                              "not exactly `tune run`; TorchTuneTrainJob always builds `tune run`")
    for key, value in trainer.items():
        if key == "numNodes":
            args["num_nodes"] = value
        elif key == "numProcPerNode":
            args["num_proc_per_node"] = value if component.startswith(("Mpi", "DeepSpeed", "Mlx")) else str(value)
        elif key == "resourcesPerNode":
            args["resources_per_node"] = resources(value or {}, findings, "spec.trainer.resourcesPerNode")
        elif key == "env":
            args["env"] = env_argument(value or [])
        elif key == "command" and component == "TorchTuneTrainJob":
            continue
        elif key in ("image", "command", "args"):
            args[key] = value
    if "num_nodes" not in args and num_nodes is not None:
        args["num_nodes"] = num_nodes
    elif num_nodes is not None and "numNodes" in trainer:
        runtime_findings[(kind, ref["name"])].note("spec.mlPolicy.numNodes", f"{num_nodes}: the TrainJob's numNodes "
                                                                             f"{trainer['numNodes']} replaces it, as "
                                                                             "in Kubeflow")
    if spec.get("suspend") is not None:
        args["suspend"] = spec["suspend"]
    if spec.get("activeDeadlineSeconds") is not None:
        args["active_deadline_seconds"] = spec["activeDeadlineSeconds"]
    if spec.get("managedBy") not in (None, "trainer.kubeflow.org/trainjob-controller"):
        findings.cannot("spec.managedBy", f"{shown(spec['managedBy'])}: no controller manages the imported job; "
                                          "MultiKueue dispatch has no equivalent")
    for kind_key, argument in (("dataset", "dataset_initializer"), ("model", "model_initializer")):
        source = (spec.get("initializer") or {}).get(kind_key)
        if source is None:
            continue
        initializer: dict[str, Any] = {}
        if source.get("storageUri"):
            initializer["storage_uri"] = source["storageUri"]
        if source.get("env"):
            initializer["env"] = env_argument(source["env"])
        if (source.get("secretRef") or {}).get("name"):
            initializer["secret_name"] = source["secretRef"]["name"]
        args[argument] = initializer
    patches, jobset = _pod_patches(spec, findings)
    for key, values in jobset.items():
        args[key] = {**values, **(args.get(key) or {})}
    for patch in patches:
        _apply_pod_patch(patch, component, args, findings)
    kueue_owns_suspend(args, findings, "spec.suspend")
    if args.get("gang_scheduler") is None and (args.get("queue") or args.get("priority_class")):
        findings.cannot("metadata", "a queue without a gang scheduler")
    return component, name, args


# ---- runtime patches ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodPatch:
    """A patch of one replicated Job's pods, whichever API version spelled it."""

    path: str
    target: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


def _pod_patches(spec: dict[str, Any], findings: Findings) -> tuple[list[PodPatch], dict[str, dict[str, str]]]:
    """v2.3's runtimePatches, v2.1's podTemplateOverrides and v2.0's podSpecOverrides as pod patches per
    target, and the JobSet's patched labels and annotations (the job's own, which reach every object and pod)."""
    patches: list[PodPatch] = []
    jobset: dict[str, dict[str, str]] = {}
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        path = f"spec.runtimePatches[{i}]"
        findings.note(f"{path}.manager", f"{shown(patch.get('manager'))} owned this patch in Kubeflow; the job's "
                                         "arguments have no owner per field (not needed)")
        if patch.get("time"):
            findings.note(f"{path}.time", "when the manager last wrote the patch (not needed)")
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        _jobset_metadata(template.get("metadata") or {}, findings, f"{path}.trainingRuntimeSpec.template.metadata",
                         jobset)
        for j, replicated in enumerate((template.get("spec") or {}).get("replicatedJobs") or []):
            where = f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            job = replicated.get("template") or {}
            for key in (job.get("metadata") or {}):
                findings.cannot(f"{where}.template.metadata.{key}", "the Job of one role has no labels or "
                                                                    "annotations of its own; give them as labels "
                                                                    "(every object) or in the pod template")
            pod = (job.get("spec") or {}).get("template") or {}
            patches.append(PodPatch(f"{where}.template.spec.template", replicated.get("name"),
                                    pod.get("metadata") or {}, pod.get("spec") or {}))
    for key, version in (("podTemplateOverrides", "v2.1"), ("podSpecOverrides", "v2.0")):
        for i, override in enumerate(spec.get(key) or []):
            path = f"spec.{key}[{i}]"
            findings.note(path, f"the source uses Kubeflow Trainer {version}'s API ({key}; runtimePatches from v2.2 "
                                "on): read as the patch it was")
            pod_spec = ((override.get("spec") or {}) if key == "podTemplateOverrides"   # v2.0: the spec inline
                        else {k: v for k, v in override.items() if k != "targetJobs"})
            for target in override.get("targetJobs") or []:
                patches.append(PodPatch(path if key == "podSpecOverrides" else f"{path}.spec", target.get("name"),
                                        override.get("metadata") or {}, pod_spec))
    for key in ("labels", "annotations"):
        if spec.get(key):
            findings.note(f"spec.{key}", f"the source uses Kubeflow Trainer v2.0/v2.1's spec.{key} (the JobSet's): "
                                         f"the job's {key}, which reach every object and pod")
            _jobset_metadata({key: spec[key]}, findings, "spec", jobset, noted=True)
    return patches, jobset


def _jobset_metadata(metadata: dict[str, Any], findings: Findings, path: str, patched: dict[str, dict[str, str]],
                     noted: bool = False) -> None:
    """Labels and annotations of the JobSet: the job's own (which reach every object and pod)."""
    for key, value in metadata.items():
        if key in ("labels", "annotations"):
            patched.setdefault(key, {}).update(value or {})
            if not noted:
                findings.note(f"{path}.{key}", f"the JobSet's {key} in Kubeflow; the job's {key}, which reach every "
                                               "object and pod")
        else:
            findings.cannot(f"{path}.{key}", "a patch of the JobSet's metadata takes only labels and annotations")


# Pod spec fields of a patch with an argument of their own; the lists and maps add to what is there.
_PATCH_ARGUMENTS = {"serviceAccountName": "service_account_name", "nodeSelector": "node_selector",
                    "affinity": "affinity", "tolerations": "tolerations", "volumes": "volumes",
                    "securityContext": "security_context"}
_CONTAINER_PATCH_ARGUMENTS = {"env": "env", "volumeMounts": "volume_mounts", "securityContext":
                              "container_security_context"}


def _merge(fields: dict[str, Any], argument: str, value: Any) -> None:
    """A patched value over the argument's: maps and lists add to it (as Kubernetes merges them), others replace."""
    current = fields.get(argument)
    if isinstance(current, dict) and isinstance(value, dict):
        fields[argument] = {**current, **value}
    elif isinstance(current, list) and isinstance(value, list):
        fields[argument] = [*current, *value]
    else:
        fields[argument] = value


def _apply_pod_patch(patch: PodPatch, component: str, args: dict[str, Any], findings: Findings) -> None:
    """The patched fields as the arguments of the pods they target: the trainer pods' are the job's (for MPI,
    the runtime's node or launcher template), an initializer's are its own; fields without one are named."""
    mpi = component in ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob")
    main = patch.target if patch.target in INITIALIZERS else "node"   # the container each role trains in
    if patch.target in INITIALIZERS:
        argument = INITIALIZERS[patch.target]
        if argument not in args:
            findings.note(patch.path, f"targets {patch.target}, which this TrainJob does not run (not needed)")
            return
        fields, trainer = args[argument], False
    elif mpi and patch.target in ("node", LAUNCHER):
        if not isinstance(args.get("runtime"), dict):
            findings.cannot(patch.path, f"a patch of the MPI {patch.target} pods alone needs the runtime's file "
                                        "(the built-in runtime is referred to by name); give the runtime's file too")
            return
        fields, trainer = args["runtime"].setdefault(patch.target, {}) or {}, False
        args["runtime"][patch.target] = fields
    elif patch.target == "node" or patch.target == TRAINER:
        fields, trainer = args, True
    else:
        findings.cannot(patch.path, f"targets replicated Job {shown(patch.target)}, which is not a trainer, launcher "
                                    "or initializer")
        return
    for key, value in patch.metadata.items():
        if key in ("labels", "annotations"):
            _merge(fields, f"pod_{key}", dict(value or {}))
        else:
            findings.cannot(f"{patch.path}.metadata.{key}", "a pod patch's metadata takes only labels and annotations")
    for key, value in patch.spec.items():
        where = f"{patch.path}.spec.{key}"
        if key in _PATCH_ARGUMENTS:
            _merge(fields, _PATCH_ARGUMENTS[key], value)
        elif key == "imagePullSecrets":
            _merge(fields, "image_pull_secrets", [secret["name"] for secret in value or []])
        elif key in ("schedulingGates", "terminationGracePeriodSeconds") and trainer:
            fields.setdefault("pod_spec_overrides", {})[key] = value
        elif key == "containers":
            for i, container in enumerate(value or []):
                _container_patch(container, main, fields, findings, f"{where}[{i}]")
        else:
            findings.cannot(where, f"no argument of the {patch.target} pods takes it"
                                   + ("; give init containers as init_containers" if key == "initContainers" else ""))


def _container_patch(container: dict[str, Any], main: str, fields: dict[str, Any], findings: Findings,
                     path: str) -> None:
    if container.get("name") != main:
        findings.cannot(path, f"container {shown(container.get('name'))}: only the main container ({main}) has "
                              "arguments; give a sidecar's settings in its own definition (sidecars)")
        return
    for key, value in container.items():
        if key == "name":
            continue
        if key == "env":
            env = env_argument(value or [])
            current = fields.get("env")
            if isinstance(current, dict) and isinstance(env, dict):
                fields["env"] = {**current, **env}
            elif current:
                fields["env"] = [*(([{"name": k, "value": v} for k, v in current.items()]) if isinstance(current, dict)
                                   else current), *value]
            else:
                fields["env"] = env
        elif key in _CONTAINER_PATCH_ARGUMENTS:
            _merge(fields, _CONTAINER_PATCH_ARGUMENTS[key], value)
        else:
            findings.cannot(f"{path}.{key}", "no argument of the main container takes it")
