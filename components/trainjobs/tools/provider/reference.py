"""docs/arguments.md, generated from the models: every argument and output with its type, default and
description, as declared in the code (`python -m trainjobs.tools.provider.reference > docs/arguments.md`)."""

import enum
import inspect
import sys
import types
import typing
from typing import Any, Union

import pulumi
from pydantic import BaseModel

from trainjobs.core.descriptions import field_description
from trainjobs.tools.provider.server import COMPONENTS

HEADER = """# Arguments and outputs of every component

Generated from the code by `python -m trainjobs.tools.provider.reference > docs/arguments.md`; a test keeps it
current. "Input" means the argument also takes a Pulumi Output (a secret, or a value unknown during
preview); "plain" arguments decide objects, pods or env, so they must be known at preview.
See [components.md](components.md) for how the arguments work together.
"""


def _type(annotation: Any) -> tuple[str, bool]:
    """A readable type, and whether it takes Outputs."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:   # a class from Python 3.11 on, a special form before
        return "any", False
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if any(typing.get_origin(a) is pulumi.Output or a is pulumi.Output or
               isinstance(a, typing.ForwardRef) for a in rest):
            plain = next(a for a in rest if typing.get_origin(a) is not collections_awaitable()
                         and typing.get_origin(a) is not pulumi.Output and not isinstance(a, typing.ForwardRef))
            return _type(plain)[0], True
        if len(rest) == 1:
            return _type(rest[0])
    if origin is list:
        inner, takes = _type(args[0])
        return f"list of {inner}", takes
    if origin is dict:
        inner, takes = _type(args[1])
        return f"map of {inner}", takes
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f'"{m.value}"' for m in annotation), False
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "bool": "boolean"}.get(annotation.__name__, annotation.__name__), False
    return "any", False


def collections_awaitable() -> Any:
    import collections.abc
    return collections.abc.Awaitable


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return getattr(default, "name", type(default).__name__)
    if default in (None, {}, []):
        return "none"
    return f"`{default.value if isinstance(default, enum.Enum) else default!r}`".replace("'", '"')


def _table(model: type[BaseModel]) -> list[str]:
    rows = ["| argument | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind, takes_outputs = _type(field.annotation)
        kind += " (Input)" if takes_outputs else ""
        description = " ".join(field_description(model, name).split()).replace("|", "\\|")
        default = _default(field) if getattr(model, "defaults_apply", lambda: True)() else "none (not set)"
        rows.append(f"| `{name}` | {kind} | {default} | {description} |")
    return rows


def _nested(model: type[BaseModel], seen: set) -> list[type[BaseModel]]:
    found = []
    for field in model.model_fields.values():
        for candidate in _models(field.annotation):
            if candidate not in seen:
                seen.add(candidate)
                found += [candidate, *_nested(candidate, seen)]
    return found


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def document() -> str:
    lines = [HEADER]
    seen: set = set()
    nested: list[type[BaseModel]] = []
    for component in COMPONENTS:
        args, outputs = component.args_type, component.outputs_type
        lines += [f"## {component.__name__}", "", inspect.cleandoc(component.__doc__ or ""), "",
                  f"`{component.__name__}(name, args: {args.__name__} | dict, opts=None)`", "", *_table(args), "",
                  "Outputs:", "", "| output | type | description |", "|---|---|---|"]
        for name, field in outputs.model_fields.items():
            lines.append(f"| `{name}` | {_type(field.annotation)[0]} | {' '.join(field_description(outputs, name).split())} |")
        lines.append("")
        nested += _nested(args, seen)
    lines += ["## Types used by the arguments", ""]
    for model in nested:
        lines += [f"### {model.__name__}", "", " ".join((model.__doc__ or "").split()), "", *_table(model), ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(document())
