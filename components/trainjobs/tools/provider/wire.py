"""A Construct request's inputs as the program meant them.

Pulumi's Python provider host decodes what the engine sends with `rpc.deserialize_properties`, which
moves a secret found anywhere inside an argument up to the whole argument, and wraps an argument that
has dependencies or holds an unknown into one Output: `env` with one secret value arrives as one
secret Output of the whole list. The components must refuse an Output wherever the structure (env
names, label keys, counts) decides what is derived, so that argument would be refused. Here the
protobuf Struct is decoded directly, and each secret, unknown and dependency stays on the value it
belongs to; then each value is placed by the package schema: a value where the arguments take
`pulumi.Input` (or `Any`) becomes an Output carrying exactly that, a known value where they need a
plain one becomes plain again, its dependencies becoming the component's.

Numbers arrive as doubles; integral ones are read as integers, so `numNodes: 2` is 2 and a message
shows `0`, not `0.0`, while 1.5 stays 1.5 and a count refuses it.
"""

from dataclasses import dataclass, replace
from typing import Any, Optional

import pulumi
from google.protobuf import struct_pb2
from pulumi.provider.experimental.analyzer import ComponentDefinition, PropertyDefinition, TypeDefinition
from pulumi.resource import DependencyResource
from pulumi.runtime import rpc

__all__ = ["Leaf", "arguments", "decode_inputs"]

# The engine marks an unknown value with a sentinel string per type (sdk/go/common/resource/plugin/rpc.go);
# the Python SDK knows only the string one (rpc.UNKNOWN).
_UNKNOWN_SENTINELS = frozenset({
    rpc.UNKNOWN,
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",   # bool
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",   # number
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",   # array
    "030794c1-ac77-496b-92df-f27374a8bd58",   # asset
    "e48ece36-62e2-4504-bad9-02848725956a",   # archive
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",   # object
})
_ANY = "pulumi.json#/Any"


@dataclass(frozen=True)
class Leaf:
    """One value the engine sent with more than the value: secret, unknown, or depending on resources."""

    value: Any = None
    known: bool = True
    secret: bool = False
    dependencies: frozenset[str] = frozenset()
    lifted: bool = False
    """The secret was marked on a structure around the value, not on the value itself, so which value of
    it was secret is lost: it stays secret where the arguments take an Output, and is read plain where
    the job needs it plain (an env name, a count) to derive its objects."""


_PLAIN = Leaf()


def decode_inputs(inputs: struct_pb2.Struct, dependencies: dict[str, set[str]]) -> dict[str, Any]:
    """The request's inputs by schema name: plain values, with a Leaf wherever the engine marked more.

    An argument's dependencies (the request's inputDependencies) go to every value inside it, unless it
    holds output values, which carry their own (as Pulumi's host does).
    """
    decoded = {}
    for key, value in inputs.fields.items():
        deps = frozenset(dependencies.get(key, ()))
        context = _PLAIN if not deps or _holds_output_values(value) else Leaf(dependencies=deps)
        result = _decode(value, context)
        if result is not None:
            decoded[key] = result
    return decoded


def _holds_output_values(value: struct_pb2.Value) -> bool:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        fields = value.struct_value.fields
        sig = fields.get(rpc._special_sig_key)
        if sig is not None and sig.string_value == rpc._special_output_value_sig:
            return True
        return any(_holds_output_values(v) for v in fields.values())
    if kind == "list_value":
        return any(_holds_output_values(v) for v in value.list_value.values)
    return False


def _decode(value: struct_pb2.Value, context: Leaf) -> Any:
    """`value` decoded; `context` is what the structures around it said (secret, dependencies)."""
    kind = value.WhichOneof("kind")
    if kind == "list_value":
        return [_decode(v, context) for v in value.list_value.values]
    if kind == "struct_value":
        return _decode_struct(value.struct_value, context)
    if kind == "string_value" and value.string_value in _UNKNOWN_SENTINELS:
        return replace(context, known=False)
    if kind == "number_value":
        number = value.number_value
        scalar: Any = int(number) if number.is_integer() else number
    elif kind in ("string_value", "bool_value"):
        scalar = getattr(value, kind)
    else:
        return None
    return scalar if context == _PLAIN else replace(context, value=scalar)


