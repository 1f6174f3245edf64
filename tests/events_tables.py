"""The tables of the ``events`` pipeline as its contract (docs/events.md) states them, by hand.

Tests compare what the engine derives from ``conf/pipelines/events.yaml`` against these, and read
the tables through them; nothing in the engine knows them.
"""

from __future__ import annotations

from medallion.io.tables import ENGINE_TABLES, TableSpec

AMOUNT_TYPE = "DECIMAL(18,4)"
TOTAL_TYPE = "DECIMAL(28,4)"  # what Spark's sum() of AMOUNT_TYPE returns

BRONZE_EVENTS = TableSpec(
    "bronze", "events",
    "raw STRING, source_file STRING, ingested_at TIMESTAMP",
    "Every line of the events landing files, as written, broken lines included; append-only.",
)
BRONZE_EVENTS_KAFKA = TableSpec(
    "bronze", "events_kafka",
    "raw STRING, key STRING, topic STRING, partition INT, offset BIGINT, "
    "kafka_timestamp TIMESTAMP, "
    "source_file STRING, ingested_at TIMESTAMP",
    "Every record of the events topics: the value as text (raw), key, topic, partition, offset and "
    "Kafka timestamp; source_file is kafka://topic/partition/offset. Append-only.",
)
BRONZE_CUSTOMERS = TableSpec(
    "bronze", "customers",
    "customer_id STRING, customer_name STRING, segment STRING, _corrupt_record STRING, "
    "source_file STRING, ingested_at TIMESTAMP",
    "The customers dimension as ingested from CSV; append-only, latest row per id wins.",
)
SILVER_EVENTS = TableSpec(
    "silver", "events",
    f"event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, amount {AMOUNT_TYPE}, "
    "customer_name STRING, segment STRING, source_file STRING, ingested_at TIMESTAMP",
    "Valid events, typed, deduplicated by event_id, enriched with the customer's name and segment.",
)
SILVER_QUARANTINE = TableSpec(
    "silver", "events_quarantine",
    "raw STRING, event_id STRING, reasons ARRAY<STRING>, source_file STRING, ingested_at TIMESTAMP",
    "Every bronze line that is not a valid event, with the reasons it failed.",
)
GOLD_EVENT_COUNTS_5M = TableSpec(
    "gold", "event_counts_5m",
    f"window_start TIMESTAMP, window_end TIMESTAMP, event_type STRING, event_count BIGINT, "
    f"total_amount {TOTAL_TYPE}",
    "Tumbling 5-minute windows per event type; open windows updated in place.",
)
GOLD_USER_ACTIVITY_SLIDING = TableSpec(
    "gold", "user_activity_sliding",
    "window_start TIMESTAMP, window_end TIMESTAMP, user_id STRING, event_count BIGINT",
    "10-minute windows sliding every 5 minutes per user; open windows updated in place.",
)
GOLD_USER_SESSIONS = TableSpec(
    "gold", "user_sessions",
    f"user_id STRING, session_start TIMESTAMP, session_end TIMESTAMP, event_count BIGINT, "
    f"total_amount {TOTAL_TYPE}",
    "Sessions with a 5-minute gap per user, appended once the watermark has closed them.",
)
GOLD_SEGMENT_REVENUE_1H = TableSpec(
    "gold", "segment_revenue_1h",
    f"window_start TIMESTAMP, window_end TIMESTAMP, segment STRING, purchase_count BIGINT, "
    f"revenue {TOTAL_TYPE}",
    "Tumbling 1-hour windows of purchases per customer segment; open windows updated in place.",
)

EVENTS_TABLES: tuple[TableSpec, ...] = (
    BRONZE_EVENTS, BRONZE_EVENTS_KAFKA, BRONZE_CUSTOMERS, SILVER_EVENTS, SILVER_QUARANTINE,
    GOLD_EVENT_COUNTS_5M, GOLD_USER_ACTIVITY_SLIDING, GOLD_USER_SESSIONS, GOLD_SEGMENT_REVENUE_1H,
)
# What a lakehouse running only the events pipeline holds: its tables and the engine's own.
ALL_TABLES: tuple[TableSpec, ...] = (*EVENTS_TABLES, *ENGINE_TABLES)
