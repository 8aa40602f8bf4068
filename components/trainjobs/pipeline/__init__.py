"""The pipeline that drives every job: the family's hooks, then what every job has (initializers, extra
roles, override fields, the failure policy, the profile's defaults), the gang scheduler and the backend,
the checks on every object; and the component that registers the plan.

It drives the families, backends and gang schedulers through their interfaces and registries, over the
model they all read (trainjobs.core), and imports no module of one of them."""
