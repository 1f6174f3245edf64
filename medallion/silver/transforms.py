"""Pure transformations of the silver layer: parse, validate, deduplicate, enrich.

Parsing goes through Spark's VARIANT type (``try_parse_json``), which tells an invalid line from
valid JSON of the wrong shape, and the JSON type of every field, without ever failing the batch:
Spark 4 runs in ANSI mode, so every conversion here is a ``try_`` one.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.tables import AMOUNT_TYPE, SILVER_EVENTS, SILVER_QUARANTINE

EVENT_TYPES = ("view", "click", "add_to_cart", "purchase")
UNKNOWN_SEGMENT = "unknown"

# ISO-8601 date and time with a zone (Z or an offset); the instant itself is checked by the cast.
ISO_8601_WITH_ZONE = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)$"
_NUMERIC_JSON = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL.*)$"


class Reason:
    """Quarantine reasons: stable strings that analysts filter on."""

    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_EVENT_ID = "missing_event_id"
    INVALID_EVENT_ID = "invalid_event_id"
    MISSING_USER_ID = "missing_user_id"
    INVALID_USER_ID = "invalid_user_id"
    MISSING_EVENT_TYPE = "missing_event_type"
    INVALID_EVENT_TYPE = "invalid_event_type"
    MISSING_TIMESTAMP = "missing_timestamp"
    INVALID_TIMESTAMP = "invalid_timestamp"
    INVALID_AMOUNT = "invalid_amount"
    NEGATIVE_AMOUNT = "negative_amount"


def _field(doc: Column, name: str) -> tuple[Column, Column]:
    """A field of a JSON object as a variant, and its JSON type (``VOID`` for null, null if absent)."""
    value = F.try_variant_get(doc, f"$.{name}", "variant")
    return value, F.schema_of_variant(value)


def _absent(json_type: Column) -> Column:
    return json_type.isNull() | (json_type == "VOID")


def _required_string(doc: Column, name: str, missing: str, invalid: str) -> tuple[Column, Column]:
    """The field's trimmed text, and the reason it fails (null when it passes).

    Identifiers are compared after trimming (the contract): ``" u1"`` and ``"u1"`` are one user.
    """
    value, json_type = _field(doc, name)
    text = F.trim(F.try_variant_get(value, "$", "string"))
    reason = (
        F.when(_absent(json_type), F.lit(missing))
        .when(json_type != "STRING", F.lit(invalid))
        .when(text == "", F.lit(missing))
    )
    return text, reason


def parse_events(bronze: DataFrame) -> DataFrame:
    """Bronze rows parsed into typed event columns plus ``reasons`` (empty when the event is valid).

    Keeps ``raw``, ``source_file`` and ``ingested_at`` for lineage and quarantine.
    """
    doc = F.try_parse_json(F.col("raw"))
    doc_type = F.schema_of_variant(doc)

    event_id, event_id_reason = _required_string(
        doc, "event_id", Reason.MISSING_EVENT_ID, Reason.INVALID_EVENT_ID)
    user_id, user_id_reason = _required_string(
        doc, "user_id", Reason.MISSING_USER_ID, Reason.INVALID_USER_ID)

    event_type_value, event_type_json = _field(doc, "event_type")
    event_type = F.try_variant_get(event_type_value, "$", "string")
    event_type_reason = (
        F.when(_absent(event_type_json), F.lit(Reason.MISSING_EVENT_TYPE))
        .when((event_type_json != "STRING") | ~event_type.isin(*EVENT_TYPES),
              F.lit(Reason.INVALID_EVENT_TYPE))
    )

    ts_value, ts_json = _field(doc, "timestamp")
    ts_text = F.try_variant_get(ts_value, "$", "string")
    timestamp = F.when(ts_text.rlike(ISO_8601_WITH_ZONE), ts_text.try_cast("timestamp"))
    timestamp_reason = (
        F.when(_absent(ts_json), F.lit(Reason.MISSING_TIMESTAMP))
        .when((ts_json != "STRING") | timestamp.isNull(), F.lit(Reason.INVALID_TIMESTAMP))
    )

    amount_value, amount_json = _field(doc, "amount")
    amount = F.when(amount_json.rlike(_NUMERIC_JSON),
                    F.try_variant_get(amount_value, "$", AMOUNT_TYPE))
    amount_reason = (
        F.when(_absent(amount_json), F.lit(None))
        .when(amount.isNull(), F.lit(Reason.INVALID_AMOUNT))
        .when(amount < 0, F.lit(Reason.NEGATIVE_AMOUNT))
    )

    field_reasons = F.array_compact(F.array(
        event_id_reason, user_id_reason, event_type_reason, timestamp_reason, amount_reason))
    reasons = (
        F.when(doc.isNull(), F.array(F.lit(Reason.INVALID_JSON)))
        .when(~doc_type.startswith("OBJECT"), F.array(F.lit(Reason.NOT_AN_OBJECT)))
        .otherwise(field_reasons)
    )
    return bronze.select(
        "raw", "source_file", "ingested_at",
        event_id.alias("event_id"),
        user_id.alias("user_id"),
        event_type.alias("event_type"),
        timestamp.alias("timestamp"),
        amount.alias("amount"),
        reasons.alias("reasons"),
    )


def select_valid(parsed: DataFrame) -> DataFrame:
    """The parsed rows that passed every rule."""
    return parsed.where(F.size("reasons") == 0).drop("reasons", "raw")


def select_quarantined(parsed: DataFrame) -> DataFrame:
    """The parsed rows that failed a rule, shaped as ``silver/events_quarantine``."""
    return parsed.where(F.size("reasons") > 0).select(*SILVER_QUARANTINE.schema.fieldNames())


def quarantine_rejected(parsed: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Valid events a quality gate rejected (silver columns plus ``reasons``), as quarantine rows.

    The raw line comes back from ``parsed`` (the batch as parsed), matched on the event's id, file
    and ingestion time, so the quarantine keeps what arrived, not a re-serialised copy.
    """

    def transform(rejected: DataFrame) -> DataFrame:
        keys = ["event_id", "source_file", "ingested_at"]
        raw = parsed.where(F.size("reasons") == 0).select(*keys, "raw").dropDuplicates(keys)
        return (
            rejected.select(*keys, "reasons")
            .join(raw, on=keys, how="left")
            .select(*SILVER_QUARANTINE.schema.fieldNames())
        )

    return transform


