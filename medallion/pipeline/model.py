"""The declaration of a pipeline, as typed, frozen objects: sources, bronze, silver, dimensions, gold.

A :class:`PipelineSpec` is what ``conf/pipelines/<name>.yaml`` says once loaded
(:mod:`medallion.pipeline.load`) and checked (:mod:`medallion.pipeline.validate`). Everything the
engine, the catalog and ``medallion status`` need about a table is derived here from the
declaration, in one place: :meth:`PipelineSpec.tables` lists every table the pipeline writes, with
its layer, columns and types, comments, expectations, time column, output mode and MERGE keys.

Derivation rules (``docs/pipelines.md`` tells them to users):

* bronze columns come from the source's format (JSON Lines: ``raw``; CSV: the header, as text, plus
  ``_corrupt_record``; Parquet: the declared schema; Kafka: value as ``raw``, key, topic, partition,
  offset, ``kafka_timestamp``), then ``source_file`` and ``ingested_at``;
* silver columns are the declared columns, then each enrichment's columns, then the input columns
  it keeps (``keep``); its quarantine holds the raw record, the key columns, ``reasons`` and the
  kept columns;
* gold columns are the window bounds and grouping columns (sessions: grouping first, as a session
  belongs to its key), then the aggregates, typed as Spark types them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from medallion.config.model import ViewSpec
from medallion.pipeline.types import (
    BIGINT,
    INT,
    STRING,
    STRING_ARRAY,
    TIMESTAMP,
    SqlType,
    avg_type,
    sum_type,
)

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Layer(str, Enum):
    """Where a table sits in the medallion: its folder under the lakehouse and its catalog database."""

    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"


class SourceFormat(str, Enum):
    """How a source's records arrive."""

    JSON_LINES = "json_lines"  # *.json files, one record a line, kept as text
    CSV = "csv"  # *.csv files with a header line
    PARQUET = "parquet"  # *.parquet files of a declared schema
    KAFKA = "kafka"  # records of Kafka topics


DEFAULT_GLOBS = {SourceFormat.JSON_LINES: "*.json", SourceFormat.CSV: "*.csv",
                 SourceFormat.PARQUET: "*.parquet"}


class ParseMode(str, Enum):
    """How a silver table reads the raw record of its input."""

    JSON = "json"  # one text column holds a JSON object (invalid_json, not_an_object)
    COLUMNS = "columns"  # the input's columns are the raw fields (CSV, Parquet; malformed_record)


class DedupScope(str, Enum):
    """Against what a silver row's key is compared."""

    TABLE = "table"  # everything the table ever held: a re-delivery is removed however late
    WATERMARK = "watermark"  # only within the event-time watermark (bounded state)
    # the rows whose event time is on a UTC date the batch's rows are on: a re-delivery (same key,
    # same event time) is removed however late it comes, at a cost bounded by a day's data
    EVENT_DATE = "event_date"


class WindowKind(str, Enum):
    """Spark's event-time windows."""

    TUMBLING = "tumbling"
    SLIDING = "sliding"
    SESSION = "session"


class OutputMode(str, Enum):
    """How a gold table is kept."""

    UPDATE = "update"  # open windows kept up to date: update-mode aggregation, MERGE on the keys
    APPEND = "append"  # closed windows only, appended once the watermark has passed them


class JoinKind(str, Enum):
    """Which rows of a stream-stream join's input are written."""

    INNER = "inner"  # matched rows only
    LEFT_OUTER = "left_outer"  # every input row; no match: the joined columns null, once the
    # watermark has passed the row (no later match can come)


class AggregateFunction(str, Enum):
    """Aggregates a gold table can compute per window and group."""

    COUNT = "count"  # rows (no column), or non-null values of the column
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    COUNT_DISTINCT = "count_distinct"  # exact: the size of the set of values (state holds them)
    APPROX_COUNT_DISTINCT = "approx_count_distinct"


class Severity(str, Enum):
    """What a failed expectation does to the batch."""

    WARN = "warn"  # recorded only
    DROP = "drop"  # the failing rows go to the table's quarantine; the rest move on
    FAIL = "fail"  # nothing is committed downstream; the job exits non-zero


