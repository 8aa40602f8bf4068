"""Strict YAML for everything a user writes: `--config` values, `Pulumi.yaml`, `Pulumi.<stack>.yaml`.

Scalars are read as `pulumi up` reads stack files (YAML 1.1): `yes`/`no`/`on`/`off` are booleans and
`0600` is octal, so a render shows what a deployment gets; a boolean where a number belongs is then
refused by the arguments' own check, naming the field. It builds plain JSON data only (string keys;
dates stay strings; no sets or binary), since Pulumi passes structured config to the program as JSON.
A key given twice in one mapping is an error, not last-wins; merge keys (`<<: *anchor`) still let
explicit keys override merged ones.
"""

import json
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

_MERGE = "tag:yaml.org,2002:merge"


class ConfigError(ValueError):
    """A `--config` value, a project file or a stack file that cannot be used as written."""


_SCALARS = tuple(f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float"))


def _checked(construct):
    """A scalar constructor whose refusal of an explicitly tagged value (`!!int abc`) is a marked error."""
    def checked(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, KeyError):
            raise ConstructorError(None, None, f"{node.value!r} is not a valid !!{node.tag.rsplit(':', 1)[1]}",
                                   node.start_mark) from None
    return checked


class _StrictLoader(yaml.SafeLoader):
    # YAML 1.1's plain scalars as the safe loader resolves them; dates and `=` stay strings.
    yaml_implicit_resolvers = {first: [(tag, regexp) for tag, regexp in resolvers if tag in (*_SCALARS, _MERGE)]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    yaml_constructors = {
        **{tag: _checked(yaml.SafeLoader.yaml_constructors[tag]) for tag in _SCALARS},
        **{tag: yaml.SafeLoader.yaml_constructors[tag] for tag in
           ("tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")},
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """A mapping whose keys are strings, each given once; ConstructorError marking the first that is not."""
        first_seen: dict[str, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise ConstructorError(None, None, f"key {json.dumps(key)} is not a string; quote it",
                                       key_node.start_mark)
            if key in first_seen:
                first = first_seen[key].start_mark
                raise ConstructorError(None, None, f'duplicate key "{key}" (first at line {first.line + 1}, '
                                       f"column {first.column + 1}); give each key once", key_node.start_mark)
            first_seen[key] = key_node
        mapping = super().construct_mapping(node, deep=deep)
        merged = [key for key in mapping if not isinstance(key, str)]
        if merged:
            raise ConstructorError(None, None, f"merged key {json.dumps(merged[0])} is not a string; quote it",
                                   node.start_mark)
        return mapping

    def construct_undefined(self, node: yaml.Node) -> Any:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise ConstructorError(None, None, f"tag {tag} is not supported; write plain strings, numbers, booleans, "
                               "lists and mappings", node.start_mark)


_StrictLoader.add_constructor(None, _StrictLoader.construct_undefined)


def load_yaml(text: str, source: str) -> Any:
    """`text` as plain JSON data; ConfigError `<source>: line L, column C: <problem>` otherwise."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader, narrowed further
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem and exc.context_mark:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(f"{source}: {where}{problem}") from None
    except yaml.reader.ReaderError as exc:
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        raise ConfigError(f"{source}: line {line}, column {column}: character U+{exc.character:04X} is "
                          "not allowed in YAML; write it as an escape in a double-quoted string") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None


def load_yaml_file(path: Path) -> Any:
    """The YAML file at `path` as plain JSON data; ConfigError naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    return load_yaml(text, str(path))
