"""The tables of the ``events`` pipeline: where each lives, its schema, and its catalog name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from medallion.config import Settings
from medallion.pipeline.model import TableDecl

if TYPE_CHECKING:  # PySpark is imported only when a schema is asked for: no-Spark commands use this
    from pyspark.sql.types import StructType

AMOUNT_TYPE = "DECIMAL(18,4)"
TOTAL_TYPE = "DECIMAL(28,4)"  # what Spark's sum() of AMOUNT_TYPE returns


@dataclass(frozen=True)
class TableSpec:
    """A Delta table at ``<lakehouse>/<layer>/<name>``, registered as ``<layer>.<name>``."""

    layer: str
    name: str
    schema_ddl: str
    comment: str
    folder: str | None = None  # folder under the lakehouse when it differs from the layer

    @property
    def qualified_name(self) -> str:
        """Catalog name, ``<layer>.<name>``."""
        return f"{self.layer}.{self.name}"

    @property
    def key(self) -> str:
        """Path-style name, ``<layer>/<name>``, as users and logs say it."""
        return f"{self.layer}/{self.name}"

    @property
    def column_names(self) -> list[str]:
        """The columns' names, read from the DDL without a Spark session."""
        names, depth, start = [], 0, 0
        for i, char in enumerate(self.schema_ddl + ","):
            if char in "(<":
                depth += 1
            elif char in ")>":
                depth -= 1
            elif char == "," and depth == 0:
                names.append(self.schema_ddl[start:i].split()[0].strip("`"))
                start = i + 1
        return names

    @property
    def schema(self) -> StructType:
        """The schema as a ``StructType``."""
        from pyspark.sql.types import StructType

        schema = StructType.fromDDL(self.schema_ddl)
        assert isinstance(schema, StructType)
        return schema

    @classmethod
    def from_decl(cls, decl: TableDecl) -> TableSpec:
        """The spec of a table a pipeline declares (same path, checkpoint and catalog name)."""
        return cls(decl.layer.value, decl.name, decl.schema_ddl, decl.doc.comment)

    def path(self, settings: Settings) -> str:
        """Location of the table's Delta log and files."""
        return settings.table_path(self.folder or self.layer, self.name)

    def checkpoint(self, settings: Settings) -> str:
        """Checkpoint of the streaming query that writes this table."""
        return settings.checkpoint_path(self.key)


BRONZE_EVENTS = TableSpec(
    "bronze", "events",
    "raw STRING, source_file STRING, ingested_at TIMESTAMP",
    "Every line of the events landing files, as written, broken lines included; append-only.",
)
BRONZE_EVENTS_KAFKA = TableSpec(
    "bronze", "events_kafka",
    "raw STRING, key STRING, topic STRING, partition INT, offset BIGINT, "
    "kafka_timestamp TIMESTAMP, "
    "source_file STRING, ingested_at TIMESTAMP",
    "Every record of the events topics: the value as text (raw), key, topic, partition, offset and "
    "Kafka timestamp; source_file is kafka://topic/partition/offset. Append-only.",
)
BRONZE_CUSTOMERS = TableSpec(
    "bronze", "customers",
    "customer_id STRING, customer_name STRING, segment STRING, _corrupt_record STRING, "
    "source_file STRING, ingested_at TIMESTAMP",
    "The customers dimension as ingested from CSV; append-only, latest row per id wins.",
)
SILVER_EVENTS = TableSpec(
    "silver", "events",
    f"event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, amount {AMOUNT_TYPE}, "
    "customer_name STRING, segment STRING, source_file STRING, ingested_at TIMESTAMP",
    "Valid events, typed, deduplicated by event_id, enriched with the customer's name and segment.",
)
SILVER_QUARANTINE = TableSpec(
    "silver", "events_quarantine",
    "raw STRING, event_id STRING, reasons ARRAY<STRING>, source_file STRING, ingested_at TIMESTAMP",
    "Every bronze line that is not a valid event, with the reasons it failed.",
)
GOLD_EVENT_COUNTS_5M = TableSpec(
    "gold", "event_counts_5m",
    f"window_start TIMESTAMP, window_end TIMESTAMP, event_type STRING, event_count BIGINT, "
    f"total_amount {TOTAL_TYPE}",
    "Tumbling 5-minute windows per event type; open windows updated in place.",
)
GOLD_USER_ACTIVITY_SLIDING = TableSpec(
    "gold", "user_activity_sliding",
    "window_start TIMESTAMP, window_end TIMESTAMP, user_id STRING, event_count BIGINT",
    "10-minute windows sliding every 5 minutes per user; open windows updated in place.",
)
GOLD_USER_SESSIONS = TableSpec(
    "gold", "user_sessions",
    f"user_id STRING, session_start TIMESTAMP, session_end TIMESTAMP, event_count BIGINT, "
    f"total_amount {TOTAL_TYPE}",
    "Sessions with a 5-minute gap per user, appended once the watermark has closed them.",
)
GOLD_SEGMENT_REVENUE_1H = TableSpec(
    "gold", "segment_revenue_1h",
    f"window_start TIMESTAMP, window_end TIMESTAMP, segment STRING, purchase_count BIGINT, "
    f"revenue {TOTAL_TYPE}",
    "Tumbling 1-hour windows of purchases per customer segment; open windows updated in place.",
)
SILVER_BATCH_METRICS = TableSpec(
    "monitoring", "silver_batches",
    "table STRING, query_id STRING, batch_id BIGINT, rows_in BIGINT, quarantined BIGINT, "
    "duplicates_removed BIGINT, rows_out BIGINT, recorded_at TIMESTAMP",
    "What each silver micro-batch did: rows read, quarantined, duplicates removed, rows written.",
    folder="_monitoring",
)
QUALITY_RESULTS = TableSpec(
    "quality", "results",
    "run_id STRING, query_id STRING, batch_id BIGINT, table STRING, expectation STRING, "
    "expectation_type STRING, severity STRING, success BOOLEAN, unexpected_count BIGINT, "
    "element_count BIGINT, observed_value STRING, result_json STRING, validated_at TIMESTAMP",
    "Every expectation checked on every micro-batch: what was observed, and whether it passed.",
)
QUERY_PROGRESS = TableSpec(
    "monitoring", "query_progress",
    "query_name STRING, query_id STRING, run_id STRING, batch_id BIGINT, batch_timestamp TIMESTAMP, "
    "num_input_rows BIGINT, input_rows_per_second DOUBLE, processed_rows_per_second DOUBLE, "
    "batch_duration_ms BIGINT, add_batch_ms BIGINT, watermark TIMESTAMP, max_event_time TIMESTAMP, "
    "state_rows BIGINT, state_memory_bytes BIGINT, rows_dropped_by_watermark BIGINT, "
    "progress_json STRING, recorded_at TIMESTAMP",
    "Every micro-batch of every streaming query: rows, rates, durations, watermark, state.",
    folder="_monitoring",
)
RUN_OUTCOMES = TableSpec(
    "monitoring", "runs",
    "pipeline_run STRING, table STRING, trigger STRING, started_at TIMESTAMP, finished_at TIMESTAMP, "
    "succeeded BOOLEAN, rows_in BIGINT, rows_out BIGINT, error STRING",
    "How each table's query ended in each run of the pipeline.",
    folder="_monitoring",
)

