"""A declaration changed after its tables were made: what carries over, and what is refused.

A pipeline's declaration is its tables' definition, and teams change it: a new column, a new
aggregate, another window. Before a layer's queries with work start, the engine compares what each
is about to write with what the lakehouse holds (:func:`medallion.engine.layer.start_layer`), by
the rules of :mod:`medallion.pipeline.evolution` (pure; ``plan`` and ``status`` apply them too):

* **A table's columns** (:func:`align_table`): columns the declaration added, and fields it added
  to struct columns, are added to the table (Delta's ``ADD COLUMNS``, at their declared place, with
  their comments); rows written before hold null in them until the table is recomputed. A column
  or field declared with a wider type is widened in place (Delta's type widening: the table
  property ``delta.enableTypeWidening`` is set, then ``ALTER COLUMN ... TYPE``; no file is
  rewritten, rows written before read as the wider type, and queries streaming from the table
  carry on). A column or field the declaration no longer has, or whose type changed otherwise
  (narrowed, or to another kind), cannot be changed in place: the table's query is refused,
  naming the columns.
* **A stateful query's definition** (:func:`keep_declared_state`): a gold table's windows, groups
  and aggregates (or its join), and the types the state holds them in, live in its query's state.
  A change to them cannot carry on from that state: Spark refuses a different state schema in the
  middle of a run, and a different window size over the same schema would silently mix windows of
  both sizes in one table. The definition the
  state was written with is kept beside it in the checkpoint, and a query whose declaration differs
  is refused, naming what changed. Its filter, watermark, defaults, expectations and comments may
  change (they apply to what comes next).

A refused query does not start; the layer's other queries do, and the run then fails naming it
(:class:`~medallion.errors.DeclarationChanged`). Either refusal says what to do: put the
declaration back, or recompute the table from its input with
``medallion backfill <table> --full-refresh``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

from pyspark.sql import SparkSession

from medallion.errors import DeclarationChanged
from medallion.io.hadoopfs import path_exists, read_text, write_text
from medallion.io.sinks.delta import TableToMake, committed_table_at
from medallion.io.tables import ENGINE_TABLES, TableSpec
from medallion.pipeline.evolution import (
    DECLARATION_FILE,
    differences,
    recompute_advice,
    schema_changes,
    state_changes,
)
from medallion.pipeline.model import TableDoc
from medallion.pipeline.types import SqlType, from_schema_json

log = logging.getLogger(__name__)


def table_schema(spark: SparkSession, path: str) -> SqlType | None:
    """The columns of the Delta table at ``path`` as its newest version has them (None: no table).

    Read through the session's Delta log, whose snapshot the query's writes then reuse.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    none = jvm.scala.Option.empty()
    snapshot = delta_log.update(False, none, none)
    if int(snapshot.version()) < 0:
        return None
    return from_schema_json(json.loads(snapshot.schema().json()))


def align_table(spark: SparkSession, spec: TableSpec, path: str, doc: TableDoc | None) -> None:
    """Bring the existing table at ``path`` to the columns ``spec`` declares (see the module's
    docstring); raise :class:`DeclarationChanged` for what cannot change in place."""
    held = table_schema(spark, path)
    if held is None:
        return
    changes = schema_changes(from_schema_json(spec.schema.jsonValue()), held)
    if changes.refused:
        raise DeclarationChanged(
            spec.key, f"its declaration changed since the table at {path} was made: "
            f"{'; '.join(changes.refused)}. A Delta table's column cannot be dropped, narrowed "
            f"or retyped in place. {recompute_advice(spec.key)}")
    escaped = path.replace("`", "``")
    if changes.widened:
        spark.sql(f"ALTER TABLE delta.`{escaped}` SET TBLPROPERTIES "
                  "('delta.enableTypeWidening' = 'true')")
        for widened in changes.widened:
            spark.sql(f"ALTER TABLE delta.`{escaped}` ALTER COLUMN {widened.ddl()}")
        log.warning("%s: %s widened in place, as its declaration now has it",
                    spec.key, ", ".join(f"column {w.name} from {w.held} to {w.declared}"
                                        for w in changes.widened))
    added = changes.added
    if not added:
        return
    for column in added:  # declared order: what one follows is there already
        comment = doc.column_comments.get(column.name) if doc else None
        spark.sql(f"ALTER TABLE delta.`{escaped}` ADD COLUMNS ({column.ddl(comment)})")
    # Bronze keeps records as they arrived: those before the column came without it.
    recompute = "" if spec.layer == "bronze" else (
        f" until `medallion backfill {spec.key} --full-refresh` recomputes them")
    log.warning("%s: column(s) %s added to the table, as its declaration now has them; rows written "
                "before hold null there%s", spec.key, ", ".join(c.name for c in added), recompute)


