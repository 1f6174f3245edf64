"""A dimension kept from a change flow's table, and enrichment with the version valid at a row's
time (``enrich.<dim>.as_of``): what the declaration derives, the order it runs in, and the
mistakes refused before Spark starts, naming the key and the file (no JVM)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from medallion.ops.backfill import plan_backfill
from medallion.pipeline.graph import InputRole, build_graph, stages
from medallion.pipeline.kinds import Layer
from medallion.pipeline.render import render_graph
from tests.change_feeds import SHOP, change_settings
from tests.pipeline_trees import load_tree, refused

Tree = dict[str, Any]

# The facts are declared before the history they are enriched from: the order of the
# declaration is not the order they are built in.
TREE: Tree = {
    "sources": {
        "orders": {"format": "json_lines", "path": "orders", "bronze": {"table": "orders"}},
        "changes": {"format": "json_lines", "path": "changes", "bronze": {"table": "changes"}},
    },
    "dimensions": {"customer_versions": {"table": "silver/customers_history"}},
    "silver": {
        "orders": {
            "input": "bronze/orders", "parse": "json",
            "columns": {"order_id": "STRING", "customer_id": "STRING", "ordered_at": "TIMESTAMP",
                        "amount": "DOUBLE"},
            "dedup": {"key": "order_id"},
            "enrich": {"customer_versions": {
                "join": {"customer_id": "id"}, "as_of": "ordered_at",
                "columns": {"segment_then": "segment", "version_from": "valid_from"},
                "defaults": {"segment_then": "unknown"}}},
        },
        "customers_history": {
            "input": "bronze/changes", "parse": "json",
            "columns": {"id": "STRING", "changed_at": "TIMESTAMP", "op": "STRING", "segment": "STRING",
                        "visits": "INT"},
            "changes": {"keys": "id", "sequence_by": "changed_at", "delete_when": "op = 'd'",
                        "scd": 2},
        },
    },
}


_load = partial(load_tree, name="shop", tree=TREE)
_fails = partial(refused, name="shop", tree=TREE)


def _enrich(tree: Tree) -> Tree:
    found: Tree = tree["silver"]["orders"]["enrich"]["customer_versions"]
    return found


def test_a_dimension_kept_from_a_change_flow_is_keyed_by_its_keys_and_typed_by_its_columns(
        tmp_path: Path) -> None:
    spec = _load(tmp_path)
    assert spec.dimension("customer_versions").key == ("id",)
    orders = spec.table("silver/orders")
    assert orders.column_names[:6] == ("order_id", "customer_id", "ordered_at", "amount",
                                       "segment_then", "version_from")
    assert str(orders.column_type("segment_then")) == "STRING"
    assert str(orders.column_type("version_from")) == "TIMESTAMP"  # the sequence's type


def test_the_history_is_built_before_the_table_enriched_from_it(tmp_path: Path) -> None:
    graph = build_graph(_load(tmp_path))
    assert ("silver/customers_history", "silver/orders", InputRole.LOOKUP) in graph.edges()
    assert stages([graph], Layer.SILVER) == (("silver/customers_history",), ("silver/orders",))
    assert set(graph.upstream("silver/orders")) == {"bronze/changes", "bronze/orders",
                                                    "silver/customers_history"}


def test_plan_says_which_version_a_row_takes(tmp_path: Path) -> None:
    spec = _load(tmp_path)
    text = render_graph(spec, build_graph(spec), spec.tables())
    assert ("enrich with customer_versions as of ordered_at on customer_id = id: "
            "segment_then = segment, version_from = valid_from (on a miss: segment_then 'unknown')"
            in text)
    assert "customer_versions: the rows of silver/customers_history per id" in text


def test_latest_enrichment_from_a_change_flow_needs_no_history(tmp_path: Path) -> None:
    def scd1(tree: Tree) -> None:
        tree["silver"]["customers_history"]["changes"]["scd"] = 1
        del _enrich(tree)["as_of"]
        _enrich(tree)["columns"] = {"segment_now": "segment"}
        del _enrich(tree)["defaults"]

    assert _load(tmp_path, scd1).table("silver/orders").column_names[4] == "segment_now"


@pytest.mark.parametrize(("change", "key", "words"), [
    (lambda t: t["dimensions"]["customer_versions"].update(table="silver/orders"),
     "dimensions.customer_versions.table",
     "silver/orders is not a silver table kept by a change flow (those: silver/customers_history)"),
    (lambda t: t["dimensions"]["customer_versions"].update(key="id"),
     "dimensions.customer_versions.key", "declare either table or source, not both"),
    (lambda t: t["silver"]["customers_history"]["changes"].update(scd=1),
     "silver.orders.enrich.customer_versions.as_of",
     "dimension customer_versions keeps no history: as_of needs a dimension kept from a table "
     "with changes.scd: 2"),
    (lambda t: _enrich(t).update(as_of="amount"),
     "silver.orders.enrich.customer_versions.as_of", "amount is DOUBLE, not a TIMESTAMP"),
    (lambda t: _enrich(t).update(as_of="placed_at"),
     "silver.orders.enrich.customer_versions.as_of", "placed_at"),
    (lambda t: t["silver"]["customers_history"]["changes"].update(sequence_by="visits"),
     "silver.orders.enrich.customer_versions.as_of",
     "silver/customers_history's versions are sequenced by visits, not by one TIMESTAMP column"),
    (lambda t: t["silver"]["customers_history"]["changes"].update(sequence_by=["changed_at", "visits"]),
     "silver.orders.enrich.customer_versions.as_of", "sequenced by changed_at, visits"),
    (lambda t: _enrich(t).update(columns=["id"]),
     "silver.orders.enrich.customer_versions.columns", "id"),
])
def test_a_point_in_time_mistake_is_refused_naming_the_key(
        tmp_path: Path, change: Callable[[Tree], None], key: str, words: str) -> None:
    _fails(tmp_path, change, key, words)


def test_a_full_refresh_of_the_history_rebuilds_the_tables_enriched_from_it(tmp_path: Path) -> None:
    settings = change_settings(tmp_path, SHOP, pipeline_name="shop")
    plan = plan_backfill(None, settings, "silver/customers_history", None, None,  # type: ignore[arg-type]
                         full_refresh=True)
    assert {spec.key for spec in plan.rewrites} == {
        "silver/customers_history", "silver/customers_history_quarantine",
        "silver/customers_history_changes", "silver/orders", "silver/orders_quarantine",
        "monitoring/silver_batches"}
    orders = plan_backfill(None, settings, "silver/orders", None, None,  # type: ignore[arg-type]
                           full_refresh=True)
    assert "silver/customers_history" not in {spec.key for spec in orders.rewrites}
