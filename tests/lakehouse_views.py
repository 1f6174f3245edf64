"""Reading a lakehouse's tables into plain Python values, for comparisons in tests."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from medallion.io.deltaread import arrow_table, has_deletion_vectors
from medallion.io.tables import SILVER_BATCH_METRICS, TableSpec
from medallion.pipeline.kinds import INGESTED_AT, TableRole
from medallion.project import Settings
from tests.events_tables import (
    BRONZE_EVENTS,
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
    SILVER_EVENTS,
    SILVER_QUARANTINE,
)
from tests.reference import Lakehouse


def rows(spark: SparkSession, settings: Settings, spec: TableSpec, *columns: str) -> list[tuple]:
    """The table's rows as tuples of ``columns`` (all columns if none named)."""
    frame = spark.read.format("delta").load(spec.path(settings))
    if columns:
        frame = frame.select(*columns)
    return [tuple(row) for row in frame.collect()]


def _normal(value: object) -> object:
    return value.normalize() if isinstance(value, Decimal) else value


def _hashable(value: object) -> object:
    """A delta-rs value as a comparable one: structs and lists as tuples, decimals normalized."""
    if isinstance(value, dict):
        return tuple(_hashable(v) for v in value.values())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return _normal(value)


def table_rows(path: str, columns: Sequence[str] = ()) -> Counter:
    """The Delta table at ``path`` as a multiset of rows of ``columns`` (all if none named).

    Read with delta-rs, not the test's Spark session: a reader of its own for comparing
    lakehouses, and about 0.05 s for a small lakehouse's tables where Spark takes about 1 s. A
    table with deletion vectors (a change flow's) is read by delta-rs's scan, which applies them.
    """
    delta = DeltaTable(path)
    if has_deletion_vectors(delta):
        table = arrow_table(delta.scan(columns=list(columns) or None))
    else:
        table = delta.to_pyarrow_table(columns=list(columns) or None)
    return Counter(tuple(_hashable(v) for v in row.values()) for row in table.to_pylist())


def snapshot(settings: Settings, also: tuple[str, ...] = ()) -> dict[str, Counter]:
    """Every table of events, and of the pipelines named in `also`, as a multiset of rows,
    without the columns that differ between runs (ingestion times, which file a duplicate's
    kept copy came from)."""
    tables: dict[str, tuple[TableSpec, tuple[str, ...]]] = {
        "bronze/events": (BRONZE_EVENTS, ("raw", "source_file")),
        "silver/events": (SILVER_EVENTS, ("event_id", "user_id", "event_type", "timestamp",
                                          "amount", "customer_name", "segment")),
        "silver/events_quarantine": (SILVER_QUARANTINE, ("raw", "reasons", "source_file")),
        "gold/event_counts_5m": (GOLD_EVENT_COUNTS_5M, ()),
        "gold/user_activity_sliding": (GOLD_USER_ACTIVITY_SLIDING, ()),
        "gold/user_sessions": (GOLD_USER_SESSIONS, ()),
        "gold/segment_revenue_1h": (GOLD_SEGMENT_REVENUE_1H, ()),
        "gold/purchase_attribution": (purchase_attribution(settings), ()),
    }
    for decl in settings.pipeline("events").tables():  # gold tables a test declared besides
        if decl.role is TableRole.GOLD and decl.key not in tables:
            tables[decl.key] = (TableSpec.from_decl(decl), ())
    for name in also:  # the tables made of each pipeline named: every column but the times
        for decl in settings.pipeline(name).tables():  # rows were ingested at
            spec = TableSpec.from_decl(decl)
            if DeltaTable.is_deltatable(spec.path(settings)):
                tables[decl.key] = (spec, tuple(column for column in decl.column_names
                                                if column != INGESTED_AT))
    normal = {name: table_rows(spec.path(settings), columns)
              for name, (spec, columns) in tables.items()}
    metrics = table_rows(SILVER_BATCH_METRICS.path(settings), ("duplicates_removed",))
    normal["duplicates_removed"] = Counter(
        {"total": sum(row[0] * times for row, times in metrics.items())})
    return normal


