"""Silver compiled from the ``events`` declaration: parsing, validation reasons, deduplication,
enrichment. Every expected value is written out by hand from the contract (the rules the
hand-written silver of the first version enforced)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from medallion.engine.silver.compile import BatchTimes, batch_counts, compile_silver, latest_rows
from medallion.engine.silver.parse import Transform, decimal_places
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.validate import validate
from tests.conftest import REPO

EVENTS = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
validate(EVENTS)
SILVER = compile_silver(EVENTS, EVENTS.silver[0])
parse_events = SILVER.parse
select_valid = SILVER.valid
select_quarantined = SILVER.quarantined
deduplicate_in_batch = SILVER.deduplicate
remove_known = SILVER.remove_known
latest_customers = latest_rows(EVENTS.dimension("customers"))


def declared_parse(folder: Path, declaration: str) -> Transform:
    """The parse of the first silver table of a pipeline declared by ``declaration``."""
    (folder / "pipelines").mkdir()
    (folder / "pipelines" / "declared.yaml").write_text(declaration, encoding="utf-8")
    (spec,) = load_pipelines(folder, "local")
    validate(spec)
    return compile_silver(spec, spec.silver[0]).parse


def enrich_with_customers(customers: DataFrame):  # type: ignore[no-untyped-def]
    """The enrichment, then the table's column order."""
    enrich = SILVER.enrich({"customers": customers})
    return lambda events: events.transform(enrich).transform(SILVER.finish)


INGESTED = datetime(2025, 1, 27, 12, 0, tzinfo=timezone.utc)


def utc(text: str) -> datetime:
    """An instant written ``2025-01-27T10:00:03.120``, in UTC, as Spark returns it (naive)."""
    return datetime.fromisoformat(text)


def bronze(spark: SparkSession, *lines: str, source_file: str = "f.json") -> DataFrame:
    """Bronze rows for ``lines``; file and ingestion time filled in."""
    return spark.createDataFrame(
        [(line, source_file, INGESTED) for line in lines],
        "raw STRING, source_file STRING, ingested_at TIMESTAMP",
    )


def reasons_of(spark: SparkSession, line: str) -> list[str]:
    row = bronze(spark, line).transform(parse_events).first()
    assert row is not None
    return list(row["reasons"])


def test_a_valid_event_is_typed(spark: SparkSession) -> None:
    line = ('{"event_id":"e1","user_id":"u1","event_type":"purchase",'
            '"timestamp":"2025-01-27T10:00:03.120Z","amount":12.5}')
    valid = bronze(spark, line).transform(parse_events).transform(select_valid)
    expected = spark.createDataFrame(
        [("e1", "u1", "purchase", utc("2025-01-27T10:00:03.120"), Decimal("12.5000"), "f.json",
          INGESTED)],
        "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
        "amount DECIMAL(18,4), source_file STRING, ingested_at TIMESTAMP",
    )
    assertDataFrameEqual(valid, expected)


def test_offsets_are_converted_to_utc_and_unknown_fields_ignored(spark: SparkSession) -> None:
    line = ('{"event_id":"e1","user_id":"u1","event_type":"view","device":"ios",'
            '"timestamp":"2025-01-27T11:30:00+01:00"}')
    row = bronze(spark, line).transform(parse_events).first()
    assert row is not None
    assert row["reasons"] == []
    assert row["timestamp"] == utc("2025-01-27T10:30:00")
    assert row["amount"] is None


def test_broken_lines_get_one_reason_each(spark: SparkSession) -> None:
    assert reasons_of(spark, '{"event_id": "e1", "user_id": "u1", "timest') == ["invalid_json"]
    assert reasons_of(spark, "not json") == ["invalid_json"]
    assert reasons_of(spark, "") == ["invalid_json"]
    assert reasons_of(spark, '[{"event_id": "e1"}]') == ["not_an_object"]
    assert reasons_of(spark, '"just a string"') == ["not_an_object"]
    assert reasons_of(spark, ' \t[1, 2]') == ["not_an_object"]
    assert reasons_of(spark, "\n 42") == ["not_an_object"]
    assert reasons_of(spark, "null") == ["not_an_object"]


def test_a_line_that_is_not_utf8_gets_that_reason_alone(spark: SparkSession) -> None:
    """Spark's text reader keeps a line's bytes: one in Latin-1 parses as JSON, but its values
    would carry U+FFFD where its bytes were (``caf\\xe9`` read as ``caf\\ufffd``)."""
    latin_1 = (b'{"event_id":"e1","user_id":"caf\xe9","event_type":"view",'
               b'"timestamp":"2025-01-27T10:00:00Z"}')
    lines = spark.createDataFrame([(bytearray(latin_1),), (bytearray(b"\xff\xfe"),)], "b BINARY")
    rows = (lines.select(F.col("b").cast("string").alias("raw"), F.lit("f.json").alias("source_file"),
                         F.lit(INGESTED).alias("ingested_at"))
            .transform(parse_events).collect())
    assert [list(row["reasons"]) for row in rows] == [["invalid_utf8"], ["invalid_utf8"]]
    assert reasons_of(spark, '{"event_id":"e1","user_id":"caf\u00e9","event_type":"view",'
                             '"timestamp":"2025-01-27T10:00:00Z"}') == []  # UTF-8: valid
    assert reasons_of(spark, '{"event_id":"e1","user_id":"caf\ufffd","event_type":"view",'
                             '"timestamp":"2025-01-27T10:00:00Z"}') == ["invalid_utf8"]


