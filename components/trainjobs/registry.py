"""The registries of the extension folders whose members an argument names: the backends (`backend`) and
the gang schedulers (`gang_scheduler`). Each lists its folder's built-in modules, imported when a member
is first looked up (each registers itself), and takes members registered from elsewhere (a test's).

The arguments (trainjobs.core.args) check and describe their values here, and this module imports no
member until one is looked up, so the arguments stay below the backends and schedulers that read them.
"""

from importlib import import_module
from typing import Any, Generic, TypeVar

__all__ = ["BACKENDS", "GANG_SCHEDULERS", "Registry"]

Member = TypeVar("Member")


class Registry(Generic[Member]):
    def __init__(self, package: str, built_in: tuple[str, ...]) -> None:
        self.package, self.built_in = package, built_in
        self._members: dict[str, Member] = {}
        self._loaded = False

    def register(self, name: str, member: Member) -> None:
        """Make `member` the one named `name` (a value of the argument that chooses it)."""
        self._members[name] = member

    def unregister(self, name: str) -> None:
        self._members.pop(name, None)

    def members(self) -> dict[str, Member]:
        """Every registered member, the package's modules imported (and so registered) on first use: the
        built-in ones first, in `built_in`'s order, whichever module was imported first."""
        if not self._loaded:
            self._loaded = True
            for module in self.built_in:
                import_module(f"{self.package}.{module}")
            ordered = sorted(self._members.items(), key=lambda item: self.built_in.index(item[0])
                             if item[0] in self.built_in else len(self.built_in))
            self._members = dict(ordered)
        return self._members

    def names(self) -> tuple[str, ...]:
        """The values the argument that chooses a member accepts."""
        return tuple(self.members())

    def summaries(self) -> dict[str, str]:
        """Each member's name and what it does (its `summary`), for that argument's description."""
        return {name: member.summary for name, member in self.members().items()}


BACKENDS: Registry[Any] = Registry("trainjobs.backends", ("jobs", "jobset"))
"""What creates a job's pods (trainjobs.backends.Backend), by `backend`; the built-in modules in the order the
argument's description lists them."""
GANG_SCHEDULERS: Registry[Any] = Registry("trainjobs.scheduling", ("kueue", "volcano", "coscheduling"))
"""What places a job's gang (trainjobs.scheduling.GangScheduler), by `gang_scheduler`; the built-in modules in
the order the argument's description lists them."""
