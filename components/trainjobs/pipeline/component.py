"""The thin Pulumi layer: a family's plan becomes child resources of one component."""

import asyncio
import re
from functools import lru_cache
from typing import Any, Callable, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel

from trainjobs.backends import deletes_before_replace, replace_on_changes, workload_kinds
from trainjobs.core.args import is_deferred, parse_args
from trainjobs.pipeline.pipeline import TrainJobPlan, derive
from trainjobs.core.deferred import PLACEHOLDERS, SECRET_VALUES, Concat, Derived
from trainjobs.core.errors import Issue, TrainJobError, refused
from trainjobs.core.family import Family
from trainjobs.core.naming import argument_value_problem

PACKAGE = "trainjobs"

# The pulumi_kubernetes module of each kind the component registers with a class of its own, imported when
# a job first registers one of its kinds: only jobs with devices need `resource.v1`, whose import alone
# takes about 50 ms of CPU, a fifteenth of a whole render of the example stack.
_RESOURCE_MODULES: dict[tuple[str, str], str] = {
    ("v1", "Service"): "core.v1",
    ("v1", "ConfigMap"): "core.v1",
    ("v1", "Secret"): "core.v1",
    ("v1", "PersistentVolumeClaim"): "core.v1",
    ("batch/v1", "Job"): "batch.v1",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "resource.v1",
}
_KEY_ALGORITHMS = {"ECDSA-P521": {"algorithm": "ECDSA", "ecdsa_curve": "P521"}, "ED25519": {"algorithm": "ED25519"}}


@lru_cache(maxsize=None)   # a few dozen field names
def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


@lru_cache(maxsize=None)
def _resource_class(api_version: str, kind: str) -> Optional[Callable[..., pulumi.CustomResource]]:
    """The pulumi_kubernetes class of a kind, or None for a custom resource (a backend's JobSet, a
    scheduler's PodGroup)."""
    module = _RESOURCE_MODULES.get((api_version, kind))
    if module is None:
        return None
    group, version = module.split(".")
    return getattr(getattr(getattr(k8s, group), version), kind)


