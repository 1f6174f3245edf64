"""Publishing lakehouse tables to Kafka topics as JSON, each with its own checkpoint.

Delivery is at-least-once: Kafka's producer has no transaction that Spark's sink could commit
together with the query's checkpoint, so a micro-batch replayed after a crash (written to Kafka,
then killed before its offsets were committed) is sent again. Consumers deduplicate by the
message key (the configured key columns, e.g. ``event_id``) and, for tables updated in place,
keep the newest value per key: every message carries the whole row, so applying one twice is
harmless.

A topic the brokers do not have is created before its first record, with the brokers' default
partitions and replication (what their auto-creation would give): a topic auto-created at the
producer's first record can race the idempotent producer's first batch, and brokers with
auto-creation off would keep the query waiting a minute before failing.

Append-only tables (what the declarations make them: silver tables, quarantines, gold tables in
mode append) are streamed as they grow. Gold tables whose open windows are updated in place are read through
Delta's change data feed (turned on here when first published): their inserts and updated rows
are published, each the row's new state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from medallion.config.model import KafkaPublish, KafkaSettings, Trigger
from medallion.engine.streaming import JobError, RunningQuery
from medallion.io.checkpoints import drop_leftovers
from medallion.io.failures import root_cause
from medallion.io.hadoopfs import path_exists
from medallion.io.sinks.delta import with_trigger
from medallion.io.sources.kafka import kafka_client_options
from medallion.io.tables import TableSpec
from medallion.pipeline.kinds import OutputMode
from medallion.project import Settings, declared_tables

log = logging.getLogger(__name__)

_CDF = "delta.enableChangeDataFeed"
_ADMIN_TIMEOUT_S = 30


def to_kafka_records(key_columns: tuple[str, ...]) -> Callable[[DataFrame], DataFrame]:
    """Rows as Kafka records: ``value`` is ``to_json(struct(*))``; ``key`` the JSON of the key
    columns (a single column: its text), or null without key columns."""

    def transform(rows: DataFrame) -> DataFrame:
        value = F.to_json(F.struct(*[F.col(c) for c in rows.columns]))
        if not key_columns:
            key = F.lit(None).cast("string")
        elif len(key_columns) == 1:
            key = F.col(key_columns[0]).cast("string")
        else:
            key = F.to_json(F.struct(*[F.col(c) for c in key_columns]))
        return rows.select(key.alias("key"), value.alias("value"))

    return transform


def publish_checkpoint(settings: Settings, entry: KafkaPublish) -> str:
    """Checkpoint of one publication: its own, beside (never inside) the tables'."""
    return settings.checkpoint_path(f"publish/{entry.table}/{entry.topic}")


def _changes(spark: SparkSession, spec: TableSpec, path: str) -> DataFrame:
    table = DeltaTable.forPath(spark, path)
    properties = table.detail().first()["properties"]  # type: ignore[index]
    if str(properties.get(_CDF, "false")).lower() != "true":
        log.info("%s: turning on the change data feed to publish its updates", spec.key)
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({_CDF} = true)")
    changes = (
        spark.readStream.format("delta").option("readChangeFeed", "true").load(path)
        .where(F.col("_change_type").isin("insert", "update_postimage"))
    )
    return changes.select(*spec.schema.fieldNames())