def test_a_csv_field_a_reader_could_not_decode_is_quarantined(spark: SparkSession) -> None:
    """Spark's CSV reader decodes as it reads: bytes that are not UTF-8 reach bronze as U+FFFD."""
    orders = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "orders")
    validate(orders)
    parse_orders = compile_silver(orders, orders.silver[0]).parse
    line = ("1", "s1", "{sku}", "2", "3.50", "2025-01-27", "10:00:00", None, "f.csv", INGESTED)
    bronze_orders = spark.createDataFrame(
        [(order, *[sku if v == "{sku}" else v for v in line])
         for order, sku in (("o1", "caf\u00e9-beans"), ("o2", "caf\ufffd-beans"))],
        "order_id STRING, line_no STRING, store_id STRING, sku STRING, quantity STRING, "
        "unit_price STRING, order_date STRING, order_time STRING, _corrupt_record STRING, "
        "source_file STRING, ingested_at TIMESTAMP")
    reasons = {r["order_id"]: list(r["reasons"]) for r in bronze_orders.transform(parse_orders).collect()}
    assert reasons == {"o1": [], "o2": ["invalid_utf8"]}


def test_an_order_line_stamped_more_than_a_day_after_its_landing_is_quarantined(
        spark: SparkSession) -> None:
    """A till whose clock ran years ahead would move the watermark and close every window on
    the lines after it. The tills write Paris time (UTC+1 in January); landed 2025-01-27 12:00Z."""
    orders = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "orders")
    validate(orders)
    parse_orders = compile_silver(orders, orders.silver[0]).parse
    lines = [("now", "2025-01-27", "12:30:00"), ("a day on", "2025-01-28", "13:00:00"),
             ("a second more", "2025-01-28", "13:00:01"), ("years on", "2031-06-01", "09:00:00")]
    bronze_orders = spark.createDataFrame(
        [(order, "1", "s1", "p1", "2", "3.50", day, time, None, "f.csv", INGESTED)
         for order, day, time in lines],
        "order_id STRING, line_no STRING, store_id STRING, sku STRING, quantity STRING, "
        "unit_price STRING, order_date STRING, order_time STRING, _corrupt_record STRING, "
        "source_file STRING, ingested_at TIMESTAMP")
    reasons = {r["order_id"]: list(r["reasons"]) for r in bronze_orders.transform(parse_orders).collect()}
    assert reasons == {"now": [], "a day on": [], "a second more": ["future_ordered_at"],
                       "years on": ["future_ordered_at"]}


def test_an_object_after_white_space_is_an_object(spark: SparkSession) -> None:
    """JSON allows white space before the document: the object after it is parsed as any other."""
    line = ('\r\n\t {"event_id":"e1","user_id":"u1","event_type":"view",'
            '"timestamp":"2025-01-27T10:00:00Z"}')
    row = bronze(spark, line).transform(parse_events).first()
    assert row is not None
    assert (row["reasons"], row["event_id"], row["timestamp"]) == (
        [], "e1", utc("2025-01-27T10:00:00"))


def test_every_failed_rule_is_named(spark: SparkSession) -> None:
    assert reasons_of(spark, "{}") == [
        "missing_event_id", "missing_user_id", "missing_event_type", "missing_timestamp"]
    assert reasons_of(
        spark,
        '{"event_id":5,"user_id":"  ","event_type":"refund","timestamp":"yesterday","amount":-1}',
    ) == ["invalid_event_id", "missing_user_id", "invalid_event_type", "invalid_timestamp",
          "negative_amount"]


def test_timestamp_rules(spark: SparkSession) -> None:
    base = '{"event_id":"e","user_id":"u","event_type":"view","timestamp":%s}'
    assert reasons_of(spark, base % '"2025-01-27T10:00:00"') == ["invalid_timestamp"]  # no zone
    assert reasons_of(spark, base % '"2025-02-30T10:00:00Z"') == ["invalid_timestamp"]  # no such day
    # INGESTED is 2025-01-27T12:00Z: a device's clock a few hours ahead is an event, a day and
    # more ahead is not (it would move every watermark past the real data).
    assert reasons_of(spark, base % '"2025-01-28T11:59:59Z"') == []
    assert reasons_of(spark, base % '"2025-01-28T12:00:01Z"') == ["future_timestamp"]
    assert reasons_of(spark, base % '"9999-12-31T23:59:59Z"') == ["future_timestamp"]
    assert reasons_of(spark, base % "1737972000") == ["invalid_timestamp"]  # a number
    assert reasons_of(spark, base % "null") == ["missing_timestamp"]
    assert reasons_of(spark, base % '"2025-01-27T10:00:00.5-05:30"') == []


def test_amount_rules(spark: SparkSession) -> None:
    base = '{"event_id":"e","user_id":"u","event_type":"purchase",' \
           '"timestamp":"2025-01-27T10:00:00Z","amount":%s}'
    assert reasons_of(spark, base % "null") == []
    assert reasons_of(spark, base % "0") == []
    assert reasons_of(spark, base % '"12.50"') == ["invalid_amount"]  # a string, not a number
    assert reasons_of(spark, base % "true") == ["invalid_amount"]
    assert reasons_of(spark, base % "1e40") == ["invalid_amount"]  # beyond DECIMAL(18,4)
    # a fifth decimal place does not fit DECIMAL(18,4): never rounded away
    assert reasons_of(spark, base % "12.34567") == ["invalid_amount"]
    assert reasons_of(spark, base % "1.5e-5") == ["invalid_amount"]
    assert reasons_of(spark, base % "12.345600") == []  # trailing zeros are no decimal places
    assert reasons_of(spark, base % "1.2345e2") == []  # 123.45
    assert reasons_of(spark, base % "-0.01") == ["negative_amount"]


