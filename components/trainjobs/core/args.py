"""Typed arguments shared by every training job family.

A *runtime* holds reusable pod templates (the analogue of a Kubeflow ClusterTrainingRuntime);
a job's arguments override it. Every model is frozen and rejects unknown fields, so a typo in a
stack's config fails before anything registers.

The models are the one declaration of every argument: each field's annotation, default and
docstring give the Python API, the validation, the generated docs and the multi-language package
schema. So the annotations stay within what Pulumi's schema inference reads (no unions but
Optional and `pulumi.Input`, no `Literal`, no `Annotated`, lists not tuples), and checks live in
validator methods.

Arguments that only pass a value into the objects are `pulumi.Input[T]`: a plain value, an Output,
a secret, or a value unknown at preview. Arguments that decide how many objects and pods exist, or
what env is derived, stay plain, because that has to be known at preview.
"""

import difflib
import enum
import functools
import re
import traceback
import types
import typing
from typing import Any, Optional, Union

import pulumi
import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.fields import FieldInfo

from trainjobs.core.descriptions import describe_choices
from trainjobs.core.errors import Issue, TrainJobError, shown
from trainjobs.kube.naming import label_key_problem
from trainjobs.kube.quantity import QuantityError, normalize_quantity, parse_quantity
from trainjobs.kube.resources import DEFAULT_DEVICE_CLASS
from trainjobs.kube.spread import spread_problems
from trainjobs.registry import BACKENDS, GANG_SCHEDULERS

DEFAULT_SHM_SIZE = "1Gi"
INT32_MAX = 2**31 - 1
# A run identifier is appended to the job name, so it must keep the name an RFC 1035 label.
RUN_ID = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# `pulumi.Input[X]` is `Union[X, Awaitable[X], "Output[T]"]`: pydantic resolves that forward reference in the
# module that declares the field, so these names make every model's fields complete when its class is created (a
# family that declares an Input field of its own imports them).
Output = pulumi.Output
T = Any


def is_deferred(value: Any) -> bool:
    """A value known only when Pulumi resolves it: an Output, or another awaitable Input."""
    return isinstance(value, pulumi.Output) or hasattr(value, "__await__")


_PLAIN_ONLY = ("must be a plain value, not an Output: it decides which objects, pods or env the job derives, and "
               "that has to be known at preview. Pass a plain value (e.g. from pulumi.Config().require_int) instead")


def _is_output(annotation: Any) -> bool:
    return typing.get_origin(annotation) is pulumi.Output or annotation is pulumi.Output


def _takes_outputs(annotation: Any) -> bool:
    """Whether a value of this annotation may itself be an Output: `pulumi.Input[...]` (optional or not)."""
    return _is_output(annotation) or (typing.get_origin(annotation) in (Union, types.UnionType)
                                      and any(_takes_outputs(arg) for arg in typing.get_args(annotation)))


def _plain_inside(annotation: Any) -> bool:
    """Whether every value inside this annotation's lists and mappings must be plain: no `pulumi.Input`,
    `Any` (pass-through Kubernetes structures take Outputs) or model (it checks its own fields) inside."""
    if annotation is Any or _is_output(annotation) or _is_model(annotation):
        return False
    return all(_plain_inside(arg) for arg in typing.get_args(annotation))


def _deferred_inside(value: Any, path: str = "") -> Optional[str]:
    """The path (`.key`, `[i]`) of the first Output inside nested lists and mappings, if any."""
    if is_deferred(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _deferred_inside(item, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}")
        if found is not None:
            return found
    return None


def _is_int(annotation: Any) -> bool:
    return annotation is int or (typing.get_origin(annotation) in (Union, types.UnionType)
                                  and int in typing.get_args(annotation))


def _is_int_list(annotation: Any) -> bool:
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation) == (int,)
    return typing.get_origin(annotation) in (Union, types.UnionType) and any(
        _is_int_list(arg) for arg in typing.get_args(annotation))


def _is_bool(annotation: Any) -> bool:
    return annotation is bool or (typing.get_origin(annotation) in (Union, types.UnionType)
                                   and set(typing.get_args(annotation)) == {bool, type(None)})


def _boolean_for_number(value: bool) -> str:
    """A boolean is never read as a number (pydantic would read true as 1)."""
    return f"expected an integer, got the boolean {str(value).lower()}: write a number"


def _not_a_boolean(value: Any) -> str:
    """Only true and false are booleans (pydantic would read "yes", "on", "1" or 1 as true)."""
    words = (" (YAML reads yes/no/on/off as words, as Pulumi reads stack files)"
             if isinstance(value, str) and value.lower() in ("yes", "no", "on", "off", "y", "n") else "")
    what = (shown(value) if isinstance(value, str) else f"the number {value}" if isinstance(value, (int, float))
            else f"a {type(value).__name__}")
    return f"expected true or false, got {what}{words}: write true or false"


