"""A declaration changed after its tables were made: what carries over, and what is refused.

A pipeline's declaration is its tables' definition, and teams change it: a new column, a new
aggregate, another window. Before a layer's queries with work start, the engine compares what each
is about to write with what the lakehouse holds (:func:`medallion.engine.layer.start_layer`):

* **A table's columns** (:func:`align_table`): columns the declaration added, and fields it added
  to struct columns, are added to the table (Delta's ``ADD COLUMNS``, at their declared place, with
  their comments); rows written before hold null in them until the table is recomputed. A column
  or field the declaration no longer has, or whose type changed, cannot be changed in place: the
  table's query is refused, naming the columns.
* **A stateful query's definition** (:func:`keep_declared_state`): a gold table's windows, groups
  and aggregates (or its join) live in its query's state. A change to them cannot carry on from that
  state: Spark refuses a different state schema in the middle of a run, and a different window size
  over the same schema would silently mix windows of both sizes in one table. The definition the
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
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from medallion.errors import DeclarationChanged
from medallion.io.catalog import documented_schema
from medallion.io.hadoopfs import path_exists, read_text, write_text
from medallion.io.sinks.delta import TableToMake, committed_table_at
from medallion.io.tables import ENGINE_TABLES, TableSpec
from medallion.pipeline.model import GoldSpec, TableDoc

log = logging.getLogger(__name__)

# Beside the state in a gold query's checkpoint: the declaration the state was written with.
DECLARATION_FILE = "medallion-declaration.json"


def recompute_advice(table: str) -> str:
    """What to do about a declaration the lakehouse cannot carry on from."""
    return ("Put the declaration back as it was, or recompute the table and everything "
            f"downstream of it from their inputs: `medallion backfill {table} --full-refresh`.")


def _plain(data_type: DataType) -> str:
    """A type as Spark writes it, without nullability or metadata (names of struct fields kept)."""
    return data_type.simpleString()


def table_schema(spark: SparkSession, path: str) -> StructType | None:
    """The schema of the Delta table at ``path`` as its newest version has it (None: no table).

    Read through the session's Delta log, whose snapshot the query's writes then reuse.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    none = jvm.scala.Option.empty()
    snapshot = delta_log.update(False, none, none)
    if int(snapshot.version()) < 0:
        return None
    return StructType.fromJson(json.loads(snapshot.schema().json()))


@dataclass(frozen=True)
class AddedColumn:
    """A column the declaration has and the table lacks: at the top level, or a field of a struct
    column (``parent``: the path to that struct, as Delta's DDL names it, e.g. ``device`` or
    ``items.element``), after the field before it in the declaration (None: first)."""

    parent: tuple[str, ...]
    field: StructField
    after: str | None

    @property
    def name(self) -> str:
        return ".".join((*self.parent, self.field.name))

    def ddl(self) -> str:
        """The column as ``ALTER TABLE ... ADD COLUMNS`` takes it, with its comment and place."""
        path = ".".join(_quoted(part) for part in (*self.parent, self.field.name))
        text = f"{path} {ddl_type(self.field.dataType)}"
        comment = self.field.metadata.get("comment")
        if comment:
            text += " COMMENT '" + comment.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return text + (f" AFTER {_quoted(self.after)}" if self.after else " FIRST")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def schema_changes(declared: StructType, held: StructType) -> tuple[list[AddedColumn], list[str]]:
    """How ``declared`` differs from the ``held`` schema of a table: the columns it lacks (fields
    of struct columns too, at any depth, in arrays' elements and maps' values as well), in the
    order they can be added, and, each as a sentence, what cannot be changed in place (a column or
    field the declaration dropped, or one whose type differs). Names match without case, as
    Delta's do."""
    added: list[AddedColumn] = []
    refused: list[str] = []
    _struct_changes(declared, held, (), added, refused)
    return added, refused


def _struct_changes(declared: StructType, held: StructType, parent: tuple[str, ...],
                    added: list[AddedColumn], refused: list[str]) -> None:
    held_by_name = {f.name.lower(): f for f in held.fields}
    declared_names = {f.name.lower() for f in declared.fields}
    for position, column in enumerate(declared.fields):
        had = held_by_name.get(column.name.lower())
        if had is None:
            added.append(AddedColumn(parent, column,
                                     declared.fields[position - 1].name if position else None))
        else:
            _type_changes(column.dataType, had.dataType, (*parent, had.name), added, refused)
    refused += [f"the table has column {'.'.join((*parent, f.name))}, which the declaration no "
                "longer has" for f in held.fields if f.name.lower() not in declared_names]