def test_decimal_places_counts_what_a_number_needs_to_be_held_exactly(spark: SparkSession) -> None:
    texts = {"517": 0, "517.0": 0, "-1.2300": 2, "+.5": 1, "12.": 0, " 7.25 ": 2, "1.5E-3": 4,
             "1.0E-30": 30, "1.0E12": 0, "1200E-2": 0, "1200E-3": 1, "10.5e-1": 2, "0E-5": 0,
             "0.000000100": 7, "abc": None, "1.2.3": None, "": None, "+": None, ".": None, "-.e5": None,
             "NaN": None, "Infinity": None}
    rows = spark.createDataFrame([(t,) for t in texts], "t STRING").select(
        "t", decimal_places(F.col("t")).alias("places")).collect()
    assert {r["t"]: r["places"] for r in rows} == texts


def test_quarantine_keeps_the_raw_line_and_the_id_when_there_is_one(spark: SparkSession) -> None:
    parsed = bronze(spark, "oops", '{"event_id":"e9","user_id":"u1","event_type":"nope",'
                                   '"timestamp":"2025-01-27T10:00:00Z"}').transform(parse_events)
    expected = spark.createDataFrame(
        [("oops", None, ["invalid_json"], "f.json", INGESTED),
         ('{"event_id":"e9","user_id":"u1","event_type":"nope","timestamp":"2025-01-27T10:00:00Z"}',
          "e9", ["invalid_event_type"], "f.json", INGESTED)],
        "raw STRING, event_id STRING, reasons ARRAY<STRING>, source_file STRING, "
        "ingested_at TIMESTAMP",
    )
    assertDataFrameEqual(parsed.transform(select_quarantined), expected)
    assert parsed.transform(select_valid).count() == 0


EVENT_SCHEMA = ("event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
                "amount DECIMAL(18,4), source_file STRING, ingested_at TIMESTAMP")


def test_deduplicate_keeps_the_first_delivery(spark: SparkSession) -> None:
    t = utc("2025-01-27T10:00:00")
    first, later = utc("2025-01-27T11:00:00"), utc("2025-01-27T11:05:00")
    events = spark.createDataFrame(
        [("e1", "u1", "view", t, None, "b.json", later),
         ("e1", "u1", "view", t, None, "a.json", first),
         ("e2", "u2", "view", t, None, "a.json", first)],
        EVENT_SCHEMA,
    )
    expected = spark.createDataFrame(
        [("e1", "u1", "view", t, None, "a.json", first),
         ("e2", "u2", "view", t, None, "a.json", first)],
        EVENT_SCHEMA,
    )
    assertDataFrameEqual(events.transform(deduplicate_in_batch), expected)


def test_remove_known_drops_events_already_in_silver(spark: SparkSession) -> None:
    t = utc("2025-01-27T10:00:00")
    events = spark.createDataFrame(
        [("e1", "u1", "view", t, None, "a.json", t), ("e2", "u1", "view", t, None, "a.json", t)],
        EVENT_SCHEMA,
    )
    known = spark.createDataFrame([("e1",), ("e7",)], "event_id STRING")
    assert [r.event_id for r in events.transform(remove_known(known)).collect()] == ["e2"]


SILVER_ROWS = "event_id STRING, timestamp TIMESTAMP"
DAY = 86_400_000_000  # microseconds


def micros(text: str) -> int:
    """An instant written ``2025-01-02T00:00:00`` (UTC) as microseconds since the epoch."""
    since = datetime.fromisoformat(text).replace(tzinfo=timezone.utc) - EPOCH
    return since // timedelta(microseconds=1)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def reach_of(valid_rows: DataFrame) -> BatchTimes:
    """Where ``valid_rows`` lie in event time, as the job finds it (every row valid)."""
    reach = batch_counts(valid_rows.withColumn("reasons", F.array().cast("array<string>")),
                         "timestamp").reach
    assert reach is not None
    return reach


def test_event_date_scope_compares_keys_with_the_batch_dates_only(spark: SparkSession) -> None:
    """A re-delivery (same id, same time) is found however late; the lookup reads only the
    dates the batch is on, so the same id at another date is not compared with."""
    silver = spark.createDataFrame(
        [("e1", utc("2025-01-01T23:59:59")), ("e2", utc("2025-01-02T00:00:00")),
         ("e3", utc("2025-01-02T23:59:59.999")), ("e4", utc("2025-01-03T00:00:00")),
         ("e5", utc("2025-01-05T12:00:00")), ("e6", None)],
        SILVER_ROWS)
    batch = spark.createDataFrame(
        [("e2", utc("2025-01-02T00:00:00")), ("e3", utc("2025-01-02T23:59:59.999")),
         ("e5", utc("2025-01-05T12:00:00")), ("e9", utc("2025-01-05T08:00:00"))],
        SILVER_ROWS)
    reach = reach_of(batch)
    assert reach.days == ((micros("2025-01-02T00:00:00"), micros("2025-01-03T00:00:00")),
                          (micros("2025-01-05T00:00:00"), micros("2025-01-06T00:00:00")))
    assert (reach.earliest, reach.nulls) == (micros("2025-01-02T00:00:00"), False)
    known = SILVER.known_rows(silver, reach)
    assert sorted(r.event_id for r in known.collect()) == ["e2", "e3", "e5"]