class MappingKeyError(ValueError):
    """A problem with one key of a mapping argument: the error's path names the key."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Model(BaseModel):
    """Base of every argument model: frozen, strict about unknown fields, errors as TrainJobError.

    Constructing a model with keyword arguments raises the same TrainJobError (field path, remedy,
    "did you mean") as passing the equivalent dict to a component.
    """

    # Each model's validator is built when it is first used (a program of torch jobs never builds the other
    # families' models, nor the bases that are only inherited from).
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, arbitrary_types_allowed=True,
                              use_enum_values=True, validate_default=False, defer_build=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise TrainJobError(f"{type(self).__name__} ({_written_at()})", None,
                                validation_issues(type(self), exc)) from None

    @classmethod
    def unknown_hint(cls, key: str) -> str | None:
        """Where a setting that is none of this model's arguments belongs, when the model knows; None lists the
        arguments instead."""
        return None

    @classmethod
    def defaults_apply(cls) -> bool:
        """Whether an unset field takes its default (the reference documents the defaults where they apply)."""
        return True

    # Only the keyword constructor converts errors: validation of a dict, or of a nested model, must keep
    # pydantic's error locations so the whole path is named. (Marks the method as pydantic's own __init__.)
    __init__.__pydantic_base_init__ = True

    @pydantic.model_validator(mode="before")
    @classmethod
    def _plain_where_it_counts(cls, data: Any) -> Any:
        """Outputs only where the field passes a value through; no booleans where a count belongs;
        an explicit None (YAML's empty value, another language's unset) means the default, except that
        a template set to None means no template. Runs before any field's own validator."""
        if not isinstance(data, dict):
            return data
        kinds = _value_kinds(cls)
        cleaned = dict(data)
        for key, value in data.items():
            kind = kinds.get(key)
            if kind is None:
                continue
            if value is None and not kind.field.is_required():
                default = kind.field.get_default(call_default_factory=True)
                cleaned[key] = None if isinstance(default, BaseModel) else default
            elif is_deferred(value) and not kind.takes_outputs:
                raise MappingKeyError(key, _PLAIN_ONLY)
            elif isinstance(value, (dict, list)) and kind.plain_inside and (
                    inner := _deferred_inside(value)) is not None:
                raise MappingKeyError(f"{key}{inner}", _PLAIN_ONLY)
            elif isinstance(value, bool) and kind.is_int:
                raise MappingKeyError(key, _boolean_for_number(value))
            elif value is not None and not isinstance(value, bool) and kind.is_bool:
                raise MappingKeyError(key, _not_a_boolean(value))
            elif isinstance(value, list) and kind.is_int_list:
                for i, item in enumerate(value):
                    if isinstance(item, bool):
                        raise MappingKeyError(f"{key}[{i}]", _boolean_for_number(item))
        return cleaned


class _ValueKind(typing.NamedTuple):
    """What a field's annotation allows of the values given for it, as `Model._plain_where_it_counts` checks them."""

    field: FieldInfo
    takes_outputs: bool   # the value itself may be an Output
    plain_inside: bool    # no Output anywhere inside its lists and mappings
    is_int: bool
    is_bool: bool
    is_int_list: bool


@functools.cache
def _value_kinds(model: type[BaseModel]) -> dict[str, _ValueKind]:
    """Each key of `model` (a field's alias and its name) -> its _ValueKind: read from the annotations once per
    model, not for every value of every job."""
    kinds = {name: _ValueKind(field, _takes_outputs(field.annotation), _plain_inside(field.annotation),
                              _is_int(field.annotation), _is_bool(field.annotation), _is_int_list(field.annotation))
             for name, field in model.model_fields.items()}
    return {**{field.alias: kinds[name] for name, field in model.model_fields.items() if field.alias}, **kinds}


def _written_at() -> str:
    """`file:line` of the user's code that constructed the arguments: with several jobs in a program, an
    Args object does not know its job's name yet, so the error names where it was written."""
    package = __name__.split(".")[0]
    for frame in traceback.extract_stack()[::-1]:
        module = frame.filename.replace("\\", "/")
        if f"/{package}/" not in module and "/pydantic/" not in module and "<frozen" not in module:
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def _quantity(value: Any, key: str | None = None) -> str:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise (ValueError(str(exc)) if key is None else MappingKeyError(key, str(exc))) from None
    return normalize_quantity(value)


# The smallest /dev/shm that is a size and not a slip: a number without a unit is bytes.
MIN_SHM_BYTES = 2**20


def shm_size(value: Any) -> str:
    """A /dev/shm size: "0" (none), or a memory quantity of at least 1Mi."""
    size = parse_quantity(_quantity(value))
    if size < 0:
        raise ValueError(f'{value!r} is negative: give a size such as "16Gi", or "0" for no /dev/shm')
    if 0 < size < MIN_SHM_BYTES:
        raise ValueError(f'{value!r} is {size} bytes, too small for /dev/shm: give a unit (e.g. "16Gi"), or "0" for '
                         "no /dev/shm")
    return normalize_quantity(value)


def _env_value(value: Any) -> Any:
    """Env values are strings in Kubernetes; YAML numbers and booleans are converted, not rejected."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


class ImagePullPolicy(str, enum.Enum):
    """When the kubelet pulls the image."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class AccessMode(str, enum.Enum):
    """Access mode of the workspace volume claim."""

    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


class EnvVar(Model):
    """One container env var, in Kubernetes form: `value` or `valueFrom`."""

    name: str = Field(min_length=1)
    """Variable name."""
    value: Optional[pulumi.Input[str]] = None
    """Its value: a string, an Output, or a secret (the Job's spec then becomes secret in Pulumi state)."""
    value_from: Optional[dict[str, Any]] = Field(default=None, alias="valueFrom")
    """A Kubernetes `valueFrom` source (secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef)."""

    @field_validator("value", mode="before")
    @classmethod
    def _value(cls, value: Any) -> Any:
        return _env_value(value)

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> "EnvVar":
        if self.value is not None and self.value_from is not None:
            raise ValueError(f'env "{self.name}" has both value and valueFrom; Kubernetes takes one: remove one')
        return self

    def manifest(self) -> dict[str, Any]:
        if self.value_from is not None:
            return {"name": self.name, "valueFrom": self.value_from}
        return {"name": self.name, "value": self.value if self.value is not None else ""}


