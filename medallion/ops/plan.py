"""``medallion plan``: what the next run will do with each declared table, before it runs.

Each declaration is compared with what the lakehouse holds, without Spark: the table's schema in
its Delta log (delta-rs) and, for a gold table, the definition its query's state was written with
(kept beside the state in its checkpoint, :data:`~medallion.pipeline.evolution.DECLARATION_FILE`).
The verdicts are the run's own rules (:mod:`medallion.pipeline.evolution`), applied to the same
facts: a new table is created; columns a declaration added are added and the table carries on;
a column dropped or retyped, or a gold table's windows, groups, aggregates or join changed, cannot
carry on, and the table needs ``medallion backfill <table> --full-refresh``, which rebuilds the
tables computed from it too; a gold table kept by recompute is recomputed by the next run
instead. Deciding is pure (:func:`verdict`); reading is at the edges.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from medallion.io.deltaread import DeltaReader
from medallion.io.s3 import is_s3, parse_s3, s3_client
from medallion.ops.rebuilds import downstream
from medallion.pipeline.evolution import (
    DECLARATION_FILE,
    change_definition,
    recompute_advice,
    schema_changes,
    state_changes,
    state_definition,
)
from medallion.pipeline.spec import TableDecl
from medallion.pipeline.types import SqlType, from_schema_json, struct_of
from medallion.project import Settings, declared_tables

EXIT_NEEDS_REFRESH = 4  # a table cannot carry on: CI can refuse the change


class Verdict(str, Enum):
    """What the next run does with a table."""

    NEW = "new"  # created by the next run that has input for it
    UNCHANGED = "unchanged"
    CARRIES_ON = "carries on"  # changed in a way the table and its state can take
    NEEDS_REFRESH = "needs a full refresh"  # the run refuses it until it is rebuilt
    RECOMPUTED = "recomputed"  # refresh: recompute: the next run recomputes it from its input


@dataclass(frozen=True)
class TablePlan:
    """A table's verdict, what changed, and for a refresh the command and what it rebuilds."""

    table: str
    verdict: Verdict
    changes: tuple[str, ...] = ()
    command: str | None = None
    rebuilds: tuple[str, ...] = field(default_factory=tuple)


def declared_schema(decl: TableDecl) -> SqlType:
    """A declared table's columns, as one STRUCT."""
    return struct_of([(f.name, f.type) for f in decl.fields])


def verdict(table: str, declared: SqlType, held: SqlType | None,
            state_recorded: dict[str, Any] | None, state_declared: dict[str, Any] | None,
            rebuilds: Sequence[str] = (), recomputed: bool = False, what: str = "state") -> TablePlan:
    """The run's rules on one table: ``held`` its schema (None: no table yet);
    ``state_recorded``/``state_declared`` the definition its state was written with and the one
    declared now (gold tables; None: no state recorded, or not a gold table); ``recomputed``: a
    gold table kept by recompute, which starts over instead of refusing a changed definition."""
    if held is None:
        return TablePlan(table, Verdict.NEW)
    changes = schema_changes(declared, held)
    refused = list(changes.refused)
    state = ([f"{what}: {change}" for change in state_changes(state_recorded, state_declared)]
             if state_recorded is not None and state_declared is not None else [])
    if recomputed and not refused and (state or state_recorded is None):
        return TablePlan(table, Verdict.RECOMPUTED, tuple(
            ([change.replace("state: ", "definition: ", 1) for change in state]
             or ["no checkpoint to carry on from"])
            + [f"column {column.name} added" for column in changes.added]))
    refused += state
    if refused:
        return TablePlan(table, Verdict.NEEDS_REFRESH, tuple(refused),
                         f"medallion backfill {table} --full-refresh", tuple(rebuilds))
    if changes.added or changes.widened:
        return TablePlan(table, Verdict.CARRIES_ON, tuple(
            [f"column {w.name} widened from {w.held} to {w.declared} (in place)"
             for w in changes.widened]
            + [f"column {column.name} added (rows written before hold null)"
               for column in changes.added]))
    return TablePlan(table, Verdict.UNCHANGED)


