"""Strict YAML for everything a user writes: `--config` values, `Pulumi.yaml`, `Pulumi.<stack>.yaml`.

The loader reads YAML 1.2's core schema: only `true`/`false` are booleans and only `null`/`~`/nothing
is null, so YAML 1.1's `yes`/`no`/`on`/`off`/`y`/`n` stay strings, `010` is ten and `1:30` is a
string; a field expecting a number then reports the word as not a number instead of reading 1.
(`pulumi up` reads stack files as YAML 1.1; docs/stack-config.md says what to quote so both agree.)
It builds plain JSON data only (string keys; no dates, sets or binary), since Pulumi passes
structured config to the program as JSON. A key given twice in one mapping is an error, not
last-wins; merge keys (`<<: *anchor`) still let explicit keys override merged ones.
"""

import json
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

_MAP, _SEQ, _STR = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"


class ConfigError(ValueError):
    """A `--config` value, a project file or a stack file that cannot be used as written."""


def _int(text: str) -> int:
    sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
    base = {"0o": 8, "0x": 16}.get(digits[:2], 10)
    return sign * int(digits[2:] if base != 10 else digits, base)


def _float(text: str) -> float:
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return float("-inf") if lowered.startswith("-") else float("inf")
    return float("nan") if lowered == ".nan" else float(text)


# YAML 1.2 core schema: tag -> (plain scalars it matches, their value, the characters they can start with).
_CORE = {
    "tag:yaml.org,2002:null": (r"~|null|Null|NULL|", lambda _: None, ["~", "n", "N", ""]),
    "tag:yaml.org,2002:bool": (r"true|True|TRUE|false|False|FALSE", lambda t: t[0] in "tT", list("tTfF")),
    "tag:yaml.org,2002:int": (r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", _int, list("-+0123456789")),
    "tag:yaml.org,2002:float": (r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)", _float, list("-+.0123456789")),
}


class _StrictLoader(yaml.SafeLoader):
    yaml_implicit_resolvers: dict = {}
    yaml_constructors: dict = {}

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


def _scalar_constructor(tag: str, pattern: re.Pattern, convert):
    def construct(loader: _StrictLoader, node: yaml.Node) -> Any:
        text = loader.construct_scalar(node)
        if not pattern.fullmatch(text):
            raise ConstructorError(None, None, f"{text!r} is not a valid !!{tag.rsplit(':', 1)[1]}", node.start_mark)
        return convert(text)
    return construct


for _tag, (_pattern, _convert, _starts) in _CORE.items():
    _compiled = re.compile(_pattern)
    _StrictLoader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), _starts)
    _StrictLoader.add_constructor(_tag, _scalar_constructor(_tag, _compiled, _convert))
_StrictLoader.add_implicit_resolver(_MERGE, re.compile(r"^<<$"), ["<"])
_StrictLoader.add_constructor(_STR, yaml.SafeLoader.construct_yaml_str)
_StrictLoader.add_constructor(_SEQ, yaml.SafeLoader.construct_yaml_seq)
_StrictLoader.add_constructor(_MAP, yaml.SafeLoader.construct_yaml_map)
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
