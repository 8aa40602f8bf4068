"""Policy rules for stacks of training jobs, as plain functions (trainjobs.policy.rules) and the
Pulumi policy pack that runs them unchanged (`trainjobs policy-pack DIR`, then `pulumi preview
--policy-pack DIR`; see policy/README.md).

    from trainjobs.policy import violations
    problems = violations([r.manifest for r in stack.kubernetes()])   # after trainjobs.testing.run(...)
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainjobs.policy import rules

__all__ = ["PACK_DESCRIPTION", "PACK_NAME", "RULES", "Rule", "Violation", "violations"]

PACK_NAME = "trainjobs"
PACK_DESCRIPTION = ("Rules for distributed training jobs on Kubernetes (resources, /dev/shm, images, secrets, DNS, "
                    "gangs, names, namespaces)")


@dataclass(frozen=True)
class Rule:
    """One rule: its name in the pack, its function, and whether it reads the whole stack."""

    name: str
    check: Callable[..., list[str]]
    reads_stack: bool = False
    options: tuple[str, ...] = ()   # keyword arguments it takes: the pack's config, the provider's namespace

    @property
    def description(self) -> str:
        return " ".join((self.check.__doc__ or "").split("\n\n")[0].split())


RULES = (
    Rule("trainjobs-requests-and-limits", rules.requests_and_limits),
    Rule("trainjobs-gpu-limit-equals-request", rules.gpu_limit_equals_request),
    Rule("trainjobs-shm-size", rules.shm_large_enough, options=("minimum",)),
    Rule("trainjobs-pinned-images", rules.pinned_images),
    Rule("trainjobs-no-secret-literals", rules.no_secret_literals),
    Rule("trainjobs-names-fit", rules.names_fit),
    Rule("trainjobs-namespace", rules.not_in_default_namespace, options=("provider_namespace",)),
    Rule("trainjobs-headless-service", rules.headless_service, reads_stack=True),
    Rule("trainjobs-gang-scheduling", rules.gang_scheduled, reads_stack=True),
    Rule("trainjobs-device-claims", rules.device_claims, reads_stack=True),
)


@dataclass(frozen=True)
class Violation:
    rule: str
    object: str   # "Kind name"
    message: str


def run_rule(rule: Rule, obj: Mapping[str, Any], stack: Sequence[Mapping[str, Any]],
             options: Mapping[str, Any] | None = None) -> list[str]:
    """One rule on one object, with the options it takes among `options`: what the pack does."""
    extra = {key: value for key, value in (options or {}).items() if key in rule.options and value is not None}
    return rule.check(obj, stack, **extra) if rule.reads_stack else rule.check(obj, **extra)


def violations(objects: Sequence[Mapping[str, Any]], options: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every rule on every object of a stack."""
    return [Violation(rule.name, rules.describe(obj), message)
            for obj in objects for rule in RULES for message in run_rule(rule, obj, objects, options)]
