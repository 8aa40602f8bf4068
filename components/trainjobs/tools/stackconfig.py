"""Strict YAML for everything a user writes: `--config` values, `Pulumi.yaml`, `Pulumi.<stack>.yaml`,
read as the Pulumi CLI reads stack files, so a render shows what a deployment gets.

The Pulumi CLI reads stack files with Go's gopkg.in/yaml.v3, which resolves plain scalars by YAML 1.2's
rules with a few of its own: `yes`/`no`/`on`/`off` and `2:4` are strings; `1_000` is 1000; `0o17`,
and also 1.1's `017`, are 15; `.5` is a float; `~` and an empty value are null; a date
(`2024-01-01`) is a timestamp, which Pulumi hands the program as Go prints it
(`2024-01-01 00:00:00 +0000 UTC`). `_resolved` follows that library's resolver rule by rule.
Pulumi then writes the stack file out and reads it again, and passes each value to the program as
text: a string as it is, anything else as Go's JSON (`config_text`).

The loader builds plain JSON data only (string keys; no sets or binary). A key given twice in one
mapping is an error (yaml.v3 refuses it too); merge keys (`<<: *anchor`) still let explicit keys
override merged ones.
"""

import calendar
import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP, _MERGE = (
    _TAG + kind for kind in ("str", "null", "bool", "int", "float", "timestamp", "merge"))


class ConfigError(ValueError):
    """A `--config` value, a project file or a stack file that cannot be used as written."""


# --- yaml.v3's resolver (resolve.go), rule by rule ----------------------------------------------------------------

_WORDS = {**{word: (_BOOL, True) for word in ("true", "True", "TRUE")},
          **{word: (_BOOL, False) for word in ("false", "False", "FALSE")},
          **{word: (_NULL, None) for word in ("", "~", "null", "Null", "NULL")},
          **{word: (_FLOAT, math.nan) for word in (".nan", ".NaN", ".NAN")},
          **{sign + word: (_FLOAT, math.inf) for word in (".inf", ".Inf", ".INF") for sign in ("", "+")},
          **{"-" + word: (_FLOAT, -math.inf) for word in (".inf", ".Inf", ".INF")}}
# The first character decides which rules a plain scalar is tried against (yaml.v3's resolveTable).
_DIGIT, _SIGN, _WORD, _DOT = "D", "S", "M", "."
_HINTS = {**dict.fromkeys("0123456789", _DIGIT), "+": _SIGN, "-": _SIGN, **dict.fromkeys("yYnNtTfFoO~", _WORD),
          ".": _DOT}
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# Go's strconv.ParseFloat on a number that starts with ".": digits, and underscores between them.
_DOT_FLOAT = re.compile(r"\.[0-9](_?[0-9])*([eE][-+]?[0-9](_?[0-9])*)?")
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_INT64, _UINT64 = 2**63, 2**64
_DATE = r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_CLOCK = r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,]([0-9]+))?"
# yaml.v3's four layouts (`T` and `t` in one), as Go's time.Parse reads them (one or more spaces match a space).
_TIMESTAMPS = (re.compile(_DATE), re.compile(f"{_DATE}[Tt]{_CLOCK}(Z|[-+][0-9]{{2}}:[0-9]{{2}})"),
               re.compile(f"{_DATE} +{_CLOCK}"))


def _go_int(text: str, base: int, signed: bool = True) -> int | None:
    """Go's strconv.ParseInt (signed) or ParseUint on text without underscores; base 0 reads a prefix (0x, 0o,
    0b, or a leading 0 for octal). None where Go returns an error, as for a number out of range."""
    sign = 1
    if signed and text[:1] in ("+", "-"):
        sign, text = (-1 if text[0] == "-" else 1), text[1:]
    if base == 0:
        prefix = text[:2].lower()
        base, text = ({"0x": (16, text[2:]), "0o": (8, text[2:]), "0b": (2, text[2:])}.get(prefix)
                      or ((8, text[1:]) if text[:1] == "0" and len(text) > 1 else (10, text)))
    if not text or any(c not in _DIGITS[base] for c in text):
        return None
    value = sign * int(text, base)
    low, high = (-_INT64, _INT64 - 1) if signed else (0, _UINT64 - 1)
    return value if low <= value <= high else None