class Resources(Model):
    """Container resources, Kubernetes quantities by resource name."""

    requests: Optional[dict[str, str]] = Field(default_factory=dict)
    """Requested amounts, e.g. `{"cpu": "4", "memory": "16Gi"}`."""
    limits: Optional[dict[str, str]] = Field(default_factory=dict)
    """Limits, e.g. `{"nvidia.com/gpu": "8"}`. Device resources given on one side are set on both."""

    @classmethod
    def unknown_hint(cls, key: str) -> str | None:
        return (f'resources are given as requests or limits: {{"requests": {{"{key}": ...}}}} or '
                f'{{"limits": {{"{key}": ...}}}}')

    @field_validator("requests", "limits", mode="before")
    @classmethod
    def _quantities(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: _quantity(quantity, key) for key, quantity in value.items()}
        return value


# --- devices through Dynamic Resource Allocation ---------------------------------------------------

class DeviceRequest(Model):
    """Devices each pod claims through Dynamic Resource Allocation (`resource.k8s.io/v1`, Kubernetes 1.34+): an
    exact count of devices of one DeviceClass, in the pod's own ResourceClaim, made from the role's
    ResourceClaimTemplate. See docs/devices.md."""

    name: Optional[str] = "gpu"
    """The request's name in the claim (a DNS label, unique among the role's requests)."""
    device_class: Optional[str] = DEFAULT_DEVICE_CLASS
    """The DeviceClass the devices come from: `gpu.nvidia.com` (NVIDIA's DRA driver's whole GPUs, counted as
    `nvidia.com/gpu`), `mig.nvidia.com`, or a class of another driver."""
    count: Optional[int] = Field(default=1, ge=1, le=INT32_MAX)
    """How many devices of the class each pod gets."""

    @classmethod
    def unknown_hint(cls, key: str) -> str | None:
        return ('a device request gives name, device_class and count (e.g. {"device_class": "gpu.nvidia.com", '
                '"count": 8}); selectors and configuration are not modelled')


class _PodFields(Model):
    """Pod settings a runtime's template gives and a job's arguments override. None means "not set here"."""

    image: Optional[pulumi.Input[str]] = None
    """Container image. Default: the runtime's."""
    image_pull_policy: Optional[ImagePullPolicy] = None
    """Always, IfNotPresent or Never. Default: Kubernetes'."""
    command: Optional[list[pulumi.Input[str]]] = None
    """Container command. Default: the runtime's (or the image's entrypoint)."""
    args: Optional[list[pulumi.Input[str]]] = None
    """Container arguments. Default: the runtime's."""
    env: Optional[list[EnvVar]] = None
    """Env vars: a mapping `NAME: value` or a list of Kubernetes EnvVars (`valueFrom` allowed), upserted by name
    over the runtime's. Derived variables are reserved. Values may be Outputs and secrets."""
    env_from: Optional[list[dict[str, Any]]] = None
    """Kubernetes `envFrom` sources (`{"secretRef": {"name": ...}}`); names may be Outputs."""
    working_dir: Optional[pulumi.Input[str]] = None
    """Container working directory. Default: the image's."""
    volumes: Optional[list[dict[str, Any]]] = None
    """Kubernetes volumes of the pods, upserted by name over the runtime's; sources may hold Outputs."""
    volume_mounts: Optional[list[dict[str, Any]]] = None
    """Mounts of the main container, upserted by mount path over the runtime's."""
    node_selector: Optional[dict[str, pulumi.Input[str]]] = None
    """Node labels the pods need, merged by key over the runtime's."""
    tolerations: Optional[list[dict[str, Any]]] = None
    """Kubernetes tolerations, passed through."""
    affinity: Optional[dict[str, Any]] = None
    """Kubernetes affinity, passed through."""
    topology_spread_constraints: Optional[list[dict[str, Any]]] = None
    """Kubernetes topologySpreadConstraints of the pods (e.g. spread ranks over zones or racks), in camelCase,
    checked as the API server checks them (maxSkew, topologyKey and whenUnsatisfiable required, one constraint
    per topologyKey and whenUnsatisfiable, minDomains only with DoNotSchedule)."""
    host_network: Optional[bool] = None
    """Pods use their node's network (for fabrics reachable only from the host). The pods then get
    dnsPolicy ClusterFirstWithHostNet, so they still resolve each other's names, and every container port
    is also a host port, so at most one pod of the job runs per node. Default: false."""
    service_account_name: Optional[pulumi.Input[str]] = None
    """Service account of the pods. Default: the namespace's `default`."""
    image_pull_secrets: Optional[list[pulumi.Input[str]]] = None
    """Names of Secrets used to pull the image."""
    priority_class_name: Optional[pulumi.Input[str]] = None
    """Priority class of the pods."""
    security_context: Optional[dict[str, Any]] = None
    """Pod security context (runAsUser, fsGroup, ...). Plain: the MPI family derives key file modes from it."""
    container_security_context: Optional[dict[str, Any]] = None
    """Security context of the main container (and the library's helper containers). Plain, as above."""
    shm_size: Optional[str] = None
    """Size of the memory-backed `/dev/shm` volume (it counts against the pod's memory): a memory quantity of at
    least 1Mi (a number without a unit is bytes, so it is refused), or "0" to disable it; a user mount at
    /dev/shm replaces it. Default: "1Gi"."""
    pod_labels: Optional[dict[str, pulumi.Input[str]]] = None
    """Labels of the pod templates only (e.g. for a service mesh)."""
    pod_annotations: Optional[dict[str, pulumi.Input[str]]] = None
    """Annotations of the pod templates only (e.g. `sidecar.istio.io/inject: "false"`)."""
    ports: Optional[list[dict[str, Any]]] = None
    """Extra container ports of the main container."""
    init_containers: Optional[list[dict[str, Any]]] = None
    """Kubernetes init containers of the pods, run after the library's own waits."""
    sidecars: Optional[list[dict[str, Any]]] = None
    """Containers beside the main one, rendered as native sidecars (init containers with
    `restartPolicy: Always`, Kubernetes 1.29+) so the Job still completes when the main container ends."""

    @field_validator("env", mode="before")
    @classmethod
    def _env_list(cls, value: Any) -> Any:
        """A mapping is the list of its entries; an entry is named by its variable (`env.NAME`) in errors."""
        if isinstance(value, dict):
            return [{"name": key, "value": val} for key, val in value.items()]
        for entry in value if isinstance(value, list) else ():
            if isinstance(entry, dict) and entry.get("value") is not None and (
                    entry.get("valueFrom") is not None or entry.get("value_from") is not None):
                raise MappingKeyError(str(entry.get("name")), f'env "{entry.get("name")}" has both value and '
                                                              "valueFrom; Kubernetes takes one: remove one")
        return value

    @field_validator("shm_size", mode="before")
    @classmethod
    def _shm_quantity(cls, value: Any) -> Any:
        return None if value is None else shm_size(value)

    @field_validator("topology_spread_constraints", mode="before")
    @classmethod
    def _spread(cls, value: Any) -> Any:
        """Every pod of the job carries them: what the API server refuses would refuse every pod."""
        if value is not None and not is_deferred(value):
            for path, message in spread_problems(value)[:1]:
                raise MappingKeyError(path, message)
        return value