class TrainJobComponent(pulumi.ComponentResource):
    """Base of every job component: validate, derive, then register the plan's manifests.

    Validation and derivation run before the component itself registers, so bad arguments
    raise TrainJobError and leave nothing in the stack. Each child's logical name is its
    Kubernetes name (derived from the job name), parented to the component; the caller's
    options (provider, protect, aliases, depends_on) flow to the children.

    A component class names its family (trainjobs.core.family); the family's arguments model is the
    component's arguments, and its outputs model's fields become the component's Pulumi outputs.
    """

    # Not annotated: Pulumi's schema inference reads every public annotation as an output.
    family = Family()   # each component class sets its own

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The family's models are the component's arguments and outputs: one declaration gives the
        attributes, `register_outputs` and, through trainjobs.tools.provider, the package schema."""
        super().__init_subclass__(**kwargs)
        cls.args_type, cls.outputs_type = cls.family.args_type, cls.family.outputs_type

    def __init__(self, name: str, args: Any, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        component = type(self).__name__
        if not isinstance(name, str):
            raise TrainJobError(component, repr(name), [Issue("name", f"must be a string, got {type(name).__name__}: "
                                                                      "the job name names its Service, Jobs and pods")])
        try:
            parsed = parse_args(component, name, self.args_type, args)
            deferred = _holds_deferred(args)
            if deferred:
                parsed = _checked_when_resolved(component, name, parsed)
            plan = derive(self.family, name, parsed)
            _claim_names(component, name, plan)
        except TrainJobError as error:
            if refused(error):   # an offline run goes on to report the program's other jobs too
                self.refusal = error
                return
            raise
        # Named as its objects are, so two runs of one job are two components side by side.
        super().__init__(f"{PACKAGE}:index:{component}", plan.name, None, opts)
        self.args = parsed
        self.plan = plan
        caller_depends = _as_list(opts.depends_on if opts else None)
        self.resources: dict[str, pulumi.CustomResource] = {}
        self._keys: dict[str, pulumi.CustomResource] = {}   # pulumi_tls.PrivateKey by name
        prerequisites: list[pulumi.Resource] = []
        by_name: dict[str, pulumi.CustomResource] = {}
        ignored = {object_name: list(paths) for object_name, paths in plan.ignore_changes}
        workloads = workload_kinds()
        for manifest in plan.manifests:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            if deferred or kind == "Secret":   # placeholders come from Outputs, or are keys in Secrets
                manifest = self._resolve(manifest, caller_depends)
            ordered_after = [by_name[before] for after, before in plan.ordering if after == object_name]
            replaced_on = replace_on_changes(kind)
            child_opts = pulumi.ResourceOptions(
                parent=self,
                depends_on=caller_depends + (prerequisites if kind in workloads else []) + ordered_after,
                ignore_changes=ignored.get(object_name),
                # Each backend names the fields of its objects that cannot change in place (a Job's failure
                # policy, a JobSet's spec), and whether the old object must go first (its name is taken).
                replace_on_changes=replaced_on or None,
                **({"delete_before_replace": True} if replaced_on and deletes_before_replace(kind) else {}),
            )
            # Registered here rather than in a helper: Pulumi records the call stack of every resource,
            # and each frame between the program and the resource class costs time per resource.
            props = {_snake(k): v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
            resource_class = _resource_class(manifest["apiVersion"], kind)
            if resource_class is None:   # a custom resource (a backend's JobSet, a scheduler's PodGroup)
                resource_class = k8s.apiextensions.CustomResource
                props = {"api_version": manifest["apiVersion"], "kind": kind, **props}
            resource = resource_class(object_name, opts=child_opts, **props)
            self.resources[f"{kind}/{object_name}"] = resource
            by_name[object_name] = resource
            if kind not in workloads:
                prerequisites.append(resource)

        # The outputs model's fields as they are stored (`dict(model)` first asks the model for a `keys` method,
        # and pydantic's answer that it has none costs more than the copy).
        self.register_outputs(dict(vars(plan.outputs)))
        for warning in plan.warnings:
            pulumi.log.warn(f'{component} "{name}": {warning}', resource=self)

    def __getattr__(self, attribute: str) -> pulumi.Output:
        """An output attribute (`job.master_addr`) becomes an Output when first read: most programs read
        few of them, and an Output per value per job is a measurable part of registering many jobs."""
        plan = self.__dict__.get("plan")
        if attribute not in self.outputs_type.model_fields or (plan is None and "refusal" not in self.__dict__):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attribute!r}")
        # A refused job (while an offline run collects every refusal) has no values; the program goes on.
        output = pulumi.Output.from_input(None if plan is None else getattr(plan.outputs, attribute))
        setattr(self, attribute, output)
        return output

    def _resolve(self, value: Any, caller_depends: list) -> Any:
        """The manifest with each placeholder replaced by an Output (see trainjobs.core.deferred)."""
        if isinstance(value, dict):
            return {k: self._resolve(v, caller_depends) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v, caller_depends) for v in value]
        if not isinstance(value, PLACEHOLDERS):
            return value
        if isinstance(value, Concat):
            return pulumi.Output.concat(*(self._resolve(part, caller_depends) for part in value.parts))
        if isinstance(value, Derived):
            return pulumi.Output.from_input(value.value).apply(value.function)
        key = self._keys.get(value.name)
        if key is None:
            import pulumi_tls as tls   # here: only families with SSH keys need it
            key = tls.PrivateKey(value.name, **_KEY_ALGORITHMS[value.algorithm],
                                 opts=pulumi.ResourceOptions(parent=self, depends_on=caller_depends))
            self._keys[value.name] = key
            self.resources[f"PrivateKey/{value.name}"] = key
        return key.private_key_openssh if value.part == "private" else key.public_key_openssh


def _as_list(depends_on: Any) -> list:
    if depends_on is None:
        return []
    return list(depends_on) if isinstance(depends_on, (list, tuple)) else [depends_on]


def _holds_deferred(value: Any) -> bool:
    """Whether the arguments as given hold an Output anywhere (most hold none, and then the parsed
    arguments need no walk)."""
    if isinstance(value, BaseModel):
        return any(_holds_deferred(getattr(value, field)) for field in value.model_fields_set)
    if isinstance(value, dict):
        return any(_holds_deferred(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_deferred(v) for v in value)
    return is_deferred(value)


def _checked_when_resolved(component: str, name: str, model: BaseModel) -> BaseModel:
    """The arguments with each Output replaced by one that checks its value once resolved.

    A value Pulumi resolves later (an Output image, an Output namespace) cannot be checked at
    construction; it gets the same check when it resolves, and a bad value fails the update with
    the argument named. Secrets stay secret and unknowns stay unknown (apply keeps both).
    """
    def walk(value: Any, path: str, leaf: str) -> Any:
        if isinstance(value, BaseModel):
            updates = {}
            for field in type(value).model_fields:
                current = getattr(value, field)
                new = walk(current, f"{path}.{field}" if path else field, field)
                if new is not current:
                    updates[field] = new
            return value.model_copy(update=updates) if updates else value
        if isinstance(value, dict):
            new = {k: walk(v, f"{path}.{k}", leaf) for k, v in value.items()}
            return new if any(new[k] is not value[k] for k in value) else value
        if isinstance(value, list):
            new = [walk(v, f"{path}[{i}]", leaf) for i, v in enumerate(value)]
            return new if any(a is not b for a, b in zip(new, value)) else value
        if is_deferred(value):
            output = pulumi.Output.from_input(value)
            asyncio.ensure_future(_note_secret(output))
            return output.apply(lambda resolved: _check(component, name, path, leaf, resolved))
        return value

    return walk(model, "", "")


async def _note_secret(output: pulumi.Output) -> None:
    if await output.is_secret() and await output.is_known():
        value = await output.future()
        if isinstance(value, str):
            SECRET_VALUES.add(value)


def _check(component: str, name: str, path: str, leaf: str, value: Any) -> Any:
    problem = argument_value_problem(leaf, value)
    if problem:
        raise TrainJobError(component, name, [Issue(path, f"{problem} (the value arrived as an Output)")])
    return value


# --- one name, one job ------------------------------------------------------------------------------

_claims: dict[tuple, str] = {}
_claims_monitor: list[Any] = [None]


def _claim_names(component: str, name: str, plan: TrainJobPlan) -> None:
    """Two jobs of one program must not derive an object of the same kind, namespace and name: the
    engine would refuse the program, or one object would silently replace the other."""
    monitor = pulumi.runtime.settings.get_monitor()
    if _claims_monitor[0] is not monitor:   # a new program run
        _claims.clear()
        _claims_monitor[0] = monitor
    namespace = plan.namespace if isinstance(plan.namespace, str) or plan.namespace is None else id(plan.namespace)
    mine = {(m["kind"], namespace, m["metadata"]["name"]) for m in plan.manifests}
    clashes = sorted((key, _claims[key]) for key in mine if key in _claims)
    if clashes:
        (kind, _, object_name), owner = clashes[0]
        if owner == name:
            message = f'another job is already named "{name}" in this program; give each job its own name'
        else:
            message = (f'{kind} "{object_name}" would also be created by job "{owner}"; rename one of the jobs '
                       f"(or the extra role) so their objects differ")
        raise TrainJobError(component, name, [Issue("name", message)])
    _claims.update({key: name for key in mine})
