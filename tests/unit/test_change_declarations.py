"""A silver table declared with ``changes:``: the tables it derives, and the mistakes refused
before Spark starts, naming the key and the file (no JVM)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from medallion.pipeline.graph import build_graph
from medallion.pipeline.kinds import OutputMode, ParseMode, TableRole, debezium_event_path
from medallion.pipeline.render import render_graph
from tests.pipeline_trees import load_tree, refused

Tree = dict[str, Any]

TREE: Tree = {
    "sources": {"changes": {"format": "json_lines", "path": "changes", "bronze": {"table": "changes"}}},
    "silver": {"customers": {
        "input": "bronze/changes", "parse": "json",
        "columns": {"id": "STRING", "lsn": "BIGINT", "tx": "INT", "op": "STRING",
                    "name": "STRING", "segment": "STRING"},
        "changes": {"keys": "id", "sequence_by": ["lsn", "tx"], "delete_when": "op = 'd'", "scd": 2,
                    "track_history_except_columns": ["name"]},
    }},
}


_load = partial(load_tree, name="crm", tree=TREE)
_fails = partial(refused, name="crm", tree=TREE)


def _changes(tree: Tree) -> Tree:
    found: Tree = tree["silver"]["customers"]["changes"]
    return found


def test_a_change_flow_derives_its_table_history_columns_and_applied_changes(tmp_path: Path) -> None:
    spec = _load(tmp_path)
    table = spec.table("silver/customers")
    assert table.column_names == ("id", "lsn", "tx", "op", "name", "segment", "source_file",
                                  "ingested_at", "valid_from", "valid_to", "is_current")
    assert str(table.column_type("valid_from")) == "STRUCT<lsn: BIGINT, tx: INT>"
    assert (table.mode, table.merge_keys) == (OutputMode.UPDATE, ("id", "valid_from"))
    applied = spec.table("silver/customers_changes")
    assert applied.role is TableRole.CHANGES
    assert applied.column_names[-1] == "_deleted"
    # Its batches replace rows of keys spread over every file: both tables are made with deletion
    # vectors; the bronze table and the quarantine, only ever appended to, without.
    assert (table.deletion_vectors, applied.deletion_vectors) == (True, True)
    assert not any(spec.table(key).deletion_vectors
                   for key in ("bronze/changes", "silver/customers_quarantine"))
    silver = spec.silver[0]
    # A change without its key or sequence, or that delete_when cannot say, is quarantined.
    assert {"missing_id", "missing_lsn", "missing_tx", "delete_when_unknown"} <= set(silver.reasons())
    assert "missing_segment" not in silver.reasons()


def _type_1(tree: Tree) -> None:
    _changes(tree).update(scd=1, sequence_by="lsn")
    del _changes(tree)["track_history_except_columns"]


def test_type_1_keeps_one_row_per_key(tmp_path: Path) -> None:
    table = _load(tmp_path, _type_1).table("silver/customers")
    assert (table.mode, table.merge_keys) == (OutputMode.UPDATE, ("id",))
    assert "valid_from" not in table.column_names


def test_type_1_may_keep_its_deletes_for_a_declared_time(tmp_path: Path) -> None:
    def kept(tree: Tree) -> None:
        _type_1(tree)
        _changes(tree)["keep_deletes_for"] = "30 days"
    spec = _load(tmp_path, kept)
    assert spec.silver[0].changes is not None and spec.silver[0].changes.keep_deletes_for == "30 days"
    plan = render_graph(spec, build_graph(spec), spec.tables())
    assert "deletes when op = 'd', kept 30 days after ingestion" in plan
    assert _load(tmp_path, _type_1).silver[0].changes.keep_deletes_for is None  # type: ignore[union-attr]


@pytest.mark.parametrize(("change", "key", "words"), [
    (lambda t: _changes(t).update(keys="ident"), "silver.customers.changes.keys", "unknown column 'ident'"),
    (lambda t: _changes(t).update(sequence_by=["id"]), "silver.customers.changes.sequence_by",
     "a key column cannot order"),
    (lambda t: _changes(t).update(delete_when="op"), "silver.customers.changes.delete_when",
     "must be true or false"),
    (lambda t: _changes(t).update(delete_when="kind = 'd'"), "silver.customers.changes.delete_when",
     "kind"),
    (lambda t: _changes(t).update(scd=3), "silver.customers.changes.scd", "must be 1"),
    (lambda t: _changes(t).update(scd=1), "silver.customers.changes.track_history_except_columns",
     "scd: 2 only"),
    (lambda t: _changes(t).update(track_history_columns=["segment"]),
     "silver.customers.changes.track_history_except_columns", "not both"),
    (lambda t: _changes(t).update(track_history_except_columns=["colour"]),
     "silver.customers.changes.track_history_except_columns", "unknown column 'colour'"),
    (lambda t: t["silver"]["customers"].update(dedup={"key": "id"}), "silver.customers.dedup",
     "takes no dedup"),
    (lambda t: t["silver"]["customers"]["columns"].update(valid_to="BIGINT"),
     "silver.customers.columns.valid_to", "a change flow adds itself"),
    (lambda t: t["silver"]["customers"].pop("changes"), "silver.customers.dedup", "required"),
    (lambda t: _changes(t).update(keep_deletes_for="30 days"), "silver.customers.changes.keep_deletes_for",
     "scd: 1 only"),
    (lambda t: (_type_1(t), _changes(t).update(keep_deletes_for="a month")),
     "silver.customers.changes.keep_deletes_for", "not a duration"),
    (lambda t: (_type_1(t), _changes(t).update(keep_deletes_for="0 days")),
     "silver.customers.changes.keep_deletes_for", "longer than zero"),
    (lambda t: (_type_1(t), _changes(t).update(keep_deletes_for="30 days"),
                t["silver"]["customers"].update(keep=["source_file"])),
     "silver.customers.changes.keep_deletes_for", "counts from ingested_at"),
])
def test_a_wrong_change_declaration_is_refused_naming_its_key(
        tmp_path: Path, change: Callable[[Tree], None], key: str, words: str) -> None:
    _fails(tmp_path, change, key, words)


@pytest.mark.parametrize(("field", "path"), [
    ("__op", "$.op"), ("__ts_ms", "$.ts_ms"), ("__source_lsn", "$.source.lsn"),
    ("__source_ts_ms", "$.source.ts_ms"), ("__transaction_id", "$.transaction.id"),
    ("id", None), ("source", None), ("_op", None),
])
def test_a_debezium_column_reads_the_event_only_when_named_so(field: str, path: str | None) -> None:
    assert debezium_event_path(field) == path


def test_a_debezium_flow_reads_its_raw_text_and_names_its_events_that_change_no_row(
        tmp_path: Path) -> None:
    def debezium(tree: Tree) -> None:
        silver = tree["silver"]["customers"]
        silver.update(parse="debezium")
        silver["columns"].update(lsn={"type": "BIGINT", "source": "__source_lsn"},
                                 tx={"type": "INT", "source": "__transaction_total_order"},
                                 op={"type": "STRING", "source": "__op"})

    spec = _load(tmp_path, debezium)
    silver = spec.silver[0]
    assert silver.parse is ParseMode.DEBEZIUM
    assert spec.table("silver/customers_quarantine").column_names[:2] == ("raw", "id")
    assert silver.reasons()[:5] == ("invalid_utf8", "no_value", "invalid_json", "not_an_object",
                                    "not_a_row_change")
    _fails(tmp_path, lambda tree: (debezium(tree), tree["sources"]["changes"].update(
        format="csv", header=["id", "lsn"])), "silver.customers.raw_column", "no text column 'raw'")
