"""Which landing folder ``medallion land`` puts a file in: the declared file sources decide; and
whether a landing file fits its source's declared columns (no JVM)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

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

from medallion.landing import LandingError, entity_of
from medallion.sources.files import csv_header, header_differs, parquet_misfits
from tests.conftest import make_settings


def test_a_file_goes_to_the_one_source_whose_glob_matches(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert entity_of(Path("x/batch-1.json"), None, settings) == "events"  # only events reads *.json


def test_a_name_several_sources_read_needs_the_source_named(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match="more than one source.*customers.*orders.*--entity"):
        entity_of(Path("x/2026-03-02.csv"), None, settings)
    assert entity_of(Path("x/2026-03-02.csv"), "orders", settings) == "orders"
    assert entity_of(Path("x/products.csv"), "products", settings) == "products"


def test_an_unknown_or_kafka_source_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match="unknown source 'events_kafka'.*file sources: events"):
        entity_of(Path("x/a.json"), "events_kafka", settings)
    with pytest.raises(LandingError, match="no source reads"):
        entity_of(Path("x/a.txt"), None, settings)


def test_a_named_source_refuses_a_file_it_would_never_read(tmp_path: Path) -> None:
    """Before, ``--entity events`` landed ``batch-1.jsonl`` where bronze never reads it (events
    reads ``*.json``): the upload succeeded, and the data never arrived."""
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match=r"x/batch-1\.jsonl: source events reads files named "
                                           r"'\*\.json' only; rename the file, or declare "
                                           r"sources\.events\.glob"):
        entity_of(Path("x/batch-1.jsonl"), "events", settings)


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
    # Names without case; within a kind the reader decides (an INT column declared BIGINT, a
    # TIMESTAMP_NTZ declared TIMESTAMP, text stored as BINARY); extra columns are not read.
    fits = StructType([StructField("ID", BinaryType()), StructField("n", IntegerType()),
                       StructField("at", TimestampNTZType()),
                       StructField("tags", ArrayType(IntegerType())),
                       StructField("note", StringType()), StructField("extra", DateType())])
    assert parquet_misfits(fits, declared) == ([], [])
    misfits = StructType([StructField("id", LongType()), StructField("n", StringType()),
                          StructField("at", DateType()), StructField("tags", StringType())])
    assert parquet_misfits(misfits, declared) == (["note"], [
        "id is BIGINT, declared STRING", "n is STRING, declared BIGINT",
        "tags is STRING, declared ARRAY<STRING>"])
    assert parquet_misfits(StructType([StructField("n", BooleanType())]), declared) == (
        ["id", "at", "tags", "note"], ["n is BOOLEAN, declared BIGINT"])
