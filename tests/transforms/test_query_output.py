"""``medallion sql`` output formats: what a shell script or a spreadsheet gets."""

from __future__ import annotations

import io
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession


def _frame(spark: SparkSession):  # type: ignore[no-untyped-def]
    return spark.sql(
        "SELECT * FROM VALUES "
        "(TIMESTAMP '2025-01-27 10:00:00', 'view', 2L, CAST(0 AS DECIMAL(28,4))), "
        "(TIMESTAMP '2025-01-27 10:05:00', 'purchase', 1L, CAST(12.5 AS DECIMAL(28,4))), "
        "(TIMESTAMP '2025-01-27 10:10:00', NULL, 0L, NULL) "
        "AS t(window_start, event_type, event_count, total_amount) ORDER BY window_start")


def test_csv_has_a_header_and_utc_timestamps(spark: SparkSession) -> None:
    from medallion.serving.query import print_result

    out = io.StringIO()
    assert print_result(_frame(spark), "csv", 0, out) == 3
    assert out.getvalue() == (
        "window_start,event_type,event_count,total_amount\n"
        "2025-01-27 10:00:00,view,2,0.0000\n"
        "2025-01-27 10:05:00,purchase,1,12.5000\n"
        "2025-01-27 10:10:00,,0,\n")


def test_json_lines_keep_nulls_and_exact_decimals(spark: SparkSession) -> None:
    from medallion.serving.query import print_result

    out = io.StringIO()
    assert print_result(_frame(spark), "json", 2, out) == 2
    records = [json.loads(line, parse_float=Decimal) for line in out.getvalue().splitlines()]
    assert records[1]["total_amount"] == Decimal("12.5")
    assert datetime.fromisoformat(records[1]["window_start"]) == datetime.fromisoformat(
        "2025-01-27T10:05:00+00:00")
    assert list(records[0]) == ["window_start", "event_type", "event_count", "total_amount"]

    out = io.StringIO()
    print_result(_frame(spark).where("event_type IS NULL"), "json", 0, out)
    assert json.loads(out.getvalue())["event_type"] is None


def test_table_format_prints_every_row_up_to_the_limit(spark: SparkSession) -> None:
    from medallion.serving.query import print_result

    out = io.StringIO()
    assert print_result(_frame(spark), "table", 2, out) == 2
    lines = out.getvalue().splitlines()
    assert lines[1].split("|")[1:-1] == ["window_start       ", "event_type", "event_count",
                                         "total_amount"]
    assert lines[3].split("|")[1:-1] == ["2025-01-27 10:00:00", "view      ", "2          ",
                                         "0.0000      "]
    assert len(lines) == 6  # border, header, border, two rows, border


def test_show_prints_structs_maps_and_arrays_as_spark_shows_them(
        spark: SparkSession, tmp_path: Path) -> None:
    """`medallion show` reads gold tables with delta-rs: a table grouped by a declared STRUCT
    column crashed it, and a struct printed as a map."""
    from deltalake import DeltaTable

    from medallion.io.deltaread import sorted_head
    from medallion.serving.grid import show_string

    frame = spark.sql(
        "SELECT * FROM VALUES "
        "(named_struct('site', 'B', 'floor', 1), map('fw', 2), array(1, 2), "
        "array(named_struct('a', 'x')), 2), "
        "(named_struct('site', 'A', 'floor', NULL), map('fw', 1, 'hw', 3), array(), "
        "array(), 1) AS t(place, attrs, tags, parts, n)")
    frame.write.format("delta").save(str(tmp_path / "t"))
    columns = frame.columns
    rows, more = sorted_head(DeltaTable(str(tmp_path / "t")), columns, ["place", "attrs", "n"], 5)
    spark_shows = frame.orderBy("n")._jdf.showString(5, 0, False)
    assert show_string(columns, [[row[c] for c in columns] for row in rows], more) == spark_shows


def test_a_script_is_split_at_the_semicolons_that_end_its_statements() -> None:
    """``medallion sql`` runs each statement of a query or a file in order, as ``spark-sql``
    does; a semicolon inside a string, a quoted name or a comment does not end one."""
    from medallion.pipeline.sql import split_statements

    script = ("-- the views; made once\n"
              "CREATE VIEW v AS SELECT 'a;b' AS t, `c;d` FROM x /* e; f */;\n"
              "SELECT \"g;h\", 'it\\'s; here' FROM v;;\n"
              "  ;\n"
              "SELECT 1 -- the last needs no semicolon; this is a comment\n")
    assert split_statements(script) == [
        "-- the views; made once\nCREATE VIEW v AS SELECT 'a;b' AS t, `c;d` FROM x /* e; f */",
        "SELECT \"g;h\", 'it\\'s; here' FROM v",
        "SELECT 1 -- the last needs no semicolon; this is a comment"]
    assert split_statements("SELECT 1") == ["SELECT 1"]
    assert split_statements(" ;\n-- nothing but a comment;\n") == []
    # an unclosed quote is not split: Spark's parser says what is wrong with it
    assert split_statements("SELECT 'open; SELECT 2") == ["SELECT 'open; SELECT 2"]


def test_the_fast_path_prints_the_text_spark_prints_for_every_type(
        spark: SparkSession, tmp_path: Path) -> None:
    """The same rows, written to Delta by Spark, printed by Spark (``--engine spark``) and read
    by delta-rs and printed without Spark (the fast path): the same CSV, JSON Lines and grid."""
    from deltalake import DeltaTable

    from medallion.io.deltaread import arrow_table
    from medallion.serving.output import python_rows, write_rows
    from medallion.serving.query import print_result

    frame = spark.sql(
        "SELECT * FROM VALUES "
        "(1, TIMESTAMP '2025-01-27 10:00:00.5', DATE '2025-01-27', CAST(12.5 AS DECIMAL(28,4)), "
        " 0.1D, 1.0E7D, 1.25E-5D, CAST(0.1 AS FLOAT), true, 'say \"hi\", ok', "
        " array(1, NULL), named_struct('site', 'B', 'floor', CAST(NULL AS INT)), map('fw', 2), "
        " 9223372036854775807L, CAST(-3 AS SMALLINT)), "
        "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) "
        "AS t(id, at, day, amount, ratio, big, small, single, flag, text, tags, place, attrs, "
        "   n, s)")
    frame.write.format("delta").save(str(tmp_path / "t"))
    stored = spark.read.format("delta").load(str(tmp_path / "t")).orderBy("id")
    read = arrow_table(DeltaTable(str(tmp_path / "t")).to_pyarrow_dataset().to_table())
    rows = sorted(python_rows(read), key=lambda row: row["id"])
    for fmt in ("csv", "json", "table"):
        by_spark, fast = io.StringIO(), io.StringIO()
        print_result(stored, fmt, 0, by_spark)
        write_rows(read.column_names, rows, fmt, fast)
        assert fast.getvalue() == by_spark.getvalue(), fmt
