"""A first declaration from sample records: ``medallion init`` (pure: values in, YAML text out).

Given a source's format and some of its records, it writes the source, its bronze table and a
silver table whose columns and types are the narrowest every sample value fits, an event time
when a timestamp column is there, and a deduplication key guessed from the values, with a
comment at each place the user must decide (the key, the time zone, rules, gold tables). What it
writes passes ``medallion pipelines`` as it is: a starting point, not a guess left unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

FORMATS = ("csv", "json_lines", "parquet")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"^[+-]?\d+$")
_DECIMAL = re.compile(r"^[+-]?\d*\.\d+$|^[+-]?\d+\.\d*$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ZONED = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$")
_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$")
_BOOLEAN = {"true", "false"}
_TIME_NAMES = ("event_time", "timestamp", "ts", "time", "created_at", "occurred_at", "at", "date")
INT_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1


class ScaffoldError(ValueError):
    """The samples cannot make a declaration; the message says why."""


@dataclass(frozen=True)
class Column:
    """A silver column: its name, Spark type, where it comes from, and what the user decides."""

    name: str
    type: str
    source: str | None = None  # the raw field, when not the column's name
    format: str | None = None
    zone_to_decide: bool = False
    required: bool = False
    unique: bool = False


@dataclass(frozen=True)
class Samples:
    """A source's sample records: its format, the raw fields in order, and their values (CSV:
    text; JSON: JSON values, nested objects flattened to dotted paths; Parquet: the declared
    Spark types in ``types``)."""

    format: str
    fields: tuple[str, ...]
    values: Mapping[str, Sequence[Any]]
    types: Mapping[str, str] = field(default_factory=dict)  # Parquet: Spark types by field
    arrays: tuple[str, ...] = ()  # JSON fields holding arrays, left to the user


def text_type(values: Sequence[str]) -> tuple[str, str | None, bool]:
    """The narrowest Spark type every non-blank text value converts to exactly, its ``format``,
    and whether its time zone is the user's to decide."""
    present = [v.strip() for v in values if v is not None and v.strip()]
    if not present:
        return "STRING", None, False
    if all(_INT.match(v) for v in present):
        biggest = max(abs(int(v)) for v in present)
        if biggest <= INT_MAX:
            return "INT", None, False
        return ("BIGINT", None, False) if biggest <= BIGINT_MAX else ("STRING", None, False)
    if all(_INT.match(v) or _DECIMAL.match(v) for v in present):
        return decimal_type(present), None, False
    if all(_INT.match(v) or _DECIMAL.match(v) or _FLOAT.match(v) for v in present):
        return "DOUBLE", None, False
    if all(v.lower() in _BOOLEAN for v in present):
        return "BOOLEAN", None, False
    if all(_DATE.match(v) for v in present):
        return "DATE", None, False
    if all(_ZONED.match(v) for v in present):
        return "TIMESTAMP", "iso8601_with_zone", False
    if all(_LOCAL.match(v) for v in present):
        return "TIMESTAMP", None, True
    return "STRING", None, False


def decimal_type(texts: Sequence[str]) -> str:
    """``DECIMAL(p,s)`` holding every value exactly, with room for values ten thousand times the
    largest sample (at least ``DECIMAL(10,s)``)."""
    scale, whole = 0, 1
    for text in texts:
        try:
            number = Decimal(text)
        except InvalidOperation:
            continue
        sign, digits, exponent = number.as_tuple()
        assert isinstance(exponent, int)
        scale = max(scale, -exponent)
        whole = max(whole, len(digits) + exponent)
    precision = min(38, max(10, whole + scale + 4))
    return f"DECIMAL({precision},{min(scale, precision)})"


def json_type(values: Sequence[Any]) -> tuple[str, str | None, bool]:
    """The Spark type of a JSON field: numbers as numbers, booleans, text as :func:`text_type`
    reads it when it is a date or a time, else STRING."""
    present = [v for v in values if v is not None]
    if not present:
        return "STRING", None, False
    if all(isinstance(v, bool) for v in present):
        return "BOOLEAN", None, False
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        biggest = max(abs(v) for v in present)
        return ("INT" if biggest <= INT_MAX else "BIGINT" if biggest <= BIGINT_MAX else "DOUBLE",
                None, False)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "DOUBLE", None, False
    if all(isinstance(v, str) for v in present):
        kind, fmt, zone = text_type(present)
        if kind in ("DATE", "TIMESTAMP"):
            return kind, fmt, zone
    return "STRING", None, False


def column_name(field_name: str) -> str:
    """A field's name as an identifier: a dotted path joined with ``_``, other characters too."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", field_name).strip("_").lower() or "column"
    return f"c_{name}" if name[0].isdigit() else name


def infer_columns(samples: Samples) -> list[Column]:
    """The silver columns of the samples' fields."""
    columns, seen = [], set()
    for raw in samples.fields:
        values = samples.values.get(raw, ())
        if samples.format == "parquet":
            kind, fmt, zone = samples.types[raw], None, False
        elif samples.format == "json_lines":
            kind, fmt, zone = json_type(values)
        else:
            kind, fmt, zone = text_type(values)
        name = column_name(raw)
        while name in seen:
            name += "_"
        seen.add(name)
        blank = [v for v in values if v is None or (isinstance(v, str) and not v.strip())]
        texts = [str(v) for v in values if v is not None]
        columns.append(Column(name, kind, raw if raw != name else None, fmt, zone,
                              required=bool(values) and not blank,
                              unique=bool(values) and not blank and len(set(texts)) == len(texts)))
    return columns


