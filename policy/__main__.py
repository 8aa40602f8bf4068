"""The trainjobs policy pack: `pulumi preview --policy-pack policy/`. The rules are trainjobs.policy."""

from pulumi_policy import EnforcementLevel, PolicyPack

from trainjobs.policy.pack import policies

PolicyPack(name="trainjobs", enforcement_level=EnforcementLevel.ADVISORY, policies=policies())
