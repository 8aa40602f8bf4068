"""Placeholders for values the derivation cannot compute itself.

The derivation stays a pure function from arguments to plain manifests. Where a manifest needs a
value that only exists under Pulumi (a key pair kept in state, a string built from an argument that
is an Output), it holds one of these placeholders; the component turns each into an Output. An
argument value the derivation only copies (an Output image, say) needs no placeholder: Pulumi takes
Outputs anywhere inside resource inputs.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Concat", "Derived", "ENCRYPTED", "GeneratedSSHKey", "PLACEHOLDERS", "REDACTED", "SECRET_VALUES",
           "UNKNOWN", "concat", "digest", "is_plain", "short_digest"]

_PLAIN_SCALARS = (str, int, float, bool, type(None))
REDACTED = "[secret]"    # what views show for a secret value
UNKNOWN = "[unknown]"    # what views show for a value known only after the update (during a preview)
# What an offline render reads for a stack file's encrypted (`secure:`) value, which it cannot decrypt.
ENCRYPTED = "<encrypted in the stack file; not decrypted offline>"


def is_plain(value: Any) -> bool:
    """Plain data all the way down: no Output or other value Pulumi has yet to resolve."""
    if isinstance(value, _PLAIN_SCALARS):
        return True
    if isinstance(value, dict):
        return all(is_plain(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    return False


@dataclass(frozen=True)
class Concat:
    """Strings joined once every part is known."""

    parts: tuple[Any, ...]


def concat(*parts: Any) -> Any:
    """The joined string, or a Concat when a part is not plain yet."""
    if all(isinstance(part, str) for part in parts):
        return "".join(parts)
    return Concat(parts)


@dataclass(frozen=True)
class Derived:
    """`function(value)` once every part of `value` is known."""

    value: Any
    function: Callable[[Any], Any]


def short_digest(value: Any) -> str:
    """12 hex digits of the SHA-256 of `value` as canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def digest(value: Any) -> Any:
    return short_digest(value) if is_plain(value) else Derived(value, short_digest)


@dataclass(frozen=True)
class GeneratedSSHKey:
    """Key material the component generates at deploy time and keeps in Pulumi state.

    One key pair resource per (`name`, algorithm), so the key is stable across updates and rotates
    only when the pair is replaced.
    """

    name: str
    part: str  # "private" (OpenSSH format) or "public" (authorized_keys line)
    algorithm: str = "ECDSA-P521"


PLACEHOLDERS = (Concat, Derived, GeneratedSSHKey)

# Plain text of the secret Outputs that job arguments held, noted as they resolve. Pulumi marks a whole
# resource input secret when any value inside it is; the views redact just these values inside it.
SECRET_VALUES: set[str] = set()
