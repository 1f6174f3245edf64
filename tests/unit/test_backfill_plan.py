"""What a full refresh deletes and reruns, checked before anything is deleted (no JVM)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from medallion.config.model import KafkaPublish
from medallion.ops.backfill import BackfillError, plan_backfill
from medallion.project import Settings

METRICS = {"monitoring/silver_batches"}  # shared by every silver table
SILVER = {"silver/events", "silver/events_quarantine"}
GOLD = {"gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
        "gold/segment_revenue_1h", "gold/purchase_attribution"}
GOLD_QUARANTINES = {f"{key}_quarantine" for key in GOLD}
# The second shipped pipeline, conf/pipelines/orders.yaml
ORDERS_SILVER = {"silver/order_lines", "silver/order_lines_quarantine"}
ORDERS_GOLD = {"gold/category_revenue_1h", "gold/store_sessions",
               "gold/category_revenue_1h_quarantine", "gold/store_sessions_quarantine"}
# The third, conf/pipelines/accounts.yaml: change flows, each with its applied changes
ACCOUNTS_SILVER = {f"silver/{name}{part}" for name in ("accounts", "account_history")
                   for part in ("", "_quarantine", "_changes")}


def keys(plan: object) -> set[str]:
    return {spec.key for spec in plan.rewrites}  # type: ignore[attr-defined]


def test_refreshing_silver_metrics_reruns_silver_then_gold(settings: Settings) -> None:
    plan = plan_backfill(None, settings, "monitoring/silver_batches", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert keys(plan) == (METRICS | SILVER | GOLD | GOLD_QUARANTINES | ORDERS_SILVER | ORDERS_GOLD
                          | ACCOUNTS_SILVER)
    assert plan.first_layer == "silver"
    assert plan.metrics_of == ()  # deleted whole


def test_refreshing_the_kafka_bronze_table_reruns_everything_downstream(settings: Settings) -> None:
    plan = plan_backfill(None, settings, "bronze/events_kafka", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert keys(plan) == {"bronze/events_kafka"} | SILVER | GOLD | GOLD_QUARANTINES
    assert plan.first_layer == "bronze"
    assert plan.metrics_of == ("silver/events",)  # orders' rows of the shared metrics stay


def test_refreshing_a_dimension_reruns_its_pipeline_only(settings: Settings) -> None:
    plan = plan_backfill(None, settings, "bronze/products", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert keys(plan) == {"bronze/products"} | ORDERS_SILVER | ORDERS_GOLD
    assert plan.metrics_of == ("silver/order_lines",)
    assert "monitoring/silver_batches: the rows of silver/order_lines" in plan.describe()


def test_refreshing_gold_clears_the_gold_quarantines_too(settings: Settings) -> None:
    everything = keys(plan_backfill(None, settings, "gold", None, None, True))  # type: ignore[arg-type]
    assert everything == GOLD | GOLD_QUARANTINES | ORDERS_GOLD
    one = plan_backfill(None, settings, "gold/user_sessions", None, None, True)  # type: ignore[arg-type]
    assert keys(one) == {"gold/user_sessions", "gold/user_sessions_quarantine"}
    assert one.first_layer == "gold"


@pytest.mark.parametrize("table", ["quality/results", "monitoring/query_progress", "monitoring/runs"])
def test_records_of_past_runs_are_not_rebuilt(settings: Settings, table: str) -> None:
    with pytest.raises(BackfillError, match="record of past runs"):
        plan_backfill(None, settings, table, None, None, full_refresh=True)  # type: ignore[arg-type]


def test_a_full_refresh_lists_only_the_tables_it_will_delete(settings: Settings) -> None:
    """A gold quarantine is made by the first row its gate drops; before, the plan listed it
    among the tables to delete although there was none."""
    plan = plan_backfill(None, settings, "gold/user_sessions", None, None, True)  # type: ignore[arg-type]
    assert plan.describe(absent={"gold/user_sessions_quarantine"}).splitlines() == [
        "full refresh of gold/user_sessions: delete these tables and their checkpoints, then "
        "process every input again:", "  gold/user_sessions"]
    assert plan.describe().splitlines()[1:] == ["  gold/user_sessions",
                                                "  gold/user_sessions_quarantine"]


PUBLISHED = (KafkaPublish("silver/events", "events.clean", ("event_id",)),
             KafkaPublish("gold/event_counts_5m", "events.counts", ("window_start", "event_type")),
             KafkaPublish("gold/user_sessions", "events.sessions", ("user_id", "session_start")),
             KafkaPublish("silver/order_lines", "orders.lines", ()))


def with_publications(settings: Settings) -> Settings:
    return replace(settings, kafka=replace(settings.kafka, publish=PUBLISHED))


def test_a_full_refresh_restarts_the_publications_of_the_tables_it_rebuilds(
        settings: Settings) -> None:
    """A rebuilt table is another Delta table: the stream publishing the old one cannot go on
    from its checkpoint (Delta refuses a table whose id changed), so the checkpoint goes too."""
    plan = plan_backfill(None, with_publications(settings), "silver/events", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert [entry.topic for entry in plan.republished] == [
        "events.clean", "events.counts", "events.sessions"]  # not the orders pipeline's
    assert plan.describe().splitlines()[-4:] == [
        "and delete the checkpoints of these publications (the next publish sends the table "
        "again, whole):",
        "  silver/events -> topic events.clean", "  gold/event_counts_5m -> topic events.counts",
        "  gold/user_sessions -> topic events.sessions"]


def test_a_range_backfill_restarts_the_publications_of_appended_gold_tables_only(
        settings: Settings) -> None:
    """A range recomputed in a gold table in mode append is not an append: the plain stream
    publishing it would stop there. A table updated in place is published through its change
    data feed, which carries the recomputed rows."""
    start, end = datetime(2025, 1, 27, tzinfo=timezone.utc), datetime(2025, 1, 28, tzinfo=timezone.utc)
    plan = plan_backfill(None, with_publications(settings), "gold", start, end)  # type: ignore[arg-type]
    assert [entry.table for entry in plan.republished] == ["gold/user_sessions"]
    assert plan.describe().splitlines()[-1] == "  gold/user_sessions -> topic events.sessions"
    one = plan_backfill(None, with_publications(settings), "gold/event_counts_5m", start, end)  # type: ignore[arg-type]
    assert one.republished == ()
    assert "publications" not in one.describe()