def purchase_attribution(settings: Settings) -> TableSpec:
    """gold/purchase_attribution, declared only (tables.py has no constant for it)."""
    return TableSpec.from_decl(settings.pipeline("events").table("gold/purchase_attribution"))


def _set(table: list[tuple]) -> set[tuple]:
    return {tuple(_normal(v) for v in row) for row in table}


def assert_matches_model(spark: SparkSession, settings: Settings, model: Lakehouse) -> None:
    """The lakehouse holds what the independent model says one run per burst fed to it gives."""
    from tests import events_tables as t

    bronze = rows(spark, settings, t.BRONZE_EVENTS, "raw")
    assert Counter(r[0] for r in bronze) == Counter(model.bronze_lines)

    silver = rows(spark, settings, t.SILVER_EVENTS,
                  "event_id", "user_id", "event_type", "timestamp", "amount", "segment")
    expected_silver = {(e.event_id, e.user_id, e.event_type, e.timestamp, e.amount,
                        model.segment(e.user_id)) for e in model.silver.values()}
    assert len(silver) == len(expected_silver), "silver holds one row per event_id"
    assert _set(silver) == {tuple(_normal(v) for v in row) for row in expected_silver}

    quarantine = rows(spark, settings, t.SILVER_QUARANTINE, "raw", "reasons")
    assert len(quarantine) == model.quarantined
    assert all(reasons for _, reasons in quarantine), "every quarantined row says why"

    duplicates = sum(r[0] for r in rows(spark, settings, SILVER_BATCH_METRICS,
                                        "duplicates_removed"))
    assert duplicates == model.duplicates
    assert len(bronze) == len(silver) + len(quarantine) + duplicates

    # The window aggregates in mode update are recomputed: every silver event counts, late or not.
    assert _set(rows(spark, settings, t.GOLD_EVENT_COUNTS_5M)) == model.exact_event_counts_5m()
    assert _set(rows(spark, settings, t.GOLD_USER_ACTIVITY_SLIDING)) == \
        model.exact_user_activity_sliding()
    assert _set(rows(spark, settings, t.GOLD_SEGMENT_REVENUE_1H)) == model.exact_segment_revenue_1h()
    # Sessions are appended once closed, by a stateful query: late events behind its watermark drop.
    assert _set(rows(spark, settings, t.GOLD_USER_SESSIONS)) == model.user_sessions()
    attribution = _set(rows(spark, settings, purchase_attribution(settings)))
    assert attribution == {tuple(_normal(v) for v in row) for row in model.purchase_attribution()}


def csv_lines(frame: DataFrame) -> tuple[str, list[str]]:
    """A Spark result as ``medallion sql --engine spark --format csv`` prints it: the header and
    the sorted lines."""
    from medallion.serving.query import print_result

    out = io.StringIO()
    print_result(frame, "csv", 0, out)
    header, *lines = out.getvalue().splitlines()
    return header, sorted(lines)


def fast_csv_lines(settings: Settings, statement: str) -> tuple[str, list[str]]:
    """The same statement through the fast path (DuckDB over delta-rs), as ``medallion sql
    --format csv`` prints it."""
    from medallion.serving.lakehouse import Lakehouse as FastPath
    from medallion.serving.output import python_rows, write_rows

    result = FastPath(settings).query(statement)
    out = io.StringIO()
    write_rows(result.table.column_names, python_rows(result.table), "csv", out)
    header, *lines = out.getvalue().splitlines()
    return header, sorted(lines)


def assert_engines_agree(spark: SparkSession, settings: Settings, statement: str,
                         frame: DataFrame | None = None) -> int:
    """``statement`` gives the same text through Spark (``frame``, else ``spark.sql`` of it)
    and through the fast path; returns the number of rows."""
    by_spark = csv_lines(frame if frame is not None else spark.sql(statement))
    fast = fast_csv_lines(settings, statement)
    assert fast == by_spark, (statement, fast, by_spark)
    return len(by_spark[1])
