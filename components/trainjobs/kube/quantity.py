"""Kubernetes resource quantities: parsing, rounding and normalisation."""

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))((?:[eE][+-]?[0-9]+)|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$")


class QuantityError(ValueError):
    pass


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a quantity such as "2500m", "1.5", "16Gi" or "1e3"."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if not match:
        raise QuantityError(
            f'"{value}" is not a Kubernetes quantity (examples: "4", "2500m", "16Gi", "1.5")'
        )
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f'"{value}" is not a number') from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def ceil_value(value: str | int | float) -> int:
    """The quantity rounded up to a whole number, as Kubernetes' Quantity.Value() does."""
    return math.ceil(parse_quantity(value))


def normalize_quantity(value: str | int | float) -> str:
    """A quantity as the string Kubernetes stores, so numbers from YAML don't cause diffs (8.0 -> "8")."""
    if isinstance(value, str):
        return value.strip()
    parsed = parse_quantity(value)
    return str(int(parsed)) if parsed == parsed.to_integral_value() else str(value)