class PodTemplate(_PodFields):
    """A role's pods: the main container and pod settings. In a runtime, None means "not set here";
    a job's arguments override the runtime's template field by field."""

    resources: Optional[Resources] = None
    """Resources of the main container, merged per key over the runtime's."""
    devices: Optional[list[DeviceRequest]] = None
    """Devices each pod claims through Dynamic Resource Allocation (e.g. `[{"count": 8}]`: 8 GPUs of class
    gpu.nvidia.com), for its main container; replaces the runtime's list."""


class Initializer(PodTemplate):
    """A dataset or model initializer: downloads into the shared /workspace before training starts."""

    storage_uri: Optional[pulumi.Input[str]] = None
    """Where to download from, set as `STORAGE_URI` (e.g. `hf://org/name`, `s3://bucket/path`)."""
    secret_name: Optional[pulumi.Input[str]] = None
    """A Secret added to the initializer's env with `envFrom` (e.g. a Hugging Face token)."""
    active_deadline_seconds: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    """`activeDeadlineSeconds` of the initializer's Job. Default: the job's active_deadline_seconds."""


class ExtraRole(PodTemplate):
    """Pods beside the training pods (TensorBoard, an evaluator, a data server): no training env,
    no training port, no SSH, not counted in any world size."""

    num_pods: Optional[int] = Field(default=1, ge=1, le=100000)
    """Number of pods of the role."""
    active_deadline_seconds: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    """`activeDeadlineSeconds` of the role's Job. Default: the job's active_deadline_seconds."""


class TrainingRuntime(Model):
    """What every runtime has: a name, metadata stamped on every object, optional initializers."""

    name: str = Field(min_length=1)
    """The runtime's name, shown as the `app.kubernetes.io/name` label."""
    labels: Optional[dict[str, str]] = Field(default_factory=dict)
    """Labels of every object and pod template of jobs using the runtime."""
    annotations: Optional[dict[str, str]] = Field(default_factory=dict)
    """Annotations of every object and pod template of jobs using the runtime."""
    dataset_initializer: Optional[Initializer] = None
    """Dataset initializer every job using the runtime gets."""
    model_initializer: Optional[Initializer] = None
    """Model initializer every job using the runtime gets."""


class FailurePolicy(Model):
    """How the job's Jobs treat a failed pod: which failures count against the backoff limit, which fail
    the job at once, and whether one failed index restarts alone (Job podFailurePolicy,
    backoffLimitPerIndex, maxFailedIndexes)."""

    count_disruptions: Optional[bool] = False
    """Whether a pod lost to a disruption (preemption, spot reclaim, node drain: the pod condition
    DisruptionTarget) counts against the backoff limit. With false (rule action Ignore) the pod is replaced
    and the job goes on, so a preempted pod does not fail a job with backoff_limit 0."""
    fatal_exit_codes: Optional[list[int]] = Field(default_factory=list)
    """Exit codes of the main container that fail the job at once (rule action FailJob), whatever the
    backoff limits: errors a retry cannot fix (bad configuration, a missing dataset)."""
    retriable_exit_codes: Optional[list[int]] = Field(default_factory=list)
    """Exit codes of the main container that are retried (rule action Count: within backoff_limit, or
    backoff_limit_per_index). When any are given, every other non-zero exit code fails the job at once."""
    backoff_limit_per_index: Optional[int] = Field(default=None, ge=0, le=INT32_MAX)
    """Job `backoffLimitPerIndex`: each failed training pod is replaced alone, up to this many times per
    index, while the others keep running. Only for families whose running ranks take a replaced pod back
    (torch with c10d rendezvous); the job's backoff_limit then no longer applies."""
    max_failed_indexes: Optional[int] = Field(default=None, ge=0, le=100000)
    """Job `maxFailedIndexes`, with backoff_limit_per_index: the job fails once more indexes than this
    have used up their retries. Default: none (the job runs until every index succeeded or failed)."""
    max_restarts: Optional[int] = Field(default=0, ge=0, le=INT32_MAX)
    """Whole-group restarts after a failed Job (JobSet `failurePolicy.maxRestarts`): every pod of the job is
    recreated and training restarts, from its checkpoint if it keeps one. Only the jobset backend restarts
    the group; with the jobs backend, `pulumi up --replace` does."""

    @field_validator("fatal_exit_codes", "retriable_exit_codes", mode="after")
    @classmethod
    def _exit_codes(cls, codes: Any) -> Any:
        """Kubernetes takes at most 255 distinct codes per rule, in order, never 0 (success)."""
        if codes is None:
            return codes
        for code in codes:
            if not 1 <= code <= 255:
                raise ValueError(f"{code} is not a failure exit code: a container exits with 1 to 255 when it fails")
        if len(set(codes)) != len(codes):
            duplicate = next(c for c in codes if codes.count(c) > 1)
            raise ValueError(f"{duplicate} is listed twice; give each exit code once")
        return sorted(codes)

    def fatal_and_retriable(self) -> list[int]:
        """Exit codes given as both: an exit code is either fatal or retriable (also checked once a profile's
        policy and a job's are merged, where each alone may be valid)."""
        return sorted(set(self.fatal_exit_codes or ()) & set(self.retriable_exit_codes or ()))

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> "FailurePolicy":
        both = self.fatal_and_retriable()
        if both:
            raise MappingKeyError("retriable_exit_codes", f"{', '.join(map(str, both))} also in fatal_exit_codes; "
                                                          "an exit code is either fatal or retriable")
        if self.max_failed_indexes is not None and self.backoff_limit_per_index is None:
            raise MappingKeyError("max_failed_indexes", "applies only with backoff_limit_per_index; set "
                                                        "backoff_limit_per_index too, or remove it")
        return self


