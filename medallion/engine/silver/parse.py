"""A silver table's raw records parsed and typed, column by column, each fault a reason.

Parsing never fails a batch (Spark 4 runs in ANSI mode, so every conversion is a ``try_`` one):

* ``parse: json``: the raw text goes through Spark's VARIANT type (``try_parse_json``), which tells
  an invalid line (``invalid_json``; a null one, a Kafka tombstone, is ``no_value``) from valid
  JSON that is not an object (``not_an_object``), and the JSON type of every field: a text column
  needs a JSON string, a number column a JSON number;
* ``parse: debezium``: as JSON, the text being a Debezium change event (inside the ``payload`` of
  the JSON converter's envelope when it carries its ``schema``); a column is read from the row the
  event carries (``after``, ``before`` for a delete), a ``__<field>`` column from the event
  itself (``__op``, ``__source_lsn``); an event that changes no row (``op`` other than c, u, d,
  r: a truncate, a message) is ``not_a_row_change``;
* ``parse: columns``: the input's columns are the raw fields (CSV text, Parquet typed values); a
  line the CSV reader could not split (``_corrupt_record``) is ``malformed_record``.

A row's reasons are listed column by column (``missing_<col>`` or ``invalid_<col>``, then the
column's rules), then the table's rules; rules are SQL CHECK constraints (null passes).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import CharType, StringType, VarcharType

from medallion.pipeline.kinds import (
    CORRUPT_RECORD,
    DEBEZIUM_DELETE,
    DEBEZIUM_OPERATIONS,
    INVALID_JSON,
    INVALID_UTF8,
    ISO_8601_WITH_ZONE,
    MALFORMED_RECORD,
    NO_VALUE,
    NOT_A_ROW_CHANGE,
    NOT_AN_OBJECT,
    ParseMode,
    debezium_event_path,
    invalid_reason,
    missing_reason,
)
from medallion.pipeline.model import ColumnSpec, SilverSpec
from medallion.pipeline.spec import TableDecl
from medallion.pipeline.sql import referenced_columns, referenced_paths
from medallion.pipeline.types import INTEGRAL, SqlType, struct_path

Transform = Callable[[DataFrame], DataFrame]


# ISO-8601 date and time with a zone (Z or an offset); the instant itself is checked by the cast.
ISO_8601_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)$"


_NUMERIC_JSON = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL.*)$"


RECORD = "_record"  # the input row as it arrived, a struct, until the quarantine takes it


_DOC = "_doc"  # JSON: the parsed document (a VARIANT); Debezium: the change event


_ROW = "_row"  # Debezium: the row the event carries (a VARIANT)


REASONS = "reasons"


def _value_column(name: str) -> str:
    return f"_value_{name}"


def _fault_column(name: str) -> str:
    return f"_fault_{name}"


def _field_column(name: str) -> str:
    return f"_field_{name}"  # JSON: the column's field of the document, a VARIANT


def _type_column(name: str) -> str:
    return f"_type_{name}"  # JSON: the field's JSON type (``schema_of_variant``)


def _typed_value_column(name: str) -> str:
    return f"_typed_{name}"  # the column's typed value before trimming


def _absent_column(name: str) -> str:
    return f"_absent_{name}"


def _some_field_absent_column(name: str) -> str:
    return f"_some_absent_{name}"  # an expression column: one of the raw fields it reads is absent


def record_fields(silver: SilverSpec, input_table: TableDecl) -> tuple[str, ...]:
    """The input columns that are the raw record (what a quarantine row keeps as it arrived)."""
    if silver.parse.reads_json:
        return (silver.raw_column,)
    return tuple(name for name in input_table.column_names if name not in silver.keep)


def _not_utf8(text: Column) -> Column:
    """Whether raw text is not UTF-8: bytes that are not (Spark's text reader keeps a line's bytes
    as they are), or U+FFFD, which a decoding reader (CSV's) leaves in their place."""
    return ~F.is_valid_utf8(text) | F.contains(text, F.lit("\ufffd"))


def _absent(json_type: Column) -> Column:
    return json_type.isNull() | (json_type == "VOID")


def blank(value: Column) -> Column:
    return F.trim(value.cast("string")) == ""


def _from_text(text: Column, column: ColumnSpec) -> Column:
    """The typed value of raw text (null when it does not convert or match the format)."""
    kind = column.type
    if kind.is_timestamp or kind.name == "DATE":
        if column.format == ISO_8601_WITH_ZONE:
            value = F.when(text.rlike(ISO_8601_PATTERN), text.try_cast("timestamp"))
        elif column.format is not None:
            value = F.try_to_timestamp(text, F.lit(column.format))
        else:
            value = text.try_cast("timestamp")
        if column.zone is not None:
            value = F.to_utc_timestamp(value, column.zone)
        return value.cast("date") if kind.name == "DATE" else value.cast(str(kind))
    if kind.is_string:
        return text
    if kind.is_decimal:
        return exact_only(F.trim(text).try_cast(str(kind)), F.trim(text), kind)
    if kind.is_numeric or kind.name == "BOOLEAN":
        return F.trim(text).try_cast(str(kind))
    return text.try_cast(str(kind))


def _json_type_fits(kind: SqlType, json_type: Column) -> Column | None:
    """Whether a JSON value whose type is ``json_type`` (``schema_of_variant``'s name) is one a
    scalar ``kind`` takes: text for a string, a date or a time, a number for a number, a boolean
    for a boolean. None for an array, map or struct, which is judged by what it holds."""
    if kind.is_string or kind.is_timestamp or kind.name == "DATE":
        return json_type == "STRING"
    if kind.is_numeric:
        return json_type.rlike(_NUMERIC_JSON)
    if kind.name == "BOOLEAN":
        return json_type == "BOOLEAN"
    return None


def _field_of(silver: SilverSpec, field_name: str) -> tuple[str, str]:
    """The staged document a JSON field is read from, and its path there."""
    if silver.parse is ParseMode.DEBEZIUM:
        event_path = debezium_event_path(field_name)
        return (_DOC, event_path) if event_path is not None else (_ROW, f"$.{field_name}")
    return _DOC, f"$.{field_name}"


def _debezium_event(doc: Column) -> Column:
    """The change event of a Debezium record: the document, or its ``payload`` when the JSON
    converter wrapped it with its ``schema``."""
    payload = F.try_variant_get(doc, "$.payload", "variant")
    wrapped = (F.try_variant_get(doc, "$.schema", "variant").isNotNull() & payload.isNotNull()
               & F.schema_of_variant(payload).startswith("OBJECT"))
    return F.when(wrapped, payload).otherwise(doc)


def _debezium_row(event: Column) -> Column:
    """The row a change event carries: ``before`` for a delete, ``after`` otherwise."""
    return F.when(F.try_variant_get(event, "$.op", "string") == DEBEZIUM_DELETE,
                  F.try_variant_get(event, "$.before", "variant")
                  ).otherwise(F.try_variant_get(event, "$.after", "variant"))


def _json_field(column: ColumnSpec) -> tuple[Column, Column]:
    """From the document's field, staged as a VARIANT (:func:`_field_column`) with its JSON type
    (:func:`_type_column`): the column's value, and whether the field is absent."""
    raw, json_type = F.col(_field_column(column.name)), F.col(_type_column(column.name))
    kind = column.type
    fits = _json_type_fits(kind, json_type)
    if fits is None:  # arrays, maps, structs: Spark's own conversion, kept when nothing was lost
        converted = F.try_variant_get(raw, "$", str(kind))
        value = F.when(~_lost_inside(raw, converted, kind), converted)
    elif kind.is_timestamp or kind.name == "DATE":  # text, read with the column's format, zone
        value = _from_text(F.when(fits, F.try_variant_get(raw, "$", "string")), column)
    else:
        value = F.when(fits, exact_only(F.try_variant_get(raw, "$", "string" if kind.is_string
                                                          else str(kind)),
                                        F.try_variant_get(raw, "$", "string"), kind))
    return value, _absent(json_type)


def _lost_inside(raw: Column, converted: Column, kind: SqlType) -> Column:
    """Whether a JSON value (a VARIANT) lost something in its conversion to ``kind``: a value
    present (not JSON null) that became null, or one of another JSON type than its declared type
    takes (:func:`_json_type_fits`), at any depth. Spark's conversion of a struct, array or map
    sets what does not convert inside it to null (a string in a DOUBLE field) and turns numbers
    into text (and into times): the rule for a top-level value holds inside."""
    present = raw.isNotNull() & ~F.is_variant_null(raw)
    json_type = F.schema_of_variant(raw)
    lost = converted.isNull()
    fits = _json_type_fits(kind, json_type)
    if fits is not None:
        lost = lost | ~fits | exact_only(F.lit(True), F.try_variant_get(raw, "$", "string"),
                                         kind).isNull()
    elif kind.name == "STRUCT":
        for name, field_kind in zip(kind.fields, kind.args, strict=True):
            inner = F.try_variant_get(raw, "$['" + name.replace("'", "\\'") + "']", "variant")
            lost = lost | _lost_inside(inner, converted.getField(name), field_kind)
    elif kind.name == "ARRAY":
        elements = F.try_variant_get(raw, "$", "ARRAY<VARIANT>")
        lost = lost | F.exists(F.zip_with(elements, converted, lambda r, c: _lost_inside(
            r, c, kind.args[0])), lambda each: each)
    elif kind.name == "MAP" and kind.args[0].is_string:  # JSON objects: text keys
        entries = F.try_variant_get(raw, "$", "MAP<STRING,VARIANT>")
        lost = lost | F.exists(F.map_values(F.map_zip_with(entries, converted, lambda _, r, c:
                                                           _lost_inside(r, c, kind.args[1]))),
                               lambda each: each)
    return present & F.coalesce(lost, F.lit(True))


# A number written out: sign, integer digits, fraction digits (trailing zeros apart), exponent.
_NUMBER_TEXT = r"^\s*[+-]?(?=\.?\d)(\d*)(?:\.(\d*?)0*)?(?:[eE]([+-]?\d+))?\s*$"


def decimal_places(text: Column) -> Column:
    """How many decimal places the number written in ``text`` needs to be held exactly:
    ``1.2300`` 2, ``517.0`` 0, ``1.5E-3`` 4, ``1200E-2`` 0; null when ``text`` is not a number
    written in decimal or scientific notation. Spark writes a DOUBLE, a DECIMAL and a JSON number
    that way, so the count is exact whatever the number's source."""
    matched = text.rlike(_NUMBER_TEXT)
    whole = F.regexp_extract(text, _NUMBER_TEXT, 1)
    fraction = F.regexp_extract(text, _NUMBER_TEXT, 2)
    exponent = F.coalesce(F.nullif(F.regexp_extract(text, _NUMBER_TEXT, 3), F.lit(""))
                          .try_cast("int"), F.lit(0))
    whole_zeros = F.length(whole) - F.length(F.regexp_replace(whole, "0+$", ""))
    places = (F.when(F.concat(whole, fraction).rlike("^0*$"), F.lit(0))
              .when(F.length(fraction) > 0, F.length(fraction) - exponent)
              .otherwise(-exponent - whole_zeros))
    return F.when(matched, F.greatest(places, F.lit(0)))


def exact_only(value: Column, number: Column, target: SqlType) -> Column:
    """``value``, ``number`` converted to ``target``; null (an invalid value) where the conversion
    would change the number: for an integer type, a number that is not whole (Spark's conversion of
    830.5 to an INT is 830, without a word); for a ``DECIMAL(p,s)``, one with more than ``s``
    decimal places (Spark rounds 0.12345 to 0.1235 in a DECIMAL(18,4)). The row is quarantined
    instead of stored changed."""
    if target.name in INTEGRAL:
        places = 0
    elif target.is_decimal and target.scale is not None:
        places = target.scale
    else:
        return value
    return F.when(decimal_places(number.try_cast("string")) <= places, value)


def _column_value(silver: SilverSpec, column: ColumnSpec, input_types: Mapping[str, SqlType],
                  typed_result: bool = False) -> tuple[Column, Column]:
    """The column's typed value, and whether its raw value is absent (a raw value present whose
    typed value is null is invalid). ``typed_result``: an expression column whose result is a
    number or a boolean, converted as such rather than from its text."""
    if column.expr is not None:
        # Computed from the raw fields beforehand. A null result is an absent value when a raw
        # field it reads is absent, and an invalid one when all of them are there.
        result = F.col(_value_column(column.name))
        value = exact_only(result.try_cast(str(column.type)), result, column.type
                           ) if typed_result else _from_text(result.try_cast("string"), column)
        return value, result.isNull() & F.col(_some_field_absent_column(column.name))
    if silver.parse.reads_json:
        return _json_field(column)
    path = _raw_path(column.field_name, input_types)
    raw = _path((RECORD, *path))
    source_type = input_types.get(path[0]) if len(path) == 1 else struct_path(
        input_types[path[0]], path[1:])
    if source_type is not None and not source_type.is_string:
        value = raw if source_type == column.type else exact_only(
            raw.try_cast(str(column.type)), raw, column.type)
    else:
        value = _from_text(raw, column)
    return value, raw.isNull()


def _raw_path(field_name: str, input_types: Mapping[str, SqlType]) -> tuple[str, ...]:
    """Where a column's raw value is in a typed input: the input column ``field_name``, or, when
    no column has that name, the struct field its dotted parts name (``card.brand``)."""
    return (field_name,) if field_name in input_types else tuple(field_name.split("."))


def _fault(silver: SilverSpec, column: ColumnSpec, absent: Column, value: Column) -> Column:
    """``missing_<col>`` / ``invalid_<col>``, or null when the raw value is fine."""
    fault = F.when(F.lit(False), F.lit(None).cast("string"))
    if column.required:
        fault = F.when(absent, F.lit(missing_reason(column.name)))
    if silver.column_can_be_invalid(column):
        fault = fault.when(~absent & value.isNull(), F.lit(invalid_reason(column.name)))
    if column.required and column.type.is_string:
        fault = fault.when(blank(value), F.lit(missing_reason(column.name)))
    return fault


def _path(parts: Sequence[str]) -> Column:
    return F.col(".".join(f"`{part}`" for part in parts))


def _any_null(paths: Sequence[Sequence[str]]) -> Column:
    """Whether one of the columns (or struct fields) is null; with none, true (a constant's null
    result is absent)."""
    return reduce(operator.or_, [_path(parts).isNull() for parts in paths], F.lit(not paths))


def _read_fields(expr: str, input_types: Mapping[str, SqlType] | None) -> list[tuple[str, ...]]:
    """The raw fields an expression reads, for its absence: with ``input_types`` (a typed input,
    such as Parquet), a reference into a struct (``card.brand``) is that field, null when the
    struct is there without it; without (JSON, where each field is text), the top-level field."""
    fields = []
    for parts in referenced_paths(expr):
        if input_types is not None and parts[0] in input_types:
            depth = len(parts)
            while depth > 1 and struct_path(input_types[parts[0]], parts[1:depth]) is None:
                depth -= 1
            fields.append(parts[:depth])
        else:
            fields.append(parts[:1])
    return fields


def _doc_is_object(silver: SilverSpec) -> Column:
    """Whether the parsed document is a JSON object. Its text starting with ``{`` says so
    without building the document's schema (``schema_of_variant``), which is asked only of the
    rest."""
    return (F.col(f"`{RECORD}`.`{silver.raw_column}`").rlike(r"^\s*\{")
            | F.schema_of_variant(F.col(_DOC)).startswith("OBJECT"))


def parse_record(silver: SilverSpec, input_table: TableDecl) -> Transform:
    """Bronze rows as typed columns, kept columns, the record, and ``reasons``."""
    input_types = {f.name: f.type for f in input_table.fields}
    json, debezium = silver.parse.reads_json, silver.parse is ParseMode.DEBEZIUM
    expr_fields = list(dict.fromkeys(
        name for c in silver.columns if c.expr is not None for name in referenced_columns(c.expr)))

    texts = [name for name in record_fields(silver, input_table) if input_types[name].is_string]

    def transform(bronze: DataFrame) -> DataFrame:
        not_utf8 = reduce(operator.or_, [_not_utf8(F.col(f"`{RECORD}`.`{name}`"))
                                         for name in texts]) if texts else None
        record = F.struct(*[F.col(f"`{c}`") for c in bronze.columns]).alias(RECORD)
        staged = [record]
        if json:
            doc = F.try_parse_json(F.col(silver.raw_column))
            staged.append((_debezium_event(doc) if debezium else doc).alias(_DOC))
        rows = bronze.select(*staged)
        if debezium:
            rows = rows.select("*", _debezium_row(F.col(_DOC)).alias(_ROW))
        documents = [_DOC, _ROW] if debezium else [_DOC] if json else []
        if any(c.expr is not None for c in silver.columns):
            # Expressions see each raw field as its value as text (null when absent), and the
            # kept input columns (the record's file) as they are.
            if json:
                fields = [F.col(f"`{RECORD}`.`{name}`").cast("string").alias(name)
                          if name in silver.keep and name in bronze.columns else
                          F.try_variant_get(F.col(where), path, "string").alias(name)
                          for name in expr_fields for where, path in [_field_of(silver, name)]]
            else:
                fields = [F.col(f"`{RECORD}`.`{name}`").alias(name) for name in expr_fields]
            exprs = [F.expr(c.expr).alias(_value_column(c.name))
                     for c in silver.columns if c.expr is not None]
            some_absent = [_any_null(_read_fields(c.expr, None if json else input_types)).alias(
                _some_field_absent_column(c.name)) for c in silver.columns if c.expr is not None]
            rows = rows.select("*", *fields).select(RECORD, *documents, *exprs, *some_absent)
        # Each step is a projection of its own, so that Spark computes every staged value once
        # per row: written as one expression, each field's value, type and absence were repeated
        # inside every condition that reads them (63 variant lookups for the 5 fields of
        # `events`), and the branches of a CASE are not shared by Spark's elimination of common
        # subexpressions.
        carried = [RECORD, *documents,
                   *(name for c in silver.columns if c.expr is not None
                     for name in (_value_column(c.name), _some_field_absent_column(c.name)))]
        if json:
            read = [c for c in silver.columns if c.expr is None]
            rows = rows.select(*carried, *[
                F.try_variant_get(F.col(where), path, "variant").alias(_field_column(c.name))
                for c in read for where, path in [_field_of(silver, c.field_name)]])
            rows = rows.select("*", *[F.schema_of_variant(F.col(_field_column(c.name))).alias(
                _type_column(c.name)) for c in read])
        # An expression's result that is not text (a number, a boolean) converts as a typed raw
        # field does: text would turn DECIMAL 1000.00 into '1000.00', which is no BIGINT.
        typed_results = {c.name for c in silver.columns if c.expr is not None
                         and (c.type.is_numeric or c.type.name == "BOOLEAN")
                         and not isinstance(rows.schema[_value_column(c.name)].dataType,
                                            (StringType, VarcharType, CharType))}
        converted: list[Column] = []
        for column in silver.columns:
            value, absent = _column_value(silver, column, input_types,
                                          typed_result=column.name in typed_results)
            converted += [value.alias(_typed_value_column(column.name)),
                          absent.alias(_absent_column(column.name))]
        rows = rows.select(*carried, *converted)
        typed, faults = [], []
        for column in silver.columns:
            value, absent = F.col(_typed_value_column(column.name)), F.col(_absent_column(column.name))
            faults.append(_fault(silver, column, absent, value).alias(_fault_column(column.name)))
            if column.trim and column.type.is_string:
                value = F.trim(value)
            typed.append(value.alias(column.name))
        kept = [F.col(f"`{RECORD}`.`{name}`").alias(name) for name in silver.keep]
        rows = rows.select(RECORD, *([_DOC] if json else []), *typed, *kept, *faults)
        # Rules see the typed (and kept) columns; a null predicate passes, as in a CHECK.
        listed: list[Column] = []
        for column in silver.columns:
            listed.append(F.col(_fault_column(column.name)))
            listed += [F.when(~F.expr(rule.predicate), F.lit(rule.name)) for rule in column.rules]
        listed += [F.when(~F.expr(rule.predicate), F.lit(rule.name)) for rule in silver.rules]
        reasons = listed_reasons = F.array_distinct(F.array_compact(F.array(*listed)))
        if json:
            doc = F.col(_DOC)
            reasons = (F.when(F.col(f"`{RECORD}`.`{silver.raw_column}`").isNull(),
                              F.array(F.lit(NO_VALUE)))
                       .when(doc.isNull(), F.array(F.lit(INVALID_JSON)))
                       .when(~_doc_is_object(silver), F.array(F.lit(NOT_AN_OBJECT))))
            if debezium:
                operation = F.try_variant_get(doc, "$.op", "string")
                reasons = reasons.when(~F.coalesce(operation.isin(*DEBEZIUM_OPERATIONS),
                                                   F.lit(False)), F.array(F.lit(NOT_A_ROW_CHANGE)))
            reasons = reasons.otherwise(listed_reasons)
        elif CORRUPT_RECORD in input_types:
            reasons = F.when(F.col(f"{RECORD}.{CORRUPT_RECORD}").isNotNull(),
                             F.array(F.lit(MALFORMED_RECORD))).otherwise(reasons)
        if not_utf8 is not None:
            # A line in Latin-1, say, would otherwise be parsed with each byte that is not UTF-8
            # turned into U+FFFD, and its values changed silently.
            reasons = F.when(not_utf8, F.array(F.lit(INVALID_UTF8))).otherwise(reasons)
        names = [c.name for c in silver.columns]
        return rows.select(RECORD, *names, *silver.keep, reasons.alias(REASONS))

    return transform
