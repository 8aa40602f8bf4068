"""The package's layers import one way: plain Kubernetes helpers (trainjobs.kube) know nothing of the
job's arguments or pipeline (trainjobs.core), which builds on them."""

import ast
import gc
from pathlib import Path

import trainjobs

PACKAGE = Path(trainjobs.__file__).parent


def imported_modules(source: str, package: str) -> set[str]:
    """Every module the source of a module of `package` imports, at any depth of its code (inside
    functions too), relative imports resolved."""
    found = set()
    for node in ast.walk(_parsed(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _parsed(source: str) -> ast.Module:
    """ast.parse with the cyclic collector held off: on CPython 3.11 a finalizer it runs in the middle of
    parsing (another test's pending asyncio future, logging) trips the parser's recursion-depth check."""
    gc.collect()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        gc.enable()


def core_imports(path: Path) -> list[str]:
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    return sorted(m for m in imported_modules(path.read_text(), package)
                  if m == "trainjobs.core" or m.startswith("trainjobs.core."))


def test_kube_imports_nothing_from_core():
    offenders = {str(path.relative_to(PACKAGE)): core_imports(path) for path in sorted((PACKAGE / "kube").rglob("*.py"))}
    assert offenders and {path: modules for path, modules in offenders.items() if modules} == {}


def test_the_check_finds_relative_and_nested_imports():
    source = "import json\ndef f():\n    from ..core import args\n    from .naming import shown\n"
    assert imported_modules(source, "trainjobs.kube") == {
        "json", "trainjobs.core", "trainjobs.core.args", "trainjobs.kube.naming", "trainjobs.kube.naming.shown"}
