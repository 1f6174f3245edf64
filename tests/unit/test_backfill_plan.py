"""What a full refresh deletes and reruns, checked before anything is deleted (no JVM)."""

from __future__ import annotations

import pytest

from medallion.backfill import BackfillError, plan_backfill
from medallion.config import Settings

METRICS = {"monitoring/silver_batches"}  # shared by every silver table
SILVER = {"silver/events", "silver/events_quarantine"}
GOLD = {"gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
        "gold/segment_revenue_1h", "gold/purchase_attribution"}
GOLD_QUARANTINES = {f"{key}_quarantine" for key in GOLD}
# The second shipped pipeline, conf/pipelines/orders.yaml
ORDERS_SILVER = {"silver/order_lines", "silver/order_lines_quarantine"}
ORDERS_GOLD = {"gold/category_revenue_1h", "gold/store_sessions",
               "gold/category_revenue_1h_quarantine", "gold/store_sessions_quarantine"}


def keys(plan: object) -> set[str]:
    return {spec.key for spec in plan.rewrites}  # type: ignore[attr-defined]


def test_refreshing_silver_metrics_reruns_silver_then_gold(settings: Settings) -> None:
    plan = plan_backfill(None, settings, "monitoring/silver_batches", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert keys(plan) == METRICS | SILVER | GOLD | GOLD_QUARANTINES | ORDERS_SILVER | ORDERS_GOLD
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