ALL_TABLES: tuple[TableSpec, ...] = (
    BRONZE_EVENTS, BRONZE_EVENTS_KAFKA, BRONZE_CUSTOMERS, SILVER_EVENTS, SILVER_QUARANTINE,
    GOLD_EVENT_COUNTS_5M, GOLD_USER_ACTIVITY_SLIDING, GOLD_USER_SESSIONS, GOLD_SEGMENT_REVENUE_1H,
    SILVER_BATCH_METRICS, QUALITY_RESULTS, QUERY_PROGRESS, RUN_OUTCOMES,
)


def lakehouse_tables(settings: Settings) -> tuple[TableSpec, ...]:
    """Every table of the lakehouse: each one every pipeline declares (with the quarantines its
    declaration derives), then the engine's own (:data:`ALL_TABLES` that no pipeline declares:
    monitoring and quality results)."""
    found = {decl.key: TableSpec.from_decl(decl)
             for pipeline in settings.pipelines for decl in pipeline.tables()}
    return (*found.values(), *(spec for spec in ALL_TABLES if spec.key not in found))


def time_columns(settings: Settings) -> dict[str, str | None]:
    """The column each table's newest event time is read from: declared tables' derived ones,
    then the engine's own tables'."""
    declared = {decl.key: decl.time_column
                for pipeline in settings.pipelines for decl in pipeline.tables()}
    return {**ENGINE_TIME_COLUMNS, **declared}


ENGINE_TIME_COLUMNS: dict[str, str | None] = {
    "monitoring/silver_batches": "recorded_at",
    "monitoring/query_progress": "recorded_at",
    "monitoring/runs": "finished_at",
    "quality/results": "validated_at",
}

# What each run records about itself (timings, rates, outcomes): these differ between two runs that
# leave every other table equal, and every run, even one with nothing new, appends to them.
RUN_RECORDS: tuple[TableSpec, ...] = (QUERY_PROGRESS, RUN_OUTCOMES)


def quarantine_of(spec: TableSpec) -> TableSpec:
    """Where rows a quality gate drops from ``spec`` go: ``<layer>/<name>_quarantine``.

    ``silver/events`` has its own (shared with parsing); other tables get the table's columns plus
    the ``reasons`` (names of the failed expectations) and when the row was quarantined.
    """
    if spec == SILVER_EVENTS:
        return SILVER_QUARANTINE
    return TableSpec(
        spec.layer, f"{spec.name}_quarantine",
        f"{spec.schema_ddl}, reasons ARRAY<STRING>, quarantined_at TIMESTAMP",
        f"Rows of {spec.key} that a quality gate dropped, with the expectations they failed.",
        folder=spec.folder,
    )


def find_table(name: str) -> TableSpec:
    """The spec named ``layer/name`` or ``layer.name``."""
    wanted = name.replace("/", ".")
    for spec in ALL_TABLES:
        if spec.qualified_name == wanted:
            return spec
    known = ", ".join(spec.key for spec in ALL_TABLES)
    raise KeyError(f"no table {name!r} (known: {known})")


def known_tables() -> dict[str, TableSpec]:
    """Every table by its catalog name, ``<layer>.<name>``."""
    return {spec.qualified_name: spec for spec in ALL_TABLES}


def column_names(spec: TableSpec) -> list[str]:
    """Top-level column names of ``spec``, read from its DDL without a JVM."""
    names, depth, start = [], 0, 0
    ddl = spec.schema_ddl + ","
    for position, char in enumerate(ddl):
        if char in "(<":
            depth += 1
        elif char in ")>":
            depth -= 1
        elif char == "," and depth == 0:
            names.append(ddl[start:position].split()[0].strip("`"))
            start = position + 1
    return names