def _decode_struct(struct: struct_pb2.Struct, context: Leaf) -> Any:
    fields = struct.fields
    sig = fields[rpc._special_sig_key].string_value if rpc._special_sig_key in fields else None
    if sig is None:
        decoded = {key: _decode(v, context) for key, v in fields.items()}
        return {key: v for key, v in decoded.items() if v is not None}
    if sig == rpc._special_secret_sig:
        return _decode_marked(fields["value"], context, secret=True, known=True, dependencies=frozenset())
    if sig == rpc._special_output_value_sig:
        dependencies = frozenset(v.string_value for v in fields["dependencies"].list_value.values) \
            if "dependencies" in fields else frozenset()
        inner = fields.get("value", struct_pb2.Value(null_value=struct_pb2.NULL_VALUE))
        return _decode_marked(inner, context, secret="secret" in fields and fields["secret"].bool_value,
                              known="value" in fields, dependencies=dependencies)
    # An asset, archive or resource reference: as Pulumi's host reads it.
    special = rpc.deserialize_properties(struct, keep_unknowns=True)
    return special if context == _PLAIN else replace(context, value=special)


def _decode_marked(inner: struct_pb2.Value, context: Leaf, *, secret: bool, known: bool,
                   dependencies: frozenset[str]) -> Any:
    """A value marked secret, unknown or dependent: the marks go to each value inside it."""
    structured = inner.WhichOneof("kind") in ("struct_value", "list_value")
    marked = Leaf(secret=context.secret or secret, dependencies=context.dependencies | dependencies,
                  lifted=(context.lifted and context.secret and not secret) or (secret and structured))
    if not known:
        return replace(marked, known=False, lifted=False)
    return _decode(inner, marked)


def arguments(inputs: dict[str, Any], component: ComponentDefinition,
              types: dict[str, TypeDefinition]) -> tuple[dict[str, Any], set[str]]:
    """Schema-named inputs as the component's Python arguments, and the resources the component must
    depend on because a value it needs plain (a count, an env name) came with dependencies.

    A Leaf becomes an Output where the schema takes one (not `plain`, or `Any`); where it needs a plain
    value, a known one becomes plain unless it was itself marked secret; an unknown one, or a secret
    one, stays an Output, so the arguments refuse it with their own message ("must be a plain value").
    Names the schema does not know are kept, so the arguments name them as unknown.
    """
    depends: set[str] = set()

    def settle(leaf: Leaf, prop: Optional[PropertyDefinition]) -> Any:
        plain = prop is not None and bool(prop.plain) and prop.ref != _ANY
        if plain and leaf.known and (not leaf.secret or leaf.lifted):   # a known Leaf holds a scalar
            depends.update(leaf.dependencies)
            return leaf.value
        return _output(leaf)

    def properties(value: dict, props: dict[str, PropertyDefinition], mapping: dict[str, str]) -> dict:
        return {mapping.get(key, key): walk(v, props.get(key)) for key, v in value.items()}

    def walk(value: Any, prop: Optional[PropertyDefinition]) -> Any:
        if isinstance(value, Leaf):
            return settle(value, prop)
        type_def = _type_definition(prop, types)
        if isinstance(value, dict) and type_def is not None and not type_def.enum:
            return properties(value, type_def.properties, type_def.properties_mapping)
        if isinstance(value, list):
            return [walk(v, prop.items if prop else None) for v in value]
        if isinstance(value, dict):
            return {key: walk(v, prop.additional_properties if prop else None) for key, v in value.items()}
        return value

    return properties(inputs, component.inputs, component.inputs_mapping), depends


def _type_definition(prop: Optional[PropertyDefinition], types: dict[str, TypeDefinition]) -> Optional[TypeDefinition]:
    if prop is None or not prop.ref or prop.ref.startswith("/") or ":" not in prop.ref:
        return None
    return types.get(prop.ref.rsplit(":", 1)[-1])


def _output(leaf: Leaf) -> pulumi.Output:
    async def resolved(value: Any) -> Any:
        return value

    return pulumi.Output({DependencyResource(urn) for urn in sorted(leaf.dependencies)}, resolved(leaf.value),
                         resolved(leaf.known), resolved(leaf.secret))