def deduplicate_in_batch(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the first delivered (by ingestion time, then file)."""
    first = Window.partitionBy("event_id").orderBy("ingested_at", "source_file", "timestamp")
    return (
        events.withColumn("_delivery", F.row_number().over(first))
        .where(F.col("_delivery") == 1)
        .drop("_delivery")
    )


def remove_known(known_ids: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Drop the events whose ``event_id`` is among ``known_ids`` (already in silver)."""

    def transform(events: DataFrame) -> DataFrame:
        return events.join(known_ids.select("event_id"), on="event_id", how="left_anti")

    return transform


def latest_customers(customers: DataFrame) -> DataFrame:
    """The customers dimension: the latest well-formed row of each trimmed ``customer_id``.

    One row per id whatever the data, so that enrichment never multiplies an event: ids that
    differ only by surrounding spaces are one customer. The latest file wins; within one file
    (Spark keeps no line order) the ordering of name and segment decides, so that a replay
    picks the same row.
    """
    latest = Window.partitionBy("customer_id").orderBy(
        F.col("ingested_at").desc(), F.col("source_file").desc(),
        F.col("customer_name").desc_nulls_last(), F.col("segment").desc_nulls_last())
    return (
        customers.where(F.col("_corrupt_record").isNull())
        .withColumn("customer_id", F.trim("customer_id"))
        .where(F.col("customer_id").isNotNull() & (F.col("customer_id") != ""))
        .withColumn("_rank", F.row_number().over(latest))
        .where(F.col("_rank") == 1)
        .select("customer_id", "customer_name", "segment")
    )


def enrich_with_customers(customers: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Left-join events to the customers dimension; ``segment`` is ``unknown`` when none matches."""

    def transform(events: DataFrame) -> DataFrame:
        dimension = customers.select(
            F.col("customer_id").alias("_customer_id"), "customer_name",
            F.coalesce(F.col("segment"), F.lit(UNKNOWN_SEGMENT)).alias("segment"))
        joined = events.join(dimension, events["user_id"] == dimension["_customer_id"], "left")
        return joined.select(
            *[F.coalesce(F.col("segment"), F.lit(UNKNOWN_SEGMENT)).alias("segment")
              if name == "segment" else F.col(name)
              for name in SILVER_EVENTS.schema.fieldNames()]
        )

    return transform