def _type_changes(declared: DataType, held: DataType, path: tuple[str, ...],
                  added: list[AddedColumn], refused: list[str]) -> None:
    """A column both have: a struct (also as an array's element or a map's value) may gain
    fields; any other difference is a new type."""
    if isinstance(declared, StructType) and isinstance(held, StructType):
        _struct_changes(declared, held, path, added, refused)
    elif isinstance(declared, ArrayType) and isinstance(held, ArrayType):
        _type_changes(declared.elementType, held.elementType, (*path, "element"), added, refused)
    elif (isinstance(declared, MapType) and isinstance(held, MapType)
          and _plain(declared.keyType) == _plain(held.keyType)):
        _type_changes(declared.valueType, held.valueType, (*path, "value"), added, refused)
    elif _plain(held) != _plain(declared):
        refused.append(f"column {'.'.join(path)} is {ddl_type(held)} in the table and "
                       f"{ddl_type(declared)} in the declaration")


def ddl_type(data_type: DataType) -> str:
    """A type as DDL, struct field names quoted (``simpleString`` leaves them bare)."""
    if isinstance(data_type, StructType):
        return "STRUCT<" + ", ".join(f"{_quoted(f.name)}: {ddl_type(f.dataType)}"
                                     for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{ddl_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{ddl_type(data_type.keyType)}, {ddl_type(data_type.valueType)}>"
    return data_type.simpleString().upper()


def align_table(spark: SparkSession, spec: TableSpec, path: str, doc: TableDoc | None) -> None:
    """Bring the existing table at ``path`` to the columns ``spec`` declares (see the module's
    docstring); raise :class:`DeclarationChanged` for what cannot change in place."""
    held = table_schema(spark, path)
    if held is None:
        return
    declared = documented_schema(spec, doc)
    added, refused = schema_changes(declared, held)
    if refused:
        raise DeclarationChanged(
            spec.key, f"its declaration changed since the table at {path} was made: "
            f"{'; '.join(refused)}. A Delta table's column cannot be dropped or retyped in "
            f"place. {recompute_advice(spec.key)}")
    if not added:
        return
    escaped = path.replace("`", "``")
    for column in added:  # declared order: what one follows is there already
        spark.sql(f"ALTER TABLE delta.`{escaped}` ADD COLUMNS ({column.ddl()})")
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


def state_definition(gold: GoldSpec) -> dict[str, Any]:
    """What a gold query's state is made of, by its declaration: what carrying on from the state
    needs unchanged. Left out, since they apply to what comes next: the filter, the watermark,
    an aggregate's default, the expectations and the comments."""
    definition: dict[str, Any] = {"input": gold.input, "mode": gold.mode.value}
    if gold.window is not None:
        window = gold.window
        definition["window"] = {key: value for key, value in (
            ("kind", window.kind.value), ("column", window.column), ("size", window.size),
            ("slide", window.slide), ("gap", window.gap)) if value is not None}
        definition["group_by"] = list(gold.group_by)
        definition["aggregates"] = {a.name: f"{a.function.value}({a.column or '*'})"
                                    for a in gold.aggregates}
    if gold.join is not None:
        join = gold.join
        definition["join"] = {"input": join.input, "equal": list(join.equal),
                              "within": join.within, "kind": join.kind.value}
        definition["select"] = {s.name: s.expr for s in gold.select}
    if gold.python is not None:
        definition["python"] = gold.python
        definition["columns"] = {f.name: str(f.type) for f in gold.columns}
    if gold.keys:
        definition["keys"] = list(gold.keys)
    return definition


def differences(before: Any, now: Any, where: str = "") -> list[str]:
    """Each place two definitions differ, as ``key: before -> now``."""
    if isinstance(before, dict) and isinstance(now, dict):
        found = []
        for key in [*before, *(k for k in now if k not in before)]:
            inner = f"{where}.{key}" if where else key
            if key not in now:
                found.append(f"{inner} removed (was {json.dumps(before[key])})")
            elif key not in before:
                found.append(f"{inner} added ({json.dumps(now[key])})")
            else:
                found += differences(before[key], now[key], inner)
        return found
    return [] if before == now else [f"{where}: {json.dumps(before)} -> {json.dumps(now)}"]


def check_declared_state(spark: SparkSession, table: str, checkpoint: str,
                         definition: dict[str, Any]) -> bool:
    """Whether the definition recorded beside a query's state is ``definition`` (False: none is
    recorded); one that differs is refused with :class:`DeclarationChanged`."""
    file = f"{checkpoint}/{DECLARATION_FILE}"
    if not path_exists(spark, file):
        return False
    try:
        recorded = json.loads(read_text(spark, file))
    except ValueError:
        return False  # a write killed half-way: what it was to record is the current one
    if recorded != definition:
        raise DeclarationChanged(
            table, "its declaration changed since its query's state was written: "
            f"{'; '.join(differences(recorded, definition))}. The windows and groups "
            "(or the join) it holds were made by the declaration before: carrying on from "
            "them would mix both in the table, and Spark refuses a state of another shape. "
            f"{recompute_advice(table)}")
    return True


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