def test_event_date_scope_merges_adjacent_days_and_keeps_null_times(spark: SparkSession) -> None:
    silver = spark.createDataFrame(
        [("e1", utc("2025-01-01T10:00:00")), ("e2", utc("2025-01-02T10:00:00")),
         ("e3", utc("2025-01-03T10:00:00")), ("e6", None)], SILVER_ROWS)
    batch = spark.createDataFrame(
        [("e1", utc("2025-01-01T09:00:00")), ("e2", utc("2025-01-02T09:00:00")), ("e6", None)],
        SILVER_ROWS)
    reach = reach_of(batch)
    assert reach.days == ((micros("2025-01-01T00:00:00"), micros("2025-01-03T00:00:00")),)
    assert reach.nulls
    assert sorted(r.event_id for r in SILVER.known_rows(silver, reach).collect()) == ["e1", "e2", "e6"]


def test_batch_counts_give_the_counts_and_the_valid_rows_times_in_one_pass(
        spark: SparkSession) -> None:
    """What the silver job asks of a parsed batch: its rows, its quarantined rows, and the dates
    and earliest time of its valid rows only (a quarantined row's time reaches no lookup)."""
    parsed = spark.createDataFrame(
        [(utc("2025-01-03T23:59:59.999"), []), (utc("2025-01-02T00:00:00"), []),
         (utc("2025-01-05T12:00:00"), []), (None, []),
         (utc("2024-12-31T08:00:00"), ["invalid_amount"]),  # earlier, but quarantined
         (None, ["missing_timestamp"]), (utc("2025-01-09T00:00:00"), ["duplicate_field"])],
        "timestamp TIMESTAMP, reasons ARRAY<STRING>")
    counts = batch_counts(parsed, "timestamp")
    assert (counts.rows_in, counts.quarantined) == (7, 3)
    assert counts.reach is not None
    assert counts.reach.days == ((micros("2025-01-02T00:00:00"), micros("2025-01-04T00:00:00")),
                                 (micros("2025-01-05T00:00:00"), micros("2025-01-06T00:00:00")))
    assert (counts.reach.earliest, counts.reach.nulls) == (micros("2025-01-02T00:00:00"), True)
    # Without an event time to bound the lookup, only the counts.
    assert batch_counts(parsed, None) == type(counts)(7, 3, None)
    # Only quarantined rows: no day, no earliest time, no null time among valid rows.
    only_bad = batch_counts(parsed.where("size(reasons) > 0"), "timestamp")
    assert only_bad.reach is not None
    assert (only_bad.rows_in, only_bad.quarantined) == (3, 3)
    assert (only_bad.reach.days, only_bad.reach.earliest, only_bad.reach.nulls) == ((), None, False)


def test_a_batch_with_events_on_the_first_and_last_days_spark_knows(spark: SparkSession) -> None:
    """A batch's days are kept as microseconds, not Python datetimes, so an event on 9999-12-31
    (its day ends in year 10000) or on 0001-01-01 has a day like any other."""
    rows = ("SELECT 'first' AS event_id, TIMESTAMP'0001-01-01 00:00:00' AS timestamp UNION ALL "
            "SELECT 'last', TIMESTAMP'9999-12-31 23:59:59' UNION ALL "
            "SELECT 'usual', TIMESTAMP'2025-01-27 10:00:00'")
    reach = reach_of(spark.sql(rows))
    assert reach.days == ((micros("0001-01-01T00:00:00"), micros("0001-01-02T00:00:00")),
                          (micros("2025-01-27T00:00:00"), micros("2025-01-28T00:00:00")),
                          (micros("9999-12-31T00:00:00"), micros("9999-12-31T00:00:00") + DAY))
    assert reach.earliest == micros("0001-01-01T00:00:00")
    silver = spark.sql(rows + " UNION ALL SELECT 'other', TIMESTAMP'2025-01-28 10:00:00'")
    assert sorted(r.event_id for r in SILVER.known_rows(silver, reach).collect()) == [
        "first", "last", "usual"]


CUSTOMER_SCHEMA = ("customer_id STRING, customer_name STRING, segment STRING, "
                   "_corrupt_record STRING, source_file STRING, ingested_at TIMESTAMP")


def test_latest_customers_takes_the_newest_well_formed_row(spark: SparkSession) -> None:
    old, new = utc("2025-01-01T00:00:00"), utc("2025-01-02T00:00:00")
    customers = spark.createDataFrame(
        [("c1", "Ann", "smb", None, "1.csv", old),
         ("c1", "Ann B.", "enterprise", None, "2.csv", new),
         ("c2", "Bob", None, None, "1.csv", old),
         (None, None, None, "garbage,line,,,", "1.csv", new),
         ("c3", "Bad", "smb", "c3,Bad,smb,extra", "2.csv", new)],
        CUSTOMER_SCHEMA,
    )
    expected = spark.createDataFrame(
        [("c1", "Ann B.", "enterprise"), ("c2", "Bob", None)],
        "customer_id STRING, customer_name STRING, segment STRING",
    )
    assertDataFrameEqual(customers.transform(latest_customers), expected)


