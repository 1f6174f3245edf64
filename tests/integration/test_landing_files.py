"""Landing files as they come from other systems.

A byte-order mark, Windows line ends, a line in Latin-1, binary garbage: bronze keeps each line
byte for byte; silver takes what is UTF-8 and quarantines what is not, with its reason, in a table
every Parquet reader can read. A file named so that its source never reads it is warned of."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import logging
import os
import shutil
import sys
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from medallion.config.model import S3Settings, Trigger
from medallion.engine.idle import FolderInput, FolderLook, files_under, location, nothing_new
from medallion.engine.runner import RunIncomplete, RunTarget, run_pipeline
from medallion.errors import InputRefused, JobError
from medallion.io import hadoopfs
from medallion.io.hadoopfs import FileHeads
from medallion.io.sources.files import arrow_columns, declared_schema, parquet_misfits
from medallion.io.tables import RUN_OUTCOMES
from medallion.ops.backfill import landing_files_between
from medallion.ops.landing import LandingError, refuse_misfit
from medallion.pipeline.model import Field
from medallion.pipeline.types import parse_type
from medallion.project import Settings, load_settings
from medallion.samples.generate import write_atomically
from tests.conf_support import copy_base_conf
from tests.conftest import REPO
from tests.events_tables import BRONZE_EVENTS, SILVER_EVENTS, SILVER_QUARANTINE

NOW = Trigger.parse("available-now")
# A second pipeline whose stores arrive as Parquet files.
FIXTURE_ORDERS = (Path(__file__).resolve().parents[1] / "unit" / "pipeline_fixtures" / "pipelines"
                  / "orders.yaml")

BOM = b'\xef\xbb\xbf{"event_id":"bom-1","user_id":"u0001","event_type":"click",' \
      b'"timestamp":"2025-01-27T10:00:05Z","amount":null}'
LATIN_1 = b'{"event_id":"latin-1","user_id":"caf\xe9","event_type":"click",' \
          b'"timestamp":"2025-01-27T10:00:06Z","amount":null}'
GARBAGE = b"\x00\x01\x02\xff\xfe garbage"
UTF_8 = b'{"event_id":"utf8-1","user_id":"caf\xc3\xa9","event_type":"click",' \
        b'"timestamp":"2025-01-27T10:00:07Z","amount":null}'
CRLF = b'{"event_id":"crlf-1","user_id":"u0002","event_type":"view",' \
       b'"timestamp":"2025-01-27T10:00:08Z","amount":null}\r'


def _land_customers(settings: Settings) -> None:
    write_atomically(Path(settings.paths.landing) / "customers" / "customers.csv",
                     ["customer_id,customer_name,segment", "u0001,Ann,smb"])


def _bronze_warnings(spark: SparkSession, settings: Settings, caplog: pytest.LogCaptureFixture,
                     containing: str) -> list[str]:
    """Run bronze; the warnings of bronze's job whose message holds ``containing``."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="medallion.engine.bronze.job"):
        run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    return [r.getMessage() for r in caplog.records if containing in r.getMessage()]


def test_lines_that_are_not_utf8_are_kept_in_bronze_and_quarantined_readably(
        spark: SparkSession, settings: Settings) -> None:
    events = Path(settings.paths.landing) / "events"
    events.mkdir(parents=True)
    (events / "export-0000.json").write_bytes(b"\n".join([BOM, LATIN_1, GARBAGE, UTF_8, CRLF]) + b"\n")
    _land_customers(settings)

    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    runs = run_pipeline(spark, settings, RunTarget.SILVER, NOW)

    # Bronze: every line, byte for byte, but for what is not content: Spark's reader takes the
    # byte-order mark and the line end (\r\n as well as \n) off.
    bronze = {bytes(r["raw"]) for r in spark.read.format("delta").load(BRONZE_EVENTS.path(settings))
              .select(F.col("raw").cast("binary").alias("raw")).collect()}
    assert bronze == {BOM[3:], LATIN_1, GARBAGE, UTF_8, CRLF[:-1]}

    silver = {r["event_id"]: r["user_id"] for r in
              DeltaTable(SILVER_EVENTS.path(settings)).to_pyarrow_dataset().to_table().to_pylist()}
    assert silver == {"bom-1": "u0001", "utf8-1": "caf\u00e9", "crlf-1": "u0002"}

    # Read with delta-rs and pyarrow, as an analyst would: the quarantine's string columns hold
    # text Python can decode, not the bytes as they arrived.
    quarantine = {(r["raw"], tuple(r["reasons"]), r["event_id"]) for r in
                  DeltaTable(SILVER_QUARANTINE.path(settings)).to_pyarrow_dataset().to_table()
                  .to_pylist()}
    assert quarantine == {
        ('{"event_id":"latin-1","user_id":"caf\ufffd","event_type":"click",'
         '"timestamp":"2025-01-27T10:00:06Z","amount":null}', ("invalid_utf8",), "latin-1"),
        ("\x00\x01\x02\ufffd\ufffd garbage", ("invalid_utf8",), None),
    }
    (run,) = [run for run in runs if run.table == "silver/events"]
    assert (run.rows_in, run.rows_out, run.quarantined, run.duplicates_removed) == (5, 3, 2, 0)


