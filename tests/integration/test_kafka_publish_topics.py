"""Publishing to a topic the brokers do not have, on a real broker whose auto-creation is off (as
production clusters run): the run makes the topic, with the brokers' default partitions, before
its first record, and every row of the table arrives.

Without that, Kafka's producer waits a minute for the topic's metadata and the query fails; with
auto-creation on, a topic made at the first record can race the idempotent producer's first batch.
A topic the brokers refuse to make fails the run with their reason, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config import KafkaPublish, Trigger
from medallion.errors import JobError
from medallion.generate import GenerateSpec, generate_landing
from medallion.runner import Layer, run_pipeline
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
    for layer in (Layer.BRONZE, Layer.SILVER):
        run_pipeline(spark, settings, layer, trigger)
    assert topic not in strict_broker.admin().list_topics(timeout=10).topics

    (run,) = run_pipeline(spark, settings, Layer.PUBLISH, trigger)

    assert run.table == f"publish:silver/events->{topic}"
    meta = strict_broker.admin().list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None and len(meta.partitions) == DEFAULT_PARTITIONS
    silver = {r["event_id"] for r in spark.read.format("delta")
              .load(settings.table_path("silver", "events")).select("event_id").collect()}
    assert len(silver) > 100
    published = strict_broker.consume_all(topic, len(silver))
    assert sorted(key for key, _ in published) == sorted(silver)

    # the next run finds the topic there and sends nothing again
    (again,) = run_pipeline(spark, settings, Layer.PUBLISH, trigger)
    assert again.rows_in == 0

    # a topic the brokers refuse to make (its name collides with the one above, "." against "_"
    # in Kafka's metric names) fails the run before anything is sent, naming the topic and why
    refused = "published_silver_events"
    settings = replace(settings, kafka=replace(
        settings.kafka, publish=(KafkaPublish("silver/events_quarantine", refused, ()),)))
    with pytest.raises(JobError) as error:
        run_pipeline(spark, settings, Layer.PUBLISH, trigger)
    assert error.value.table == f"kafka.publish topic {refused}"
    assert "could not be created" in error.value.cause
    assert "InvalidTopicException" in error.value.cause and topic in error.value.cause
    assert refused not in strict_broker.admin().list_topics(timeout=10).topics
