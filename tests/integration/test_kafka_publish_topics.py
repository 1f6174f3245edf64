"""Publishing to a topic the brokers do not have, on a real broker whose auto-creation is off (as
production clusters run): the run makes the topic, with the brokers' default partitions, before
its first record, and every row of the table arrives.

Without that, Kafka's producer waits a minute for the topic's metadata and the query fails; with
auto-creation on, a topic made at the first record can race the idempotent producer's first batch.
A topic the brokers refuse to make fails the run with their reason, before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import KafkaPublish, Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import TableRun
from medallion.errors import JobError
from medallion.ops.backfill import backfill_gold, full_refresh, plan_backfill
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conftest import make_settings
from tests.kafka_broker import Broker

DEFAULT_PARTITIONS = 3  # not the project's broker default (2), so the test sees whose it is


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker that makes no topic on a client's request for an unknown one."""
    root = tmp_path_factory.mktemp("kafka_strict")
    extra = root / "strict.properties"
    extra.write_text(f"auto.create.topics.enable=false\nnum.partitions={DEFAULT_PARTITIONS}\n")
    broker = Broker(root / "broker", extra_properties=extra)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_a_missing_publish_topic_is_made_before_the_first_record(
        spark: SparkSession, strict_broker: Broker, tmp_path: Path) -> None:
    topic = "published.silver.events"
    settings = make_settings(tmp_path, kafka_bootstrap=strict_broker.bootstrap)
    settings = replace(settings, kafka=replace(
        settings.kafka, publish=(KafkaPublish("silver/events", topic, ("event_id",)),)))
    generate_landing(settings.paths.landing, GenerateSpec(events=150, files=1, users=20))
    trigger = Trigger()
    for layer in (RunTarget.BRONZE, RunTarget.SILVER):
        run_pipeline(spark, settings, layer, trigger)
    assert topic not in strict_broker.admin().list_topics(timeout=10).topics

    (run,) = run_pipeline(spark, settings, RunTarget.PUBLISH, trigger)

    assert run.table == f"publish:silver/events->{topic}"
    meta = strict_broker.admin().list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None and len(meta.partitions) == DEFAULT_PARTITIONS
    silver = {r["event_id"] for r in spark.read.format("delta")
              .load(settings.table_path("silver", "events")).select("event_id").collect()}
    assert len(silver) > 100
    published = strict_broker.consume_all(topic, len(silver))
    assert sorted(key for key, _ in published) == sorted(silver)

    # the next run finds the topic there and sends nothing again
    (again,) = run_pipeline(spark, settings, RunTarget.PUBLISH, trigger)
    assert again.rows_in == 0

    # a topic the brokers refuse to make (its name collides with the one above, "." against "_"
    # in Kafka's metric names) fails the run before anything is sent, naming the topic and why
    refused = "published_silver_events"
    settings = replace(settings, kafka=replace(
        settings.kafka, publish=(KafkaPublish("silver/events_quarantine", refused, ()),)))
    with pytest.raises(JobError) as error:
        run_pipeline(spark, settings, RunTarget.PUBLISH, trigger)
    assert error.value.table == f"kafka.publish topic {refused}"
    assert "could not be created" in error.value.cause
    assert "InvalidTopicException" in error.value.cause and topic in error.value.cause
    assert refused not in strict_broker.admin().list_topics(timeout=10).topics


def test_publishing_goes_on_after_backfills_rewrite_what_it_published(
        spark: SparkSession, strict_broker: Broker, tmp_path: Path) -> None:
    """A range backfill rewrites closed sessions in place (not an append, which stopped the
    stream publishing them), and a full refresh makes silver another Delta table (whose id the
    publishing stream's checkpoint refused): each time the next publish sends the table again.
    The backfill leaves the sessions still open to the stream, which appends them once closed."""
    clean, sessions = "backfilled.silver.events", "backfilled.gold.sessions"
    settings = make_settings(tmp_path, kafka_bootstrap=strict_broker.bootstrap)
    settings = replace(settings, kafka=replace(settings.kafka, publish=(
        KafkaPublish("silver/events", clean, ("event_id",)),
        KafkaPublish("gold/user_sessions", sessions, ("user_id", "session_start")))))
    spec = GenerateSpec(events=200, files=1, users=10, seconds_between_events=20, late_rate=0)
    generate_landing(settings.paths.landing, spec)  # 66 minutes: sessions close behind it
    trigger = Trigger()

    def run(layers: list[str]) -> list[TableRun]:
        return [r for layer in layers for r in run_pipeline(spark, settings, RunTarget(layer), trigger)]

    def keys(table: str, *columns: str) -> list[str]:
        rows = spark.read.format("delta").load(settings.table_path(*table.split("/")))
        return sorted(json.dumps([str(r[c]) for c in columns]) for r in rows.collect())

    run(["all"])
    closed = keys("gold/user_sessions", "user_id", "session_start")
    assert len(closed) >= 10
    assert len(strict_broker.consume_all(sessions, len(closed))) == len(closed)

    # every closed session recomputed in place, then published again, whole
    plan = plan_backfill(spark, settings, "gold", spec.start - timedelta(days=1),
                         spec.start + timedelta(days=1))
    assert [entry.topic for entry in plan.republished] == [sessions]
    backfill_gold(spark, settings, plan)
    assert keys("gold/user_sessions", "user_id", "session_start") == closed  # the open ones: not
    (published,) = [r for r in run(["publish"]) if r.table.endswith(sessions)]
    assert published.rows_out == len(closed)
    assert len(strict_broker.consume_all(sessions, 2 * len(closed))) == 2 * len(closed)

    # the next burst closes the sessions left open: each is in the table once
    generate_landing(settings.paths.landing, replace(spec, start=spec.start + timedelta(hours=2),
                                                     burst="later", seed=8))
    run(["all"])
    after = keys("gold/user_sessions", "user_id", "session_start")
    assert len(after) == len(set(after)) > len(closed)

    # silver rebuilt, and everything downstream of it: published again, whole
    events = keys("silver/events", "event_id")
    plan = plan_backfill(spark, settings, "silver/events", None, None, full_refresh=True)
    full_refresh(spark, settings, plan, run)
    assert keys("silver/events", "event_id") == events
    outcome = {r.table: r.rows_out for r in run(["publish"])}
    rebuilt = keys("gold/user_sessions", "user_id", "session_start")
    assert outcome == {f"publish:silver/events->{clean}": len(events),
                       f"publish:gold/user_sessions->{sessions}": len(rebuilt)}
    again = strict_broker.consume_all(clean, 2 * len(events))
    assert sorted(json.dumps([key]) for key, _ in again) == sorted(events + events)