# Expectation types the quality gate computes in one aggregation over the batch. Row-level ones
# (a yes/no per row) can also ``drop``; batch-level ones describe the batch as a whole.
ROW_LEVEL_TYPES: frozenset[str] = frozenset({
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_null",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_be_between",
    "expect_column_values_to_match_regex",
    "expect_column_values_to_not_match_regex",
    "expect_column_value_lengths_to_be_between",
    "expect_column_pair_values_a_to_be_greater_than_b",
})
BATCH_LEVEL_TYPES: frozenset[str] = frozenset({
    "expect_table_row_count_to_be_between",
    "expect_column_values_to_be_unique",
    "expect_column_max_to_be_between",
    "expect_column_min_to_be_between",
    "expect_column_mean_to_be_between",
    "expect_column_sum_to_be_between",
})
SUPPORTED_TYPES: frozenset[str] = ROW_LEVEL_TYPES | BATCH_LEVEL_TYPES


class TableRole(str, Enum):
    """What a declared or derived table is for."""

    BRONZE = "bronze"
    SILVER = "silver"
    QUARANTINE = "quarantine"
    GOLD = "gold"


# Quarantine reasons the parse step gives, beside missing_<column> / invalid_<column> and rule names.
INVALID_UTF8 = "invalid_utf8"  # the raw record's text is not UTF-8 (or holds U+FFFD in its place)
NO_VALUE = "no_value"  # JSON: the raw column is null, as in a Kafka tombstone (a record without a value)
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
MALFORMED_RECORD = "malformed_record"
ISO_8601_WITH_ZONE = "iso8601_with_zone"  # the ``format`` keyword of today's event timestamps

SOURCE_FILE = "source_file"
INGESTED_AT = "ingested_at"
CORRUPT_RECORD = "_corrupt_record"


def missing_reason(column: str) -> str:
    """The reason given when a required column is absent, null, or blank text."""
    return f"missing_{column}"


def invalid_reason(column: str) -> str:
    """The reason given when a column's raw value does not convert to its type or format."""
    return f"invalid_{column}"


@dataclass(frozen=True)
class Field:
    """A column of a table: its name and Spark SQL type."""

    name: str
    type: SqlType

    def ddl(self) -> str:
        """``name TYPE`` as Spark's DDL writes it (backticks only where the name needs them)."""
        name = self.name if IDENTIFIER.match(self.name) else f"`{self.name}`"
        return f"{name} {self.type}"


@dataclass(frozen=True)
class ExpectationSpec:
    """A data-quality expectation gating a table, as declared under the table's ``expectations``.

    The one model of an expectation: the loader builds it, the quality gate evaluates it.
    ``source`` and ``kwargs_source`` name the files that declared the type and (last) changed the
    arguments; ``declared_at`` is the key path (``gold.<name>.expectations.<expectation>``).
    """

    table: str  # layer/name of the table it gates
    name: str
    expectation_type: str  # a Great Expectations type, e.g. expect_column_values_to_not_be_null
    kwargs: Mapping[str, Any]
    severity: Severity
    source: str = field(default="defaults", compare=False)
    description: str = ""
    kwargs_source: str = field(default="defaults", compare=False)
    declared_at: str = field(default="", compare=False)

    @property
    def row_level(self) -> bool:
        """Whether the expectation judges each row (and so can drop the rows it rejects)."""
        return self.expectation_type in ROW_LEVEL_TYPES


@dataclass(frozen=True)
class TableDoc:
    """What a table says about itself: catalog comments, the expectations that gate it, and the
    columns ``medallion maintain`` Z-orders its files by (none: compaction only)."""

    comment: str = ""
    column_comments: Mapping[str, str] = field(default_factory=dict)
    expectations: tuple[ExpectationSpec, ...] = ()
    zorder: tuple[str, ...] = ()


@dataclass(frozen=True)
class BronzeSpec:
    """The bronze table a source lands in: every record kept, as it arrived."""

    table: str
    doc: TableDoc = TableDoc()


