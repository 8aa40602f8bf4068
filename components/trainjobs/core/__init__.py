"""The pipeline every job goes through, and what all families share: typed arguments, the family
interface, naming rules, initializers, extra roles, overrides, errors and the component that registers
a plan."""
