"""``medallion init`` from a CSV, a JSON Lines and a Parquet sample, then one run: each declared
pipeline's bronze keeps every landed record and silver holds the valid ones, typed as inferred,
with the broken and badly typed records quarantined with their reasons. Expected rows are
written out by hand below. Before that, a silver run on the empty lakehouse says why it read
nothing."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import load_settings
from tests.conf_support import copy_base_conf

T0 = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)


def _rows(spark: SparkSession, path: str, *columns: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).select(*columns).collect())


def test_init_then_run_makes_bronze_and_silver_of_each_format(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    for shipped in (conf / "pipelines").glob("*.yaml"):
        shipped.unlink()
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    samples, landing = tmp_path / "samples", tmp_path / "landing"
    samples.mkdir()

    (samples / "flights.csv").write_text(
        "flight_id,dep_time,fare,departed\nf1,830,10.25,2025-01-27 10:00:00\n"
        "f2,517,7.5,2025-01-27 11:00:00\n", encoding="utf-8")
    (samples / "clicks.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"id": "c1", "at": "2025-01-27T10:00:00Z", "user": {"id": "u1"}, "n": 1},
        {"id": "c2", "at": "2025-01-27T10:01:00Z", "user": {"id": "u2"}, "n": 2}))
        + "\n", encoding="utf-8")
    pq.write_table(pa.table({
        "sensor": ["s1", "s2"], "value": pa.array([Decimal("1.50"), Decimal("2.25")],
                                                  pa.decimal128(9, 2)),
        "taken_at": pa.array([T0, T0], pa.timestamp("us", tz="UTC"))}), samples / "readings.parquet")
    for name, sample in (("flights", "flights.csv"), ("clicks", "clicks.jsonl"),
                         ("readings", "readings.parquet")):
        assert main(["--conf-dir", str(conf), "init", name, str(samples / sample)]) == 0
        (landing / name).mkdir(parents=True)
        shutil.copy(samples / sample, landing / name / sample)

    # Later files: a badly typed value, a broken line, a re-delivery.
    (landing / "flights" / "later.csv").write_text(
        "flight_id,dep_time,fare,departed\nf3,12x,3.00,2025-01-27 12:00:00\nf4,900\n"
        "f1,830,10.25,2025-01-27 10:00:00\n", encoding="utf-8")
    (landing / "clicks" / "later.jsonl").write_text(
        '{"id": "c3", "at": "not a time", "user": {"id": "u3"}, "n": 3}\n{broken\n',
        encoding="utf-8")

    settings = load_settings(env="local", conf_dir=conf, landing=str(landing),
                             lakehouse=str(tmp_path / "lakehouse"))
    # silver run before bronze ever ran: each table says why it read nothing
    early = {run.table: run for run in run_pipeline(spark, settings, RunTarget.SILVER, Trigger(),
                                                    monitor=False)}
    assert early["silver/flights"].batches == 0
    assert early["silver/flights"].note == (
        "nothing to read yet: bronze/flights never written (its layer has not run, or nothing "
        "has landed for it)")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger(), monitor=False)
    lake = settings.paths.lakehouse

    assert len(_rows(spark, f"{lake}/bronze/flights", "flight_id")) == 5
    assert _rows(spark, f"{lake}/silver/flights", "flight_id", "dep_time", "fare", "departed") == [
        ("f1", 830, Decimal("10.25"), datetime(2025, 1, 27, 10, 0)),
        ("f2", 517, Decimal("7.50"), datetime(2025, 1, 27, 11, 0))]
    assert _rows(spark, f"{lake}/silver/flights_quarantine", "flight_id", "reasons") == [
        ("f3", ["invalid_dep_time"]), ("f4", ["malformed_record"])]

    assert len(_rows(spark, f"{lake}/bronze/clicks", "raw")) == 4
    assert _rows(spark, f"{lake}/silver/clicks", "id", "user_id", "n") == [
        ("c1", "u1", 1), ("c2", "u2", 2)]
    assert [r[0] for r in _rows(spark, f"{lake}/silver/clicks_quarantine", "reasons")] == [
        ["invalid_at"], ["invalid_json"]]

    assert _rows(spark, f"{lake}/silver/readings", "sensor", "value") == [
        ("s1", Decimal("1.50")), ("s2", Decimal("2.25"))]