@dataclass(frozen=True)
class SourceSpec:
    """Where raw records come from, and the bronze table that keeps them.

    ``alternative_to`` names another source this one can replace (events from Kafka instead of
    files): exactly one of them runs, the ``active`` one, and a table reading the other's bronze
    table reads this one's instead, which must hold at least the same columns.
    """

    name: str
    format: SourceFormat
    bronze: BronzeSpec
    path: str | None = None  # folder under <landing> (files)
    glob: str | None = None  # which files of the folder (files); default *.json, *.csv, *.parquet
    header: tuple[str, ...] = ()  # CSV: the header's columns, read as text
    schema: tuple[Field, ...] = ()  # Parquet: the files' columns
    topics: tuple[str, ...] = ()  # Kafka
    options: Mapping[str, str] = field(default_factory=dict)  # extra reader options (CSV sep, ...)
    alternative_to: str | None = None
    active: bool = True

    @property
    def bronze_key(self) -> str:
        """``bronze/<table>``."""
        return f"{Layer.BRONZE.value}/{self.bronze.table}"

    @property
    def file_glob(self) -> str:
        """Which files of its folder a file source reads: declared, else by format."""
        return self.glob or DEFAULT_GLOBS.get(self.format, "*")

    def bronze_fields(self) -> tuple[Field, ...]:
        """The bronze table's columns, derived from the format."""
        lineage = (Field(SOURCE_FILE, STRING), Field(INGESTED_AT, TIMESTAMP))
        if self.format is SourceFormat.JSON_LINES:
            return (Field("raw", STRING), *lineage)
        if self.format is SourceFormat.CSV:
            return (*(Field(c, STRING) for c in self.header), Field(CORRUPT_RECORD, STRING), *lineage)
        if self.format is SourceFormat.PARQUET:
            return (*self.schema, *lineage)
        return (Field("raw", STRING), Field("key", STRING), Field("topic", STRING),
                Field("partition", INT), Field("offset", BIGINT), Field("kafka_timestamp", TIMESTAMP),
                *lineage)

    @property
    def raw_fields(self) -> tuple[str, ...] | None:
        """The record's field names as silver may take them; None where any name may occur (JSON)."""
        if self.format is SourceFormat.CSV:
            return self.header
        if self.format is SourceFormat.PARQUET:
            return tuple(f.name for f in self.schema)
        return None


@dataclass(frozen=True)
class RuleSpec:
    """A validation rule: rows for which ``predicate`` is false are quarantined with reason ``name``.

    As in a SQL CHECK constraint, a predicate that is null (a column missing or already invalid)
    passes: absence is ``required``'s business, so a row gets one reason per fault.
    ``column`` is set for a rule declared with a column; its reason comes right after the
    column's own missing/invalid reason.
    """

    name: str
    predicate: str
    column: str | None = None


@dataclass(frozen=True)
class ColumnSpec:
    """A typed silver column, taken from the raw record by name (``source``) or by ``expr``.

    ``source`` is a field name (JSON: a dotted path into the object; CSV/Parquet: an input
    column); when neither is given the field has the column's name. ``expr`` is a Spark SQL
    expression over raw fields, each standing for its value as text (null when absent).
    The value converts strictly to ``type`` (JSON: a string column needs a JSON string, a number
    column a JSON number); a value that does not convert, or does not match ``format``, gives
    ``invalid_<name>``. ``required``: an absent, null or blank value gives ``missing_<name>``.
    ``trim``: surrounding whitespace is removed from the kept value.
    """

    name: str
    type: SqlType
    source: str | None = None
    expr: str | None = None
    required: bool = False
    trim: bool = False
    format: str | None = None  # timestamps/dates: iso8601_with_zone, or a Spark datetime pattern
    zone: str | None = None  # time zone of a timestamp text that carries none
    rules: tuple[RuleSpec, ...] = ()

    @property
    def field_name(self) -> str:
        """The raw field the column is taken from when it is not an expression."""
        return self.source or self.name


@dataclass(frozen=True)
class DedupSpec:
    """One row per ``key``: the first by ``order_by`` is kept, the others counted as duplicates."""

    key: tuple[str, ...]
    order_by: tuple[str, ...] = ()
    scope: DedupScope = DedupScope.TABLE


@dataclass(frozen=True)
class EnrichmentSpec:
    """A left join to a dimension: its ``columns`` added, ``defaults`` used where none matches.

    ``join`` pairs a column of the table with a key column of the dimension, in the dimension's key
    order. A default also replaces a null value of a matching row (no row ends up without it).
    """

    dimension: str
    join: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DimensionSpec:
    """A lookup kept from a source's bronze table: its latest row per key.

    Rows with a null or blank key, or failing ``where``, are left out; of the rest, the first by
    ``latest_by`` (each descending) wins. ``trim``: keys are compared after trimming.
    """

    name: str
    source: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    latest_by: tuple[str, ...] = (INGESTED_AT, SOURCE_FILE)
    where: str | None = None
    trim: bool = True


