"""The three sides of the registration benchmark, and the check that they register the same objects.

- component: N jobs through the component class, with dict arguments, as a user writes them.
- raw: exactly the resources the component registered (same types, names, inputs, secrets and
  dependencies, the same key resource whose outputs fill the Secret), registered directly with the
  pulumi_kubernetes / pulumi_tls classes, with no component.
- floor: the raw resources plus one bare `pulumi.ComponentResource` per job as their parent (same
  type token and name as the component, so every URN matches; no `register_outputs`, which a
  component needs only to record outputs in the state): the least any component costs.

The raw and floor programs are built from what the component side registered, so they
follow the component whatever it registers. All sides run under `trainjobs.testing.run` (one mocks
class), so only the component's own cost differs.
"""

import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable

import pulumi

import trainjobs
from trainjobs.testing import Secret, StackResult, run

# The jobs each family registers N times: family -> (component class in `components`, its arguments).
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "torch": ("TorchTrainJob", {"image": "img:1", "command": ["torchrun", "train.py"], "num_nodes": 4,
                                "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}}),
    "mpi": ("MpiTrainJob", {"image": "img:1", "command": ["mpirun", "python", "x.py"], "num_nodes": 4}),
}
SIDES = ("component", "raw", "floor")
_SECRET_KEY = pulumi.runtime.rpc._special_sig_key
_SECRET_SIG = pulumi.runtime.rpc._special_secret_sig
_OUTPUT = "$output"   # spec marker: this value is an output of another registered resource
_SECRET = "$secret"   # spec marker: this value was registered as a secret


def job_names(n: int) -> list[str]:
    return [f"job-{i}" for i in range(n)]


def component_program(family: str, names: list[str]) -> Callable[[], None]:
    class_name, args = CASES[family]
    cls = getattr(trainjobs, class_name)

    def program() -> None:
        for name in names:
            cls(name, args)
    return program


@dataclass
class Recording:
    """What one run registered, plus the outputs each non-Kubernetes resource got from the mocks (key material)."""

    result: StackResult
    outputs: dict[tuple[str, str], dict[str, Any]]   # (type, name) -> {output property: value}, inputs left out


def record(program: Callable[[], None]) -> Recording:
    """Run `program` under the test kit, seeing every resource it creates through a stack transformation."""
    made: list[tuple[str, str, pulumi.Resource, set[str]]] = []

    def recorded() -> None:
        pulumi.runtime.register_stack_transformation(
            lambda a: made.append((a.type_, a.name, a.resource, {k for k, v in (a.props or {}).items() if v is not None})))
        program()
        for type_, name, resource, inputs in made:
            if isinstance(resource, pulumi.CustomResource) and not type_.startswith("kubernetes:"):
                pulumi.export(f"{type_}::{name}", {k: v for k, v in vars(resource).items()
                                                    if isinstance(v, pulumi.Output) and not k.startswith("_")
                                                    and k not in inputs and k not in ("urn", "id")})

    result = run(recorded)
    outputs = {}
    for key, value in result.outputs.items():
        type_, name = key.split("::", 1)
        value = value.value if isinstance(value, Secret) else value
        outputs[(type_, name)] = {k: v for k, v in value.items() if v is not None}
    return Recording(result, outputs)


def _output_index(recording: Recording) -> dict[str, list[tuple[str, str, str]]]:
    """Each string output value -> every (type, name, property) that produced it."""
    index: dict[str, list[tuple[str, str, str]]] = {}
    for (type_, name), props in recording.outputs.items():
        for prop, value in props.items():
            if isinstance(value, str) and value:
                index.setdefault(value, []).append((type_, name, prop))
    return {value: sorted(sources) for value, sources in index.items()}


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SECRET_KEY) == _SECRET_SIG


# --- the spec the raw and floor programs are built from -------------------------------------------

def spec_from(recording: Recording, family: str, names: list[str]) -> dict[str, Any]:
    """A JSON-able description of every custom resource the component side registered, by job.

    Values that are another resource's outputs become references to that output; the dependencies
    they imply are left out of the explicit ones, as the component left them.
    """
    index = _output_index(recording)
    by_urn = {r.urn: r for r in recording.result.resources}
    unseen = [f"{r.type} {r.name}" for r in recording.result.resources
              if r.custom and not r.is_kubernetes and (r.type, r.name) not in recording.outputs]
    if unseen:   # its outputs could not be wired into the raw side, which would then copy their values
        raise SystemExit(f"the outputs of {unseen[0]} were not seen; the raw side cannot reproduce it")
    groups: dict[str, dict[str, Any]] = {}
    for resource in recording.result.resources:
        if not resource.custom:
            continue
        if resource.provider or resource.protect:
            raise SystemExit(f"the benchmark does not reproduce providers or protect ({resource.type} {resource.name})")
        chain = recording.result.parent_chain(resource)
        if not chain:
            raise SystemExit(f"{resource.type} {resource.name} has no parent component; the floor needs one per job")
        top = chain[-1]
        deps = {(by_urn[u].type, by_urn[u].name) for u in resource.dependencies}
        used: set[tuple[str, str]] = set()
        inputs = _encode(resource.inputs, index, deps, used)
        groups.setdefault(top.name, {"type": top.type, "name": top.name, "resources": []})["resources"].append({
            "type": resource.type, "name": resource.name, "inputs": inputs,
            "depends_on": sorted(deps - used),
        })
    missing = [n for n in names if n not in groups]
    if missing:
        raise SystemExit(f"the component side registered nothing for jobs {missing[:3]}")
    return {"family": family, "names": names, "groups": [groups[n] for n in names]}


