"""The trainjobs policy pack: `pulumi preview --policy-pack policy/`. The rules are trainjobs.policy."""

from trainjobs.policy.pack import serve

serve()
