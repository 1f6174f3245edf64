"""Rows as Spark's ``DataFrame.show(n, truncate=False)`` prints them, without Spark (pure).

``medallion show`` reads gold through delta-rs and prints it the way it always has: a boxed grid,
cells left-aligned, ``NULL`` for a null, timestamps in UTC (the session's zone) with the fraction
of a second only when there is one, decimals in plain notation, then ``only showing top N rows``
when rows were left out.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

_ESCAPES = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f", "\b": "\\b",
                          "\v": "\\v", "\a": "\\a"})


class Real(float):
    """A 4-byte float: printed with the fewest digits that read back as the same float, as
    Java's ``Float.toString``."""


def java_double(value: float, single: bool = False) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` when ``single``) writes it:
    plain notation from 10^-3 up to 10^7, else ``<digits>E<exponent>``; ``NaN``, ``Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    text = _shortest_single(value) if single else repr(value)
    digits = Decimal(text)
    if 1e-3 <= abs(value) < 1e7:
        plain = format(digits, "f")
        return plain if "." in plain else plain + ".0"
    sign, numerals, exponent = digits.as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, numerals)).rstrip("0") or "0"
    power = exponent + len(numerals) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _shortest_single(value: float) -> str:
    single = struct.unpack("f", struct.pack("f", value))[0]
    for precision in range(1, 10):
        text = f"{single:.{precision}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            return text
    return repr(single)


def cell(value: Any, null: str = "NULL") -> str:
    """One value as Spark shows it; with ``null="null"``, as Spark casts it to a string (a null
    inside an array, map or struct is then ``null``)."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value, isinstance(value, Real))
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{value.microsecond:06d}".rstrip("0") if value.microsecond else text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return "[" + " ".join(f"{b:02X}" for b in value) + "]"
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        # a map, as Arrow gives it: its (key, value) pairs
        return "{" + ", ".join(f"{cell(k, null)} -> {cell(v, null)}" for k, v in value) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cell(v, null) for v in value) + "]"
    if isinstance(value, dict):  # a struct: its values, as Spark shows one
        return "{" + ", ".join(cell(v, null) for v in value.values()) + "}"
    return str(value).translate(_ESCAPES)


def show_string(columns: Sequence[str], rows: Sequence[Sequence[Any]], more: bool = False) -> str:
    """The grid of ``rows`` (already limited); ``more``: rows were left out after them.

    As Spark's ``showString``: ends with a newline, unless the "only showing" line ends it.
    """
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(3, len(name), *(len(r[i]) for r in cells)) for i, name in enumerate(columns)]
    sep = "+" + "+".join("-" * w for w in widths) + "+\n"

    def line(values: Sequence[str]) -> str:
        return "|" + "|".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + "|\n"

    text = sep + line(list(columns)) + sep + "".join(line(r) for r in cells) + sep
    if more:
        text += f"only showing top {len(rows)} {'row' if len(rows) == 1 else 'rows'}"
    return text
