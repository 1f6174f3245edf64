"""Publishing lakehouse tables to Kafka topics as JSON, each with its own checkpoint.

Delivery is at-least-once: Kafka's producer has no transaction that Spark's sink could commit
together with the query's checkpoint, so a micro-batch replayed after a crash (written to Kafka,
then killed before its offsets were committed) is sent again. Consumers deduplicate by the
message key (the configured key columns, e.g. ``event_id``) and, for tables updated in place,
keep the newest value per key: every message carries the whole row, so applying one twice is
harmless.

Append-only tables (what the declarations make them: silver tables, quarantines, gold tables in
mode append) are streamed as they grow. Gold tables whose open windows are updated in place are read through
Delta's change data feed (turned on here when first published): their inserts and updated rows
are published, each the row's new state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import KafkaPublish, Settings, Trigger, declared_tables
from medallion.hadoopfs import path_exists
from medallion.pipeline.model import OutputMode
from medallion.sinks.delta import with_trigger
from medallion.sources.kafka import kafka_client_options
from medallion.streaming import JobError, RunningQuery
from medallion.tables import TableSpec

log = logging.getLogger(__name__)

_CDF = "delta.enableChangeDataFeed"


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


def start_publish(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start publishing every table listed in ``kafka.publish`` (none: nothing to start)."""
    queries: list[RunningQuery] = []
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
        writer = (
            records.writeStream.format("kafka")
            .queryName(name)
            .options(**kafka_client_options(settings.kafka))
            .option("topic", entry.topic)
            .option("checkpointLocation", publish_checkpoint(settings, entry))
        )
        log.info("%s: publishing to %s", spec.key, entry.topic)
        queries.append(RunningQuery(name, with_trigger(writer, trigger).start()))
    return queries
