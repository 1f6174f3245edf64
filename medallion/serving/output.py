"""Query results printed as Spark prints them, without Spark (pure, over Arrow).

``medallion sql`` gives the same text whichever engine answers: a grid as ``DataFrame.show``, CSV
with each value as Spark casts it to a string, JSON Lines as Spark's ``to_json``; timestamps in
UTC, the session's zone. Parquet keeps the Arrow types as they are.
"""

from __future__ import annotations

import base64
import csv
import json
from collections.abc import Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

from medallion.serving.grid import Real, cell, java_double, show_string

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json")


def _json(value: Any) -> Any:
    """A value as Spark's ``to_json`` writes it, before JSON encoding."""
    if isinstance(value, datetime):
        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return _Raw(format(value, "f"))
    if isinstance(value, float):
        number = java_double(value, isinstance(value, Real))
        return number if number[-1] in "Ny" else _Raw(number)  # NaN, Infinity: strings
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return {cell(k): _json(v) for k, v in value}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


class _Raw(str):
    """A number written as it is (a decimal's scale, Java's notation)."""


def _encode(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_encode(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def json_line(row: dict[str, Any]) -> str:
    """One row as Spark's ``to_json(struct(*))`` with null fields kept."""
    return _encode({name: _json(value) for name, value in row.items()})


def python_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts: timestamps in UTC, 4-byte floats marked :class:`Real`."""
    import pyarrow as pa

    from medallion.io.deltaread import to_rows

    singles = [f.name for f in table.schema if pa.types.is_float32(f.type)]
    rows = to_rows(table)
    for row in rows:
        for name in singles:
            if row[name] is not None:
                row[name] = Real(row[name])
    return rows


def write_rows(columns: Sequence[str], rows: Sequence[dict[str, Any]], fmt: str, out: TextIO,
               more: bool = False) -> None:
    """Print ``rows`` as ``table`` (``more``: rows were left out), ``csv`` or ``json``."""
    if fmt == "table":
        out.write(show_string(columns, [[row[c] for c in columns] for row in rows], more))
        if more:
            out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[None if row[c] is None else cell(row[c], null="null") for c in columns]
                          for row in rows])
    elif fmt == "json":
        out.writelines(json_line(row) + "\n" for row in rows)
    else:
        raise ValueError(f"unknown format {fmt!r} ({', '.join(FORMATS)})")
    out.flush()


def write_parquet(table: pa.Table, path: str) -> None:
    """The result as one Parquet file, its Arrow types kept (decimals, UTC timestamps)."""
    import pyarrow.parquet as pq

    pq.write_table(table, path)
