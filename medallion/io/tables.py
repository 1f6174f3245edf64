"""Tables as the engine handles them: where each lives, its schema, and its catalog name.

The tables a pipeline writes are its declaration's (:meth:`TableSpec.from_decl`); the engine's own
(run records, quality results) are defined here, the one place that knows them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from medallion.pipeline.spec import TableDecl
from medallion.project import Settings, declared_tables

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # PySpark is imported only when a schema is asked for: no-Spark commands use this
    from pyspark.sql.types import StructType

@dataclass(frozen=True)
class TableSpec:
    """A Delta table at ``<lakehouse>/<layer>/<name>``, registered as ``<layer>.<name>``."""

    layer: str
    name: str
    schema_ddl: str
    comment: str
    folder: str | None = None  # folder under the lakehouse when it differs from the layer
    deletion_vectors: bool = False  # made with deletion vectors (TableDecl.deletion_vectors)

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
        return cls(decl.layer.value, decl.name, decl.schema_ddl, decl.doc.comment,
                   deletion_vectors=decl.deletion_vectors)

    def path(self, settings: Settings) -> str:
        """Location of the table's Delta log and files."""
        return settings.table_path(self.folder or self.layer, self.name)

    def checkpoint(self, settings: Settings) -> str:
        """Checkpoint of the streaming query that writes this table."""
        return settings.checkpoint_path(self.key)


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

# The engine's own tables, in the catalog schemas pipeline.views.ENGINE_SCHEMAS reserves for them.
ENGINE_TABLES: tuple[TableSpec, ...] = (
    SILVER_BATCH_METRICS, QUALITY_RESULTS, QUERY_PROGRESS, RUN_OUTCOMES,
)


def lakehouse_tables(settings: Settings) -> tuple[TableSpec, ...]:
    """Every table of the lakehouse: each one every pipeline declares (with the quarantines its
    declaration derives), then the engine's own (:data:`ENGINE_TABLES`: monitoring and quality
    results)."""
    declared = tuple(TableSpec.from_decl(decl)
                     for decl in declared_tables(settings.pipelines).values())
    return (*declared, *ENGINE_TABLES)


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

    The table's columns plus the ``reasons`` (names of the failed expectations) and when the row
    was quarantined. (A silver table's declaration derives its own, shared with parsing.)
    """
    return TableSpec(
        spec.layer, f"{spec.name}_quarantine",
        f"{spec.schema_ddl}, reasons ARRAY<STRING>, quarantined_at TIMESTAMP",
        f"Rows of {spec.key} that a quality gate dropped, with the expectations they failed.",
        folder=spec.folder,
    )


# The folders of the lakehouse whose tables pipelines declare (the engine's own are fixed).
PIPELINE_LAYERS = ("bronze", "silver", "gold")


def undeclared_tables(settings: Settings) -> list[str]:
    """The Delta tables under ``<lakehouse>/<layer>/`` (bronze, silver, gold) that no pipeline
    declares any more (``<layer>/<name>``): a table removed from its declaration, or renamed in
    it, stays where it was with its data, checkpoint and catalog entry, and no run updates it.
    Listed without Spark (the file system, or boto3 for S3); a listing that fails is logged and
    gives none, since what it is for must not stop a run or ``status``."""
    root = settings.paths.lakehouse.rstrip("/")
    # <folder>/<name> of every declared table (the engine's own keep theirs under other folders)
    declared = {f"{spec.folder or spec.layer}/{spec.name}" for spec in lakehouse_tables(settings)}
    declared |= settings.set_aside
    found = []
    try:
        for layer in PIPELINE_LAYERS:
            found += [f"{layer}/{name}" for name in _delta_tables_in(
                settings, f"{root}/{layer}",
                skip={key.partition("/")[2] for key in declared if key.startswith(f"{layer}/")})]
    except Exception as exc:  # noqa: BLE001 - storage errors of every kind
        log.info("could not list the lakehouse's tables under %s: %s", root, exc)
        return []
    return found


def _delta_tables_in(settings: Settings, folder: str, skip: set[str]) -> list[str]:
    """The names of the folders right under ``folder``, but ``skip``, that hold a Delta log."""
    from medallion.io.s3 import is_s3, parse_s3, s3_client

    if not is_s3(folder):
        local = folder.removeprefix("file://").removeprefix("file:")
        try:
            names = sorted(entry.name for entry in os.scandir(local) if entry.is_dir())
        except FileNotFoundError:
            return []
        return [name for name in names
                if name not in skip and os.path.isdir(os.path.join(local, name, "_delta_log"))]
    where = parse_s3(folder)
    client = s3_client(settings.s3)
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=where.bucket, Prefix=where.key() + "/", Delimiter="/"):
        for common in page.get("CommonPrefixes", ()):
            name = common["Prefix"].rstrip("/").rpartition("/")[2]
            if name not in skip and client.list_objects_v2(
                    Bucket=where.bucket, MaxKeys=1,
                    Prefix=where.key(name, "_delta_log") + "/").get("KeyCount", 0):
                found.append(name)
    return sorted(found)