def _go_float(text: str) -> float | None:
    """Go's strconv.ParseFloat on a decimal number: None where it overflows (Go's range error)."""
    value = float(text.replace("_", ""))
    return value if math.isfinite(value) else None


def _timestamp(text: str) -> str | None:
    """A yaml.v3 timestamp as Pulumi passes it: the text of Go's time.Time.String() (`2024-01-01 00:00:00
    +0000 UTC`). None where time.Parse refuses the text (it is then a string). A time with an offset is
    refused: Go names its zone from the machine's local zone, so what the program gets depends on where
    `pulumi up` runs."""
    if len(text) < 5 or not text[:4].isdigit() or text[4] != "-":
        return None
    match = next(filter(None, (layout.fullmatch(text) for layout in _TIMESTAMPS)), None)
    if match is None:
        return None
    groups = match.groups() + (None,) * (8 - len(match.groups()))   # a date alone is midnight, UTC
    year, month, day, hour, minute, second = (int(part or 0) for part in groups[:6])
    fraction, zone = groups[6:]
    leap_like = year or 2000   # Go's year 0 is a leap year, as 2000 is (Python has no year 0)
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(leap_like, month)[1]
            and hour < 24 and minute < 60 and second < 60):
        return None
    if zone and zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 24 or minutes > 60:
            return None
        raise ValueError(f"{text} is a timestamp with a zone offset, which Pulumi passes to the program in the "
                         "local zone of the machine that runs it; quote it to pass the text, or give the time in UTC (Z)")
    nanos = (fraction or "")[:9].ljust(9, "0").rstrip("0")
    return (f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{'.' + nanos if nanos else ''} "
            "+0000 UTC")


def _resolved(text: str, tag: str = "") -> tuple[str, Any]:
    """The tag and value yaml.v3 gives a plain scalar (`tag` empty), or one tagged explicitly (timestamps are
    tried only then, or with !!timestamp), in resolve.go's order."""
    hint = _HINTS.get(text[0]) if text else _WORD
    if hint and tag != _STR:
        if text in _WORDS:
            return _WORDS[text]
        if hint == _DOT and _DOT_FLOAT.fullmatch(text):
            value = _go_float(text)
            if value is not None:
                return _FLOAT, value
        elif hint in (_DIGIT, _SIGN):
            if tag in ("", _TIMESTAMP):
                stamp = _timestamp(text)
                if stamp is not None:
                    return _TIMESTAMP, stamp
            plain = text.replace("_", "")
            for signed in (True, False):
                number = _go_int(plain, 0, signed)
                if number is not None:
                    return _INT, number
            if _YAML_FLOAT.fullmatch(plain) and (value := _go_float(plain)) is not None:
                return _FLOAT, value
            for prefix, base in (("0b", 2), ("0o", 8)):
                if plain.startswith(prefix):
                    number = _go_int(plain[2:], base)
                    if number is None:
                        number = _go_int(plain[2:], base, signed=False)
                    if number is not None:
                        return _INT, number
                elif plain.startswith("-" + prefix):
                    number = _go_int("-" + plain[3:], base)
                    if number is not None:
                        return _INT, number
    return _STR, text


def _pulumi_number(value: int | float) -> int | float:
    """A number as Pulumi holds it after writing the stack file out and reading it again: yaml.v3 writes a
    float as Go's %g, so a whole float below a million comes back an integer (`1.0` is 1, `-0.0` is 0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        return int(value)
    return value


# --- how Pulumi passes a value to the program ----------------------------------------------------------------------

_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
               "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED = re.compile('["\\\\<>&\u2028\u2029\x00-\x1f]')


def _go_json(value: Any, nested: bool = False) -> str:
    """`value` as Go's encoding/json writes it: compact, keys sorted, HTML characters escaped, floats in
    the shortest form (`1e+21`, `0.5`, `100000000000000000000`). Inside a list or mapping (`nested`) Pulumi
    holds an integer beyond int64 (yaml.v3 reads it as a uint64) as a float64: 2**63 is 9223372036854776000."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _go_json(float(value)) if nested and not -_INT64 <= value < _INT64 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a number JSON can carry, and Pulumi passes config as JSON")
        if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
            return re.sub(r"e-0(\d)$", r"e-\1", repr(value))
        return format(Decimal(repr(value)).normalize(), "f")
    if isinstance(value, str):
        return '"' + _GO_ESCAPED.sub(lambda m: _GO_ESCAPES.get(m[0]) or f"\\u{ord(m[0]):04x}", value) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_json(k)}:{_go_json(v, True)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_json(v, True) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} is not config data")


