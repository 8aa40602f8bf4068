"""The rules as pulumi-policy policies: what a pack's __main__.py serves to `pulumi preview --policy-pack`
(`serve`), in this repository's policy/ and in the pack `trainjobs policy-pack DIR` writes.

Each policy calls its rule unchanged on the object Pulumi is about to register (a resource policy), or
on every object with the stack's other objects (a stack policy, for rules that read several
objects). Only Kubernetes resources are checked; a rule's minimum is set in the pack's config.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi_policy as pp

from trainjobs.policy import PACK_NAME, RULES, Rule, run_rule

_CONFIG = {"trainjobs-shm-size": pp.PolicyConfigSchema(
    properties={"minimum": {"type": "string", "description": "Smallest /dev/shm size accepted, e.g. 2Gi"}})}


def manifest(resource_type: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """A resource's inputs as the Kubernetes object they make (None for a resource of another provider):
    `kubernetes:batch/v1:Job` gives apiVersion `batch/v1`, `kubernetes:core/v1:Service` gives `v1`."""
    provider, _, rest = resource_type.partition(":")
    if provider != "kubernetes" or ":" not in rest:
        return None
    api, _, kind = rest.rpartition(":")
    obj = _plain(props)
    obj.setdefault("apiVersion", api.removeprefix("core/"))
    obj.setdefault("kind", kind)
    return obj


def _plain(value: Any) -> Any:
    """pulumi-policy's proxies (secrets, unknowns) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


def _provider_namespace(provider: Any) -> str | None:
    namespace = (getattr(provider, "props", None) or {}).get("namespace")
    return namespace if isinstance(namespace, str) else None


def _resource_validation(rule: Rule):
    def validate(args: pp.ResourceValidationArgs, report_violation) -> None:
        obj = manifest(args.resource_type, args.props)
        if obj is None:
            return
        for message in run_rule(rule, obj, [obj], {**args.get_config(),
                                                    "provider_namespace": _provider_namespace(args.provider)}):
            report_violation(message, None)
    return validate


def _stack_validation(rule: Rule):
    def validate(args: pp.StackValidationArgs, report_violation) -> None:
        objects = [(r.urn, manifest(r.resource_type, r.props)) for r in args.resources]
        stack = [obj for _, obj in objects if obj is not None]
        for urn, obj in objects:
            if obj is not None:
                for message in run_rule(rule, obj, stack, args.get_config()):
                    report_violation(message, urn)
    return validate


def policies() -> list[pp.Policy]:
    """One policy per rule; the enforcement level is the pack's (advisory unless configured)."""
    made: list[pp.Policy] = []
    for rule in RULES:
        kind = pp.StackValidationPolicy if rule.reads_stack else pp.ResourceValidationPolicy
        validate = _stack_validation(rule) if rule.reads_stack else _resource_validation(rule)
        made.append(kind(name=rule.name, description=rule.description, validate=validate,
                         config_schema=_CONFIG.get(rule.name)))
    return made


def serve() -> None:
    """Serve the pack to the Pulumi engine; every policy advisory unless the pack's config says otherwise."""
    pp.PolicyPack(name=PACK_NAME, enforcement_level=pp.EnforcementLevel.ADVISORY, policies=policies())