def test_customer_ids_differing_only_by_spaces_are_one_customer(spark: SparkSession) -> None:
    t = utc("2025-01-01T00:00:00")
    customers = spark.createDataFrame(
        [("u1", "Ann", "smb", None, "1.csv", t),
         (" u1", "Ann", "smb", None, "1.csv", t),
         ("u1 ", "Ann B.", "enterprise", None, "1.csv", t),
         ("  ", "Nobody", "smb", None, "1.csv", t)],
        CUSTOMER_SCHEMA,
    )
    dimension = customers.transform(latest_customers)
    # one row; among rows of one file the name then the segment decide (descending)
    assert [tuple(r) for r in dimension.collect()] == [("u1", "Ann B.", "enterprise")]
    # and an event of u1, whatever spaces its id carries, is enriched once
    line = ('{"event_id":" e1 ","user_id":" u1","event_type":"view",'
            '"timestamp":"2025-01-27T10:00:00Z"}')
    events = bronze(spark, line).transform(parse_events).transform(select_valid)
    enriched = events.transform(enrich_with_customers(dimension)).collect()
    assert [(r["event_id"], r["user_id"], r["customer_name"]) for r in enriched] == [
        ("e1", "u1", "Ann B.")]


def test_the_same_customer_row_wins_in_any_order(spark: SparkSession) -> None:
    t = utc("2025-01-01T00:00:00")
    rows = [("u1", "Ann", "smb", None, "1.csv", t), (" u1", "Zed", "smb", None, "1.csv", t)]
    first = spark.createDataFrame(rows, CUSTOMER_SCHEMA).transform(latest_customers).collect()
    second = spark.createDataFrame(rows[::-1], CUSTOMER_SCHEMA).repartition(2) \
        .transform(latest_customers).collect()
    assert [tuple(r) for r in first] == [tuple(r) for r in second] == [("u1", "Zed", "smb")]


def test_enrichment_misses_get_the_unknown_segment(spark: SparkSession) -> None:
    t = utc("2025-01-27T10:00:00")
    events = spark.createDataFrame(
        [("e1", "c1", "view", t, None, "a.json", t),
         ("e2", "nobody", "view", t, None, "a.json", t),
         ("e3", "c2", "purchase", t, Decimal("3.0000"), "a.json", t)],
        EVENT_SCHEMA,
    )
    customers = spark.createDataFrame(
        [("c1", "Ann", "smb"), ("c2", "Bob", None)],
        "customer_id STRING, customer_name STRING, segment STRING",
    )
    expected = spark.createDataFrame(
        [("e1", "c1", "view", t, None, "Ann", "smb", "a.json", t),
         ("e2", "nobody", "view", t, None, None, "unknown", "a.json", t),
         ("e3", "c2", "purchase", t, Decimal("3.0000"), "Bob", "unknown", "a.json", t)],
        "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
        "amount DECIMAL(18,4), customer_name STRING, segment STRING, source_file STRING, "
        "ingested_at TIMESTAMP",
    )
    assertDataFrameEqual(events.transform(enrich_with_customers(customers)), expected)


TWO_DIMENSIONS = """
sources:
  flights: {format: csv, path: flights, header: [flight, origin, dest], bronze: {table: flights}}
  airports: {format: csv, path: airports, header: [code, name], bronze: {table: airports}}
  cities: {format: csv, path: cities, header: [code, name], bronze: {table: cities}}
dimensions:
  airports: {source: airports, key: code, columns: [name]}
  cities: {source: cities, key: code, columns: [name]}
silver:
  flights:
    input: bronze/flights
    parse: columns
    columns:
      flight: {type: STRING, required: true}
      origin: STRING
      dest: STRING
    dedup: {key: [flight]}
    enrich:
      airports: {join: {origin: code}, columns: {origin_name: name}}
      cities:
        join: {dest: code}
        columns: {dest_city: name}
        defaults: {dest_city: unknown}
"""


def test_two_dimensions_with_one_column_name_enrich_one_table_under_the_names_it_gives(
        spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "flights.yaml").write_text(TWO_DIMENSIONS, encoding="utf-8")
    (spec,) = load_pipelines(tmp_path, "local")
    validate(spec)
    silver = compile_silver(spec, spec.silver[0])
    t = utc("2025-01-27T10:00:00")
    flights = spark.createDataFrame(
        [("f1", "LYS", "CDG", "a.csv", t), ("f2", "CDG", "XXX", "a.csv", t)],
        "flight STRING, origin STRING, dest STRING, source_file STRING, ingested_at TIMESTAMP")
    airports = spark.createDataFrame([("LYS", "Saint-Exupery"), ("CDG", "Roissy")],
                                     "code STRING, name STRING")
    cities = spark.createDataFrame([("CDG", "Paris")], "code STRING, name STRING")
    enriched = flights.transform(silver.enrich({"airports": airports, "cities": cities})) \
        .transform(silver.finish)
    assert enriched.columns == ["flight", "origin", "dest", "origin_name", "dest_city",
                                "source_file", "ingested_at"]
    assert sorted(tuple(r)[:5] for r in enriched.collect()) == [
        ("f1", "LYS", "CDG", "Saint-Exupery", "Paris"),
        ("f2", "CDG", "XXX", "Roissy", "unknown")]


NESTED = """
sources:
  readings: {format: json_lines, path: readings, bronze: {table: readings}}
silver:
  readings:
    input: bronze/readings
    parse: json
    columns:
      id: {type: STRING, required: true}
      flags: ARRAY<STRING>
      attrs: MAP<STRING,INT>
      position: "STRUCT<lat: DOUBLE, `lon-e`: DOUBLE, tags: ARRAY<BOOLEAN>, at: TIMESTAMP>"
    dedup: {key: [id]}
"""


