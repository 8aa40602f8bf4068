"""Argument and output descriptions: the attribute docstrings of the models, read when asked for.

Each argument's description lives once, as the docstring under its field. The package schema and
docs/arguments.md read them through `field_description`; reading them when every model class is
created (pydantic's `use_attribute_docstrings`) would parse the library's source on every import.

An argument whose values are the members of a registry (`backend`, `gang_scheduler`) writes `{choices}`
in its docstring; the registry fills it in (`describe_choices`), so a new member is described where it
is defined and the docs list it without an edit here.
"""

import ast
import inspect
import textwrap
from functools import cache
from typing import Callable

from pydantic import BaseModel

_CHOICES: dict[str, Callable[[], dict[str, str]]] = {}


def describe_choices(field: str, summaries: Callable[[], dict[str, str]]) -> None:
    """`{choices}` in field `field`'s description becomes `"a" (what a is), "b" (...) or "c" (...)`, from
    `summaries()`: each value the field takes and what it means."""
    _CHOICES[field] = summaries


def field_description(model: type[BaseModel], field: str) -> str:
    """The docstring under `field` in `model` or in the nearest base class declaring it, or ""."""
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and field in _docstrings(cls):
            text = _docstrings(cls)[field]
            return text.replace("{choices}", _choices(field)) if field in _CHOICES else text
    return ""


def _choices(field: str) -> str:
    described = [f'"{value}" ({summary})' for value, summary in _CHOICES[field]().items()]
    return " or ".join(filter(None, (", ".join(described[:-1]), described[-1])))


@cache
def _docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings of the fields `cls` itself declares."""
    if cls is BaseModel or "__annotations__" not in cls.__dict__:
        return {}
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    return {statement.target.id: inspect.cleandoc(following.value.value)
            for statement, following in zip(body, body[1:])
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)}