def ensure_topics(spark: SparkSession, kafka: KafkaSettings, topics: Sequence[str]) -> list[str]:
    """Create those of ``topics`` the brokers do not have (the brokers' default partitions and
    replication) and wait until each of their partitions has a leader; return those missing.

    Kafka's own admin client in the driver's JVM, with the sink's options (JKS stores and SASL
    as the sink has them). A topic this client may not create fails here, naming it.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    admin_api = jvm.org.apache.kafka.clients.admin
    known = set(admin_api.AdminClientConfig.configNames())
    properties = jvm.java.util.Properties()
    for name, value in kafka_client_options(kafka).items():
        if name.startswith("kafka.") and name[len("kafka."):] in known:
            properties.setProperty(name[len("kafka."):], value)
    properties.setProperty("default.api.timeout.ms", str(_ADMIN_TIMEOUT_S * 1000))
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    admin = admin_api.AdminClient.create(properties)
    try:
        try:
            existing = set(admin.listTopics().names().get(_ADMIN_TIMEOUT_S, seconds))
        except Exception as exc:  # noqa: BLE001  (Py4J carries the JVM's error)
            raise JobError("kafka.publish", "could not list the topics of the Kafka brokers at "
                           f"{kafka.bootstrap_servers} (within {_ADMIN_TIMEOUT_S} s): "
                           f"{root_cause(exc)}") from exc
        missing = [topic for topic in dict.fromkeys(topics) if topic not in existing]
        if not missing:
            return []
        empty = jvm.java.util.Optional.empty()
        new_topics = jvm.java.util.ArrayList()
        for topic in missing:
            new_topics.add(admin_api.NewTopic(topic, empty, empty))
        futures = admin.createTopics(new_topics).values()
        for topic in missing:
            try:
                futures.get(topic).get(_ADMIN_TIMEOUT_S, seconds)
            except Exception as exc:  # noqa: BLE001
                cause = root_cause(exc)
                if "TopicExistsException" not in cause:  # made meanwhile by someone else
                    hint = ("; create it ahead, or allow this client to create topics"
                            if "Authorization" in cause else "")
                    raise JobError(f"kafka.publish topic {topic}", "the topic does not exist and "
                                   f"could not be created: {cause}{hint}") from exc
                continue
            log.warning("created Kafka topic %s with the brokers' default partitions and "
                        "replication (create it ahead to choose them)", topic)
        _await_leaders(admin, missing, seconds)
        return missing
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(5))


def _await_leaders(admin: Any, topics: list[str], seconds: Any) -> None:
    """Wait (up to the admin timeout) until every partition of ``topics`` has a leader."""
    deadline = time.monotonic() + _ADMIN_TIMEOUT_S
    while True:
        try:
            described = admin.describeTopics(topics).allTopicNames().get(_ADMIN_TIMEOUT_S, seconds)
            if all(p.leader() is not None for t in described.values() for p in t.partitions()):
                return
        except Exception:  # noqa: BLE001  (not served yet: retried until the deadline)
            pass
        if time.monotonic() > deadline:
            log.warning("Kafka topics %s: not every partition has a leader yet", ", ".join(topics))
            return
        time.sleep(0.2)


def start_publish(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start publishing every table listed in ``kafka.publish`` (none: nothing to start); the
    topics of those that start are created first if the brokers do not have them."""
    queries: list[RunningQuery] = []
    writers: list[tuple[str, str, DataStreamWriter]] = []
    declared = declared_tables(settings.pipelines)  # load_settings checked every entry's table
    for entry in settings.kafka.publish:
        decl = declared[entry.table]
        spec = TableSpec.from_decl(decl)
        path = spec.path(settings)
        name = f"publish:{spec.key}->{entry.topic}"
        if not DeltaTable.isDeltaTable(spark, path):
            queries.append(RunningQuery(name, None, note=f"{spec.key} does not exist yet"))
            continue
        if decl.mode is OutputMode.APPEND:  # rows are only ever appended: read them as they come
            rows = spark.readStream.format("delta").load(path)
        else:
            writer_checkpoint = spec.checkpoint(settings)
            if not path_exists(spark, f"{writer_checkpoint}/offsets"):
                raise JobError(name, f"{spec.key} has not been written yet; run gold first")
            rows = _changes(spark, spec, path)
        records = rows.transform(to_kafka_records(entry.key))
        drop_leftovers(spark, publish_checkpoint(settings, entry))
        writer = (
            records.writeStream.format("kafka")
            .queryName(name)
            .options(**kafka_client_options(settings.kafka))
            .option("topic", entry.topic)
            .option("checkpointLocation", publish_checkpoint(settings, entry))
        )
        writers.append((name, entry.topic, with_trigger(writer, trigger)))
    if writers:
        ensure_topics(spark, settings.kafka, [topic for _, topic, _ in writers])
    for name, topic, writer in writers:
        log.info("%s: publishing to %s", name, topic)
        queries.append(RunningQuery(name, writer.start()))
    return queries