def test_a_value_inside_an_array_map_or_struct_converts_as_strictly_as_a_column(
        spark: SparkSession, tmp_path: Path) -> None:
    """A nested value that does not convert to its declared type (a string where a DOUBLE is
    declared, a number where a STRING is) quarantines the row: Spark's own conversion would set it
    to null, or turn the number into text, and let the row pass as valid."""
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "nested.yaml").write_text(NESTED, encoding="utf-8")
    (nested,) = load_pipelines(tmp_path, "local")
    validate(nested)
    parse = compile_silver(nested, nested.silver[0]).parse
    good = {"flags": ["a"], "attrs": {"fw": 2},
            "position": {"lat": 1.5, "lon-e": 2, "tags": [True], "at": "2025-01-27 10:00:00"}}
    lines = {
        "good": good,
        "absent-and-null-inside": {"flags": [None], "attrs": {"fw": None},
                                   "position": {"lat": None, "extra": "x"}},
        "number-in-text-array": {**good, "flags": ["a", 1]},
        "text-in-int-map": {**good, "attrs": {"fw": "2"}},
        "int-map-overflow": {**good, "attrs": {"fw": 2**40}},
        "half-in-int-map": {**good, "attrs": {"fw": 2.5}},
        "whole-float-in-int-map": {**good, "attrs": {"fw": 2.0}},
        "text-in-double-field": {**good, "position": {"lat": "north"}},
        "number-in-boolean-array-in-struct": {**good, "position": {"tags": [True, 0]}},
        "text-for-array": {**good, "flags": "a,b"},
        # a time is text, inside a struct as at the top: Spark's conversion takes a number as
        # seconds since 1970
        "number-for-time-in-struct": {**good, "position": {"at": 1737972000}},
        "text-not-a-time-in-struct": {**good, "position": {"at": "soon"}},
    }
    rows = bronze(spark, *(json.dumps({"id": key, **value}) for key, value in lines.items())
                  ).transform(parse).collect()
    assert {r["id"]: list(r["reasons"]) for r in rows} == {
        "good": [], "absent-and-null-inside": [],
        "number-in-text-array": ["invalid_flags"], "text-in-int-map": ["invalid_attrs"],
        "int-map-overflow": ["invalid_attrs"], "half-in-int-map": ["invalid_attrs"],
        "whole-float-in-int-map": [], "text-in-double-field": ["invalid_position"],
        "number-in-boolean-array-in-struct": ["invalid_position"],
        "text-for-array": ["invalid_flags"],
        "number-for-time-in-struct": ["invalid_position"],
        "text-not-a-time-in-struct": ["invalid_position"]}
    kept = next(r for r in rows if r["id"] == "good")
    assert (kept["flags"], kept["attrs"], kept["position"].asDict(recursive=True)) == (
        ["a"], {"fw": 2}, {"lat": 1.5, "lon-e": 2.0, "tags": [True],
                           "at": datetime(2025, 1, 27, 10, 0)})


CLICKS = """
sources:
  clicks: {format: json_lines, path: clicks, bronze: {table: clicks}}
silver:
  clicks:
    input: bronze/clicks
    parse: json
    columns:
      id: {type: STRING, required: true}
      clicked_at:
        type: TIMESTAMP
        required: true
        expr: timestamp_millis(try_cast(ms AS BIGINT))
      page: {type: STRING, expr: "concat(site, path)"}
    dedup: {key: [id]}
"""


def test_an_expression_null_from_fields_that_are_there_is_invalid_not_missing(
        spark: SparkSession, tmp_path: Path) -> None:
    """An expression's null result was always ``missing_<col>``: a click whose ``ms`` was
    ``"soon"`` was reported as having no time at all. Missing now means a field the expression
    reads is absent; with every field there, a null result is an invalid value."""
    parse = declared_parse(tmp_path, CLICKS)
    lines = {
        "good": {"ms": "1737972000000", "site": "a", "path": "/b"},
        "ms-not-a-number": {"ms": "soon", "site": "a", "path": "/b"},
        "ms-absent": {"site": "a", "path": "/b"},
        "ms-null": {"ms": None},
        "path-absent": {"ms": 1737972000000, "site": "a"},
    }
    rows = bronze(spark, *(json.dumps({"id": key, **value}) for key, value in lines.items())
                  ).transform(parse).collect()
    assert {r["id"]: list(r["reasons"]) for r in rows} == {
        "good": [], "ms-not-a-number": ["invalid_clicked_at"], "ms-absent": ["missing_clicked_at"],
        "ms-null": ["missing_clicked_at"], "path-absent": []}
    good = next(r for r in rows if r["id"] == "good")
    assert (good["clicked_at"], good["page"]) == (datetime(2025, 1, 27, 10, 0), "a/b")
    assert next(r for r in rows if r["id"] == "path-absent")["page"] is None


def test_an_order_line_whose_total_cannot_be_computed_from_its_fields_says_so(
        spark: SparkSession) -> None:
    """``line_total`` is an expression over ``quantity`` and ``unit_price``: a price that is not a
    number makes both the price and the total invalid; an absent price, the price missing only."""
    orders = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "orders")
    validate(orders)
    parse_orders = compile_silver(orders, orders.silver[0]).parse
    prices = {"priced": "3.50", "not-a-price": "three", "no-price": None}
    bronze_orders = spark.createDataFrame(
        [(order, "1", "s1", "p1", "2", price, "2025-01-27", "10:00:00", None, "f.csv", INGESTED)
         for order, price in prices.items()],
        "order_id STRING, line_no STRING, store_id STRING, sku STRING, quantity STRING, "
        "unit_price STRING, order_date STRING, order_time STRING, _corrupt_record STRING, "
        "source_file STRING, ingested_at TIMESTAMP")
    reasons = {r["order_id"]: list(r["reasons"]) for r in bronze_orders.transform(parse_orders).collect()}
    assert reasons == {"priced": [], "not-a-price": ["invalid_unit_price", "invalid_line_total"],
                       "no-price": ["missing_unit_price"]}


