"""Dataset and model initializers: their Jobs, the shared /workspace volume, and the completion markers
training pods wait for, so the order holds under `pulumi up` and when the YAML is applied at once."""

from dataclasses import dataclass
from typing import Any

from trainjobs.core.args import AccessMode, Initializer, PodTemplate, TrainingRuntime, TrainJobArgs
from trainjobs.core.deferred import concat, digest
from trainjobs.core.errors import IssueCollector, shown
from trainjobs.core.naming import argument_value_problem, check_plain
from trainjobs.core.objects import container, object_labels, pod_set, template_env
from trainjobs.core.podsets import INITIALIZER_ARGUMENTS, INITIALIZER_ROLES, PodSetSpec
from trainjobs.kube.manifests import metadata
from trainjobs.kube.templates import overlay, upsert_env
from trainjobs.scripts import script


WORKSPACE = "/workspace"
WORKSPACE_VOLUME = "initializer"
MARKER_DIR = f"{WORKSPACE}/.trainjobs"
WORKSPACE_ROLE = "workspace"
# Kubeflow Trainer's initializer images, used when neither the runtime nor the job gives one.
INITIALIZER_IMAGES = {"dataset-initializer": "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0",
                      "model-initializer": "ghcr.io/kubeflow/trainer/model-initializer:v2.3.0"}
# The URI schemes Kubeflow's initializer images fetch (pkg/initializers/{dataset,model}/__main__.py).
INITIALIZER_SCHEMES = {"dataset-initializer": ("hf", "cache", "s3"), "model-initializer": ("hf", "s3")}


@dataclass(frozen=True)
class InitializerSetup:
    """What initializers add to a job: their objects, and what training pods need to wait for them."""

    manifests: tuple[dict[str, Any], ...] = ()
    """Objects beside the pods (the workspace PVC)."""
    pod_sets: tuple[PodSetSpec, ...] = ()
    volume: dict[str, Any] | None = None
    mount: dict[str, Any] | None = None
    markers: tuple[str, ...] = ()
    timeout_seconds: int = 0
    specs: tuple[tuple[str, str, Initializer], ...] = ()   # (role, argument, effective spec) per initializer

    def wait_container(self, template: PodTemplate) -> list[dict[str, Any]]:
        """Init container for training pods: waits (bounded) for every initializer's completion marker.

        The markers make the order hold when the rendered YAML is applied all at once (GitOps);
        under `pulumi up` the training Jobs are also created only after the initializers complete.
        """
        if not self.markers:
            return []
        wait: dict[str, Any] = {"name": "wait-for-initializers", "image": template.image,
                                "command": ["/bin/sh", "-c", script("wait-for-initializers"), "wait-for-initializers",
                                            str(self.timeout_seconds), *self.markers],
                                "volumeMounts": [self.mount]}
        if template.container_security_context:
            wait["securityContext"] = template.container_security_context
        return [wait]


