"""Typed arguments shared by every training job family.

A *runtime* holds reusable pod templates (the analogue of a Kubeflow ClusterTrainingRuntime);
a job's arguments override it. Every model is frozen and rejects unknown fields, so a typo in a
stack's config fails before anything registers.
"""

import difflib
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from .errors import Issue, TrainJobError, shown
from .quantity import QuantityError, normalize_quantity, parse_quantity

DEFAULT_SHM_SIZE = "1Gi"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _quantity(value: Any) -> str:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return normalize_quantity(value)


Quantity = Annotated[str, BeforeValidator(_quantity)]


def _env_value(value: Any) -> Any:
    """Env values are strings in Kubernetes; YAML numbers and booleans are converted, not rejected."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


class EnvVar(Model):
    """One container env var, in Kubernetes form: `value` or `valueFrom`."""

    name: str = Field(min_length=1)
    value: Annotated[str | None, BeforeValidator(_env_value)] = None
    value_from: dict[str, Any] | None = Field(default=None, alias="valueFrom")

    def manifest(self) -> dict[str, Any]:
        if self.value_from is not None:
            return {"name": self.name, "valueFrom": self.value_from}
        return {"name": self.name, "value": self.value if self.value is not None else ""}


def _env_list(value: Any) -> Any:
    if isinstance(value, dict):
        return [{"name": key, "value": val} for key, val in value.items()]
    return value


Env = Annotated[tuple[EnvVar, ...] | None, BeforeValidator(_env_list)]


class Resources(Model):
    """Container resources: `{"requests": {...}, "limits": {...}}` with Kubernetes quantities."""

    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class _PodFields(Model):
    """Settings a runtime template gives and a job may override. None means "not set here"."""

    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: Env = None
    env_from: list[dict[str, Any]] | None = None
    working_dir: str | None = None
    volumes: list[dict[str, Any]] | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    affinity: dict[str, Any] | None = None
    service_account_name: str | None = None
    image_pull_secrets: list[str] | None = None
    priority_class_name: str | None = None
    security_context: dict[str, Any] | None = None
    container_security_context: dict[str, Any] | None = None
    shm_size: Quantity | None = None
    pod_labels: dict[str, str] | None = None
    pod_annotations: dict[str, str] | None = None
    ports: list[dict[str, Any]] | None = None
    init_containers: list[dict[str, Any]] | None = None
    sidecars: list[dict[str, Any]] | None = None


class PodTemplate(_PodFields):
    """A role's pods as a runtime defines them (the main container plus pod settings)."""

    resources: Resources | None = None


# Kubeflow's TrainJob CRD rule for initializer storage URIs. Matched whole, with `.` not matching a
# newline, as CEL (RE2) does.
_STORAGE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://.+")


def _storage_uri(value: Any) -> Any:
    """A URI as Kubeflow's CRD requires; the scheme is checked against the initializer that fetches it."""
    if isinstance(value, str) and not _STORAGE_URI.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a URI: Kubeflow requires scheme://... with something after the "
                         "scheme, e.g. hf://org/name or s3://bucket/path")
    return value


class Initializer(PodTemplate):
    """A dataset or model initializer: downloads into the shared /workspace before training starts."""

    storage_uri: Annotated[str | None, BeforeValidator(_storage_uri)] = None
    secret_name: str | None = None


class ExtraRole(PodTemplate):
    """Pods beside the training pods (TensorBoard, an evaluator, a data server): no training env,
    no training port, no SSH, not counted in any world size."""

    num_pods: int = Field(default=1, ge=1)


class TrainingRuntime(Model):
    """What every runtime has: a name, metadata stamped on every object, optional initializers."""

    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    dataset_initializer: Initializer | None = None
    model_initializer: Initializer | None = None


class TrainJobArgs(_PodFields):
    """Arguments every training job accepts; each family adds its own."""

    num_nodes: int = Field(default=1, ge=1)
    resources_per_node: Resources | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    backoff_limit: int = Field(default=0, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    wait_for_completion: bool = False
    wait_timeout_seconds: int | None = Field(default=None, ge=1)
    dataset_initializer: Initializer | None = None
    model_initializer: Initializer | None = None
    workspace_volume: dict[str, Any] | None = None
    workspace_size: Quantity = "20Gi"
    workspace_access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"] = "ReadWriteOnce"
    workspace_storage_class: str | None = None
    initializer_timeout_seconds: int = Field(default=3600, ge=1)
    extra_roles: dict[str, ExtraRole] = Field(default_factory=dict)

    def template_overrides(self) -> PodTemplate:
        """The job's pod settings in runtime-template form, for overlaying on the runtime."""
        fields = {name: getattr(self, name) for name in _PodFields.model_fields}
        return PodTemplate(**fields, resources=self.resources_per_node)


def builtin_runtimes(family: str, *runtimes: TrainingRuntime) -> BeforeValidator:
    """Lets a `runtime` argument name one of the family's built-in runtimes, as stack config does."""
    by_name = {runtime.name: runtime for runtime in runtimes}

    def lookup(value: Any) -> Any:
        if isinstance(value, str):
            if value not in by_name:
                raise ValueError(f'unknown runtime "{value}"; built-in {family} runtimes: {", ".join(sorted(by_name))}')
            return by_name[value]
        return value

    return BeforeValidator(lookup)


def parse_args(component: str, name: str, model: type[BaseModel], value: Any) -> Any:
    """`value` (a model or a plain dict) as `model`, or a TrainJobError naming every bad field."""
    if isinstance(value, model):
        return value
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise TrainJobError(component, name, [Issue("args", f"expected {model.__name__} or a dict, got {type(value).__name__}")])
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as exc:
        raise TrainJobError(component, name, _issues(model, exc)) from None


def _issues(model: type[BaseModel], exc: pydantic.ValidationError) -> list[Issue]:
    issues: dict[str, Issue] = {}
    for error in exc.errors():
        path, owner = _field_path(model, error["loc"])
        if error["type"] == "extra_forbidden":
            unknown = path.rpartition(".")[2]
            known = list(owner.model_fields) if owner else []
            close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
            hint = f'; did you mean "{close[0]}"?' if close else f"; known arguments: {', '.join(known)}"
            message = f'unknown argument "{unknown}"{hint}'
        else:
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] not in ("missing", "value_error") and not isinstance(error.get("input"), (dict, list)):
                message += f" (got {error['input']!r})"
        issues.setdefault(path, Issue(path, message))
    return list(issues.values())


def _field_path(model: type[BaseModel], loc: tuple) -> tuple[str, type[BaseModel] | None]:
    """The user-facing path of a pydantic error location, skipping union-branch tags."""
    parts: list[str] = []
    owner: type[BaseModel] | None = model
    current: Any = model
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
            continue
        if _is_model(current) and item in current.model_fields:
            owner = current
            parts.append(item)
            current = _inner_model(current.model_fields[item].annotation)
        elif _is_model(current) and item not in current.model_fields and item == loc[-1]:
            owner = current
            parts.append(item)
        elif current is None or not _is_model(current):
            if "[" in item or item in ("int", "str", "float", "bool", "dict", "list", "tuple"):
                continue
            parts.append(item)
    return ".".join(parts), owner


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _inner_model(annotation: Any) -> Any:
    """The model class inside Optional/Union/list/tuple/Annotated annotations, if any."""
    if _is_model(annotation):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, tuple, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None