PRICES = """
sources:
  prices: {format: json_lines, path: prices, bronze: {table: prices}}
silver:
  prices:
    input: bronze/prices
    parse: json
    columns:
      id: {type: STRING, required: true}
      cents: {type: BIGINT, expr: "try_cast(price AS DECIMAL(10,2)) * 100"}
      dear: {type: BOOLEAN, expr: "try_cast(price AS DECIMAL(10,2)) > 5"}
      label: {type: INT, expr: "concat(price, '')"}
    dedup: {key: [id]}
"""


def test_an_expression_that_gives_a_number_converts_as_a_number_not_from_its_text(
        spark: SparkSession, tmp_path: Path) -> None:
    """An expression's result was converted to the declared type from its text: ``price * 100``
    gave DECIMAL 1000.00, whose text '1000.00' is no BIGINT, so every row was invalid. A number
    or a boolean now converts as a typed raw field does; text still converts from text."""
    parse = declared_parse(tmp_path, PRICES)
    lines = {"ten": {"price": "10.00"}, "two": {"price": "2"}, "text": {"price": "x"}}
    rows = bronze(spark, *(json.dumps({"id": key, **value}) for key, value in lines.items())
                  ).transform(parse).collect()
    assert {r["id"]: (r["cents"], r["dear"], r["label"], list(r["reasons"])) for r in rows} == {
        "ten": (1000, True, None, ["invalid_label"]),  # '10.00' is no INT, as text
        "two": (200, False, 2, []),
        "text": (None, None, None, ["invalid_cents", "invalid_dear", "invalid_label"])}


PAYMENTS = """
sources:
  payments:
    format: parquet
    path: payments
    schema: {id: STRING, card: "STRUCT<brand: STRING, last4: STRING, issuer: STRUCT<bank: STRING>>"}
    bronze: {table: payments}
silver:
  payments:
    input: bronze/payments
    parse: columns
    columns:
      id: {type: STRING, required: true}
      brand: {type: STRING, source: card.brand, required: true}
      bank: {type: STRING, source: card.issuer.bank}
      last4: {type: STRING, expr: upper(card.last4)}
    dedup: {key: [id]}
"""


def test_a_struct_field_of_a_typed_input_is_a_column_and_its_null_is_absent_not_invalid(
        spark: SparkSession, tmp_path: Path) -> None:
    """A Parquet source's struct fields (``card.brand``): ``source`` could name only a top-level
    column (refused before Spark started), and an expression reading ``card.last4`` of a card
    without one gave ``invalid_last4``, quarantining a valid payment, since its absence was
    judged on ``card`` alone. The field a path names is what is present or absent now."""
    parse = declared_parse(tmp_path, PAYMENTS)
    cards = {
        "full": ("visa", "12ab", ("b1",)),
        "no-last4": ("visa", None, ("b1",)),
        "no-issuer": ("mc", "9", None),
        "no-brand": (None, "77x", ("b2",)),
        "no-card": None,
    }
    bronze_payments = spark.createDataFrame(
        [(key, card, "f.parquet", INGESTED) for key, card in cards.items()],
        "id STRING, card STRUCT<brand: STRING, last4: STRING, issuer: STRUCT<bank: STRING>>, "
        "source_file STRING, ingested_at TIMESTAMP")
    rows = bronze_payments.transform(parse).collect()
    assert {r["id"]: (r["brand"], r["bank"], r["last4"], list(r["reasons"])) for r in rows} == {
        "full": ("visa", "b1", "12AB", []),
        "no-last4": ("visa", "b1", None, []),
        "no-issuer": ("mc", None, "9", []),
        "no-brand": (None, "b2", "77X", ["missing_brand"]),
        "no-card": (None, None, None, ["missing_brand"]),
    }



DELAYS = """
sources:
  flights:
    format: parquet
    path: flights
    schema: {id: STRING, dep: STRING, arr: DOUBLE, fare: DOUBLE}
    bronze: {table: flights}
silver:
  flights:
    input: bronze/flights
    parse: columns
    columns:
      id: {type: STRING, required: true}
      dep_time: {type: INT, expr: "try_cast(dep AS DOUBLE)"}
      arr_time: {type: INT, source: arr}
      fare: {type: "DECIMAL(18,4)", source: fare}
      fare_rounded: {type: "DECIMAL(18,2)", expr: "round(fare, 2)"}
    dedup: {key: [id]}
"""


