"""``medallion status``: where each table stands, from its Delta log and the ``_monitoring`` tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from delta.tables import DeltaTable
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from medallion.config import Settings
from medallion.tables import ALL_TABLES, QUERY_PROGRESS, RUN_OUTCOMES, TableSpec

# The column holding each table's newest event time: event time where the table has one,
# otherwise when its rows arrived.
EVENT_TIME_COLUMN = {
    "bronze/events": "ingested_at",
    "bronze/customers": "ingested_at",
    "silver/events": "timestamp",
    "silver/events_quarantine": "ingested_at",
    "gold/event_counts_5m": "window_end",
    "gold/user_activity_sliding": "window_end",
    "gold/user_sessions": "session_end",
    "gold/segment_revenue_1h": "window_end",
    "monitoring/silver_batches": "recorded_at",
    "monitoring/query_progress": "recorded_at",
    "monitoring/runs": "finished_at",
}


@dataclass(frozen=True)
class TableStatus:
    """One table's state: its last commit, size, freshness, streaming state and last run."""

    table: str
    exists: bool
    version: int | None = None
    committed_at: datetime | None = None
    rows: int | None = None
    newest_event: datetime | None = None
    lag_seconds: float | None = None
    state_rows: int | None = None
    state_memory_bytes: int | None = None
    last_run_succeeded: bool | None = None
    last_run_at: datetime | None = None
    last_error: str | None = None


def _utc(value: datetime | None) -> datetime | None:
    # PySpark hands TIMESTAMPs back as naive datetimes in the process's zone.
    if value is None:
        return None
    return value.astimezone(timezone.utc) if value.tzinfo is None else value


def _latest_per_table(spark: SparkSession, spec: TableSpec, settings: Settings, key: str,
                      order: str) -> dict[str, dict]:
    path = spec.path(settings)
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    frame = spark.read.format("delta").load(path)
    latest = (frame.withColumn("_rank", F.row_number().over(
        Window.partitionBy(key).orderBy(F.col(order).desc())))
        .where("_rank = 1").drop("_rank"))
    return {row[key]: row.asDict() for row in latest.collect()}


def collect_status(spark: SparkSession, settings: Settings,
                   now: datetime | None = None) -> list[TableStatus]:
    """The status of every table of the lakehouse (absent tables included, marked so)."""
    now = now or datetime.now(timezone.utc)
    progress = _latest_per_table(spark, QUERY_PROGRESS, settings, "query_name", "batch_timestamp")
    outcomes = _latest_per_table(spark, RUN_OUTCOMES, settings, "table", "finished_at")
    result = []
    for spec in ALL_TABLES:
        path = spec.path(settings)
        if not DeltaTable.isDeltaTable(spark, path):
            result.append(TableStatus(spec.key, exists=False))
            continue
        commit = DeltaTable.forPath(spark, path).history(1).select("version", "timestamp").first()
        assert commit is not None
        column = EVENT_TIME_COLUMN.get(spec.key)
        frame = spark.read.format("delta").load(path)
        aggregates = [F.count(F.lit(1)).alias("rows")]
        if column:
            aggregates.append(F.max(column).alias("newest"))
        stats = frame.agg(*aggregates).first()
        assert stats is not None
        newest = _utc(stats["newest"]) if column else None
        state = progress.get(spec.key, {})
        outcome = outcomes.get(spec.key, {})
        result.append(TableStatus(
            table=spec.key, exists=True, version=int(commit["version"]),
            committed_at=_utc(commit["timestamp"]), rows=int(stats["rows"]),
            newest_event=newest, lag_seconds=(now - newest).total_seconds() if newest else None,
            state_rows=state.get("state_rows"), state_memory_bytes=state.get("state_memory_bytes"),
            last_run_succeeded=outcome.get("succeeded"), last_run_at=_utc(outcome.get("finished_at")),
            last_error=outcome.get("error"),
        ))
    return result


def _lag(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value}B"


_COLUMNS = ("table", "version", "committed (UTC)", "rows", "lag", "state rows", "state mem",
            "last run")


def format_status(statuses: Sequence[TableStatus]) -> str:
    """A fixed-width table, one line per table, then the last error of any failed table."""
    rows = []
    for s in statuses:
        if not s.exists:
            rows.append((s.table, "-", "-", "-", "-", "-", "-", "not created"))
            continue
        last = "-" if s.last_run_succeeded is None else ("ok" if s.last_run_succeeded else "FAILED")
        rows.append((
            s.table, str(s.version),
            s.committed_at.strftime("%Y-%m-%d %H:%M:%S") if s.committed_at else "-",
            str(s.rows), _lag(s.lag_seconds),
            "-" if s.state_rows is None else str(s.state_rows), _bytes(s.state_memory_bytes), last,
        ))
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(_COLUMNS, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines += [f"error: {s.table}: {s.last_error}" for s in statuses
              if s.last_run_succeeded is False and s.last_error]
    return "\n".join(lines)
