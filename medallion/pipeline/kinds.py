"""The closed sets a declaration chooses from (layers, formats, modes, windows, severities) and
the names the engine gives: quarantine reasons, bookkeeping columns."""

from __future__ import annotations

import re
from enum import Enum

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
    # one text column holds a Debezium change event in JSON: columns are read from the row it
    # carries (``after``; ``before`` for a delete), ``__<field>`` from the event (not_a_row_change)
    DEBEZIUM = "debezium"

    @property
    def reads_json(self) -> bool:
        """Whether the raw record is one text column of JSON."""
        return self is not ParseMode.COLUMNS


# Debezium: a column whose field is ``__<path>`` reads the event, not its row: ``__op``,
# ``__ts_ms``, ``__source_<field>`` (``__source_lsn``), ``__transaction_<field>``, as Debezium's
# ExtractNewRecordState transform names the event's fields it adds to a row.
DEBEZIUM_EVENT_PREFIX = "__"
DEBEZIUM_OPERATIONS = ("c", "u", "d", "r")  # create, update, delete, read (a snapshot's row)
DEBEZIUM_DELETE = "d"


def debezium_event_path(field_name: str) -> str | None:
    """The JSON path in a Debezium event of a ``__<path>`` field (None: a field of the row)."""
    if not field_name.startswith(DEBEZIUM_EVENT_PREFIX):
        return None
    rest = field_name[len(DEBEZIUM_EVENT_PREFIX):]
    for block in ("source", "transaction"):
        if rest.startswith(f"{block}_"):
            return f"$.{block}.{rest[len(block) + 1:]}"
    return f"$.{rest}"


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


class Refresh(str, Enum):
    """How a window aggregate's table is brought up to date with new input."""

    # Spark's streaming aggregation: each window's running value in the query's state store
    STATEFUL = "stateful"
    # no state: each batch's windows recomputed from the input table and replaced in one commit
    RECOMPUTE = "recompute"


class JoinKind(str, Enum):
    """Which rows of a stream-stream join's input are written."""

    INNER = "inner"  # matched rows only
    LEFT_OUTER = "left_outer"  # every input row; no match: the joined columns null, once the


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
    CHANGES = "changes"  # a change flow's applied changes
    GOLD = "gold"


# Quarantine reasons the parse step gives, beside missing_<column> / invalid_<column> and rule names.
INVALID_UTF8 = "invalid_utf8"  # the raw record's text is not UTF-8 (or holds U+FFFD in its place)


NO_VALUE = "no_value"  # JSON: the raw column is null, as in a Kafka tombstone (a record without a value)


INVALID_JSON = "invalid_json"


NOT_AN_OBJECT = "not_an_object"


NOT_A_ROW_CHANGE = "not_a_row_change"  # Debezium: an event whose op is not c, u, d or r (t, m, none)


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