def event_time(columns: Sequence[Column]) -> Column | None:
    """The column windows would run over: a required TIMESTAMP, by its name first."""
    stamps = [c for c in columns if c.type == "TIMESTAMP"]
    for name in _TIME_NAMES:
        for column in stamps:
            if column.name == name or column.name.endswith(f"_{name}"):
                return column
    return stamps[0] if stamps else None


def dedup_key(columns: Sequence[Column]) -> list[str]:
    """A key guessed from the values: a unique column named like an id, else any unique column,
    else every column (a re-delivery of the whole row)."""
    unique = [c for c in columns if c.unique and c.type not in ("DOUBLE", "BOOLEAN")]
    named = [c for c in unique if c.name == "id" or c.name.endswith("_id")]
    chosen = named[:1] or unique[:1]
    return [c.name for c in chosen] or [c.name for c in columns]


def _yaml_text(text: str) -> str:
    return text if re.match(r"^[A-Za-z_][A-Za-z0-9_./-]*$", text) and text.lower() not in (
        "yes", "no", "on", "off", "true", "false", "null", "y", "n", "~") else \
        "'" + text.replace("'", "''") + "'"


def render(name: str, samples: Samples, glob: str) -> str:
    """The declaration of pipeline ``name`` for ``samples`` landing as ``glob`` in
    ``<landing>/<name>/``, as YAML with the decisions left to the user in comments."""
    if not _NAME.match(name):
        raise ScaffoldError(f"{name!r} is not a pipeline name (letters, digits, _; not first a "
                            "digit)")
    if samples.format not in FORMATS:
        raise ScaffoldError(f"format {samples.format!r} is not one of {', '.join(FORMATS)}")
    if not samples.fields:
        raise ScaffoldError("the samples hold no field")
    if samples.format == "csv":
        bad = [f for f in samples.fields if not _NAME.match(f)]
        if bad:
            raise ScaffoldError(f"CSV header column(s) {', '.join(map(repr, bad))}: a bronze "
                                "table's column must be a plain name (letters, digits, _)")
    columns = infer_columns(samples)
    time_column = event_time(columns)
    key = dedup_key(columns)
    lines = [
        f"# The {name} pipeline, first written by `medallion init` from sample files: check every",
        "# line, above all those marked DECIDE. docs/pipelines.md tells every key; `medallion",
        "# pipelines` checks the file.",
        f"description: {name} records from landing files",
        "",
        "sources:",
        f"  {name}:",
        f"    format: {samples.format}",
        f"    path: {name}                    # <landing>/{name}/",
        f"    glob: {_yaml_text(glob)}",
    ]
    if samples.format == "csv":
        lines.append(f"    header: [{', '.join(samples.fields)}]")
    if samples.format == "parquet":
        lines.append("    schema:")
        lines += [f"      {_yaml_text(f)}: {_yaml_text(samples.types[f])}" for f in samples.fields]
    lines += [f"    bronze: {{table: {name}}}", "", "silver:", f"  {name}:",
              f"    input: bronze/{name}",
              f"    parse: {'json' if samples.format == 'json_lines' else 'columns'}",
              "    columns:"]
    for column in columns:
        lines.append(f"      {column.name}:")
        lines.append(f"        type: {_yaml_text(column.type)}")
        if column.source:
            lines.append(f"        source: {_yaml_text(column.source)}")
        if column.required:
            lines.append("        required: true            # DECIDE: every sample had a value")
        if column.format:
            lines.append(f"        format: {column.format}")
        if column.zone_to_decide:
            lines.append("        zone: UTC                 # DECIDE: the zone these times were "
                         "written in")
    if samples.arrays:
        lines.append(f"      # left out, arrays: {', '.join(samples.arrays)} (declare them as "
                     "ARRAY<...> if you need them)")
    lines += ["    # rules:                        # DECIDE: what makes a row invalid, e.g.",
              "    #   negative_amount: amount >= 0",
              "    dedup:",
              f"      key: [{', '.join(key)}]   # DECIDE: what identifies a row (a guess from the "
              "samples)",
              "      order_by: [ingested_at, source_file]"]
    if time_column is not None:
        lines.append(f"    event_time: {time_column.name}")
        lines += ["", "# gold:                             # DECIDE: the aggregates analysts need, "
                      "e.g.",
                  f"#   {name}_per_hour:",
                  f"#     input: silver/{name}",
                  "#     window: {kind: tumbling, size: 1 hour}",
                  "#     aggregates:",
                  "#       rows: {function: count}",
                  "#     mode: update"]
    else:
        lines.append("    # event_time: no TIMESTAMP column in the samples: windows need one")
    return "\n".join(lines) + "\n"
