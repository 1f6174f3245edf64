"""A pipeline's declared parts as typed, frozen objects: sources, bronze, silver, dimensions,
gold, expectations and comments (the whole: :mod:`medallion.pipeline.spec`)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from medallion.pipeline.kinds import (
    CORRUPT_RECORD,
    DEFAULT_GLOBS,
    IDENTIFIER,
    INGESTED_AT,
    INVALID_JSON,
    INVALID_UTF8,
    MALFORMED_RECORD,
    NO_VALUE,
    NOT_A_ROW_CHANGE,
    NOT_AN_OBJECT,
    ROW_LEVEL_TYPES,
    SOURCE_FILE,
    AggregateFunction,
    DedupScope,
    JoinKind,
    Layer,
    OutputMode,
    ParseMode,
    Refresh,
    Severity,
    SourceFormat,
    WindowKind,
    invalid_reason,
    missing_reason,
)
from medallion.pipeline.types import (
    BIGINT,
    INT,
    STRING,
    TIMESTAMP,
    SqlType,
    avg_type,
    sum_type,
)


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
    """What a table says about itself: catalog comments, the expectations that gate it, and how
    ``medallion maintain`` lays out its files: Z-ordered by ``zorder``, or clustered by
    ``cluster_by`` (Delta's liquid clustering; one or the other; none: compaction only)."""

    comment: str = ""
    column_comments: Mapping[str, str] = field(default_factory=dict)
    expectations: tuple[ExpectationSpec, ...] = ()
    zorder: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()


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


DELETED = "_deleted"  # a change flow's change rows: whether the change deletes its key
VALID_FROM = "valid_from"  # SCD type 2: the sequence of the change that started the version
VALID_TO = "valid_to"  # SCD type 2: the sequence of the change that ended it; null while current
IS_CURRENT = "is_current"  # SCD type 2: valid_to is null
DELETE_UNKNOWN = "delete_when_unknown"  # the quarantine reason of a change delete_when gives null for


@dataclass(frozen=True)
class ChangesSpec:
    """A change flow: each row is a change of the row with ``keys``, ordered among that key's
    changes by ``sequence_by``, deleting it when ``delete_when`` holds. SCD type 1 keeps each
    key's latest row; type 2 its history, a new version when a ``track_history`` column changes
    (every column when None; ``track_history_except``: every column but those).

    ``snapshot``: each row is a key's row in a full export, ``sequence_by`` its one column the
    export's position; the changes are what differs from the export before (a key it lacks is
    deleted).

    ``keep_deletes_for`` (type 1): how long after it was ingested maintenance keeps the delete of
    a deleted key, which refuses the key's older changes; None: for good."""

    keys: tuple[str, ...]
    sequence_by: tuple[str, ...]
    delete_when: str | None = None
    scd: int = 1
    track_history: tuple[str, ...] | None = None
    track_history_except: tuple[str, ...] = ()
    snapshot: bool = False
    keep_deletes_for: str | None = None  # type 1: how long maintenance keeps a key's delete

    @property
    def order_key(self) -> str:
        """The declaration's key that orders the changes."""
        return "snapshot_by" if self.snapshot else "sequence_by"


@dataclass(frozen=True)
class EnrichmentSpec:
    """A left join to a dimension: its ``columns`` added, ``defaults`` used where none matches.

    ``join`` pairs a column of the table with a key column of the dimension, in the dimension's key
    order. A default also replaces a null value of a matching row (no row ends up without it).
    """

    dimension: str
    join: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]  # as the table names them
    defaults: Mapping[str, Any] = field(default_factory=dict)  # by the table's names
    renamed: Mapping[str, str] = field(default_factory=dict)  # table's name -> dimension's column
    as_of: str | None = None  # a TIMESTAMP column: the version valid at its time (SCD type 2)

    def source_of(self, column: str) -> str:
        """The dimension's column that the table's ``column`` takes."""
        return self.renamed.get(column, column)


@dataclass(frozen=True)
class DimensionSpec:
    """A lookup kept from a source's bronze table: its latest row per key; or a silver ``table``
    kept by a change flow, its rows as they stand (SCD type 2: each key's versions).

    From a source: rows with a null or blank key, or failing ``where``, are left out; of the rest,
    the first by ``latest_by`` (each descending) wins. ``trim``: keys are compared after trimming.
    From a table: ``key`` is its change flow's keys, and any of its columns can be taken.
    """

    name: str
    source: str | None
    key: tuple[str, ...]
    columns: tuple[str, ...]
    table: str | None = None  # silver/<name>, a change flow's table
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
    changes: ChangesSpec | None = None  # a change flow: rows are changes applied by key (SCD 1/2)

    @property
    def key(self) -> str:
        """``silver/<name>``."""
        return f"{Layer.SILVER.value}/{self.name}"

    @property
    def changes_key(self) -> str:
        """``silver/<name>_changes``: a change flow's applied changes, one per key and sequence."""
        return f"{self.key}_changes"

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
        found: list[str] = [INVALID_UTF8]
        if self.parse.reads_json:
            found += [NO_VALUE, INVALID_JSON, NOT_AN_OBJECT]
        if self.parse is ParseMode.DEBEZIUM:
            found.append(NOT_A_ROW_CHANGE)
        elif malformed and self.parse is ParseMode.COLUMNS:
            found.append(MALFORMED_RECORD)
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
    # with window: how new input reaches the table (the loader's default: recompute in mode update)
    refresh: Refresh = Refresh.STATEFUL
    doc: TableDoc = TableDoc()

    @property
    def recomputed(self) -> bool:
        """Whether its windows are recomputed from the input instead of kept in a state store."""
        return self.window is not None and self.refresh is Refresh.RECOMPUTE

    @property
    def recomputed_in_place(self) -> bool:
        """Whether what its checkpoint cannot carry on from recomputes the table in place (mode
        update); an append-mode table's rows were final when appended, and stay."""
        return self.recomputed and self.mode is OutputMode.UPDATE

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