def test_a_number_that_is_not_whole_is_no_integer_whether_typed_or_computed(
        spark: SparkSession, tmp_path: Path) -> None:
    """An INT exported as a float (``517.0``, as pandas writes an integer column with nulls) is
    that INT; ``830.5`` is no INT, from an expression or from a typed field: its row is
    quarantined with the column's reason, never stored truncated. So is a number with more decimal
    places than a DECIMAL's scale: never stored rounded."""
    parse = declared_parse(tmp_path, DELAYS)
    flights = {
        "whole": ("517.0", 1201.0, 19.99),
        "half-dep": ("830.5", 1201.0, 19.99),
        "half-arr": ("517", 1201.5, 19.99),
        "fine-fare": ("517", 1201.0, 0.12345),
        "fare-at-scale": ("517", 1201.0, 0.1234),
        "huge": ("1e12", 1e12, 19.99),
        "no-dep": (None, 1201.0, None),
    }
    bronze_flights = spark.createDataFrame(
        [(key, *values, "f.parquet", INGESTED) for key, values in flights.items()],
        "id STRING, dep STRING, arr DOUBLE, fare DOUBLE, source_file STRING, ingested_at TIMESTAMP")
    rows = bronze_flights.transform(parse).collect()
    assert {r["id"]: (r["dep_time"], r["arr_time"], r["fare"], list(r["reasons"]))
            for r in rows} == {
        "whole": (517, 1201, Decimal("19.9900"), []),
        "half-dep": (None, 1201, Decimal("19.9900"), ["invalid_dep_time"]),
        "half-arr": (517, None, Decimal("19.9900"), ["invalid_arr_time"]),
        "fine-fare": (517, 1201, None, ["invalid_fare"]),
        "fare-at-scale": (517, 1201, Decimal("0.1234"), []),
        "huge": (None, None, Decimal("19.9900"), ["invalid_dep_time", "invalid_arr_time"]),
        "no-dep": (None, 1201, None, []),
    }
    # rounding, declared in the expression, is what the column holds
    assert {r["id"]: r["fare_rounded"] for r in rows} == {
        "whole": Decimal("19.99"), "half-dep": Decimal("19.99"), "half-arr": Decimal("19.99"),
        "fine-fare": Decimal("0.12"), "fare-at-scale": Decimal("0.12"), "huge": Decimal("19.99"),
        "no-dep": None}


SEATS = """
sources:
  bookings: {format: json_lines, path: bookings, bronze: {table: bookings}}
silver:
  bookings:
    input: bronze/bookings
    parse: json
    columns:
      id: {type: STRING, required: true}
      seats: {type: INT}
      total: {type: BIGINT, expr: "try_cast(seats AS DOUBLE) * 2"}
    dedup: {key: [id]}
"""


def test_a_json_number_that_is_not_whole_is_no_integer(spark: SparkSession, tmp_path: Path) -> None:
    parse = declared_parse(tmp_path, SEATS)
    lines = {"three": 3, "three-point-oh": 3.0, "half": 2.5, "tiny": 1e-30, "big": 3e9}
    rows = bronze(spark, *(json.dumps({"id": key, "seats": value}) for key, value in lines.items())
                  ).transform(parse).collect()
    assert {r["id"]: (r["seats"], r["total"], list(r["reasons"])) for r in rows} == {
        "three": (3, 6, []),
        "three-point-oh": (3, 6, []),
        "half": (None, 5, ["invalid_seats"]),  # 2.5 seats is no INT; twice it is a whole 5
        "tiny": (None, None, ["invalid_seats", "invalid_total"]),
        "big": (None, 6000000000, ["invalid_seats"]),  # out of INT's range, whole as a BIGINT
    }


CUSTOMER_CDC = """
sources:
  cdc: {format: json_lines, path: cdc, bronze: {table: cdc}}
silver:
  customers:
    input: bronze/cdc
    parse: debezium
    columns:
      id: STRING
      name: STRING
      since: {type: DATE, source: account.since}
      label: {type: STRING, expr: "concat(name, '@', __source_db)"}
      op: {type: STRING, source: __op}
      lsn: {type: BIGINT, source: __source_lsn}
      at: {type: BIGINT, source: __ts_ms}
    changes: {keys: id, sequence_by: lsn, delete_when: op = 'd'}
"""


def test_a_debezium_event_gives_the_row_it_carries_and_where_it_was_in_the_log(
        spark: SparkSession, tmp_path: Path) -> None:
    """An insert, an update and a snapshot's read carry the row in ``after``; a delete, in
    ``before`` (here its key alone); ``__`` columns read the event; the JSON converter's envelope
    with its schema is opened. A truncate or a message changes no row."""
    parse = declared_parse(tmp_path, CUSTOMER_CDC)
    source = {"connector": "postgresql", "db": "crm", "lsn": 24023128}

    def event(op: str, before: dict | None, after: dict | None, lsn: int) -> dict:
        return {"op": op, "before": before, "after": after, "source": {**source, "lsn": lsn},
                "ts_ms": lsn + 1}

    row = {"id": "c1", "name": "Ann", "account": {"since": "2024-03-01"}}
    lines = [
        event("c", None, row, 10),
        {"schema": {"type": "struct"}, "payload": event("u", row, {**row, "name": "Bo"}, 11)},
        event("r", None, {**row, "id": "c2"}, 12),
        event("d", {"id": "c1"}, None, 13),
        {"payload": "a field of the row's own", "op": "c", "after": {"id": "c3"},
         "source": {"lsn": 14}},
        {"op": "t", "source": {**source, "lsn": 15}, "ts_ms": 16},
        {"op": "m", "source": {**source, "lsn": 16}, "message": {"prefix": "x"}},
        {"before": None, "after": row, "source": source},
    ]
    rows = bronze(spark, *map(json.dumps, lines)).transform(parse).collect()
    got = [(r["id"], r["name"], r["since"], r["label"], r["op"], r["lsn"], r["at"], list(r["reasons"]))
           for r in rows]
    since = datetime(2024, 3, 1).date()
    assert got == [
        ("c1", "Ann", since, "Ann@crm", "c", 10, 11, []),
        ("c1", "Bo", since, "Bo@crm", "u", 11, 12, []),
        ("c2", "Ann", since, "Ann@crm", "r", 12, 13, []),
        ("c1", None, None, None, "d", 13, 14, []),
        ("c3", None, None, None, "c", 14, None, []),
        (None, None, None, None, "t", 15, 16, ["not_a_row_change"]),
        (None, None, None, None, "m", 16, None, ["not_a_row_change"]),
        ("c1", "Ann", since, "Ann@crm", None, 24023128, None, ["not_a_row_change"]),
    ]
