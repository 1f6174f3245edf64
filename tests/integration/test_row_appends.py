"""Rows the driver holds (run records, batch metrics, quality results) appended with delta-rs, on
real Delta tables that Spark created and reads: one commit, marked, with no Spark job; through
Spark for a table delta-rs cannot write; and once only when a delta-rs attempt fails, whether its
commit landed or not."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import medallion.io.sinks.delta as delta_sink
from medallion.config.model import S3Settings
from medallion.io.sinks.delta import append_rows, ensure_table
from medallion.io.sinks.rows import NotAppended
from medallion.io.tables import RUN_OUTCOMES
from medallion.project import Settings
from medallion.spark.session import build_session
from tests.conftest import make_settings
from tests.s3_support import S3SettingsFactory

AT = datetime(2025, 3, 1, 9, 30, 15, 250000, tzinfo=timezone.utc)
LOCAL_AT = AT.astimezone().replace(tzinfo=None)  # as PySpark returns a timestamp: local, naive


def _outcomes(*tables: str) -> list[dict[str, Any]]:
    return [{"pipeline_run": "run-1", "table": table, "trigger": "availableNow", "started_at": AT,
             "finished_at": AT, "succeeded": True, "rows_in": 120 + i, "rows_out": 40,
             "error": None if i else "none"} for i, table in enumerate(tables)]


def _history(spark: SparkSession, path: str) -> list[tuple[int, str, str | None]]:
    """(version, engine, userMetadata) of each commit after the table's creation, oldest first."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return sorted((r["version"], r["engineInfo"].split("/")[0].split(":")[0], r["userMetadata"])
                  for r in rows if r["version"] > 0)


