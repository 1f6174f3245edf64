"""A change flow fed full exports (``changes.snapshot_by``): what it derives, how ``plan`` tells
it, and the mistakes refused before Spark starts, naming the key and the file (no JVM)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from medallion.pipeline.evolution import change_definition
from medallion.pipeline.graph import build_graph
from medallion.pipeline.kinds import OutputMode
from medallion.pipeline.render import render_graph
from tests.pipeline_trees import load_tree, refused

Tree = dict[str, Any]

TREE: Tree = {
    "sources": {"exports": {"format": "csv", "path": "exports", "header": ["id", "name", "segment"],
                            "bronze": {"table": "exports"}}},
    "silver": {"customers": {
        "input": "bronze/exports", "parse": "columns",
        "columns": {"id": "STRING", "name": "STRING", "segment": "STRING",
                    "exported_on": {"type": "DATE",
                                    "expr": "regexp_extract(source_file, '([0-9-]+)[.]csv$', 1)"}},
        "changes": {"keys": "id", "snapshot_by": "exported_on", "scd": 2},
    }},
}

_load = partial(load_tree, name="crm", tree=TREE)
_fails = partial(refused, name="crm", tree=TREE)


def _changes(tree: Tree) -> Tree:
    found: Tree = tree["silver"]["customers"]["changes"]
    return found


def test_an_export_position_orders_the_changes_and_bounds_the_versions(tmp_path: Path) -> None:
    spec = _load(tmp_path)
    silver = spec.silver[0]
    assert silver.changes is not None and silver.changes.snapshot
    assert silver.changes.sequence_by == ("exported_on",)
    table = spec.table("silver/customers")
    assert str(table.column_type("valid_from")) == "DATE"
    assert (table.mode, table.merge_keys) == (OutputMode.UPDATE, ("id", "valid_from"))
    # A row with no key or no position says nothing of an export: quarantined.
    assert {"missing_id", "missing_exported_on"} <= set(silver.reasons())
    assert "delete_when_unknown" not in silver.reasons()
    plan = render_graph(spec, build_graph(spec), spec.tables())
    assert "full exports of key id in order of exported_on" in plan
    assert change_definition(silver)["snapshot"] is True


@pytest.mark.parametrize(("change", "key", "words"), [
    (lambda t: _changes(t).update(sequence_by="exported_on"), "silver.customers.changes.sequence_by",
     "snapshot_by takes its place"),
    (lambda t: _changes(t).update(delete_when="segment = 'x'"), "silver.customers.changes.delete_when",
     "a key an export lacks is deleted"),
    (lambda t: _changes(t).update(snapshot_by="day"), "silver.customers.changes.snapshot_by",
     "unknown column 'day'"),
    (lambda t: _changes(t).update(snapshot_by="id"), "silver.customers.changes.snapshot_by",
     "a key column cannot order"),
    (lambda t: _changes(t).pop("snapshot_by"), "silver.customers.changes.sequence_by", "required"),
    (lambda t: _changes(t).update(scd=1, keep_deletes_for="7 days"),
     "silver.customers.changes.keep_deletes_for", "keeps its applied changes whole"),
])
def test_a_wrong_snapshot_declaration_is_refused_naming_its_key(
        tmp_path: Path, change: Callable[[Tree], None], key: str, words: str) -> None:
    _fails(tmp_path, change, key, words)