def initializers(name: str, args: TrainJobArgs, runtime: TrainingRuntime, issues: IssueCollector,
                 training_pods: int) -> InitializerSetup:
    """Dataset and model initializer pod sets, the shared workspace volume, and their completion markers.

    Each initializer's own command runs in an init container named after its role (the image's
    entrypoint is kept when no command is given); the Job's main container then writes a marker
    file named after a hash of the initializer's spec, so a changed initializer is waited for again
    and an unchanged one is not re-awaited.
    """
    configured = {}
    for role, field_name in INITIALIZER_ARGUMENTS.items():
        base, top = getattr(runtime, field_name), getattr(args, field_name)
        if base is None and top is None:
            continue
        spec = overlay(base, top) if base is not None and top is not None else (top or base)
        if spec.image is None:
            spec = spec.model_copy(update={"image": INITIALIZER_IMAGES[role]})
        if spec.storage_uri is None and spec.command is None:
            issues.add(f"{field_name}.storage_uri", "set the URI to download from (e.g. hf://org/name), "
                                                    "or a command for a custom initializer")
        elif isinstance(spec.storage_uri, str) and (problem := argument_value_problem("storage_uri", spec.storage_uri)):
            issues.add(f"{field_name}.storage_uri", problem)
        elif isinstance(spec.storage_uri, str) and isinstance(spec.image, str) and _kubeflow_initializer(spec.image, role):
            scheme = spec.storage_uri.partition("://")[0].lower()
            if scheme not in INITIALIZER_SCHEMES[role]:
                kind = role.split("-")[0]
                issues.add(f"{field_name}.storage_uri",
                           f"Unsupported {kind} storage URI scheme {shown(scheme)}: expected one of "
                           f"{', '.join(INITIALIZER_SCHEMES[role])} (Kubeflow's {role} image); or give the "
                           "initializer an image of your own that fetches it")
        configured[role] = spec
    if not configured:
        return InitializerSetup()

    manifests: list[dict[str, Any]] = []
    if args.workspace_volume is not None:
        volume = {"name": WORKSPACE_VOLUME, **args.workspace_volume}
    else:
        claim = workspace_claim(name)
        # Training pods on several nodes mount the workspace at once; a ReadWriteOnce volume attaches to one.
        access = args.workspace_access_mode or (AccessMode.READ_WRITE_MANY.value if training_pods > 1
                                                else AccessMode.READ_WRITE_ONCE.value)
        pvc_spec: dict[str, Any] = {"accessModes": [access],
                                    "resources": {"requests": {"storage": args.workspace_size}}}
        if args.workspace_storage_class is not None:
            check_plain(issues, "workspace_storage_class", args.workspace_storage_class)
            pvc_spec["storageClassName"] = args.workspace_storage_class
        manifests.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": metadata(claim, args.namespace, object_labels(name, WORKSPACE_ROLE, runtime, args),
                                               {**runtime.annotations, **args.annotations}),
                          "spec": pvc_spec})
        volume = {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
    mount = {"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE}

    markers, pod_sets = [], []
    lifecycle = args.model_copy(update={"wait_for_completion": True,
                                        "wait_timeout_seconds": args.initializer_timeout_seconds})
    for role, spec in configured.items():
        # Fields left unset are not part of the digest, so a new optional field re-runs no initializer.
        given = {key: value for key, value in spec.model_dump(by_alias=True).items() if value is not None}
        marker = concat(f"{MARKER_DIR}/{role}-", digest(given), ".done")
        env = template_env(spec)
        if spec.storage_uri is not None:
            env = upsert_env(env, [{"name": "STORAGE_URI", "value": spec.storage_uri}])
        work = container(spec.model_copy(update={"shm_size": "0"}), env, ports=[], extra_mounts=[mount], name=role)
        if spec.secret_name:
            work["envFrom"] = [*work.get("envFrom", []), {"secretRef": {"name": spec.secret_name}}]
        done = {"name": "complete", "image": spec.image,
                "command": ["/bin/sh", "-c", f'mkdir -p {MARKER_DIR} && touch "$1"', "complete", marker],
                "volumeMounts": [mount]}
        if spec.container_security_context:
            done["securityContext"] = spec.container_security_context
        own = lifecycle if spec.active_deadline_seconds is None else lifecycle.model_copy(
            update={"active_deadline_seconds": spec.active_deadline_seconds})
        pod_sets.append(pod_set(name, role, 1, spec.model_copy(update={"shm_size": "0"}), done, runtime, own,
                                extra_volumes=[volume], init_containers=[work]))
        markers.append(marker)
    specs = tuple((role, field_name, configured[role]) for role, field_name in INITIALIZER_ARGUMENTS.items()
                  if role in configured)
    return InitializerSetup(tuple(manifests), tuple(pod_sets), volume, mount, tuple(markers),
                            args.initializer_timeout_seconds, specs)


def _kubeflow_initializer(image: str, role: str) -> bool:
    """Whether `image` is Kubeflow's initializer for `role`, at any tag or digest."""
    return _repository(image) == _repository(INITIALIZER_IMAGES[role])


def _repository(image: str) -> str:
    image = image.partition("@")[0]
    head, colon, tag = image.rpartition(":")
    return head if colon and "/" not in tag else image


def workspace_claim(name: str) -> str:
    return f"{name}-initializer"