@dataclass(frozen=True)
class SilverSpec:
    """A cleansed table: parse, type, check, deduplicate, enrich; failures to its quarantine."""

    name: str
    input: str  # table key, e.g. bronze/events
    parse: ParseMode
    columns: tuple[ColumnSpec, ...]
    dedup: DedupSpec
    event_time: str | None = None
    watermark: str | None = None  # for its readers' windows; the pipeline's when absent
    raw_column: str = "raw"  # JSON: the input column that holds the text
    rules: tuple[RuleSpec, ...] = ()  # table rules, over several columns
    enrichments: tuple[EnrichmentSpec, ...] = ()
    keep: tuple[str, ...] = (SOURCE_FILE, INGESTED_AT)  # input columns carried over as they are
    python: str | None = None  # module:function applied last to the valid rows; keeps the columns
    doc: TableDoc = TableDoc()

    @property
    def key(self) -> str:
        """``silver/<name>``."""
        return f"{Layer.SILVER.value}/{self.name}"

    @property
    def quarantine_key(self) -> str:
        """``silver/<name>_quarantine``."""
        return f"{self.key}_quarantine"

    def all_rules(self) -> tuple[RuleSpec, ...]:
        """Column rules (in column order), then table rules."""
        return (*(r for c in self.columns for r in c.rules), *self.rules)

    def column_can_be_invalid(self, column: ColumnSpec) -> bool:
        """Whether converting the raw value can fail (text taken by name from CSV cannot)."""
        return not (self.parse is ParseMode.COLUMNS and column.expr is None and column.type.is_string
                    and column.format is None)

    def reasons(self, input_columns: Collection[str] | None = None) -> tuple[str, ...]:
        """Every quarantine reason the table can give, in the order a row's reasons are listed.
        ``input_columns``: its input's, when known (only a CSV source's bronze table has the
        reader's ``_corrupt_record``, so only it gives ``malformed_record``)."""
        malformed = input_columns is None or CORRUPT_RECORD in input_columns
        found: list[str] = [INVALID_UTF8] + (
            [NO_VALUE, INVALID_JSON, NOT_AN_OBJECT] if self.parse is ParseMode.JSON
            else [MALFORMED_RECORD] if malformed else [])
        for column in self.columns:
            if column.required:
                found.append(missing_reason(column.name))
            if self.column_can_be_invalid(column):
                found.append(invalid_reason(column.name))
            found += [r.name for r in column.rules]
        found += [r.name for r in self.rules]
        return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class WindowSpec:
    """An event-time window over ``column``: tumbling (size), sliding (size, slide), session (gap)."""

    kind: WindowKind
    column: str
    size: str | None = None
    slide: str | None = None
    gap: str | None = None

    @property
    def bounds(self) -> tuple[str, str]:
        """Names of the window's start and end columns in the gold table."""
        if self.kind is WindowKind.SESSION:
            return ("session_start", "session_end")
        return ("window_start", "window_end")

    def describe(self) -> str:
        """``tumbling 5 minutes``, ``sliding 10 minutes every 5 minutes``, ``session gap 5 minutes``."""
        if self.kind is WindowKind.SESSION:
            return f"session gap {self.gap}"
        if self.kind is WindowKind.SLIDING:
            return f"sliding {self.size} every {self.slide}"
        return f"tumbling {self.size}"


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate column: ``function`` of ``column`` (none: rows), ``default`` when null."""

    name: str
    function: AggregateFunction
    column: str | None = None
    default: int | float | None = None

    def describe(self) -> str:
        """``sum(amount)``, ``count(*)``, with ``, 0 when none`` for a default."""
        text = f"{self.function.value}({self.column or '*'})"
        return text if self.default is None else f"coalesce({text}, {self.default})"

    def result_type(self, input_type: SqlType | None) -> SqlType:
        """The result's type as Spark gives it (a default does not change it)."""
        if self.function in (AggregateFunction.COUNT, AggregateFunction.COUNT_DISTINCT,
                             AggregateFunction.APPROX_COUNT_DISTINCT):
            return BIGINT
        assert input_type is not None, "sum, min, max and avg need a column"
        if self.function is AggregateFunction.SUM:
            return sum_type(input_type)
        if self.function is AggregateFunction.AVG:
            return avg_type(input_type)
        return input_type


