"""The declaration model: events.yaml derives today's tables, a second shape loads, types and graph.

No JVM: nothing here starts Spark. Expected schemas are written out by hand (today's TableSpecs in
medallion/io/tables.py), never computed by the code under test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from medallion.cli.pipelines import main
from medallion.pipeline.graph import FlowKind, InputRole
from medallion.pipeline.kinds import OutputMode, TableRole
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.render import render_graph
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.types import TypeNameError, parse_type
from medallion.pipeline.validate import validate

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
FIXTURES = Path(__file__).resolve().parent / "pipeline_fixtures"

# Today's tables of the events pipeline (medallion/io/tables.py), by hand.
EVENTS_TABLES = {
    "bronze/events": "raw STRING, source_file STRING, ingested_at TIMESTAMP",
    "bronze/events_kafka": "raw STRING, key STRING, topic STRING, partition INT, offset BIGINT, "
                           "kafka_timestamp TIMESTAMP, source_file STRING, ingested_at TIMESTAMP",
    "bronze/customers": "customer_id STRING, customer_name STRING, segment STRING, _corrupt_record STRING, "
                        "source_file STRING, ingested_at TIMESTAMP",
    "silver/events": "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
                     "amount DECIMAL(18,4), customer_name STRING, segment STRING, source_file STRING, "
                     "ingested_at TIMESTAMP",
    "silver/events_quarantine": "raw STRING, event_id STRING, reasons ARRAY<STRING>, source_file STRING, "
                                "ingested_at TIMESTAMP",
    "gold/event_counts_5m": "window_start TIMESTAMP, window_end TIMESTAMP, event_type STRING, "
                            "event_count BIGINT, total_amount DECIMAL(28,4)",
    "gold/user_activity_sliding": "window_start TIMESTAMP, window_end TIMESTAMP, user_id STRING, "
                                  "event_count BIGINT",
    "gold/user_sessions": "user_id STRING, session_start TIMESTAMP, session_end TIMESTAMP, "
                          "event_count BIGINT, total_amount DECIMAL(28,4)",
    "gold/segment_revenue_1h": "window_start TIMESTAMP, window_end TIMESTAMP, segment STRING, "
                               "purchase_count BIGINT, revenue DECIMAL(28,4)",
    "gold/purchase_attribution": "event_id STRING, user_id STRING, purchase_time TIMESTAMP, "
                                 "amount DECIMAL(18,4), attributed_event_id STRING, "
                                 "attributed_event_type STRING, attributed_time TIMESTAMP, "
                                 "delay_seconds DECIMAL(18,6)",
}


def _columns(ddl: str) -> list[tuple[str, str]]:
    """``name TYPE, ...`` as pairs; types hold no top-level comma in these schemas."""
    pairs = []
    protected = re.sub(r"DECIMAL\((\d+),(\d+)\)", r"DECIMAL(\1;\2)", ddl)
    for part in protected.split(","):
        name, _, kind = part.strip().partition(" ")
        pairs.append((name, kind.replace(";", ",")))
    return pairs


@pytest.fixture(scope="module")
def events() -> PipelineSpec:
    spec = next(p for p in load_pipelines(CONF, "local") if p.name == "events")
    return spec


@pytest.fixture(scope="module")
def orders() -> PipelineSpec:
    (spec,) = load_pipelines(FIXTURES, "local")
    return spec


def test_events_derives_todays_tables(events: PipelineSpec) -> None:
    _, tables = validate(events)
    derived = {t.key: [(f.name, str(f.type)) for f in t.fields] for t in tables}
    assert derived == {key: _columns(ddl) for key, ddl in EVENTS_TABLES.items()}
    assert [t.key for t in tables] == list(EVENTS_TABLES)


def test_events_gold_modes_keys_and_time_columns(events: PipelineSpec) -> None:
    tables = {t.key: t for t in events.tables()}
    assert {k: (t.mode, t.merge_keys) for k, t in tables.items() if k.startswith("gold/")} == {
        "gold/event_counts_5m": (OutputMode.UPDATE, ("window_start", "window_end", "event_type")),
        "gold/user_activity_sliding": (OutputMode.UPDATE, ("window_start", "window_end", "user_id")),
        "gold/user_sessions": (OutputMode.APPEND, ()),
        "gold/segment_revenue_1h": (OutputMode.UPDATE, ("window_start", "window_end", "segment")),
        "gold/purchase_attribution": (OutputMode.UPDATE, ("event_id",)),
    }
    # The columns `medallion status` reads freshness from (medallion/ops/status.py today).
    assert {k: t.time_column for k, t in tables.items()} == {
        "bronze/events": "ingested_at", "bronze/events_kafka": "ingested_at",
        "bronze/customers": "ingested_at", "silver/events": "timestamp",
        "silver/events_quarantine": "ingested_at", "gold/event_counts_5m": "window_end",
        "gold/user_activity_sliding": "window_end", "gold/user_sessions": "session_end",
        "gold/segment_revenue_1h": "window_end", "gold/purchase_attribution": "purchase_time",
    }
    assert tables["silver/events"].quarantine == "silver/events_quarantine"
    assert tables["silver/events_quarantine"].role is TableRole.QUARANTINE
    silver = tables["silver/events"]
    assert silver.qualified_name == "silver.events"


def test_events_quarantine_reasons_are_todays(events: PipelineSpec) -> None:
    assert events.silver[0].reasons() == (
        "invalid_utf8", "no_value", "invalid_json", "not_an_object", "missing_event_id", "invalid_event_id",
        "missing_user_id", "invalid_user_id", "missing_event_type", "invalid_event_type",
        "missing_timestamp", "invalid_timestamp", "future_timestamp", "invalid_amount",
        "negative_amount")


def test_events_declares_todays_windows_dedup_and_enrichment(events: PipelineSpec) -> None:
    gold = {g.name: g for g in events.gold}
    assert [(g.window.kind.value, g.window.size, g.window.slide, g.window.gap, g.window.column)
            for g in gold.values() if g.window] == [
        ("tumbling", "5 minutes", None, None, "timestamp"),
        ("sliding", "10 minutes", "5 minutes", None, "timestamp"),
        ("session", None, None, "5 minutes", "timestamp"),
        ("tumbling", "1 hour", None, None, "timestamp"),
    ]
    assert gold["segment_revenue_1h"].filter == "event_type = 'purchase'"
    assert [(a.name, a.describe()) for a in gold["event_counts_5m"].aggregates] == [
        ("event_count", "count(*)"), ("total_amount", "coalesce(sum(amount), 0)")]
    assert {events.watermark_of(g) for g in gold.values()} == {"10 minutes"}
    silver = events.silver[0]
    assert silver.dedup.key == ("event_id",)
    assert silver.dedup.order_by == ("ingested_at", "source_file", "timestamp")
    (enrichment,) = silver.enrichments
    assert (enrichment.join, enrichment.columns, dict(enrichment.defaults)) == (
        (("user_id", "customer_id"),), ("customer_name", "segment"), {"segment": "unknown"})
    customers = events.dimension("customers")
    assert (customers.key, customers.where, customers.trim) == (
        ("customer_id",), "_corrupt_record IS NULL", True)


# The gates and catalog comments of the events pipeline (its contract, and what base.yaml held
# before the declarations took them over), written out by hand.
NOT_NULL, BETWEEN, IN_SET = ("expect_column_values_to_not_be_null",
                             "expect_column_values_to_be_between", "expect_column_values_to_be_in_set")
A_GT_B = "expect_column_pair_values_a_to_be_greater_than_b"
EVENT_TYPES = ["view", "click", "add_to_cart", "purchase"]
WINDOW_ORDERED = {"window_ordered": (A_GT_B, {"column_A": "window_end", "column_B": "window_start"},
                                     "fail")}
EVENTS_EXPECTATIONS = {
    "silver/events": {
        "event_id_not_null": (NOT_NULL, {"column": "event_id"}, "fail"),
        "event_id_unique": ("expect_column_values_to_be_unique", {"column": "event_id"}, "fail"),
        "user_id_not_null": (NOT_NULL, {"column": "user_id"}, "fail"),
        "user_id_not_blank": ("expect_column_values_to_match_regex",
                              {"column": "user_id", "regex": "\\S"}, "drop"),
        "event_type_in_set": (IN_SET, {"column": "event_type", "value_set": EVENT_TYPES}, "fail"),
        "timestamp_not_null": (NOT_NULL, {"column": "timestamp"}, "fail"),
        "amount_not_negative": (BETWEEN, {"column": "amount", "min_value": 0}, "drop"),
        "segment_not_null": (NOT_NULL, {"column": "segment"}, "fail"),
        "batch_size": ("expect_table_row_count_to_be_between",
                       {"min_value": 0, "max_value": 50000000}, "warn"),
        "fresh_events": ("expect_column_max_to_be_between",
                         {"column": "timestamp",
                          "min_value": {"$PARAMETER": "now() - timedelta(days=2)"}}, "warn"),
    },
    "gold/event_counts_5m": {
        **WINDOW_ORDERED,
        "event_type_in_set": (IN_SET, {"column": "event_type", "value_set": EVENT_TYPES}, "fail"),
        "event_count_positive": (BETWEEN, {"column": "event_count", "min_value": 1}, "fail"),
        "total_amount_not_negative": (BETWEEN, {"column": "total_amount", "min_value": 0}, "fail"),
    },
    "gold/user_activity_sliding": {
        **WINDOW_ORDERED,
        "user_id_not_null": (NOT_NULL, {"column": "user_id"}, "fail"),
        "event_count_positive": (BETWEEN, {"column": "event_count", "min_value": 1}, "fail"),
    },
    "gold/user_sessions": {
        "session_ordered": (A_GT_B, {"column_A": "session_end", "column_B": "session_start"}, "fail"),
        "event_count_positive": (BETWEEN, {"column": "event_count", "min_value": 1}, "fail"),
        "total_amount_not_negative": (BETWEEN, {"column": "total_amount", "min_value": 0}, "fail"),
    },
    "gold/segment_revenue_1h": {
        **WINDOW_ORDERED,
        "segment_not_null": (NOT_NULL, {"column": "segment"}, "fail"),
        "purchase_count_positive": (BETWEEN, {"column": "purchase_count", "min_value": 1}, "fail"),
        "revenue_not_negative": (BETWEEN, {"column": "revenue", "min_value": 0}, "fail"),
    },
    "gold/purchase_attribution": {
        "event_id_not_null": (NOT_NULL, {"column": "event_id"}, "fail"),
        "delay_within_30_minutes": (BETWEEN, {"column": "delay_seconds", "min_value": 0,
                                              "max_value": 1800}, "fail"),
        "attributed_type_in_set": ("expect_column_values_to_be_in_set",
                                   {"column": "attributed_event_type",
                                    "value_set": ["click", "add_to_cart"]}, "fail"),
    },
}
EVENTS_COMMENTS = {
    "bronze/events": "Every line of the events landing files, as written, broken lines included; "
                     "append-only.",
    "bronze/events_kafka": "Every record of the events topics: the value as text (raw), key, topic, "
                           "partition, offset and Kafka timestamp; source_file is "
                           "kafka://topic/partition/offset. Append-only.",
    "bronze/customers": "The customers dimension as ingested from CSV; append-only, latest row per "
                        "id wins.",
    "silver/events": "Valid events, typed, deduplicated by event_id, enriched with the customer's "
                     "name and segment.",
    "silver/events_quarantine": "Every row of bronze/events that is not a valid row of "
                                "silver/events, with the reasons it failed.",
    "gold/event_counts_5m": "Events and amount per event type in tumbling 5-minute windows (UTC); "
                            "open windows are updated in place.",
    "gold/user_activity_sliding": "10-minute windows sliding every 5 minutes per user; open windows "
                                  "updated in place.",
    "gold/user_sessions": "Sessions with a 5-minute gap per user, appended once the watermark has "
                          "closed them.",
    "gold/segment_revenue_1h": "Tumbling 1-hour windows of purchases per customer segment; open "
                               "windows updated in place.",
    "gold/purchase_attribution": "Each purchase with the user's latest click or add_to_cart in the "
                                 "30 minutes before it; a purchase with none has nulls there, "
                                 "written once the watermark has passed it.",
}
EVENTS_COLUMN_COMMENTS = {
    "gold/event_counts_5m": {
        "window_start": "Start of the 5-minute window, inclusive (UTC)",
        "window_end": "End of the 5-minute window, exclusive (UTC)",
        "event_type": "view, click, add_to_cart or purchase",
        "event_count": "Valid, deduplicated events in the window",
        "total_amount": "Sum of amount over the window's events, 0 when none has one",
    },
    "gold/user_activity_sliding": {
        "window_start": "Start of the 10-minute window, inclusive (UTC); windows slide every 5 minutes",
        "window_end": "End of the 10-minute window, exclusive (UTC)",
        "user_id": "The user the events belong to",
        "event_count": "Valid, deduplicated events of the user in the window",
    },
    "gold/user_sessions": {
        "user_id": "The user the session belongs to",
        "session_start": "Time of the session's first event (UTC)",
        "session_end": "Time of the session's last event plus the 5-minute gap (UTC)",
        "event_count": "Events in the session",
        "total_amount": "Sum of amount over the session's events, 0 when none has one",
    },
    "gold/segment_revenue_1h": {
        "window_start": "Start of the 1-hour window, inclusive (UTC)",
        "window_end": "End of the 1-hour window, exclusive (UTC)",
        "segment": "Customer segment, unknown when the user has no customer row",
        "purchase_count": "Purchases in the window",
        "revenue": "Sum of the purchases' amount",
    },
    "gold/purchase_attribution": {
        "event_id": "The purchase's event_id",
        "user_id": "The user who purchased",
        "purchase_time": "Time of the purchase (UTC)",
        "amount": "Amount of the purchase",
        "attributed_event_id": "event_id of the latest click or add_to_cart of the user at most "
                               "30 minutes before the purchase; null when none",
        "attributed_event_type": "click or add_to_cart; null when none",
        "attributed_time": "Time of the attributed event (UTC); null when none",
        "delay_seconds": "Seconds from the attributed event to the purchase (0 to 1800); null "
                         "when none",
    },
}


def test_events_declares_its_gates_and_catalog_comments(events: PipelineSpec) -> None:
    tables = events.tables()
    declared = {t.key: {e.name: (e.expectation_type, dict(e.kwargs), e.severity.value)
                        for e in t.doc.expectations} for t in tables if t.doc.expectations}
    assert declared == EVENTS_EXPECTATIONS
    assert all(e.table == t.key for t in tables for e in t.doc.expectations)
    assert {t.key: t.doc.comment for t in tables} == EVENTS_COMMENTS
    assert {t.key: dict(t.doc.column_comments) for t in tables
            if t.doc.column_comments} == EVENTS_COLUMN_COMMENTS


def test_kafka_alternative_stands_in_for_bronze_events(events: PipelineSpec) -> None:
    graph, _ = validate(events)
    (silver_input, customers) = graph.writer_of("silver/events").inputs
    assert (silver_input.table, silver_input.alternatives, silver_input.role) == (
        "bronze/events", ("bronze/events_kafka",), InputRole.STREAM)
    assert (customers.table, customers.role, customers.via) == (
        "bronze/customers", InputRole.LOOKUP, "customers")
    assert {f.name: f.active for f in graph.flows if f.kind is FlowKind.INGEST} == {
        "ingest:events": True, "ingest:events_kafka": False, "ingest:customers": True}


def test_second_shape_loads_and_derives_its_tables(orders: PipelineSpec) -> None:
    _, tables = validate(orders)
    derived = {t.key: t.schema_ddl for t in tables}
    assert derived == {
        "bronze/orders": "order_id STRING, line_no STRING, store_id STRING, sku STRING, quantity STRING, "
                         "unit_price STRING, order_date STRING, order_time STRING, _corrupt_record STRING, "
                         "source_file STRING, ingested_at TIMESTAMP",
        "bronze/products": "sku STRING, product_name STRING, category STRING, _corrupt_record STRING, "
                           "source_file STRING, ingested_at TIMESTAMP",
        "bronze/stores": "store_id STRING, city STRING, opened DATE, source_file STRING, "
                         "ingested_at TIMESTAMP",
        "silver/order_lines": "order_id STRING, line_no INT, store_id STRING, sku STRING, quantity INT, "
                              "unit_price DECIMAL(10,2), ordered_at TIMESTAMP, product_name STRING, "
                              "category STRING, city STRING, source_file STRING, ingested_at TIMESTAMP",
        "silver/order_lines_quarantine": "order_id STRING, line_no STRING, store_id STRING, sku STRING, "
                                         "quantity STRING, unit_price STRING, order_date STRING, "
                                         "order_time STRING, _corrupt_record STRING, reasons ARRAY<STRING>, "
                                         "source_file STRING, ingested_at TIMESTAMP",
        "gold/category_revenue_sliding": "window_start TIMESTAMP, window_end TIMESTAMP, category STRING, "
                                         "lines BIGINT, units BIGINT, revenue DECIMAL(20,2), "
                                         "avg_price DECIMAL(14,6), max_price DECIMAL(10,2), stores BIGINT",
        "gold/store_visits": "store_id STRING, city STRING, session_start TIMESTAMP, session_end TIMESTAMP, "
                             "orders BIGINT, first_order TIMESTAMP",
        "gold/store_visits_quarantine": "store_id STRING, city STRING, session_start TIMESTAMP, "
                                        "session_end TIMESTAMP, orders BIGINT, first_order TIMESTAMP, "
                                        "reasons ARRAY<STRING>, quarantined_at TIMESTAMP",
    }
    silver = orders.silver[0]
    assert silver.dedup.key == ("order_id", "line_no")
    assert silver.columns[-1].expr == "concat(order_date, ' ', order_time)"
    assert orders.source("orders").options == {"sep": ";"}
    assert [d.name for d in orders.dimensions] == ["products", "stores"]
    assert orders.table("gold/category_revenue_sliding").merge_keys == (
        "window_start", "window_end", "category")
    assert orders.watermark_of(orders.gold[0]) == "20 minutes"  # silver's, over the pipeline's 30


def test_topological_order_puts_inputs_first(events: PipelineSpec, orders: PipelineSpec) -> None:
    graph, _ = validate(events)
    order = list(graph.order)
    for source, target, _ in graph.edges():
        assert order.index(source) < order.index(target)
    assert order[:3] == ["bronze/events", "bronze/events_kafka", "bronze/customers"]
    assert order[3:5] == ["silver/events", "silver/events_quarantine"]
    assert graph.upstream("gold/user_sessions") == (
        "bronze/events", "bronze/events_kafka", "bronze/customers", "silver/events")
    orders_graph, _ = validate(orders)
    assert orders_graph.order == (
        "bronze/orders", "bronze/products", "bronze/stores", "silver/order_lines",
        "silver/order_lines_quarantine", "gold/category_revenue_sliding", "gold/store_visits",
        "gold/store_visits_quarantine")


def test_rendering_lists_tables_flows_and_edges(events: PipelineSpec) -> None:
    graph, tables = validate(events)
    text = render_graph(events, graph, tables)
    for expected in (
        "bronze/events  <- ingest:events: ingest json_lines from landing events/*.json",
        "silver/events  <- cleanse:events: cleanse bronze/events | bronze/events_kafka, "
        "lookup customers (bronze/customers)",
        "silver/events_quarantine  <- cleanse:events (rejected rows of silver/events)",
        "window session gap 5 minutes on timestamp by user_id, watermark 10 minutes",
        "mode update, MERGE on window_start, window_end, segment",
        "  bronze/customers -> silver/events (lookup)",
        "  silver/events -> gold/segment_revenue_1h (stream)",
        "views:\n  gold.event_counts_daily: reads gold.event_counts_5m\n"
        "  gold.segment_revenue_daily: reads gold.segment_revenue_1h\nedges:",
    ):
        assert expected in text


def test_cli_prints_the_graph_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--conf-dir", str(CONF), "--env", "local"]) == 0
    out = capsys.readouterr().out
    assert "pipeline events" in out and "gold/user_sessions" in out and "3 pipeline(s) valid" in out


def test_cli_names_key_and_file_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "bad.yaml").write_text("sources: {x: {format: xml}}\n", encoding="utf-8")
    assert main(["--conf-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    bad = tmp_path / "pipelines" / "bad.yaml"
    assert f"invalid pipeline definition: sources.x.format (from {bad})" in err


def test_the_package_imports_no_spark() -> None:
    code = ("import sys, medallion.cli.pipelines, medallion.pipeline.validate; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False,
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


@pytest.mark.parametrize(("text", "canonical"), [
    ("string", "STRING"), ("Long", "BIGINT"), ("INTEGER", "INT"), ("decimal", "DECIMAL(10,0)"),
    ("NUMERIC(18, 4)", "DECIMAL(18,4)"), ("array<string>", "ARRAY<STRING>"),
    ("MAP<STRING, BIGINT>", "MAP<STRING,BIGINT>"),
    ("struct<a: int, b string>", "STRUCT<a: INT, b: STRING>"),
    ("STRUCT<`b c`: INT>", "STRUCT<`b c`: INT>"),  # Spark's DDL needs the backticks back
    ("timestamp_ltz", "TIMESTAMP"), ("VARCHAR(20)", "STRING"),
])
def test_type_names_are_read_as_spark_reads_them(text: str, canonical: str) -> None:
    assert str(parse_type(text)) == canonical


@pytest.mark.parametrize("text", ["DECIMEL(18,4)", "DECIMAL(39,2)", "DECIMAL(4,6)", "ARRAY<STRING",
                                  "INT INT"])
def test_bad_type_names_are_refused(text: str) -> None:
    with pytest.raises(TypeNameError):
        parse_type(text)


def test_only_a_csv_input_lists_malformed_record_among_its_quarantine_reasons(
        tmp_path: Path, orders: PipelineSpec) -> None:
    """``medallion pipelines`` listed ``malformed_record`` for a Parquet source's silver table,
    whose bronze table has no ``_corrupt_record`` for the reader to fill: a reason no row gets."""
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "payments.yaml").write_text("""
sources:
  payments:
    format: parquet
    path: payments
    schema: {id: STRING, amount: DOUBLE}
    bronze: {table: payments}
silver:
  payments:
    input: bronze/payments
    parse: columns
    columns: {id: {type: STRING, required: true}, amount: "DECIMAL(10,2)"}
    dedup: {key: [id]}
""", encoding="utf-8")
    (payments,) = load_pipelines(tmp_path, "local")
    assert "      quarantine reasons: invalid_utf8, missing_id, invalid_amount\n" in render_graph(
        payments, *validate(payments))
    assert "quarantine reasons: invalid_utf8, malformed_record, missing_order_id," in render_graph(
        orders, *validate(orders))