def _read_text(settings: Settings, path: str) -> str | None:
    """A small file of the lakehouse (local or S3), or None when there is none."""
    if is_s3(path):
        where = parse_s3(path)
        client = s3_client(settings.s3)
        try:
            body = client.get_object(Bucket=where.bucket, Key=where.prefix)["Body"]
        except client.exceptions.NoSuchKey:
            return None
        text: str = body.read().decode("utf-8")
        return text
    local = path.removeprefix("file:")
    try:
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _recorded_state(settings: Settings, key: str) -> dict[str, Any] | None:
    text = _read_text(settings, f"{settings.checkpoint_path(key)}/{DECLARATION_FILE}")
    if text is None:
        return None
    try:
        recorded: dict[str, Any] = json.loads(text)
    except ValueError:
        return None  # a write killed half-way: the run records the current one
    return recorded


def collect_plan(settings: Settings) -> list[TablePlan]:
    """The verdict of every declared table, in the pipelines' order."""
    house = DeltaReader(settings)
    golds = {f"gold/{gold.name}": gold for pipeline in settings.pipelines for gold in pipeline.gold}
    watermarks = {f"gold/{gold.name}": pipeline.watermark_of(gold)
                  for pipeline in settings.pipelines for gold in pipeline.gold}
    change_flows = {silver.key: silver for pipeline in settings.pipelines
                    for silver in pipeline.silver if silver.changes is not None}
    feeds = downstream(settings)
    plans = []
    decls = declared_tables(settings.pipelines)
    for key, decl in decls.items():
        layer, _, name = key.partition("/")
        table = house.open(settings.table_path(layer, name), key)
        held = None if table is None else from_schema_json(json.loads(table.schema().to_json()))
        gold, changes = golds.get(key), change_flows.get(key)
        recorded = _recorded_state(settings, key) if table is not None and (gold or changes) \
            else None
        if changes is not None and table is not None and recorded is None:
            recorded = {}  # made by a flow that took no changes: every part of it is new
        declared = (state_definition(gold, decls[gold.input], watermarks[key]) if gold is not None
                    else change_definition(changes) if changes is not None else None)
        plans.append(verdict(key, declared_schema(decl), held, recorded, declared,
                             [spec.key for spec in feeds.get(key, ())],
                             recomputed=gold is not None and gold.recomputed_in_place,
                             what="changes" if changes is not None else "state"))
    return plans


def format_plan(plans: Sequence[TablePlan]) -> str:
    """One line per table, then what changed and, for a refresh, the command and what it
    rebuilds; a last line counting the verdicts."""
    width = max((len(p.table) for p in plans), default=5)
    lines = []
    for plan in plans:
        lines.append(f"{plan.table.ljust(width)}  {plan.verdict.value}")
        lines += [f"{' ' * width}    {change}" for change in plan.changes]
        if plan.command:
            also = f" (rebuilds {', '.join(plan.rebuilds)} too)" if plan.rebuilds else ""
            lines.append(f"{' ' * width}    run: {plan.command}{also}; or put the declaration back")
    counts = {v: sum(p.verdict is v for p in plans) for v in Verdict}
    lines.append("plan: " + ", ".join(f"{n} {v.value}" for v, n in counts.items() if n))
    return "\n".join(lines)


def plan_json(plans: Sequence[TablePlan]) -> str:
    """The plan for tools: one JSON document."""
    return json.dumps({"tables": [{**asdict(p), "verdict": p.verdict.value} for p in plans],
                       "needs_refresh": any(p.verdict is Verdict.NEEDS_REFRESH for p in plans),
                       "advice": {p.table: recompute_advice(p.table) for p in plans
                                  if p.verdict is Verdict.NEEDS_REFRESH}}, indent=1)
