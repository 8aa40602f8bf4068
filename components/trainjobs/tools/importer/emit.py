"""Imported jobs as a Python program or a Pulumi YAML program.

Python passes the arguments as a dict (what stack config gives a component too). YAML uses the
package schema's property names: each argument model field in camelCase, while Kubernetes objects
passed through (volumes, tolerations, env's valueFrom, labels) keep their own keys.
"""

import keyword
import re
import typing
from typing import Any

from pydantic import BaseModel

from trainjobs.core.args import EnvVar
from trainjobs.tools.importer import Imported
from trainjobs.tools.cli.render import DUMPER, to_yaml


def _identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    return f"{text}_job" if keyword.iskeyword(text) or text[:1].isdigit() else text


def _comments(job: Imported) -> list[str]:
    lines = [f"{job.findings.source}"]
    lines += [f"  note: {f}" for f in job.findings.notes]
    lines += [f"  dropped: {f}" for f in job.findings.unexpressed]
    return lines


def findings_lines(imported: list[Imported]) -> list[str]:
    """One line per note and per dropped field, for stderr."""
    lines: list[str] = []
    for job in imported:
        lines += [f"note: {job.findings.source}: {f}" for f in job.findings.notes]
        lines += [f"warning: {job.findings.source}: dropped {f}" for f in job.findings.unexpressed]
    return lines


def _literal(value: Any, level: int, width: int = 100) -> str:
    """A Python literal of plain data, one item per line where it does not fit on one."""
    flat = repr(value)
    if len(flat) + 4 * level <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = "    " * (level + 1)
    if isinstance(value, dict):
        items = [f"{pad}{k!r}: {_literal(v, level + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + "    " * level + "}"
    items = [f"{pad}{_literal(v, level + 1)}," for v in value]
    return "[\n" + "\n".join(items) + "\n" + "    " * level + "]"


def python(imported: list[Imported], sources: list[str]) -> str:
    components = sorted({job.component for job in imported})
    out = [f'"""Imported by `trainjobs import {" ".join(sources)}`."""', "",
           f"from trainjobs import {', '.join(components)}", ""]
    for job in imported:
        out += ["", *(f"# {line}" for line in _comments(job))]
        out.append(f"{_identifier(job.name)} = {job.component}({job.name!r}, {_literal(job.args, 0)})")
    return "\n".join(out) + "\n"


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The argument model inside an annotation, and how it holds it: "one", "list" or "dict"."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "one"
    for arg in typing.get_args(annotation):
        model, how = _model_of(arg)
        if model is not None:
            return model, "list" if origin is list else "dict" if origin is dict else how
    return None, ""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def schema_properties(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """Argument values under the package schema's names: model fields in camelCase (aliases as given),
    values that are Kubernetes objects or user mappings unchanged."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        field = model.model_fields.get(key)
        if field is None:
            out[key] = value
            continue
        name = field.alias or _camel(key)
        inner, how = _model_of(field.annotation)
        if inner is None or value is None:
            out[name] = value
        elif isinstance(value, str):   # a built-in runtime, by name
            out[name] = {"name": value}
        elif inner is EnvVar and isinstance(value, dict):
            out[name] = [{"name": k, "value": v} for k, v in value.items()]
        elif how == "list":
            out[name] = [schema_properties(inner, v) if isinstance(v, dict) else v for v in value]
        elif how == "dict":
            out[name] = {k: schema_properties(inner, v) for k, v in value.items()}
        else:
            out[name] = schema_properties(inner, value)
    return out


class _ProgramDumper(DUMPER):
    """render's YAML (multi-line text as literal blocks), keys in the program's order."""


_ProgramDumper.add_representer(dict, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map",
                                                                                   list(data.items())))


def pulumi_yaml(imported: list[Imported], sources: list[str]) -> str:
    from trainjobs.tools.provider.server import JOB_COMPONENTS

    args_types = {component.__name__: component.family.args_type for component in JOB_COMPONENTS}
    header = [f"# Imported by `trainjobs import {' '.join(sources)}`.",
              "# `packages` names the trainjobs provider: after `pulumi package add <trainjobs>/provider`."]
    for job in imported:
        header += [f"# {line}" for line in _comments(job)]
    program = {"name": "imported-training", "runtime": "yaml", "packages": {"trainjobs": "<trainjobs>/provider"},
               "resources": {job.name: {"type": f"trainjobs:index:{job.component}",
                                        "properties": schema_properties(args_types[job.component], job.args)}
                             for job in imported}}
    return "\n".join(header) + "\n" + to_yaml(program, _ProgramDumper)


__all__ = ["findings_lines", "pulumi_yaml", "python", "schema_properties"]
