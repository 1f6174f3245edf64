"""Which landing folder ``medallion land`` puts a file in: the declared file sources decide;
whether a landing file fits its source's declared columns; and ``medallion land`` refusing a file
that does not (no JVM)."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import logging
import shutil
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from medallion.io.sources.files import csv_header, header_differs, parquet_misfits
from medallion.ops.landing import LandingError, land_files, source_of
from medallion.project import Settings, load_settings
from tests.conf_support import copy_base_conf
from tests.conftest import make_settings

FIXTURE_ORDERS = Path(__file__).resolve().parent / "pipeline_fixtures" / "pipelines" / "orders.yaml"


def test_a_file_goes_to_the_one_source_whose_glob_matches(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    # only events reads *.json, only account_changes *.jsonl
    assert source_of(Path("x/batch-1.json"), None, settings).name == "events"
    assert source_of(Path("x/2026-03-01.jsonl"), None, settings).name == "account_changes"


def test_a_name_several_sources_read_needs_the_source_named(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError) as refused:
        source_of(Path("x/2026-03-02.csv"), None, settings)
    assert str(refused.value) == (  # the sources that read it, not events (*.json)
        "x/2026-03-02.csv: more than one source reads a file of this name (customers (*.csv), "
        "orders (*.csv), products (*.csv), stores (*.csv)); name the source with --entity")
    assert source_of(Path("x/2026-03-02.csv"), "orders", settings).name == "orders"
    assert source_of(Path("x/products.csv"), "products", settings).name == "products"


def test_an_unknown_or_kafka_source_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError,
                       match="unknown source 'events_kafka'.*file sources: account_changes, events"):
        source_of(Path("x/a.json"), "events_kafka", settings)
    with pytest.raises(LandingError, match="no source reads"):
        source_of(Path("x/a.txt"), None, settings)


def test_a_named_source_refuses_a_file_it_would_never_read(tmp_path: Path) -> None:
    """``--entity events`` refuses ``batch-1.jsonl`` (events reads ``*.json``): landed, the
    upload would succeed and the data never arrive."""
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match=r"x/batch-1\.jsonl: source events reads files named "
                                           r"'\*\.json' only; rename the file, or declare "
                                           r"sources\.events\.glob"):
        source_of(Path("x/batch-1.jsonl"), "events", settings)


def test_a_csv_header_is_split_as_the_source_reads_it_and_compared_without_case(
        tmp_path: Path) -> None:
    stores = make_settings(tmp_path).file_sources()["stores"]  # header: store_id, city
    assert csv_header('\ufeff"store_id", City ', stores) == ["store_id", "City"]
    assert not header_differs(csv_header('\ufeff"store_id", City ', stores), stores)
    assert header_differs(csv_header("city,store_id", stores), stores)  # swapped
    assert header_differs(csv_header("store_id", stores), stores)  # one missing
    assert header_differs(csv_header("store_id,city,country", stores), stores)  # one more
    semicolons = dataclasses.replace(stores, options={"sep": ";", "quote": "'"})
    assert csv_header("'store;id';city", semicolons) == ["store;id", "city"]
    assert csv_header("store_id,city", semicolons) == ["store_id,city"]
    assert not header_differs(csv_header("store_id;city", semicolons), semicolons)
    pipes = dataclasses.replace(stores, options={"delimiter": "||"})  # Spark allows several chars
    assert csv_header("store_id||city", pipes) == ["store_id", "city"]


def test_a_parquet_file_fits_the_declared_columns_unless_a_column_holds_another_kind_of_value(
        ) -> None:
    declared = StructType([StructField("id", StringType()), StructField("n", LongType()),
                           StructField("at", TimestampType()), StructField("tags", ArrayType(
                               StringType())), StructField("note", StringType())])
    # Names without case; what the reader converts (an INT column declared BIGINT, a
    # TIMESTAMP_NTZ declared TIMESTAMP, text stored as BINARY); extra columns are not read.
    fits = StructType([StructField("ID", BinaryType()), StructField("n", IntegerType()),
                       StructField("at", TimestampNTZType()),
                       StructField("tags", ArrayType(BinaryType())),
                       StructField("note", StringType()), StructField("extra", DateType())])
    assert parquet_misfits(fits, declared) == ([], [])
    misfits = StructType([StructField("id", LongType()), StructField("n", StringType()),
                          StructField("at", DateType()), StructField("tags", StringType())])
    assert parquet_misfits(misfits, declared) == (["note"], [
        "id is BIGINT, declared STRING", "n is STRING, declared BIGINT",
        "at is DATE, declared TIMESTAMP", "tags is STRING, declared ARRAY<STRING>"])
    # Inside arrays, maps and structs too, named by the field that does not fit.
    nested = StructType([StructField("n", LongType()), StructField("tags", ArrayType(LongType())),
                         StructField("at", TimestampType())])
    assert parquet_misfits(nested, StructType([
        StructField("n", IntegerType()), StructField("tags", ArrayType(StringType())),
        StructField("at", DateType())])) == ([], [
            "n is BIGINT, declared INT", "tags[] is BIGINT, declared STRING",
            "at is TIMESTAMP, declared DATE"])
    assert parquet_misfits(StructType([StructField("n", BooleanType())]), declared) == (
        ["id", "at", "tags", "note"], ["n is BOOLEAN, declared BIGINT"])


def test_land_refuses_a_csv_file_whose_header_is_not_the_declared_one_before_landing_anything(
        tmp_path: Path) -> None:
    """Such a file is refused, since landed it would stop every run until someone moved it out
    of the landing folder. The refusal names the file that declares the header, as loaded: here
    an overlay, in a configuration folder of the user's own."""
    conf = copy_base_conf(tmp_path / "conf")  # stores: CSV, header store_id, city
    (conf / "local.yaml").write_text("{}\n", encoding="utf-8")
    overlay = conf / "pipelines" / "orders.local.yaml"  # compressed files too
    overlay.write_text("sources:\n  stores:\n    glob: '*.csv*'\n    header: [store_id, city]\n",
                       encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "landing"),
                             lakehouse=str(tmp_path / "lakehouse"))
    assert settings.file_sources()["stores"].file_glob == "*.csv*"
    good = tmp_path / "stores-1.csv.bz2"  # a BOM, other case, CRLF: the reader reads it as declared
    good.write_bytes(bz2.compress("\ufeffStore_ID, City\r\ns1,Paris\r\n".encode()))
    swapped = tmp_path / "stores-2.csv.gz"
    swapped.write_bytes(gzip.compress(b"city,store_id\nLyon,s2\n"))
    with pytest.raises(LandingError) as refused:
        land_files(settings, [good, swapped], entity="stores")
    assert str(refused.value) == (
        f"{swapped}: its header is city,store_id, not the declared store_id,city "
        f"(sources.stores.header in {overlay}), and its columns would be read by position into "
        "other fields. Nothing was landed: correct the file (or the declaration), then land it "
        "again")
    assert not (tmp_path / "landing").exists()

    broken = tmp_path / "stores-3.csv.gz"
    broken.write_bytes(b"store_id,city\n")  # not gzip
    with pytest.raises(LandingError, match=r"stores-3\.csv\.gz: it cannot be decompressed as its "
                                           r"name says \(Not a gzipped file"):
        land_files(settings, [good, broken], entity="stores")

    binary = tmp_path / "stores-5.csv"  # not text: its "header" is quoted cut short, printable
    binary.write_bytes(b"\x00\x01" * 200 + b"a" * 200 + b"\n")
    with pytest.raises(LandingError) as refused:
        land_files(settings, [binary], entity="stores")
    assert str(refused.value).startswith(
        f"{binary}: its header is {chr(0xfffd) * 120}... (600 characters), not the declared "
        "store_id,city (sources.stores.header")

    empty = tmp_path / "stores-4.csv"
    empty.write_bytes(b"")  # nothing to read as another column
    landed = land_files(settings, [good, empty], entity="stores")
    assert [Path(f.target).name for f in landed] == ["stores-1.csv.bz2", "stores-4.csv"]