def config_text(value: Any) -> str:
    """The text a Pulumi program gets for a config value (`pulumi.Config().get`): a string as it is, an
    empty value as "", anything else as Go's JSON, which `get_int`, `get_bool` and `get_object` read."""
    if isinstance(value, str):
        return value
    return "" if value is None else _go_json(value)


# --- the loader ----------------------------------------------------------------------------------------------------

def _scalar(tag: str):
    """The constructor of one scalar tag: yaml.v3's value, or a marked error where yaml.v3 refuses the text."""
    def construct(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        try:
            resolved, value = _resolved(node.value, tag)
        except ValueError as exc:
            raise ConstructorError(None, None, str(exc), node.start_mark) from None
        if resolved == _INT and tag == _FLOAT:
            resolved, value = _FLOAT, float(value)   # !!float 2 is 2.0
        if resolved != tag:
            raise ConstructorError(None, None, f"{node.value!r} is not a valid !!{tag.rsplit(':', 1)[1]}",
                                   node.start_mark)
        if tag == _FLOAT and not math.isfinite(value):
            raise ConstructorError(None, None, f"{node.value} is not a number JSON can carry, and Pulumi passes "
                                   "config to the program as JSON; quote it to pass the text", node.start_mark)
        return _pulumi_number(value) if tag in (_INT, _FLOAT) else value
    return construct


class _StrictLoader(yaml.SafeLoader):
    yaml_implicit_resolvers: dict = {}   # resolve() decides, by yaml.v3's rules
    yaml_constructors = {
        **{tag: _scalar(tag) for tag in (_NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP)},
        _MERGE: lambda loader, node: node.value,   # `<<` anywhere but as a key is the string "<<"
        **{tag: yaml.SafeLoader.yaml_constructors[tag] for tag in (_STR, _TAG + "seq", _TAG + "map")},
    }

    def resolve(self, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
        """A plain scalar's tag by yaml.v3's rules; `<<` is the merge key, as yaml.v3 reads it in a mapping."""
        if kind is yaml.ScalarNode and implicit[0]:
            if value == "<<":
                return _MERGE
            try:
                return _resolved(value)[0]
            except ValueError:
                return _TIMESTAMP   # its constructor reports the problem where it is
        return super().resolve(kind, value, implicit)

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composing: set[str] = set()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """An anchor defined again names the later node from there on, as in yaml.v3 (PyYAML refuses it);
        a node holding an alias of itself is refused, as yaml.v3 does (it has no JSON form)."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.composing:
                raise ComposerError(None, None, f"anchor {event.anchor!r} is used inside its own value",
                                    event.start_mark)
            return super().compose_node(parent, index)
        anchor = event.anchor
        if anchor is not None:
            self.anchors.pop(anchor, None)
            self.composing.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.composing.discard(anchor)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """A mapping whose keys are strings, each given once; ConstructorError marking the first that is not."""
        first_seen: dict[str, yaml.Node] = {}
        for key_node, _ in node.value:
            key = "<<" if key_node.tag == _MERGE else self.construct_object(key_node, deep=True)
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
        tag = node.tag.replace(_TAG, "!!")
        raise ConstructorError(None, None, f"tag {tag} is not supported; write plain strings, numbers, booleans, "
                               "lists and mappings", node.start_mark)


_StrictLoader.add_constructor(None, _StrictLoader.construct_undefined)


def load_yaml(text: str, source: str) -> Any:
    """`text` as plain JSON data, as Pulumi reads it; ConfigError `<source>: line L, column C: <problem>` otherwise."""
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
