"""The package's modules import one way, read from their source (imports at any depth, inside functions
and `if TYPE_CHECKING:` too): no module imports itself through others, and each layer imports only
from its own layer and the layers below it (docs/contributing.md, "Where the code lives")."""

import ast
import gc
import importlib
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import AbstractSet, Iterator, Mapping

import trainjobs

PACKAGE = Path(trainjobs.__file__).parent

# Lowest first. A module belongs to the layer of the longest prefix that names it or a package above it.
LAYERS = (
    ("plain Kubernetes, and the scripts containers run", ("trainjobs.kube", "trainjobs.scripts")),
    ("the model every family, backend and gang scheduler reads: the arguments, the Family interface, pod sets, "
     "names, objects, errors, and the registries of what an argument names", ("trainjobs.core", "trainjobs.registry")),
    ("the backends", ("trainjobs.backends",)),
    ("the gang schedulers, which decorate the pod sets a backend will hold", ("trainjobs.scheduling",)),
    ("the pipeline that drives them, and the component that registers its plan", ("trainjobs.pipeline",)),
    ("the families, each with its component on the pipeline's", ("trainjobs.families",)),
    ("the package's public names, the platform's component, and reading deployed jobs' state",
     ("trainjobs", "trainjobs.platform", "trainjobs.observe")),
    ("what run-local and the command share: the offline engine, the per-pod view",
     ("trainjobs.tools.engine", "trainjobs.tools.stackconfig", "trainjobs.tools.podview")),
    ("run-local and the test kit", ("trainjobs.localrun", "trainjobs.testing")),
    ("the command, the provider, the importer and the policy pack", ("trainjobs.tools", "trainjobs.policy")),
)


def module_files() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = module_files()


def imported_modules(source: str, package: str, modules=MODULES) -> set[str]:
    """The modules of `modules` the source of a module of `package` imports, at any depth of its code, relative
    imports resolved: `from x import y` imports module x.y when there is one, else x; `import x.y.z` the
    longest of x.y.z, x.y, x that is a module."""
    found = set()
    for node in ast.walk(_parsed(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found.update(next(([".".join(parts[:n])] for n in range(len(parts), 0, -1)
                                   if ".".join(parts[:n]) in modules), []))
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            named = {f"{module}.{alias.name}" for alias in node.names}
            found.update(named & modules.keys())
            if named - modules.keys() and module in modules:
                found.add(module)
    return found


def _parsed(source: str) -> ast.Module:
    with _collector_held():
        return ast.parse(source)


@contextmanager
def _collector_held() -> Iterator[None]:
    """The cyclic collector held off (after one collection): on CPython 3.11 a finalizer it runs in the middle
    of parsing (another test's pending asyncio future, logging) trips the parser's recursion-depth check."""
    if not gc.isenabled():   # held already, by the caller
        yield
        return
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Each module -> the other modules of the package it imports."""
    graph = {}
    with _collector_held():
        for name, path in MODULES.items():
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            graph[name] = frozenset(imported_modules(path.read_text(), package) - {name})
    return graph


def circles(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """The groups of modules that import each other, through others or directly (each strongly connected
    component of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def layer_of(module: str) -> int:
    matches = [(len(prefix), number) for number, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or (prefix != "trainjobs" and module.startswith(prefix + "."))]
    assert matches, f"{module} is in no layer: add its folder to LAYERS (and to docs/contributing.md)"
    return max(matches)[1]


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    assert len(graph) > 50 and circles(graph) == []


def test_each_layer_imports_only_from_itself_and_the_layers_below():
    upward = {f"{module} -> {imported}": f"{LAYERS[layer_of(module)][0]} imports {LAYERS[layer_of(imported)][0]}"
              for module, imports in import_graph().items() for imported in imports
              if layer_of(imported) > layer_of(module)}
    assert upward == {}


def test_the_pipeline_drives_families_backends_and_schedulers_through_their_interfaces_alone():
    """It looks backends and gang schedulers up by name in their packages, and calls a family through the
    Family hooks: it imports those packages' interfaces, and no module of a family, backend or scheduler."""
    graph = import_graph()
    plugins = {m for m in MODULES if m.startswith(("trainjobs.families", "trainjobs.backends", "trainjobs.scheduling"))}
    assert {m: sorted(graph[m] & plugins) for m in MODULES if m.startswith("trainjobs.pipeline") and graph[m] & plugins} == {
        "trainjobs.pipeline.component": ["trainjobs.backends"],
        "trainjobs.pipeline.pipeline": ["trainjobs.backends", "trainjobs.scheduling"]}


def test_the_circles_found_are_the_modules_that_import_each_other():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}, "f": {"a"}}
    assert circles(graph) == [["a", "b", "c"], ["e", "e2"]]


def test_the_check_finds_relative_nested_and_type_checking_imports():
    modules = dict.fromkeys(["trainjobs.core", "trainjobs.core.args", "trainjobs.kube", "trainjobs.kube.naming",
                             "trainjobs.backends"])
    source = ("import json\nimport trainjobs.kube.naming.x\nfrom typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from trainjobs.backends import Backend\n"
              "def f():\n    from ..core import args\n    from . import shown\n")
    assert imported_modules(source, "trainjobs.kube", modules) == {
        "trainjobs.kube.naming", "trainjobs.backends", "trainjobs.core.args", "trainjobs.kube"}


def test_every_module_has_its_layer():
    assert {layer_of(m) for m in MODULES} == set(range(len(LAYERS)))
    assert (layer_of("trainjobs.kube.naming"), layer_of("trainjobs.tools.podview"), layer_of("trainjobs.tools.cli.main"),
            layer_of("trainjobs")) == (0, 7, 9, 6)


def test_every_module_imports():
    """On the Python running the tests: its syntax, its annotations evaluated (pydantic builds the models when
    they are defined), what it imports. The other Pythons run this and the tests of what else differs between
    versions, not every test (scripts/test-other-pythons). Not imported, only parsed above as every module is:
    a `__main__`, which runs its command when imported, and run-local's stand-in for the mpi-pi image's
    program, which runs in pods on Debian's python3 with its mpi4py."""
    programs = {"trainjobs.localrun._mpi_pi"}
    failed = {}
    for name in MODULES:
        if name.rpartition(".")[2] != "__main__" and name not in programs:
            try:
                importlib.import_module(name)
            except Exception as error:   # noqa: BLE001 (each module's failure, named)
                failed[name] = repr(error)
    assert len(MODULES) > 50 and failed == {}