class PlacementMode(str, enum.Enum):
    """Whether the pods must land in one domain (and wait until they can), or should (and may spread)."""

    REQUIRED = "required"
    PREFERRED = "preferred"


class Placement(Model):
    """Where the job's training pods land together: one domain of a topology level (a rack, a block), so their
    collectives stay off the spine. The gang scheduler renders it its own way: Kueue's topology-aware
    scheduling, Volcano's network topology, and without one JobSet's exclusive placement (backend "jobset")
    or pod affinity among the job's pods (backend "jobs"). What the chosen one cannot honour is refused.
    See docs/scheduling.md#placement."""

    topology: Optional[str] = None
    """The level: a node label key whose value names the domain (e.g. `example.com/rack`, a level of Kueue's
    Topology). Kueue, JobSet and pod affinity read it; Volcano places by HyperNode tier (tier, tier_name)."""
    mode: Optional[PlacementMode] = PlacementMode.REQUIRED.value
    """required: every training pod in one domain of the level, waiting until one has room (Volcano: hard);
    preferred: that level if it fits, else the next wider one, else spread (Volcano: soft)."""
    slice_topology: Optional[str] = None
    """Kueue only: each slice of slice_size pods in one domain of this level (e.g. 4 pods per rack), within
    topology when it is set too."""
    slice_size: Optional[int] = Field(default=None, ge=1, le=100000)
    """Kueue only, with slice_topology: pods per slice, at most the role's pod count."""
    tier: Optional[int] = Field(default=None, ge=0, le=INT32_MAX)
    """Volcano only: the highest HyperNode tier the pods may span (the PodGroup's
    `networkTopology.highestTierAllowed`; 1 = one leaf switch)."""
    tier_name: Optional[str] = Field(default=None, min_length=1, max_length=253)
    """Volcano only (1.14 or later): the highest tier by its name (`networkTopology.highestTierName`, a
    HyperNode's tierName), instead of tier."""

    @field_validator("topology", "slice_topology")
    @classmethod
    def _level(cls, value: Any) -> Any:
        """Kueue and the API server take a node label key (a qualified name)."""
        problem = label_key_problem(value) if value is not None else None
        if problem:
            raise ValueError(f"{problem}; a topology level is a node label key such as example.com/rack")
        return value

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> "Placement":
        if (self.slice_topology is None) != (self.slice_size is None):
            missing = "slice_size" if self.slice_size is None else "slice_topology"
            raise MappingKeyError(missing, "slices need both slice_topology (the level each slice fits in) and "
                                           "slice_size (pods per slice)")
        if self.tier is not None and self.tier_name is not None:
            raise MappingKeyError("tier_name", "Volcano takes one tier limit: give tier or tier_name, not both")
        if self.topology is None and self.slice_topology is None and self.tier is None and self.tier_name is None:
            raise MappingKeyError("topology", "a placement needs a level: topology (a node label key such as "
                                              "example.com/rack), or tier / tier_name under Volcano")
        return self


# `num_nodes: "MIN:MAX"`, as torchrun's --nnodes takes it.
NODE_RANGE = re.compile(r"(\d+)\s*:\s*(\d+)")


class ElasticAdmission(str, enum.Enum):
    """How Kueue admits a job with a node range."""

    PARTIAL = "partial"
    SLICES = "slices"


ELASTIC_ADMISSIONS = {
    ElasticAdmission.PARTIAL.value: "Kueue's partial admission: the Job starts with as many pods as fit, at least "
                                    "min_nodes, and keeps that size until it ends",
    ElasticAdmission.SLICES.value: "Kueue's elastic Job through workload slices: admitted whole, then grows or shrinks "
                                   "while it runs when its parallelism is changed",
}


