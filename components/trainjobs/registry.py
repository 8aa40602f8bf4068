"""One registry for an extension folder (backends, gang schedulers): its built-in modules, imported when a
member is first looked up (each registers itself), and members registered from elsewhere (a test's)."""

from importlib import import_module
from typing import Generic, TypeVar

__all__ = ["Registry"]

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