def test_files_a_source_never_reads_are_warned_of_at_every_run(
        spark: SparkSession, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """A file the source's glob does not read (``batch-2.jsonl`` beside ``batch-1.json``) is
    warned of at every run; hidden files are not."""
    events = Path(settings.paths.landing) / "events"
    write_atomically(events / "batch-1.json", [UTF_8.decode()])
    for name in ("batch-2.jsonl", "batch-3.json.gz", ".batch-4.json.tmp", "_SUCCESS"):
        (events / name).write_bytes(CRLF)  # the last two are hidden: Spark skips them by design
    _land_customers(settings)

    for _ in range(2):  # the second run has nothing new, and says it again
        assert _bronze_warnings(spark, settings, caplog, "are not read") == [
            f"bronze/events: 2 file(s) in {events} are not read, since their names do not match "
            "'*.json': batch-2.jsonl, batch-3.json.gz (rename them, or declare "
            f"sources.events.glob in {EVENTS_DECLARATION})"]
    assert spark.read.format("delta").load(BRONZE_EVENTS.path(settings)).count() == 1


def test_a_file_changed_after_bronze_read_it_is_warned_of(
        spark: SparkSession, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """A file is read once by its name: a corrected file copied over the one bronze had read (a
    daily export under the same name, say) is skipped, so every run warns of it."""
    events = Path(settings.paths.landing) / "events"
    write_atomically(events / "batch-1.json", [UTF_8.decode()])
    write_atomically(events / "batch-2.json", [CRLF.decode().strip()])
    _land_customers(settings)
    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)

    write_atomically(events / "batch-1.json", [UTF_8.decode(), BOM[3:].decode()])  # corrected
    later = (events / "batch-2.json").stat().st_mtime + 60
    os.utime(events / "batch-1.json", (later, later))  # whatever the file system's clock grain
    assert _bronze_warnings(spark, settings, caplog, "changed after") == [
        f"bronze/events: 1 file(s) in {events} changed after bronze read them, and are not read "
        "again: batch-1.json (a file is read once by its name: land a corrected file under a new "
        "name)"]
    assert spark.read.format("delta").load(BRONZE_EVENTS.path(settings)).count() == 2


class _CountingFileSystem:
    """A Hadoop file system whose listings and opened files are counted, by path."""

    def __init__(self, fs: Any, counts: Counter[tuple[str, str]]) -> None:
        self._fs, self._counts = fs, counts

    def listStatus(self, path: Any) -> Any:  # noqa: N802 - Hadoop's name
        self._counts["list", str(path)] += 1
        return self._fs.listStatus(path)

    def listFiles(self, path: Any, recursive: bool) -> Any:  # noqa: N802 - Hadoop's name
        self._counts["list", str(path)] += 1
        return self._fs.listFiles(path, recursive)

    def open(self, path: Any) -> Any:
        self._counts["open", str(path)] += 1
        return self._fs.open(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)


def test_a_run_with_nothing_new_lists_the_landing_folder_once_and_reads_the_log_once(
        spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 each listing is a LIST request and each log file a GET, so an idle run's warnings
    and its idle check share one listing of the folder and one reading of the source log."""
    events = Path(settings.paths.landing) / "events"
    for batch in range(3):  # three batches of the source log to read back
        write_atomically(events / f"batch-{batch}.json", [UTF_8.decode()])
        run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    assert spark.read.format("delta").load(BRONZE_EVENTS.path(settings)).count() == 3

    counts: Counter[tuple[str, str]] = Counter()
    real = hadoopfs.hadoop_path
    for module in [m for name, m in sys.modules.items() if name.startswith("medallion")
                   and getattr(m, "hadoop_path", None) is real]:  # every module reaching files
        monkeypatch.setattr(module, "hadoop_path", lambda session, path: (
            lambda fs, target: (_CountingFileSystem(fs, counts), target))(*real(session, path)))
    walk = os.walk  # a local folder is listed by Python (medallion.engine.idle)

    def counted_walk(top: str, *args: Any, **kwargs: Any) -> Any:
        counts["list", str(top).rstrip("/")] += 1
        return walk(top, *args, **kwargs)
    monkeypatch.setattr(os, "walk", counted_walk)
    runs = run_pipeline(spark, settings, RunTarget.BRONZE, NOW)

    assert [(run.table, run.rows_in) for run in runs if run.table == BRONZE_EVENTS.key] == [
        (BRONZE_EVENTS.key, 0)]
    source_log = Path(BRONZE_EVENTS.checkpoint(settings)) / "sources" / "0"
    assert [n for (op, path), n in counts.items() if op == "list" and path.endswith(
        str(events))] == [1]
    log_reads = {Path(path).name: n for (op, path), n in counts.items()
                 if op == "open" and str(source_log) in path}
    assert log_reads == {"0": 1, "1": 1, "2": 1}


def test_files_in_folders_under_the_landing_folder_are_read_once_and_the_hidden_ones_never(
        spark: SparkSession, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """A folder per day is a common landing layout: ``events/2025-01-27/b.json`` is read like a
    file at the top; a writer's ``_temporary`` folder stays unread."""
    events = Path(settings.paths.landing) / "events"
    write_atomically(events / "a.json", [UTF_8.decode()])
    write_atomically(events / "2025-01-27" / "b.json", [BOM[3:].decode()])
    write_atomically(events / "2025-01-27" / "notes.txt", ["not events"])
    write_atomically(events / "_temporary" / "0" / "c.json", [CRLF.decode().strip()])
    _land_customers(settings)
    started = datetime.now(timezone.utc) - timedelta(minutes=1)

    assert _bronze_warnings(spark, settings, caplog, "are not read") == [
        f"bronze/events: 1 file(s) in {events} are not read, since their names do not match "
        "'*.json': 2025-01-27/notes.txt (rename them, or declare sources.events.glob in "
        f"{EVENTS_DECLARATION})"]
    bronze = spark.read.format("delta").load(BRONZE_EVENTS.path(settings))
    assert sorted(r[0] for r in bronze.select(F.get_json_object("raw", "$.event_id")).collect()) \
        == ["bom-1", "utf8-1"]

    checkpoint = BRONZE_EVENTS.checkpoint(settings)
    def events_input() -> FolderInput:
        return FolderInput(FolderLook(spark, str(events), checkpoint, settings.s3), "*.json")

    assert nothing_new(spark, checkpoint, events_input())
    write_atomically(events / "2025-01-28" / "d.json", [CRLF.decode().strip()])
    assert not nothing_new(spark, checkpoint, events_input())
    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    assert bronze.count() == 3

    # A range backfill of bronze picks the same files: those in folders under it, not the hidden.
    later = datetime.now(timezone.utc) + timedelta(minutes=1)
    assert [Path(f.removeprefix("file:")).relative_to(events) for f in landing_files_between(
        spark, settings, started, later, BRONZE_EVENTS.key)] == [
        Path("2025-01-27/b.json"), Path("2025-01-28/d.json"), Path("a.json")]


def test_a_file_landed_with_an_old_modification_time_is_read(
        spark: SparkSession, settings: Settings) -> None:
    """``mv``, ``cp -p``, ``rsync -a`` and ``tar x`` keep a file's modification time: a partner's
    export of last month moved into the landing folder is as old as the export, and is read like a
    new one. Spark's file source, left to its ``maxFileAge``, would skip every file more than 7
    days older than the newest it had read, without a word, at every run."""
    events = Path(settings.paths.landing) / "events"
    write_atomically(events / "today.json", [UTF_8.decode()])
    _land_customers(settings)
    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)

    old = events / "exported-last-month.json"
    write_atomically(old, [BOM[3:].decode(), CRLF.decode().strip()])
    month_ago = (datetime.now(timezone.utc) - timedelta(days=30)).timestamp()
    os.utime(old, (month_ago, month_ago))
    [run] = [r for r in run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
             if r.table == BRONZE_EVENTS.key]
    assert (run.batches, run.rows_out) == (1, 2)
    bronze = spark.read.format("delta").load(BRONZE_EVENTS.path(settings))
    assert sorted(r[0] for r in bronze.select(F.get_json_object("raw", "$.event_id")).collect()) \
        == ["bom-1", "crlf-1", "utf8-1"]


# The refusals name the file that declares what they refuse against, here the repo's own.
EVENTS_DECLARATION = REPO / "conf" / "pipelines" / "events.yaml"
ORDERS_HEADER = "order_id,line_no,store_id,sku,quantity,unit_price,order_date,order_time"


def test_a_csv_file_whose_header_is_not_the_declared_one_is_refused_and_the_rest_runs(
        spark: SparkSession, settings: Settings) -> None:
    """Spark's CSV reader takes the columns by position, so a till export with ``sku`` and
    ``store_id`` swapped would reach silver with each in the other's place. Its source ingests
    nothing; the run's other tables go on (one team's bad file must not hold every pipeline
    back), and the run fails naming the file."""
    landing = Path(settings.paths.landing)
    write_atomically(landing / "products" / "p.csv", ["sku,product_name,category", "p1,Beans,coffee"])
    write_atomically(landing / "stores" / "s.csv", ["store_id,city", "s1,Lyon"])
    orders = landing / "orders"
    write_atomically(orders / "a.csv", [ORDERS_HEADER, "o1,1,s1,p1,2,10.00,2026-03-02,09:00:00"])
    # The same columns, spelled as other exports spell them: a byte-order mark, quotes, capitals.
    write_atomically(orders / "b.csv", ['\ufeff"ORDER_ID","line_no","store_id","sku","quantity",'
                                        '"unit_price","order_date","order_time"',
                                        "o2,1,s1,p1,1,10.00,2026-03-02,09:05:00"])
    swapped = "order_id,line_no,sku,store_id,quantity,unit_price,order_date,order_time"
    write_atomically(orders / "2026-03-02" / "c.csv", [swapped, "o3,1,p1,s1,1,10.00,2026-03-02,09:10:00"])

    with pytest.raises(RunIncomplete) as refused:
        run_pipeline(spark, settings, RunTarget.ALL, NOW)
    assert str(refused.value) == (
        f"bronze/orders: 1 landing file(s) in {orders} have a header other than the declared "
        f"{ORDERS_HEADER} (sources.orders.header in {REPO}/conf/pipelines/orders.yaml), and "
        f"their columns would be read by position into other fields: 2026-03-02/c.csv has {swapped}. "
        "Nothing was ingested into bronze/orders (the run's other tables went on): move the "
        "file(s) out of the folder (or rename them so the source's glob does not match), and land "
        "them again with the declared columns under a new name")
    assert not Path(settings.paths.lakehouse, "bronze", "orders").exists()
    for table, key, value in (("products", "sku", "p1"), ("stores", "store_id", "s1")):
        rows = spark.read.format("delta").load(str(Path(settings.paths.lakehouse, "bronze", table)))
        assert [r[key] for r in rows.collect()] == [value]  # the other sources ran
    ran = {run.table: run for run in refused.value.runs}
    assert (ran["bronze/products"].rows_out, ran["bronze/orders"].batches) == (1, 0)
    assert ran["bronze/orders"].note == "not run: its new input was refused"
    outcomes = spark.read.format("delta").load(RUN_OUTCOMES.path(settings)).where(
        "table = 'bronze/orders'")
    assert [(r["succeeded"], r["error"]) for r in outcomes.collect()] == [
        (False, refused.value.cause)]
    # A service does not start without one of its tables: it fails at once, nothing left running.
    with pytest.raises(InputRefused, match="Nothing was ingested into bronze/orders"):
        run_pipeline(spark, settings, RunTarget.ALL, Trigger.parse("processing-time=5 seconds"))
    assert spark.streams.active == []

    (orders / "2026-03-02" / "c.csv").rename(orders / "2026-03-02" / "c.csv.rejected")
    run_pipeline(spark, settings, RunTarget.ALL, NOW)
    lines = spark.read.format("delta").load(str(Path(settings.paths.lakehouse, "silver", "order_lines")))
    assert sorted((r["order_id"], r["store_id"], r["sku"]) for r in lines.collect()) == [
        ("o1", "s1", "p1"), ("o2", "s1", "p1")]


def _parquet_settings(tmp_path: Path) -> Settings:
    """The fixture's ``orders`` pipeline alone, whose ``stores`` source is Parquet."""
    conf = copy_base_conf(tmp_path / "conf")
    shutil.copy(FIXTURE_ORDERS, conf / "pipelines" / "orders.yaml")  # stores: Parquet
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "landing"),
                             lakehouse=str(tmp_path / "lakehouse"))
    return dataclasses.replace(settings, pipelines=(settings.pipeline("orders"),))