class CommonArgs(_PodFields):
    """Arguments every training job accepts, whatever its family: the fields of a job's arguments and
    of a platform profile."""

    num_nodes: Optional[int] = Field(default=1, ge=1, le=100000)
    """Number of training pods (for the MPI family: MPI hosts); with min_nodes, the most. Indexed Jobs allow
    100000. In YAML, stack config and dicts also a node range `"MIN:MAX"` (e.g. `"2:4"`: num_nodes 4, min_nodes 2)."""
    min_nodes: Optional[int] = Field(default=None, ge=1, le=100000)
    """The fewest training pods the job trains with, below num_nodes: the job is elastic. torch with
    rendezvous c10d only: PET_NNODES=MIN:MAX, the Indexed Job sized for num_nodes, ranks re-formed when
    pods join or leave. Default: none (num_nodes pods, fixed). See docs/failures.md."""
    elastic_admission: Optional[ElasticAdmission] = None
    """How Kueue admits an elastic job (gang_scheduler "kueue", backend "jobs"): {choices}. Default:
    "partial" on the jobs backend; on the jobset backend Kueue admits the job whole. See docs/scheduling.md."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _node_range(cls, data: Any) -> Any:
        """`num_nodes: "MIN:MAX"` is num_nodes MAX and min_nodes MIN, in every entry point."""
        if not isinstance(data, dict) or not isinstance(data.get("num_nodes"), str):
            return data
        text = data["num_nodes"].strip()
        match = NODE_RANGE.fullmatch(text)
        if match is None:
            if re.fullmatch(r"[-+]?\d+", text):
                return data   # an integer in a string: the field checks it
            raise MappingKeyError("num_nodes", f"{shown(data['num_nodes'])} is neither a number of nodes nor a node "
                                               'range MIN:MAX (e.g. "2:4": 2 to 4 nodes)')
        if data.get("min_nodes") is not None:
            raise MappingKeyError("min_nodes", f'num_nodes "{data["num_nodes"]}" already gives the fewest nodes: '
                                               "remove min_nodes, or give num_nodes as a number")
        low, high = int(match.group(1)), int(match.group(2))
        if low < 1:
            raise MappingKeyError("num_nodes", f'"{data["num_nodes"]}" starts at {low} nodes: a node range MIN:MAX '
                                               'has MIN at least 1 (e.g. "1:4")')
        if low >= high:
            raise MappingKeyError("num_nodes", f'"{data["num_nodes"]}" is not a node range MIN:MAX with MIN < MAX '
                                               '(e.g. "2:4"); for a fixed size give a number')
        return {**data, "num_nodes": high, "min_nodes": low}

    @pydantic.model_validator(mode="after")
    def _range_order(self) -> "CommonArgs":
        """min_nodes below num_nodes; a profile's min_nodes alone is checked against each job's num_nodes."""
        if not self.defaults_apply() and "num_nodes" not in self.model_fields_set:
            return self
        if self.min_nodes is not None and self.num_nodes is not None and self.min_nodes >= self.num_nodes:
            raise MappingKeyError("min_nodes", f"{self.min_nodes} is not below num_nodes {self.num_nodes}: a node "
                                               "range MIN:MAX has MIN < MAX; for a fixed size give num_nodes alone")
        return self
    resources_per_node: Optional[Resources] = None
    """Resources of each training pod's main container, merged per key over the runtime's. Device resources
    (`nvidia.com/gpu`, ...) given on one side are set on both, as Kubernetes needs them equal."""
    devices_per_node: Optional[list[DeviceRequest]] = None
    """Devices each training pod claims through Dynamic Resource Allocation instead of a device resource, for its
    main container: e.g. `[{"count": 8}]` for 8 GPUs of class `gpu.nvidia.com`. Renders a ResourceClaimTemplate
    per role; replaces the runtime's list. Kubernetes 1.34+ with a DRA driver. See docs/devices.md."""
    namespace: Optional[pulumi.Input[str]] = None
    """Namespace of every object. Default: the provider's."""
    labels: Optional[dict[str, pulumi.Input[str]]] = Field(default_factory=dict)
    """Labels of every object and pod template (`trainjobs.io/job-name`, `trainjobs.io/role` and `trainjobs.io/run`
    are reserved)."""
    annotations: Optional[dict[str, pulumi.Input[str]]] = Field(default_factory=dict)
    """Annotations of every object and pod template."""
    backoff_limit: Optional[int] = Field(default=0, ge=0, le=INT32_MAX)
    """Job `backoffLimit`: with 0, one failed rank fails the Job and Kubernetes stops its other pods."""
    active_deadline_seconds: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    """Job `activeDeadlineSeconds`. Default: none."""
    ttl_seconds_after_finished: Optional[int] = Field(default=None, ge=0, le=INT32_MAX)
    """Job TTL. With Pulumi or GitOps managing the Job, a TTL deletion is drift and the next update re-runs it."""
    wait_for_completion: Optional[bool] = False
    """False annotates Jobs `pulumi.com/waitFor: "jsonpath={.metadata.uid}"` (a JobSet `pulumi.com/skipAwait`) so
    `pulumi up` returns once they are created; true makes `pulumi up` wait for them to complete."""
    wait_timeout_seconds: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    """With wait_for_completion, `pulumi.com/timeoutSeconds`. Default: the provider's (10 minutes)."""
    backend: Optional[str] = "jobs"
    """What the job's pods are created by: {choices}. Pods, env, hostnames, DNS names and the hostfile are the
    same either way. See docs/backends.md."""
    dataset_initializer: Optional[Initializer] = None
    """Dataset initializer, over the runtime's."""
    model_initializer: Optional[Initializer] = None
    """Model initializer, over the runtime's."""
    workspace_volume: Optional[dict[str, Any]] = None
    """Volume source shared at /workspace by initializers and training pods (e.g. `{"nfs": {...}}`).
    Default: a new PVC `N-initializer` when initializers exist."""
    workspace_size: Optional[str] = "20Gi"
    """Storage request of the workspace PVC."""
    workspace_access_mode: Optional[AccessMode] = None
    """Access mode of the workspace PVC. Default: ReadWriteMany when the job has several training pods (pods on
    different nodes mount it at once), else ReadWriteOnce."""
    workspace_storage_class: Optional[pulumi.Input[str]] = None
    """Storage class of the workspace PVC. Default: the cluster's."""
    initializer_timeout_seconds: Optional[int] = Field(default=3600, ge=1, le=INT32_MAX)
    """How long `pulumi up` waits for each initializer Job, and training pods wait for their markers."""
    extra_roles: Optional[dict[str, ExtraRole]] = Field(default_factory=dict)
    """Role name -> pods beside training that get no training env (TensorBoard, an evaluator)."""
    gang_scheduler: Optional[str] = None
    """Gang scheduling of the job's training pods (nodes and launcher) as one unit: {choices}. Default: none,
    each Job is scheduled pod by pod. See docs/scheduling.md."""
    queue: Optional[str] = None
    """The queue the job waits in: a Kueue LocalQueue (required with gang_scheduler "kueue") or a Volcano
    queue (gang_scheduler "volcano"; default Volcano's `default`)."""
    priority_class: Optional[str] = None
    """Priority of the job in its queue: a Kueue WorkloadPriorityClass (gang_scheduler "kueue") or the
    Volcano PodGroup's priorityClassName. The pods' own priority is priority_class_name."""
    schedule_timeout_seconds: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    """How long the Coscheduling plugin waits for the whole group before it retries (the PodGroup's
    `scheduleTimeoutSeconds`; default the plugin's). gang_scheduler "coscheduling" only."""
    scheduler_name: Optional[str] = None
    """The pods' `schedulerName`, for every pod of the job. Default: "volcano" under Volcano, else the
    cluster's default scheduler (under coscheduling, name the scheduler that runs the Coscheduling plugin
    unless the default one does)."""
    suspend: Optional[bool] = None
    """The Jobs' (or the JobSet's) `spec.suspend`: true creates them suspended, and nothing runs until
    something resumes them. Default: unset. Refused under Kueue, which suspends and resumes them itself."""
    pod_spec_overrides: Optional[dict[str, Any]] = None
    """PodSpec fields the arguments do not model, in Kubernetes' camelCase (dnsPolicy, runtimeClassName,
    shareProcessNamespace, ...), set on every training pod. Fields the job
    derives or has an argument for are refused."""
    container_overrides: Optional[dict[str, Any]] = None
    """Container fields the arguments do not model (lifecycle, startupProbe, ...), set on each training pod's
    main container. Fields the job derives or has an argument for are refused."""
    failure_policy: Optional[FailurePolicy] = None
    """Which pod failures count, which fail the job at once, and per-index retries. Default: disruptions
    (preemption, spot reclaim, node drain) do not count against the backoff limit; every other failure does."""
    job_spec_overrides: Optional[dict[str, Any]] = None
    """JobSpec fields the arguments do not model (successPolicy, podReplacementPolicy, ...), set on every
    training Job. Fields the job derives or has an argument for are refused."""
    placement: Optional[Placement] = None
    """Where the training pods land together (a rack, a block), rendered by the gang scheduler: Kueue's
    topology annotations (an MPI launcher grouped with its nodes), Volcano's PodGroup networkTopology,
    without one JobSet's exclusive placement or pod affinity. See docs/scheduling.md#placement."""
    multikueue: Optional[bool] = False
    """The job is dispatched by MultiKueue to a worker cluster (its queue's ClusterQueue has the MultiKueue
    admission check): implies gang_scheduler "kueue", renders `spec.managedBy: kueue.x-k8s.io/multikueue`,
    and refuses what MultiKueue leaves behind (the jobs backend's Service, an MPI hostfile and SSH key, a
    workspace PVC). See docs/scheduling.md#multikueue."""

    @field_validator("gang_scheduler")
    @classmethod
    def _known_gang_scheduler(cls, value: Any) -> Any:
        if value is not None and value not in GANG_SCHEDULERS.names():
            raise ValueError(f'unknown gang scheduler {shown(value)}: use one of {", ".join(GANG_SCHEDULERS.names())}, '
                             "or leave it unset for none")
        return value

    @field_validator("workspace_size", mode="before")
    @classmethod
    def _workspace_quantity(cls, value: Any) -> Any:
        return None if value is None else _quantity(value)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: Any) -> Any:
        if value is not None and value not in BACKENDS.names():
            raise ValueError(f'unknown backend {shown(value)}: use one of {", ".join(BACKENDS.names())}')
        return value

    def template_overrides(self) -> PodTemplate:
        """The job's pod settings in runtime-template form, for overlaying on the runtime."""
        return PodTemplate.model_construct(**{name: getattr(self, name) for name in _PodFields.model_fields},
                                           resources=self.resources_per_node, devices=self.devices_per_node)