@dataclass(frozen=True)
class JoinSpec:
    """A second stream a gold table joins its input with, matched by time range and equal keys.

    A row of the joined stream (``input``, after ``filter``) matches an input row when the
    ``equal`` columns are equal on both sides and its event time is in
    ``[input row's time - within, input row's time]``, both ends included. The time range and the
    watermarks on both sides bound what the join keeps in state.
    """

    input: str  # table key, e.g. silver/events
    equal: tuple[str, ...]
    within: str  # a Spark duration
    kind: JoinKind = JoinKind.LEFT_OUTER
    filter: str | None = None


@dataclass(frozen=True)
class SelectSpec:
    """An output column of a join: ``left.<column>``, ``right.<column>``, or an expression over
    both with its declared ``type``."""

    name: str
    expr: str
    type: SqlType | None = None  # None: a plain column reference, typed as its input column

    @property
    def reference(self) -> tuple[str, str] | None:
        """``(side, column)`` when the expression is a plain column of one side."""
        found = re.fullmatch(r"(left|right)\.([A-Za-z_][A-Za-z0-9_]*)", self.expr.strip())
        return (found.group(1), found.group(2)) if found else None


@dataclass(frozen=True)
class GoldSpec:
    """An aggregate table: ``input`` filtered, grouped per window, aggregated, kept by ``mode``.

    A Python step (``python``, ``module:function``) replaces the window and aggregates: it gets the
    input stream (after ``filter``) and returns ``columns``; with mode update it also names its
    MERGE ``keys``.

    A ``join`` also replaces them: the input (after ``filter``, as ``left``) joined with a second
    stream (as ``right``), the output columns declared in ``select``, kept by MERGE on ``keys``
    (mode update); of several rows per key the one greatest by ``latest_by`` stays.
    """

    name: str
    input: str  # table key, e.g. silver/events
    mode: OutputMode
    window: WindowSpec | None = None
    group_by: tuple[str, ...] = ()
    aggregates: tuple[AggregateSpec, ...] = ()
    filter: str | None = None
    watermark: str | None = None  # the input table's when absent
    python: str | None = None
    columns: tuple[Field, ...] = ()  # with python: what the step returns
    keys: tuple[str, ...] = ()  # with python or join, mode update: the MERGE keys
    join: JoinSpec | None = None
    select: tuple[SelectSpec, ...] = ()  # with join: the output columns
    latest_by: tuple[str, ...] = ()  # with join: of several rows per key, the greatest stays
    doc: TableDoc = TableDoc()

    @property
    def key(self) -> str:
        """``gold/<name>``."""
        return f"{Layer.GOLD.value}/{self.name}"

    @property
    def prune_by(self) -> str | None:
        """The MERGE key whose batch range bounds the MERGE's scan of the table: the window's
        start (mode update over windows); none for joins and Python steps."""
        if self.mode is not OutputMode.UPDATE or self.window is None or self.join is not None \
                or self.python is not None:
            return None
        return self.window.bounds[0]

    @property
    def merge_keys(self) -> tuple[str, ...]:
        """Columns a MERGE matches on (mode update): window bounds and grouping columns."""
        if self.mode is not OutputMode.UPDATE:
            return ()
        if self.python is not None or self.join is not None:
            return self.keys
        assert self.window is not None
        return (*self.window.bounds, *self.group_by)


@dataclass(frozen=True)
class TableDecl:
    """A table the pipeline writes, derived from its declaration: what the engine, the catalog and
    ``medallion status`` need (its path ``<lakehouse>/<layer>/<name>``, checkpoint
    ``<lakehouse>/_checkpoints/<layer>/<name>``, schema, comments, gates, keys)."""

    layer: Layer
    name: str
    role: TableRole
    fields: tuple[Field, ...]
    doc: TableDoc = TableDoc()
    time_column: str | None = INGESTED_AT  # its newest event time (freshness) is read from this
    mode: OutputMode = OutputMode.APPEND
    merge_keys: tuple[str, ...] = ()
    quarantine: str | None = None  # key of the table its rejected rows go to
    declared_at: str = ""  # key path of the declaration, for messages

    @property
    def key(self) -> str:
        """``<layer>/<name>``, as users and logs say it."""
        return f"{self.layer.value}/{self.name}"

    @property
    def qualified_name(self) -> str:
        """Catalog name, ``<layer>.<name>``."""
        return f"{self.layer.value}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        """The columns' names, in order."""
        return tuple(f.name for f in self.fields)

    @property
    def schema_ddl(self) -> str:
        """The schema as Spark DDL, ``name TYPE, ...``."""
        return ", ".join(f.ddl() for f in self.fields)

    def column_type(self, name: str) -> SqlType | None:
        """The type of column ``name``; None when there is no such column."""
        return next((f.type for f in self.fields if f.name == name), None)