def test_a_parquet_file_the_reader_cannot_read_as_declared_stops_the_run_before_it_is_read(
        spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A Parquet file with a column of another type, or a file that is not Parquet, stops its
    source before anything is read, the run naming each file and what it holds against the
    declared type (the reader's own error would name no file, and fail every run after it);
    ``medallion land`` refuses the same files. A file lacking a declared column is read with it
    null, and the run warns of it."""
    settings = _parquet_settings(tmp_path)
    stores = tmp_path / "landing" / "stores"
    stores.mkdir(parents=True)
    opened = date(2025, 1, 1)
    pq.write_table(pa.table({"store_id": ["s1"], "city": ["Paris"], "opened": [opened]}),
                   stores / "good.parquet")
    (stores / "2025").mkdir()
    pq.write_table(pa.table({"STORE_ID": ["s2"], "City": ["Lyon"],  # Spark ignores case
                             "opened": [opened], "manager": ["Eve"]}), stores / "2025" / "x.parquet")
    pq.write_table(pa.table({"store_id": ["s3"]}), stores / "lacking.parquet")
    (stores / "empty.parquet").write_bytes(b"")  # no rows: Spark's reader skips it
    pq.write_table(pa.table({"store_id": ["s4"], "city": ["Nice"], "opened": ["2025-01-01"]}),
                   stores / "text-date.parquet")
    pq.write_table(pa.table({"store_id": [5], "city": ["Nice"], "opened": [opened]}),
                   stores / "number-id.parquet")
    (stores / "export.parquet").write_bytes(b"store_id,city\ns6,Nice\n")  # CSV, misnamed

    # `medallion land` refuses the files the run refuses, from pyarrow's reading of each footer
    source = settings.file_sources()["stores"]
    refused_at_landing = set()
    for path in stores.rglob("*.parquet"):
        with contextlib.suppress(LandingError):
            refuse_misfit(path, source, settings)
            continue
        refused_at_landing.add(path.name)
    assert refused_at_landing == {"export.parquet", "number-id.parquet", "text-date.parquet"}

    caplog.set_level(logging.WARNING, logger="medallion.engine.bronze.job")
    with pytest.raises(JobError) as refused:
        run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    declared = f"sources.stores.schema in {tmp_path}/conf/pipelines/orders.yaml"
    assert str(refused.value).startswith(
        f"bronze/stores: 3 landing file(s) in {stores} cannot be read as the columns that "
        f"{declared} declares: export.parquet: its footer cannot be read (")
    assert str(refused.value).endswith(
        "); number-id.parquet: store_id is BIGINT, declared STRING; text-date.parquet: opened is "
        "STRING, declared DATE. Nothing was ingested into bronze/stores (the run's other tables "
        "went on): move the file(s) out of the folder (or rename them so the source's glob does "
        "not match), and land them again with the declared columns under a new name")
    assert "is not a Parquet file" in str(refused.value)
    assert not (tmp_path / "lakehouse" / "bronze" / "stores").exists()

    for name in ("export.parquet", "number-id.parquet", "text-date.parquet"):
        (stores / name).rename(tmp_path / name)
    caplog.clear()
    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    assert [r.getMessage() for r in caplog.records if "lack" in r.getMessage()] == [
        f"bronze/stores: 1 file(s) in {stores} lack columns that {declared} declares, and are "
        "read with them null: lacking.parquet lacks city, opened"]
    rows = spark.read.format("delta").load(str(tmp_path / "lakehouse" / "bronze" / "stores"))
    assert sorted((r["store_id"], r["city"], r["opened"]) for r in rows.collect()) == [
        ("s1", "Paris", opened), ("s2", "Lyon", opened), ("s3", None, None)]

    caplog.clear()  # read files are not looked at again
    run_pipeline(spark, settings, RunTarget.BRONZE, NOW)
    assert [r.getMessage() for r in caplog.records if "lack" in r.getMessage()] == []


def test_a_declared_parquet_schema_is_the_one_spark_parses_from_its_ddl(
        spark: SparkSession, tmp_path: Path) -> None:
    """Bronze's footer check and `medallion land` (no JVM) compare files with the declared
    columns built in Python: they must be what Spark's reader is given as DDL."""
    types = ["STRING", "VARCHAR(3)", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT",
             "DOUBLE", "DECIMAL", "DECIMAL(18,4)", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "BINARY",
             "VARIANT", "ARRAY<INT>", "MAP<STRING, ARRAY<DATE>>",
             "STRUCT<a: INT, `b c`: STRUCT<d: DECIMAL(5,2)>>"]
    fields = tuple(Field(f"c{i}", parse_type(text)) for i, text in enumerate(types))
    source = dataclasses.replace(_parquet_settings(tmp_path).file_sources()["stores"],
                                 schema=fields)
    ddl = ", ".join(field.ddl() for field in fields)
    assert declared_schema(source) == StructType.fromDDL(ddl)


# Parquet columns as pyarrow writes them (pandas' integers are INT64), and declared types, each
# with its kind of value.
FILE_COLUMNS = {
    "INT16": (pa.array([1], pa.int16()), "number"), "INT32": (pa.array([1], pa.int32()), "number"),
    "INT64": (pa.array([1], pa.int64()), "number"),
    "FLOAT": (pa.array([1.5], pa.float32()), "number"),
    "DOUBLE": (pa.array([1.5], pa.float64()), "number"),
    "DECIMAL(10,2)": (pa.array([Decimal("1.50")], pa.decimal128(10, 2)), "number"),
    "DECIMAL(5,0)": (pa.array([Decimal("1")], pa.decimal128(5, 0)), "number"),
    "DATE": (pa.array([date(2025, 1, 1)], pa.date32()), "time"),
    "TIMESTAMP": (pa.array([datetime(2025, 1, 1)], pa.timestamp("us", tz="UTC")), "time"),
    "TIMESTAMP_NTZ": (pa.array([datetime(2025, 1, 1)], pa.timestamp("us")), "time"),
    "STRUCT<n: BIGINT>": (pa.array([{"n": 1}], pa.struct([("n", pa.int64())])), "struct"),
}
DECLARED = {**{t: "number" for t in ("TINYINT", "INT", "BIGINT", "FLOAT", "DOUBLE",
                                     "DECIMAL(10,2)", "DECIMAL(12,2)", "DECIMAL(10,4)",
                                     "DECIMAL(38,0)")},
            **{t: "time" for t in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")},
            "STRUCT<n: INT>": "struct", "STRUCT<n: BIGINT>": "struct"}


def test_the_footer_check_refuses_what_spark_s_reader_cannot_read_within_a_kind(
        spark: SparkSession, tmp_path: Path) -> None:
    """Bronze's footer check and `medallion land` hold Spark's Parquet reader's conversions (it
    widens numbers, never narrows them: a file's INT64, as pandas writes integers, is refused
    before the batch of a column declared INT, not inside it). Within a kind of value they
    must refuse exactly what this Spark's reader refuses; across kinds, even what it reads (a
    DATE as a number of days in an INT)."""
    heads = FileHeads(spark, str(tmp_path))
    disagree = []
    for index, (written, (column, kind)) in enumerate(FILE_COLUMNS.items()):
        path = tmp_path / f"file-{index}.parquet"
        pq.write_table(pa.table({"c": column}), path)
        spark_sees = heads.parquet_schema(str(path))
        pyarrow_sees, _ = arrow_columns(pq.read_schema(path))
        for declared_type, declared_kind in DECLARED.items():
            declared = StructType.fromDDL(f"c {declared_type}")
            try:
                spark.read.schema(declared).parquet(str(path)).collect()
                read = True
            except Exception:  # noqa: BLE001 - the reader refuses with several kinds of error
                read = False
            expected = read and kind == declared_kind
            for seen_by, seen in (("Spark", spark_sees), ("pyarrow", pyarrow_sees)):
                if (parquet_misfits(seen, declared)[1] == []) != expected:
                    disagree.append(f"{written} declared {declared_type} (footer read by "
                                    f"{seen_by}): Spark reads it: {read}")
    assert disagree == []


def test_a_landing_file_first_line_is_read_decompressed_as_spark_reads_it(
        spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(f"{ORDERS_HEADER}\r\no1,1\n".encode()))
    (tmp_path / "b.csv").write_bytes("\ufeffcaf\u00e9,x\no1\n".encode())
    (tmp_path / "c.csv").write_bytes(b"")
    heads = FileHeads(spark, str(tmp_path))
    assert heads.first_line(str(tmp_path / "a.csv.gz")) == ORDERS_HEADER
    assert heads.first_line(str(tmp_path / "b.csv")) == "\ufeffcaf\u00e9,x"
    assert heads.first_line(str(tmp_path / "c.csv")) is None


def test_a_local_folder_is_listed_as_hadoop_lists_it(spark: SparkSession, tmp_path: Path) -> None:
    """The idle check and the changed-file warning compare these paths and times with those the
    file source logged through Hadoop: a listing by Python must give the same, to the
    millisecond, or an idle run would start and an untouched file be warned of as changed."""
    folder = tmp_path / "events folder"
    for name in ("a.json", "2025-01-27/b é.json", "_temporary/0/c.json", ".d.json", "e.txt"):
        write_atomically(folder / name, [name])  # sizes differ
    os.utime(folder / "a.json", ns=(1_700_000_000_123_456_789, 1_700_000_000_123_999_999))
    (folder / ".a.json.crc").write_bytes(b"crc")  # Hadoop's checksum files are not listed

    fs, path = hadoopfs.hadoop_path(spark, str(folder))
    hadoop, files = set(), fs.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        hadoop.add((str(status.getPath().toString()), location(str(status.getPath().toUri())),
                    int(status.getModificationTime()), int(status.getLen())))
    listed = files_under(spark, str(folder), S3Settings())
    assert listed is not None
    assert {(f.uri, f.location, f.modified_ms, f.size) for f in listed} == hadoop
    assert sorted(f.path for f in listed) == [
        ".d.json", "2025-01-27/b é.json", "_temporary/0/c.json", "a.json", "e.txt"]
    assert {f.modified_ms for f in listed if f.path == "a.json"} == {1_700_000_000_123}


def test_a_local_folders_names_are_those_hadoop_lists(spark: SparkSession, tmp_path: Path) -> None:
    """Checkpoint and Delta log folders are listed by Python when local (an idle run lists some
    forty): the names must be those Hadoop's local file system gives, its checksum files hidden,
    however the folder is spelled."""
    folder = tmp_path / "offsets é"
    for name in ("0", "1", ".1.crc", ".hidden", "_x", "sub/2"):
        write_atomically(folder / name, [name])

    def through_hadoop(path: str) -> list[str]:
        fs, target = hadoopfs.hadoop_path(spark, path)
        if not fs.exists(target):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(target))

    for spelled in (str(folder), folder.as_uri(), f"file:{folder}", str(folder / "0"),
                    str(tmp_path / "missing")):
        assert hadoopfs.local_path(spark, spelled) is not None, spelled
        assert sorted(hadoopfs.folder_names(spark, spelled)) == through_hadoop(spelled), spelled
    assert sorted(hadoopfs.folder_names(spark, str(folder))) == [".hidden", "0", "1", "_x", "sub"]
    assert hadoopfs.local_path(spark, "s3a://bucket/lakehouse/_delta_log") is None
    assert hadoopfs.local_path(spark, "hdfs://namenode/lakehouse") is None
    for odd in ("a#b", "a?b", "a:b"):  # what a URL parser would take for a fragment, a query, a scheme
        write_atomically(tmp_path / "odd" / odd / "0", ["0"])
        spelled = str(tmp_path / "odd" / odd)
        assert hadoopfs.folder_names(spark, spelled) == through_hadoop(spelled) == ["0"], odd