class PlatformProfile(CommonArgs):
    """Defaults a platform team sets once for every job of a stack (namespace, labels, GPU pool node
    selectors and tolerations, priority, queue, pull secrets, service account, shm size, failure policy).
    Only the fields given are defaults; a job's own arguments win: a mapping merges by key, env upserts by
    name, volumes, init containers and sidecars by name, volume mounts by mount path, a nested model
    (resources, failure policy, initializers, extra roles) field by field; any other value, lists
    included, is replaced by the job's."""

    @classmethod
    def defaults_apply(cls) -> bool:
        """A profile's fields have no defaults of their own: only the values it gives apply to a job."""
        return False


# The values of these arguments are the registries' members; their descriptions list them.
describe_choices("backend", BACKENDS.summaries)
describe_choices("gang_scheduler", GANG_SCHEDULERS.summaries)
describe_choices("elastic_admission", lambda: ELASTIC_ADMISSIONS)


class TrainJobArgs(CommonArgs):
    """Arguments every training job accepts; each family adds its own. Pod settings override the runtime's
    template of the training pods."""

    @classmethod
    def unknown_hint(cls, key: str) -> str | None:
        """A setting of the training program is none of the job's arguments: it reaches the program as
        command-line arguments, env, or a file."""
        return (f"the job's arguments describe its pods; a setting of your training program goes to it in args "
                f"(e.g. --{key.replace('_', '-')}), env, or a config file it reads (mounted with volumes); "
                f"known arguments: {', '.join(cls.model_fields)}")

    profile: Optional[PlatformProfile] = None
    """The platform's defaults for this job (see PlatformProfile); the job's own arguments override them."""

    @pydantic.model_validator(mode="after")
    def _profile_range_order(self) -> "TrainJobArgs":
        """A node range half from the profile: its min_nodes below the num_nodes the job runs with."""
        profile, given = self.profile, self.model_fields_set
        if profile is None or "min_nodes" in given or profile.min_nodes is None:
            return self
        num_nodes = self.num_nodes if "num_nodes" in given or "num_nodes" not in profile.model_fields_set \
            else profile.num_nodes
        if num_nodes is not None and profile.min_nodes >= num_nodes:
            raise MappingKeyError("profile.min_nodes", f"{profile.min_nodes} is not below the job's num_nodes "
                                                       f"{num_nodes}: give the job more nodes, or its own min_nodes")
        return self
    run: Optional[str] = None
    """The run this job is: its objects are named `<name>-<run>` and labelled `trainjobs.io/run`, so a new
    value starts a new run beside (or, replacing the old value, instead of) the previous one, and a finished
    run's objects are never updated in place. Lowercase letters, digits and "-". Default: no run, objects
    named `<name>`. See docs/runs.md."""

    @field_validator("run")
    @classmethod
    def _run_name_part(cls, value: Any) -> Any:
        if value is not None and not RUN_ID.fullmatch(value):
            raise ValueError(f"{shown(value)} cannot be part of the job's object names: use lowercase letters, "
                             'digits and "-", starting and ending with a letter or digit (e.g. "2", "lr-3e4")')
        return value


