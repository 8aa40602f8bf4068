"""A platform profile under a job's arguments: the profile's values are defaults, the job's win.

Merged field by field, with the rules a job's settings use over a runtime's template
(trainjobs.kube.templates.merged_value): a mapping merges by key, env upserts by name, volumes, init
containers and sidecars by name, volume mounts by mount path, a nested model (resources, failure
policy, an initializer) field by field; any other value, lists included, is the job's. No argument is
named here, so every new common argument is a profile default too.
"""

from trainjobs.core.args import TrainJobArgs
from trainjobs.kube.templates import merged_value

__all__ = ["apply_profile", "from_profile"]


def apply_profile(args: TrainJobArgs) -> TrainJobArgs:
    """The job's arguments with its profile's defaults under them (the arguments themselves without one)."""
    profile = args.profile
    if profile is None:
        return args
    given = args.model_fields_set
    update = {name: merged_value(name, getattr(profile, name), getattr(args, name)) if name in given
              else getattr(profile, name) for name in profile.model_fields_set}
    return args.model_copy(update=update)


def from_profile(args: TrainJobArgs) -> frozenset[str]:
    """The arguments whose value comes from the profile alone (the job does not give them)."""
    if args.profile is None:
        return frozenset()
    return frozenset(args.profile.model_fields_set - args.model_fields_set)