QUARANTINE_REASONS = Field("reasons", STRING_ARRAY)
QUARANTINED_AT = Field("quarantined_at", TIMESTAMP)


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline, as declared in ``conf/pipelines/<name>.yaml`` (and its overlay)."""

    name: str
    file: str
    watermark: str
    sources: tuple[SourceSpec, ...] = ()
    dimensions: tuple[DimensionSpec, ...] = ()
    silver: tuple[SilverSpec, ...] = ()
    gold: tuple[GoldSpec, ...] = ()
    views: tuple[ViewSpec, ...] = ()  # catalog views over this pipeline's tables
    description: str = ""
    # dotted key -> the file it came from (a key an overlay set names the overlay)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def source_of(self, key: str) -> str:
        """The file that declared ``key`` (or its nearest declared parent)."""
        while key:
            if key in self.origins:
                return self.origins[key]
            key = key.rpartition(".")[0]
        return self.file

    def declared_at(self, key: str) -> str:
        """``key`` and the file that declares it (an overlay that set it, else the pipeline's own
        file, under whichever configuration folder was loaded), as messages name a declaration."""
        return f"{key} in {self.source_of(key)}"

    def source(self, name: str) -> SourceSpec:
        """The source called ``name``."""
        return next(s for s in self.sources if s.name == name)

    def dimension(self, name: str) -> DimensionSpec:
        """The dimension called ``name``."""
        return next(d for d in self.dimensions if d.name == name)

    def watermark_of(self, gold: GoldSpec) -> str:
        """The lateness a gold table tolerates: its own, else its silver input's, else the pipeline's."""
        silver = next((s for s in self.silver if s.key == gold.input), None)
        return gold.watermark or (silver.watermark if silver else None) or self.watermark

    def alternatives_of(self, bronze_key: str) -> tuple[str, ...]:
        """Bronze tables that stand in for ``bronze_key`` when their source is chosen instead."""
        primary = next((s for s in self.sources if s.bronze_key == bronze_key), None)
        if primary is None:
            return ()
        return tuple(s.bronze_key for s in self.sources if s.alternative_to == primary.name)

    def tables(self) -> tuple[TableDecl, ...]:
        """Every table the pipeline writes, bronze, silver (and quarantines), gold, in that order.

        Assumes a checked spec (:func:`medallion.pipeline.validate.validate`): references resolve.
        """
        found: dict[str, TableDecl] = {t.key: t for t in self.tables_of_sources()}
        for silver in self.silver:
            for decl in self.tables_of_silver(silver, found):
                found[decl.key] = decl
        for gold in self.gold:
            for decl in self.tables_of_gold(gold, found):
                found[decl.key] = decl
        return tuple(found.values())

    def tables_of_sources(self) -> tuple[TableDecl, ...]:
        """The bronze tables, one per source."""
        return tuple(TableDecl(Layer.BRONZE, s.bronze.table, TableRole.BRONZE, s.bronze_fields(),
                               s.bronze.doc, declared_at=f"sources.{s.name}.bronze")
                     for s in self.sources)

    def table(self, key: str) -> TableDecl:
        """The table ``<layer>/<name>`` (or ``<layer>.<name>``); KeyError if the pipeline has none."""
        wanted = key.replace(".", "/", 1)
        for decl in self.tables():
            if decl.key == wanted:
                return decl
        raise KeyError(f"pipeline {self.name} has no table {key!r}")

    def silver_fields(self, silver: SilverSpec, known: Mapping[str, TableDecl]) -> tuple[Field, ...]:
        """A silver table's columns: declared, then enrichments', then the kept input columns."""
        fields = [Field(c.name, c.type) for c in silver.columns]
        for enrichment in silver.enrichments:
            bronze = known[self.source(self.dimension(enrichment.dimension).source).bronze_key]
            for name in enrichment.columns:
                fields.append(Field(name, bronze.column_type(name) or STRING))
        source = known[silver.input]
        fields += [Field(name, source.column_type(name) or STRING) for name in silver.keep]
        return tuple(fields)

    def tables_of_silver(self, silver: SilverSpec,
                         known: Mapping[str, TableDecl]) -> tuple[TableDecl, TableDecl]:
        """A silver table and its quarantine, given the tables already derived (its inputs')."""
        fields = self.silver_fields(silver, known)
        by_name = {f.name: f for f in fields}
        source = known[silver.input]
        if silver.parse is ParseMode.JSON:
            record: tuple[Field, ...] = (Field(silver.raw_column, STRING),)
        else:
            record = tuple(f for f in source.fields if f.name not in silver.keep)
        record_names = {f.name for f in record}
        # The key as far as it could be read: the quarantine can be searched by it.
        keys = tuple(by_name[k] for k in silver.dedup.key if k not in record_names)
        kept = tuple(by_name[k] for k in silver.keep)
        table = TableDecl(Layer.SILVER, silver.name, TableRole.SILVER, fields, silver.doc,
                          time_column=silver.event_time or INGESTED_AT,
                          quarantine=silver.quarantine_key, declared_at=f"silver.{silver.name}")
        quarantine = TableDecl(
            Layer.SILVER, f"{silver.name}_quarantine", TableRole.QUARANTINE,
            (*record, *keys, QUARANTINE_REASONS, *kept),
            TableDoc(comment=f"Every row of {silver.input} that is not a valid row of {silver.key}, "
                             "with the reasons it failed."),
            time_column=INGESTED_AT if INGESTED_AT in silver.keep else None,
            declared_at=f"silver.{silver.name}")
        return table, quarantine

    def gold_fields(self, gold: GoldSpec, known: Mapping[str, TableDecl]) -> tuple[Field, ...]:
        """A gold table's columns, derived from window, grouping and aggregates (or declared)."""
        if gold.python is not None:
            return gold.columns
        source = known[gold.input]
        if gold.join is not None:
            sides = {"left": source, "right": known[gold.join.input]}
            fields = []
            for column in gold.select:
                reference = column.reference
                if column.type is not None:
                    fields.append(Field(column.name, column.type))
                elif reference is not None:
                    side, name = reference
                    fields.append(Field(column.name, sides[side].column_type(name) or STRING))
            return tuple(fields)
        assert gold.window is not None
        start, end = gold.window.bounds
        bounds = (Field(start, TIMESTAMP), Field(end, TIMESTAMP))
        groups = tuple(Field(g, source.column_type(g) or STRING) for g in gold.group_by)
        aggregates = tuple(
            Field(a.name, a.result_type(source.column_type(a.column) if a.column else None))
            for a in gold.aggregates)
        if gold.window.kind is WindowKind.SESSION:
            return (*groups, *bounds, *aggregates)
        return (*bounds, *groups, *aggregates)

    def _joined_time(self, gold: GoldSpec, fields: tuple[Field, ...]) -> str:
        """A join's time column: the one selected as its input's event time (else the first)."""
        silver = next((s for s in self.silver if s.key == gold.input), None)
        event_time = silver.event_time if silver is not None else None
        return next((s.name for s in gold.select if s.reference == ("left", event_time)),
                    fields[0].name)

    def tables_of_gold(self, gold: GoldSpec, known: Mapping[str, TableDecl]) -> tuple[TableDecl, ...]:
        """A gold table, and its quarantine when an expectation drops rows."""
        fields = self.gold_fields(gold, known)
        drops = any(e.severity is Severity.DROP for e in gold.doc.expectations)
        time_column = gold.window.bounds[1] if gold.window else self._joined_time(gold, fields)
        table = TableDecl(Layer.GOLD, gold.name, TableRole.GOLD, fields, gold.doc,
                          time_column=time_column, mode=gold.mode, merge_keys=gold.merge_keys,
                          quarantine=f"{gold.key}_quarantine" if drops else None,
                          declared_at=f"gold.{gold.name}")
        if not drops:
            return (table,)
        quarantine = TableDecl(
            Layer.GOLD, f"{gold.name}_quarantine", TableRole.QUARANTINE,
            (*fields, QUARANTINE_REASONS, QUARANTINED_AT),
            TableDoc(comment=f"Rows of {gold.key} that a quality gate dropped, with the expectations "
                             "they failed."),
            time_column=QUARANTINED_AT.name, declared_at=f"gold.{gold.name}")
        return table, quarantine