def shared_runtime(runtime: TrainingRuntime) -> Any:
    """The default of a `runtime` argument: the built-in runtime itself. Runtimes are frozen, so every
    job shares it; a plain default would be deep-copied each time arguments are parsed."""
    return Field(default_factory=lambda: runtime)


def builtin_runtime(value: Any, family: str, runtimes: dict[str, TrainingRuntime]) -> Any:
    """A `runtime` argument naming a built-in runtime, as a string (stack config) or as a runtime
    that gives only a built-in's name (other Pulumi languages), is that built-in runtime."""
    if isinstance(value, dict) and set(value) == {"name"} and value["name"] in runtimes:
        return runtimes[value["name"]]
    if not isinstance(value, str):
        return value
    name = value
    if name not in runtimes:
        raise ValueError(f'unknown runtime "{name}"; built-in {family} runtimes: {", ".join(sorted(runtimes))}')
    return runtimes[name]


def parse_args(component: str, name: str, model: type[BaseModel], value: Any) -> Any:
    """`value` (a model or a plain dict) as `model`, or a TrainJobError naming every bad field."""
    if isinstance(value, model):
        return value
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise TrainJobError(component, name, [Issue("args", f"expected {model.__name__} or a dict, got "
                                                           f"{type(value).__name__}")])
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as exc:
        raise TrainJobError(component, name, validation_issues(model, exc)) from None


def validation_issues(model: type[BaseModel], exc: pydantic.ValidationError) -> list[Issue]:
    """A pydantic error as one Issue per argument path, with "did you mean" for unknown arguments."""
    found: dict[str, Issue] = {}
    for error in exc.errors():
        path, owner = _field_path(model, error["loc"])
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, MappingKeyError):
            path = f"{path}{'' if cause.key.startswith('[') else '.'}{cause.key}" if path else cause.key
        if error["type"] == "extra_forbidden":
            unknown = str(error["loc"][-1])   # a key may hold dots itself (nvidia.com/gpu)
            known = list(owner.model_fields) if owner else []
            close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
            elsewhere = owner.unknown_hint(unknown) if owner is not None and issubclass(owner, Model) else None
            hint = (f'; did you mean "{close[0]}"?' if close else f"; {elsewhere}" if elsewhere
                    else f"; known arguments: {', '.join(known)}")
            message = f'unknown argument "{unknown}"{hint}'
        else:
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] not in ("missing", "value_error") and not isinstance(error.get("input"), (dict, list)):
                message += f" (got {_shown(error.get('input'))})"
        found.setdefault(path, Issue(path, message))
    return list(found.values())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _field_path(model: type[BaseModel], loc: tuple) -> tuple[str, type[BaseModel] | None]:
    """The user-facing path of a pydantic error location, skipping union-branch tags."""
    parts: list[str] = []
    owner: type[BaseModel] | None = model
    current: Any = model
    keyed = False   # the last field is a mapping: the next location item is one of its keys
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
            continue
        if keyed:
            parts.append(item)
            keyed = False
        elif _is_model(current) and item in current.model_fields:
            owner = current
            parts.append(item)
            annotation = current.model_fields[item].annotation
            current = _inner_model(annotation)
            keyed = _is_mapping(annotation)
        elif _is_model(current) and item not in current.model_fields and item == loc[-1] and "[" not in item:
            owner = current
            parts.append(item)
        elif current is None or not _is_model(current):
            if "[" in item or item in ("int", "str", "float", "bool", "dict", "list", "tuple"):
                continue
            parts.append(item)
    return ".".join(parts), owner


def _is_mapping(annotation: Any) -> bool:
    if typing.get_origin(annotation) is dict:
        return True
    return typing.get_origin(annotation) in (Union, types.UnionType) and any(
        typing.get_origin(arg) is dict for arg in typing.get_args(annotation))


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _inner_model(annotation: Any) -> Any:
    """The model class inside Optional/Union/list/dict annotations, if any."""
    if _is_model(annotation):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, tuple, dict):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None