def _stored(spark: SparkSession, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _new_table(spark: SparkSession, settings: Settings) -> str:
    path = RUN_OUTCOMES.path(settings)
    ensure_table(spark, RUN_OUTCOMES, path)
    return path


def test_rows_are_one_delta_rs_commit_with_the_mark_and_no_spark_job(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    path = _new_table(spark, settings)
    rows = _outcomes("silver/events", "gold/event_counts_5m")
    tracker, group = spark.sparkContext.statusTracker(), "row-appends"
    spark.sparkContext.setJobGroup(group, "append_rows runs no job")
    try:
        append_rows(spark, settings.s3, RUN_OUTCOMES, path, rows, "mark-1")
        assert list(tracker.getJobIdsForGroup(group)) == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert _history(spark, path) == [(1, "delta-rs", "mark-1")]
    # Spark reads every value back as written, the timestamp to the microsecond.
    assert _stored(spark, path) == sorted(
        (r["pipeline_run"], r["table"], r["trigger"], LOCAL_AT, LOCAL_AT, r["succeeded"],
         r["rows_in"], r["rows_out"], r["error"]) for r in rows)


def test_a_table_delta_rs_cannot_write_gets_the_rows_through_spark(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    path = _new_table(spark, settings)
    # A feature delta-rs 1.x does not write, as a session default could turn it on.
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
              "('delta.enableInCommitTimestamps' = 'true')")
    append_rows(spark, settings.s3, RUN_OUTCOMES, path, _outcomes("silver/events"), "mark-1")
    append_rows(spark, settings.s3, RUN_OUTCOMES, path, _outcomes("gold/x"), "mark-2")
    written = [(engine, mark) for _, engine, mark in _history(spark, path) if mark]
    assert written == [("Apache-Spark", "mark-1"), ("Apache-Spark", "mark-2")]
    assert len(_stored(spark, path)) == 2


@pytest.mark.parametrize("landed", [True, False], ids=["commit-landed", "nothing-written"])
def test_a_failed_delta_rs_attempt_leaves_the_rows_once(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landed: bool) -> None:
    """delta-rs fails after its commit landed (say, the answer was lost) or before writing: the
    rows are in the table once either way, the second time through Spark."""
    settings = make_settings(tmp_path)
    path = _new_table(spark, settings)
    real = delta_sink.append_with_delta_rs

    def failing(location: Any, rows: Any, marker: str) -> None:
        if landed:
            real(location, rows, marker)
        raise NotAppended("the connection was reset", 0)

    monkeypatch.setattr(delta_sink, "append_with_delta_rs", failing)
    append_rows(spark, settings.s3, RUN_OUTCOMES, path, _outcomes("silver/events"), "mark-1")
    engine = "delta-rs" if landed else "Apache-Spark"
    assert _history(spark, path) == [(1, engine, "mark-1")]
    assert len(_stored(spark, path)) == 1


def test_a_column_the_table_does_not_have_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    path = _new_table(spark, settings)
    row = {**_outcomes("silver/events")[0], "rows_dropped": 3}
    with pytest.raises(ValueError, match="monitoring/runs: no column rows_dropped"):
        append_rows(spark, settings.s3, RUN_OUTCOMES, path, [row], "mark-1")
    assert _history(spark, path) == []


def test_with_sse_s3_both_writers_ask_s3_to_encrypt_each_object(
        s3_spark: SparkSession, s3_settings_factory: S3SettingsFactory) -> None:
    """S3Proxy stores no encrypted objects, and says so to a request that asks for it: so its
    refusal shows the header went out, from S3A (which took "SSE-S3" for an unknown algorithm
    before it was given S3A's name for it) and from delta-rs."""
    from medallion.io.sinks.rows import append_with_delta_rs, location_for_writing

    plain = s3_settings_factory()
    assert build_session(plain, register_tables=False) is s3_spark
    path = _new_table(s3_spark, plain)
    encrypted = s3_settings_factory(sse="SSE-S3").s3
    with pytest.raises(NotAppended, match="encryption is not supported"):
        append_with_delta_rs(location_for_writing(path, encrypted), _outcomes("a"), "mark-1")

    settings = s3_settings_factory(sse="SSE-S3")
    build_session(settings, register_tables=False)
    try:
        with pytest.raises(Exception, match="Server-side encryption is not supported"):
            _new_table(s3_spark, settings)
    finally:  # the session is shared: the next tests' buckets are not encrypted
        key = "fs.s3a.encryption.algorithm"
        s3_spark.sparkContext._jsc.hadoopConfiguration().unset(key)  # type: ignore[union-attr]
        s3_spark.conf.unset(f"spark.hadoop.{key}")


def test_rows_on_s3_are_a_delta_rs_commit_and_a_stale_writer_takes_the_next_version(
        s3_spark: SparkSession, s3_settings_factory: S3SettingsFactory) -> None:
    """On S3 the commit is a conditional put: a writer whose version was taken meanwhile (here a
    second append made between opening the table and committing) retries on the next version
    instead of overwriting the other's commit."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from medallion.io.sinks.rows import location_for_writing

    settings = s3_settings_factory()
    assert build_session(settings, register_tables=False) is s3_spark  # pointed at the server
    path = _new_table(s3_spark, settings)
    append_rows(s3_spark, settings.s3, RUN_OUTCOMES, path, _outcomes("a"), "mark-1")
    where = location_for_writing(path, settings.s3)
    stale = DeltaTable(where.uri, storage_options=dict(where.options))  # at version 1
    append_rows(s3_spark, settings.s3, RUN_OUTCOMES, path, _outcomes("b"), "mark-2")
    # A writer that opened the table before mark-2 landed commits with the same options.
    rows = pa.Table.from_pylist(_outcomes("c"), schema=pa.schema(stale.schema().to_arrow()))
    write_deltalake(stale, rows, mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": "mark-3"}))
    assert _history(s3_spark, path) == [(1, "delta-rs", "mark-1"), (2, "delta-rs", "mark-2"),
                                        (3, "delta-rs", "mark-3")]
    assert sorted(r[1] for r in _stored(s3_spark, path)) == ["a", "b", "c"]


def test_a_dynamodb_log_store_keeps_the_appends_in_spark(tmp_path: Path) -> None:
    """Spark's commits take their turn through the DynamoDB table; a conditional put would not."""
    from medallion.config.model import DeltaLogStore
    from medallion.io.sinks.rows import delta_rs_can_write

    arbitrated = S3Settings(delta_log_store=DeltaLogStore.DYNAMODB)
    assert not delta_rs_can_write("s3a://bucket/lakehouse/monitoring/runs", arbitrated)
    assert delta_rs_can_write("s3a://bucket/lakehouse/monitoring/runs", S3Settings())
    assert delta_rs_can_write(str(tmp_path / "monitoring" / "runs"), arbitrated)