def _parquet_settings(tmp_path: Path) -> Settings:
    conf = copy_base_conf(tmp_path / "conf")
    shutil.copy(FIXTURE_ORDERS, conf / "pipelines" / "orders.yaml")  # stores: Parquet
    (conf / "local.yaml").write_text("{}\n", encoding="utf-8")
    return load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "landing"),
                         lakehouse=str(tmp_path / "lakehouse"))


def test_land_refuses_a_parquet_file_bronze_would_refuse_and_warns_of_lacking_columns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = _parquet_settings(tmp_path)  # stores: store_id STRING, city STRING, opened DATE
    files = tmp_path / "files"
    files.mkdir()
    opened = date(2025, 1, 1)
    tables = {
        "good": {"STORE_ID": ["s1"], "City": ["Paris"], "opened": [opened], "manager": ["Eve"]},
        "lacking": {"store_id": ["s2"]},
        "unsigned": {"store_id": pa.array([3], pa.uint64()), "city": ["Nice"], "opened": [opened]},
        "text-date": {"store_id": ["s4"], "city": ["Nice"], "opened": ["2025-01-01"]},
        "number-id": {"store_id": [5], "city": ["Nice"], "opened": [opened]},
        "list-city": {"store_id": ["s6"], "city": [["Nice"]], "opened": [opened]},
    }
    for name, columns in tables.items():
        pq.write_table(pa.table(columns), files / f"{name}.parquet")
    (files / "empty.parquet").write_bytes(b"")
    (files / "export.parquet").write_bytes(b"store_id,city\ns7,Nice\n")  # CSV, misnamed

    declaration = tmp_path / "conf" / "pipelines" / "orders.yaml"
    declared = f"the columns that sources.stores.schema in {declaration} declares"
    refusals = {
        "text-date": f"opened is STRING, declared DATE: it cannot be read as {declared}",
        "number-id": f"store_id is BIGINT, declared STRING: it cannot be read as {declared}",
        "list-city": f"city is ARRAY<STRING>, declared STRING: it cannot be read as {declared}",
    }
    for name, why in refusals.items():
        bad = files / f"{name}.parquet"
        with pytest.raises(LandingError) as refused:
            land_files(settings, [files / "good.parquet", bad])
        assert str(refused.value) == (f"{bad}: {why}. Nothing was landed: correct the file (or "
                                      "the declaration), then land it again")
    with pytest.raises(LandingError, match=r"export\.parquet: it is not a Parquet file bronze can "
                                           r"read: its footer cannot be read \(.*magic bytes"):
        land_files(settings, [files / "export.parquet"])
    assert not (tmp_path / "landing").exists()

    # An unsigned column has no Spark type here: the run's own check reads it as Spark does.
    caplog.set_level(logging.WARNING, logger="medallion.ops.landing")
    landed = land_files(settings, [files / f"{name}.parquet"
                                   for name in ("good", "lacking", "unsigned", "empty")])
    assert sorted(Path(f.target).name for f in landed) == [
        "empty.parquet", "good.parquet", "lacking.parquet", "unsigned.parquet"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{files / 'lacking.parquet'} lacks columns that sources.stores.schema in "
        f"{declaration} declares, and they will be read as null: city, opened"]