def _encode(value: Any, index: dict, deps: set, used: set) -> Any:
    if _is_secret(value):
        inner = _encode(value["value"], index, deps, used)
        # A secret that holds another resource's (secret) output is secret through that output.
        return inner if _holds_output(inner) else {_SECRET: inner}
    if isinstance(value, dict):
        return {k: _encode(v, index, deps, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v, index, deps, used) for v in value]
    if isinstance(value, str) and value in index:
        sources = [s for s in index[value] if (s[0], s[1]) in deps] or index[value]
        type_, name, prop = sources[0]
        used.add((type_, name))
        return {_OUTPUT: [type_, name, prop]}
    if isinstance(value, float) and value.is_integer():
        return int(value)   # the wire has only floats; programs pass ints
    return value


def _holds_output(value: Any) -> bool:
    if isinstance(value, dict):
        return _OUTPUT in value or any(_holds_output(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_output(v) for v in value)
    return False


def first_job(spec: dict[str, Any]) -> dict[str, Any]:
    return {**spec, "names": spec["names"][:1], "groups": spec["groups"][:1]}


# --- the raw and floor programs ---------------------------------------------------------------------

def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def resource_class(type_: str) -> Callable[..., pulumi.CustomResource]:
    """`kubernetes:core/v1:Service` -> pulumi_kubernetes.core.v1.Service; `tls:index/x:PrivateKey` -> pulumi_tls.PrivateKey."""
    package, module, name = type_.split(":")
    path = f"pulumi_{package}" if module.startswith("index") else f"pulumi_{package}.{module.replace('/', '.')}"
    return getattr(importlib.import_module(path), name)


def resolved_classes(spec: dict[str, Any]) -> dict[str, Callable[..., pulumi.CustomResource]]:
    """Every class the spec uses, imported before anything is timed."""
    types = {r["type"] for g in spec["groups"] for r in g["resources"]}
    return {t: resource_class(t) for t in types}


def _decode(value: Any, made: dict[tuple[str, str], pulumi.CustomResource]) -> Any:
    if isinstance(value, dict):
        if _OUTPUT in value:
            type_, name, prop = value[_OUTPUT]
            return getattr(made[(type_, name)], prop)
        if _SECRET in value:
            return pulumi.Output.secret(_decode(value[_SECRET], made))
        return {k: _decode(v, made) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, made) for v in value]
    return value


def direct_program(spec: dict[str, Any], with_parents: bool) -> Callable[[], None]:
    """The spec's resources registered directly; `with_parents`: each job's under a bare ComponentResource."""
    classes = resolved_classes(spec)

    def program() -> None:
        made: dict[tuple[str, str], pulumi.CustomResource] = {}
        for group in spec["groups"]:
            parent = pulumi.ComponentResource(group["type"], group["name"], None) if with_parents else None
            for r in group["resources"]:
                kubernetes = r["type"].startswith("kubernetes:")
                props = {_snake(k): _decode(v, made) for k, v in r["inputs"].items()
                         if not (kubernetes and k in ("apiVersion", "kind"))}   # the class sets these two
                opts = pulumi.ResourceOptions(parent=parent, depends_on=[made[tuple(d)] for d in r["depends_on"]])
                made[(r["type"], r["name"])] = classes[r["type"]](r["name"], opts=opts, **props)
    return program


def program_for(side: str, spec: dict[str, Any]) -> Callable[[], None]:
    if side == "component":
        return component_program(spec["family"], spec["names"])
    return direct_program(spec, with_parents=side == "floor")


# --- the check --------------------------------------------------------------------------------------

def normalized(recording: Recording, with_parents: bool) -> dict[tuple[str, str], dict[str, Any]]:
    """Every custom resource as comparable data: another resource's output shows as where it came from."""
    index = _output_index(recording)
    by_urn = {r.urn: r for r in recording.result.resources}

    def norm(value: Any) -> Any:
        if _is_secret(value):
            return {"<secret>": norm(value["value"])}
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, str) and value in index:
            return "<output of " + " or ".join(f"{t} {n} {p}" for t, n, p in index[value]) + ">"
        return value

    view = {}
    for r in recording.result.resources:
        if not r.custom:
            continue
        parent = by_urn[r.parent_urn] if r.parent_urn in by_urn else None
        view[(r.type, r.name)] = {
            "inputs": norm(r.inputs),
            "dependencies": sorted((by_urn[u].type, by_urn[u].name) for u in r.dependencies),
            "provider": r.provider, "protect": r.protect,
            **({"parent": (parent.type, parent.name) if parent else None} if with_parents else {}),
        }
    return view


def differences(component: Recording, other: Recording, side: str, limit: int = 5) -> list[str]:
    """How `other` differs from the component side in the resources it registered (empty: identical)."""
    with_parents = side == "floor"
    a, b = normalized(component, with_parents), normalized(other, with_parents)
    found = [f"only the component registers {t} {n}" for t, n in sorted(set(a) - set(b))]
    found += [f"only {side} registers {t} {n}" for t, n in sorted(set(b) - set(a))]
    for key in sorted(set(a) & set(b)):
        for field, value in a[key].items():
            if b[key][field] != value:
                found.append(f"{key[0]} {key[1]}: {field} differs")
    if with_parents:
        groups = lambda rec: sorted((r.type, r.name) for r in rec.result.resources if not r.custom)
        if groups(component) != groups(other):
            found.append("the component resources differ")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])