_ALIGNING: dict[str, threading.Lock] = {}
_ALIGNING_GUARD = threading.Lock()


def align_tables(spark: SparkSession, tables: Iterable[TableToMake]) -> None:
    """:func:`align_table` for each declared table of ``tables`` that exists (the engine's own,
    which change with its code, are left out); a table two queries name is aligned by one at a
    time, and the second finds nothing left to add."""
    for spec, path, doc in tables:
        if spec in ENGINE_TABLES or not committed_table_at(spark, path):
            continue
        with _ALIGNING_GUARD:
            lock = _ALIGNING.setdefault(path, threading.Lock())
        with lock:
            align_table(spark, spec, path, doc)


def check_declared_state(spark: SparkSession, table: str, checkpoint: str,
                         definition: dict[str, Any]) -> bool:
    """Whether the definition recorded beside a query's state is ``definition`` (False: none is
    recorded, or one that says less); one that differs is refused with
    :class:`DeclarationChanged`."""
    file = f"{checkpoint}/{DECLARATION_FILE}"
    if not path_exists(spark, file):
        return False
    try:
        recorded = json.loads(read_text(spark, file))
    except ValueError:
        return False  # a write killed half-way: what it was to record is the current one
    changed = state_changes(recorded, definition)
    if changed:
        raise DeclarationChanged(
            table, "its declaration changed since its query's state was written: "
            f"{'; '.join(changed)}. The windows and groups "
            "(or the join) it holds were made by the declaration before: carrying on from "
            "them would mix both in the table, and Spark refuses a state of another shape. "
            f"{recompute_advice(table)}")
    return bool(recorded == definition)


def keep_declared_state(spark: SparkSession, table: str, checkpoint: str,
                        definition: dict[str, Any], resumed: bool) -> None:
    """Record the definition a query's state is written with, or, when the query carries on from
    a state (``resumed``), refuse one that differs from the recorded one
    (:func:`check_declared_state`).

    A checkpoint written before the definition was recorded takes the current one: nothing says
    what it was made with.
    """
    if resumed and check_declared_state(spark, table, checkpoint, definition):
        return
    write_text(spark, f"{checkpoint}/{DECLARATION_FILE}",
               json.dumps(definition, sort_keys=True, indent=1) + "\n")


def keep_change_definition(spark: SparkSession, table: str, checkpoint: str,
                           definition: dict[str, Any]) -> None:
    """Record the definition a change flow starts with (:func:`~medallion.pipeline.evolution.
    change_definition`); carrying on, refuse another one, and a table whose query recorded none
    (a flow that did not take changes made it)."""
    file = f"{checkpoint}/{DECLARATION_FILE}"
    if path_exists(spark, f"{checkpoint}/offsets"):
        try:
            recorded = json.loads(read_text(spark, file)) if path_exists(spark, file) else None
        except ValueError:
            recorded = definition  # a write killed half-way: what it was to record is this one
        if recorded is None:
            raise DeclarationChanged(
                table, "its rows were not made from changes (its checkpoint records no changes "
                "declaration), and a change flow cannot carry on from them. "
                f"{recompute_advice(table)}")
        changed = differences(recorded, definition)
        if changed:
            raise DeclarationChanged(
                table, f"its changes declaration changed: {'; '.join(changed)}. Its rows and "
                "applied changes were made by the one before, and carrying on would mix both. "
                f"{recompute_advice(table)}")
        if recorded == definition:
            return
    write_text(spark, file, json.dumps(definition, sort_keys=True, indent=1) + "\n")
