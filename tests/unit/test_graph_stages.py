"""The order the engine builds a layer's tables in comes from the pipelines' graphs (no Spark)."""

from __future__ import annotations

from pathlib import Path

import yaml

from medallion.config.yamlfiles import Origins
from medallion.pipeline.graph import PipelineGraph, build_graph, stages
from medallion.pipeline.kinds import Layer
from medallion.pipeline.load import load_pipeline, parse_pipeline

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "conf" / "pipelines" / "events.yaml"

# Two chains of gold tables, declared out of order: each table is read by the one above it.
CHAINS = """
sources:
  taps: {format: json_lines, path: taps, bronze: {table: taps}}
silver:
  taps:
    input: bronze/taps
    parse: json
    columns: {id: STRING, at: TIMESTAMP, n: INT}
    dedup: {key: [id]}
    event_time: at
gold:
  taps_1h:
    input: gold/taps_15m
    window: {kind: tumbling, size: 1 hour, column: window_start}
    aggregates: {windows: {function: count}}
    mode: update
  taps_5m:
    input: silver/taps
    window: {kind: tumbling, size: 5 minutes}
    aggregates: {taps: {function: count}}
    mode: append
  taps_15m:
    input: gold/taps_5m
    window: {kind: tumbling, size: 15 minutes, column: window_start}
    aggregates: {windows: {function: count}}
    mode: append
  taps_daily:
    input: silver/taps
    window: {kind: tumbling, size: 1 day}
    aggregates: {taps: {function: count}}
    mode: update
"""


def _chains() -> PipelineGraph:
    tree = yaml.safe_load(CHAINS)
    return build_graph(parse_pipeline("taps", tree, Origins(), "taps.yaml"))


def test_gold_tables_read_by_other_gold_tables_come_a_stage_before_their_readers() -> None:
    graph = _chains()
    assert stages([graph], Layer.GOLD) == (
        ("gold/taps_5m", "gold/taps_daily"), ("gold/taps_15m",), ("gold/taps_1h",))


def test_a_layer_whose_flows_read_none_of_its_own_tables_is_one_stage() -> None:
    events = build_graph(load_pipeline(EVENTS, None))
    assert stages([events], Layer.GOLD) == ((
        "gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
        "gold/segment_revenue_1h", "gold/purchase_attribution"),)
    assert stages([events], Layer.SILVER) == (("silver/events",),)


def test_the_stages_of_several_pipelines_are_laid_side_by_side() -> None:
    events = build_graph(load_pipeline(EVENTS, None))
    first, *rest = stages([events, _chains()], Layer.GOLD)
    assert first[:5] == ("gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
                         "gold/segment_revenue_1h", "gold/purchase_attribution")
    assert first[5:] == ("gold/taps_5m", "gold/taps_daily")
    assert rest == [("gold/taps_15m",), ("gold/taps_1h",)]
