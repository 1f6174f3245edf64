"""End to end from a real Kafka topic to gold and back out to topics, against a real broker.

Expected tables are computed here in plain Python from the lines sent, by the contract's rules,
not by the pipeline's code.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config.model import KafkaPublish
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import TableRun
from medallion.project import Settings
from medallion.samples.produce import producer_config, send_lines
from tests.conftest import make_settings
from tests.kafka_broker import Broker, with_kafka_topics

LINES = [
    '{"event_id":"e1","user_id":"u1","event_type":"view","timestamp":"2025-01-27T10:00:00Z"}',
    '{"event_id":"e2","user_id":"u1","event_type":"click","timestamp":"2025-01-27T10:04:59.999Z"}',
    '{"event_id":"e3","user_id":"u2","event_type":"purchase","timestamp":"2025-01-27T10:05:00Z",'
    '"amount":10.5}',
    '{"event_id":"e4","user_id":"u2","event_type":"purchase","timestamp":"2025-01-27T10:07:30Z",'
    '"amount":4.5,"device":"ios"}',
    '{"event_id":"e5","user_id":"u3","event_type":"view","timestamp":"2025-01-27T10:09:59Z",'
    '"amount":null}',
    '{"event_id":"e6","user_id":"u1","event_type":"add_to_cart","timestamp":"2025-01-27T10:10:00Z"}',
    '{"event_id":"e2","user_id":"u1","event_type":"click","timestamp":"2025-01-27T10:04:59.999Z"}',
    "not json at all",
    '{"event_id":"x1","user_id":"u1","event_type":"refund","timestamp":"2025-01-27T10:01:00Z"}',
    '{"event_id":"x2","user_id":"u3","event_type":"purchase","timestamp":"2025-01-27T10:02:00Z",'
    '"amount":-1}',
]
MORE_LINES = [
    '{"event_id":"e7","user_id":"u2","event_type":"purchase","timestamp":"2025-01-27T10:12:00Z",'
    '"amount":5}',
    '{"event_id":"e1","user_id":"u1","event_type":"view","timestamp":"2025-01-27T10:00:00Z"}',
]
CUSTOMERS = "customer_id,customer_name,segment\nu1,Alice,consumer\nu2,Bob,enterprise\n"
SEGMENTS = {"u1": "consumer", "u2": "enterprise"}
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def valid_events(lines: list[str]) -> dict[str, dict]:
    """The contract's validation and deduplication, written independently of silver."""
    events: dict[str, dict] = {}
    for line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(doc, dict):
            continue
        amount = doc.get("amount")
        ok = (
            isinstance(doc.get("event_id"), str) and doc["event_id"].strip()
            and isinstance(doc.get("user_id"), str) and doc["user_id"].strip()
            and doc.get("event_type") in ("view", "click", "add_to_cart", "purchase")
            and isinstance(doc.get("timestamp"), str) and ISO.match(doc["timestamp"])
            and (amount is None or (isinstance(amount, (int, float)) and amount >= 0))
        )
        if ok and doc["event_id"] not in events:
            events[doc["event_id"]] = doc
    return events


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _floor(instant: datetime, minutes: int) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    step = timedelta(minutes=minutes)
    return epoch + ((instant - epoch) // step) * step


def expected_event_counts(events: dict[str, dict]) -> set[tuple[str, str, int, Decimal]]:
    counts: dict[tuple[str, str], list] = defaultdict(lambda: [0, Decimal("0")])
    for doc in events.values():
        start = _floor(_instant(doc["timestamp"]), 5).strftime("%Y-%m-%dT%H:%M:%S")
        counts[(start, doc["event_type"])][0] += 1
        counts[(start, doc["event_type"])][1] += Decimal(str(doc.get("amount") or 0))
    return {(start, kind, n, total) for (start, kind), (n, total) in counts.items()}


def expected_segment_revenue(events: dict[str, dict]) -> set[tuple[str, str, int, Decimal]]:
    revenue: dict[tuple[str, str], list] = defaultdict(lambda: [0, Decimal("0")])
    for doc in events.values():
        if doc["event_type"] == "purchase":
            start = _floor(_instant(doc["timestamp"]), 60).strftime("%Y-%m-%dT%H:%M:%S")
            key = (start, SEGMENTS.get(doc["user_id"], "unknown"))
            revenue[key][0] += 1
            revenue[key][1] += Decimal(str(doc["amount"]))
    return {(start, segment, n, total) for (start, segment), (n, total) in revenue.items()}


def kafka_settings(root: Path, broker: Broker, topic: str, **kafka: object) -> Settings:
    settings = make_settings(root, read_from="kafka", kafka_bootstrap=broker.bootstrap)
    return with_kafka_topics(replace(settings, kafka=replace(settings.kafka, **kafka)), topic)


def send_tombstone(settings: Settings, topic: str, key: bytes) -> None:
    """A record with a key and no value, as a compacted topic's producers delete a key."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(settings.kafka))
    producer.produce(topic, key=key, value=None)
    assert producer.flush(30) == 0


def _run(spark: SparkSession, settings: Settings) -> dict[str, TableRun]:
    return {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL,
                                                   settings.streaming.trigger)}


def _gold_counts(spark: SparkSession, settings: Settings) -> set[tuple[str, str, int, Decimal]]:
    table = settings.table_path("gold", "event_counts_5m")
    rows = spark.read.format("delta").load(table).selectExpr(
        "date_format(window_start, \"yyyy-MM-dd'T'HH:mm:ss\") AS s", "event_type", "event_count",
        "total_amount").collect()
    return {(r["s"], r["event_type"], r["event_count"], r["total_amount"]) for r in rows}


def test_topic_to_gold_and_back_to_topics(spark: SparkSession, kafka_broker: Broker,
                                          tmp_path: Path) -> None:
    topic, silver_topic, gold_topic = "it.events", "it.silver.events", "it.gold.counts"
    # The publish topics are left to the run, which makes them before their first record: made
    # by the broker's auto-creation at that record instead, a topic raced the idempotent
    # producer's first batch once in CI (OutOfOrderSequenceException until Kafka's 2-minute
    # delivery timeout, in a partition created a second after its sibling).
    kafka_broker.create_topic(topic, 2)
    publish = (KafkaPublish("silver/events", silver_topic, ("event_id",)),
               KafkaPublish("gold/event_counts_5m", gold_topic, ("window_start", "event_type")))
    settings = kafka_settings(tmp_path, kafka_broker, topic, publish=publish)
    customers = Path(settings.landing_path("customers"))
    customers.mkdir(parents=True)
    (customers / "customers.csv").write_text(CUSTOMERS)
    assert send_lines(settings.kafka, topic, LINES) == len(LINES)
    send_tombstone(settings, topic, b"e9")

    runs = _run(spark, settings)

    # bronze: every record once, with its coordinates, the one without a value included
    bronze_path = settings.table_path("bronze", "events_kafka")
    bronze = spark.read.format("delta").load(bronze_path).collect()
    assert sorted(r["raw"] for r in bronze if r["raw"] is not None) == sorted(LINES)
    assert [r["key"] for r in bronze if r["raw"] is None] == ["e9"]
    by_partition: dict[int, list[int]] = defaultdict(list)
    for row in bronze:
        assert row["topic"] == topic
        assert row["source_file"] == f"kafka://{topic}/{row['partition']}/{row['offset']}"
        by_partition[row["partition"]].append(row["offset"])
    assert sum(len(v) for v in by_partition.values()) == len(LINES) + 1
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    assert runs["bronze/events_kafka"].rows_in == len(LINES) + 1
    assert runs["bronze/events_kafka"].offsets_missing == 0

    # silver and quarantine, by the contract's rules computed here
    expected = valid_events(LINES)
    silver = spark.read.format("delta").load(settings.table_path("silver", "events")).collect()
    assert sorted(r["event_id"] for r in silver) == sorted(expected)
    assert {r["event_id"]: r["segment"] for r in silver} == {
        i: SEGMENTS.get(e["user_id"], "unknown") for i, e in expected.items()}
    quarantine = spark.read.format("delta").load(
        settings.table_path("silver", "events_quarantine")).collect()
    assert len(quarantine) == 4
    # the tombstone says what it is, not invalid_json
    assert [list(r["reasons"]) for r in quarantine if r["raw"] is None] == [["no_value"]]
    assert runs["silver/events"].duplicates_removed == 1  # rows = silver + quarantine + duplicates

    # gold against the independent computation
    assert _gold_counts(spark, settings) == expected_event_counts(expected)
    revenue = spark.read.format("delta").load(
        settings.table_path("gold", "segment_revenue_1h")).selectExpr(
        "date_format(window_start, \"yyyy-MM-dd'T'HH:mm:ss\") AS s", "segment", "purchase_count",
        "revenue").collect()
    assert {(r[0], r[1], r[2], r[3]) for r in revenue} == expected_segment_revenue(expected)

    # published: silver events keyed by event_id, gold windows keyed by their merge keys
    published = kafka_broker.consume_all(silver_topic, len(expected))
    assert sorted(key for key, _ in published) == sorted(expected)
    assert {key: value["user_id"] for key, value in published} == {
        i: e["user_id"] for i, e in expected.items()}
    windows = kafka_broker.consume_all(gold_topic, len(expected_event_counts(expected)))
    latest = {(v["window_start"][:19], v["event_type"]): (v["event_count"], v["total_amount"])
              for _, v in windows}
    assert {(s, t, n, Decimal(str(a))) for (s, t), (n, a) in latest.items()} == \
        expected_event_counts(expected)

    # a rerun with nothing new reads nothing and publishes nothing
    rerun = _run(spark, settings)
    assert rerun["bronze/events_kafka"].rows_in == 0
    assert spark.read.format("delta").load(
        settings.table_path("bronze", "events_kafka")).count() == len(LINES) + 1
    assert len(kafka_broker.consume_all(silver_topic, len(expected))) == len(expected)

    # new records: only they are read; the re-delivered e1 is removed and counted
    assert send_lines(settings.kafka, topic, MORE_LINES) == len(MORE_LINES)
    more = _run(spark, settings)
    assert more["bronze/events_kafka"].rows_in == len(MORE_LINES)
    assert more["silver/events"].duplicates_removed == 1
    everything = valid_events(LINES + MORE_LINES)
    silver = spark.read.format("delta").load(settings.table_path("silver", "events")).collect()
    assert sorted(r["event_id"] for r in silver) == sorted(everything)
    assert _gold_counts(spark, settings) == expected_event_counts(everything)
    published = kafka_broker.consume_all(silver_topic, len(everything))
    assert sorted(key for key, _ in published) == sorted(everything)


def test_produce_command_publishes_the_generated_lines(kafka_broker: Broker,
                                                       tmp_path: Path) -> None:
    from medallion.cli.main import main
    from medallion.samples.generate import GenerateSpec, generate_event_lines

    topic = "it.produce"
    kafka_broker.create_topic(topic, 1)
    status = main(["produce", "--events", "40", "--seed", "3", "--burst", "demo",
                   "--topic", topic, "--bootstrap-servers", kafka_broker.bootstrap,
                   "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lh")])
    assert status == 0
    spec = GenerateSpec(events=40, seed=3, burst="demo")
    expected = list(generate_event_lines(spec))
    consumer_records = _raw_values(kafka_broker, topic, len(expected))
    assert consumer_records == expected  # one partition: in order, broken lines included
    assert (tmp_path / "landing" / "customers" / "customers-sample.csv").is_file()


def _raw_values(broker: Broker, topic: str, expected: int) -> list[str]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"raw-{topic}",
                         "auto.offset.reset": "earliest"})
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        for _ in range(240):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value().decode())
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values
