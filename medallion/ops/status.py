"""``medallion status``: where each table stands, from its Delta log and the ``_monitoring`` tables.

Read through delta-rs (:mod:`medallion.io.deltaread`), no Spark: the logs give versions, commit times
and row counts, the per-file statistics give each table's newest event time; only the two small
monitoring tables are read row by row (of the query progress, only the batches since the oldest of
the queries' last ones). Formatting is pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from medallion.io.deltaread import DeltaReader, read_rows, table_facts
from medallion.io.tables import (
    QUERY_PROGRESS,
    RUN_OUTCOMES,
    TableSpec,
    lakehouse_tables,
    time_columns,
    undeclared_tables,
)
from medallion.ops.plan import TablePlan, Verdict, collect_plan
from medallion.pipeline.graph import FlowKind, InputRole
from medallion.project import Settings


@dataclass(frozen=True)
class TableStatus:
    """One table's state: its last commit, size, freshness, streaming state and last run."""

    table: str
    exists: bool
    version: int | None = None
    committed_at: datetime | None = None
    rows: int | None = None
    newest_event: datetime | None = None
    lag_seconds: float | None = None  # data age: how old the newest event time is
    behind_seconds: float | None = None  # processing lag: how long new input has waited for it
    state_rows: int | None = None
    state_bytes: int | None = None
    last_run_succeeded: bool | None = None
    last_run_at: datetime | None = None
    last_error: str | None = None
    files: int | None = None
    size_bytes: int | None = None
    declared: bool = True  # False: in the lakehouse, but no pipeline declares it any more
    refresh: TablePlan | None = None  # its declaration changed in a way a run refuses


def latest_per_key(rows: Iterable[dict[str, Any]], key: str, order: str) -> dict[str, dict]:
    """Per value of ``key``, the row with the greatest ``order`` (rows without one lose)."""
    latest: dict[str, dict] = {}
    for row in rows:
        held = latest.get(row[key])
        if held is None or (row[order] is not None
                            and (held[order] is None or row[order] > held[order])):
            latest[row[key]] = row
    return latest


def state_bytes(progress: Mapping[str, Any]) -> int | None:
    """The size of a query's state after a batch, from its progress as Spark reports it.

    RocksDB stores report 0 as ``memoryUsedBytes``; their size is that of the SST files holding the
    store's rows (``rocksdbSstFileSize``, what the checkpoint keeps for that version). Spark's
    HDFS-backed store reports the memory its map uses. None for a query without state.
    """
    operators = progress.get("stateOperators") or []
    if not operators:
        return None
    total = 0
    for operator in operators:
        custom = operator.get("customMetrics") or {}
        size = custom.get("rocksdbSstFileSize")
        total += int(size if size is not None else operator.get("memoryUsedBytes") or 0)
    return total


def _latest_progress(house: DeltaReader) -> dict[str, dict]:
    """Per query, the state rows and state size after its last batch.

    The progress JSON is large, and the table has a row per batch since the lakehouse began: it is
    read only from the oldest of the queries' last batches on (Delta skips the older files).
    """
    table = house.open(QUERY_PROGRESS.path(house.settings), QUERY_PROGRESS.key)
    if table is None:
        return {}
    key = QUERY_PROGRESS.key
    stamps = [row["batch_timestamp"] for row in latest_per_key(
        read_rows(table, ["query_name", "batch_timestamp"], key), "query_name", "batch_timestamp"
    ).values() if row["batch_timestamp"] is not None]
    since = f"batch_timestamp >= '{min(stamps).isoformat()}'" if stamps else None
    latest = latest_per_key(read_rows(table, ["query_name", "batch_timestamp", "state_rows",
                                              "progress_json"], key, since),
                            "query_name", "batch_timestamp")
    for row in latest.values():
        progress = json.loads(row.pop("progress_json") or "{}")
        row["state_bytes"] = state_bytes(progress)
        if not progress.get("stateOperators"):
            row["state_rows"] = None  # no state, rather than a state of 0 rows
    return latest


def stream_inputs(settings: Settings) -> dict[str, list[str]]:
    """Per silver and gold table, the tables it reads as a stream (the source that runs in place
    of an alternative one): what it must keep up with."""
    inputs: dict[str, list[str]] = {}
    for pipeline, graph in zip(settings.pipelines, settings.graphs, strict=True):
        for flow in graph.flows:
            if flow.kind is FlowKind.INGEST:
                continue
            inputs[flow.target] = [settings.input_of(pipeline, each.table) for each in flow.inputs
                                   if each.role is InputRole.STREAM]
    return inputs


def behind(commits: Iterable[datetime], caught_up: datetime | None, now: datetime
           ) -> float | None:
    """How long the oldest input commit after ``caught_up`` (when the table last took in all
    its input) has waited: 0 when there is none; None when the table never caught up."""
    if caught_up is None:
        return None
    waiting = [commit for commit in commits if commit > caught_up]
    return (now - min(waiting)).total_seconds() if waiting else 0.0


def _commit_times(house: DeltaReader, path: str, key: str, limit: int = 100) -> list[datetime]:
    """The commit times of the table at ``path`` (its newest ``limit`` ones)."""
    table = house.open(path, key)
    if table is None:
        return []
    return [datetime.fromtimestamp(entry["timestamp"] / 1000, timezone.utc)
            for entry in table.history(limit) if entry.get("timestamp") is not None]


def _latest(house: DeltaReader, spec: TableSpec, key: str, order: str, columns: Sequence[str]
            ) -> dict[str, dict]:
    table = house.open(spec.path(house.settings), spec.key)
    if table is None:
        return {}
    return latest_per_key(read_rows(table, [key, order, *columns], spec.key), key, order)


def collect_status(settings: Settings, now: datetime | None = None) -> list[TableStatus]:
    """The status of every table of the lakehouse (absent tables included, marked so)."""
    now = now or datetime.now(timezone.utc)
    house = DeltaReader(settings)
    progress = _latest_progress(house)
    outcomes = _latest(house, RUN_OUTCOMES, "table", "finished_at",
                       ["succeeded", "error", "started_at"])
    inputs = stream_inputs(settings)
    commits: dict[str, list[datetime]] = {}
    result = []
    # The column holding each table's newest event time: event time where the table has one,
    # otherwise when its rows arrived (derived from the declarations).
    newest_of = time_columns(settings)
    refused = {plan.table: plan for plan in collect_plan(settings)
               if plan.verdict is Verdict.NEEDS_REFRESH}
    for spec in lakehouse_tables(settings):
        table = house.open(spec.path(settings), spec.key)
        if table is None:
            result.append(TableStatus(spec.key, exists=False))
            continue
        facts = table_facts(table, newest_of.get(spec.key), spec.key)
        newest = facts.newest
        state = progress.get(spec.key, {})
        outcome = outcomes.get(spec.key, {})
        # A successful run took in everything committed before it started; a batch, what was
        # committed before it.
        marks = [outcome.get("started_at") if outcome.get("succeeded") else None,
                 state.get("batch_timestamp")]
        caught_up = max((m for m in marks if m is not None), default=None)
        waiting = None
        if spec.key in inputs and caught_up is not None:  # each input's history read once
            for key in inputs[spec.key]:
                if key not in commits:
                    commits[key] = _commit_times(house, settings.table_path(*key.split("/", 1)),
                                                 key)
            waiting = behind([moment for key in inputs[spec.key] for moment in commits[key]],
                             caught_up, now)
        result.append(TableStatus(
            table=spec.key, exists=True, version=facts.version, committed_at=facts.committed_at,
            rows=facts.rows, newest_event=newest,
            lag_seconds=(now - newest).total_seconds() if newest else None,
            behind_seconds=waiting,
            state_rows=state.get("state_rows"), state_bytes=state.get("state_bytes"),
            last_run_succeeded=outcome.get("succeeded"), last_run_at=outcome.get("finished_at"),
            last_error=outcome.get("error"), files=facts.files, size_bytes=facts.size_bytes,
            refresh=refused.get(spec.key),
        ))
    for key in undeclared_tables(settings):  # no run updates them: said, with what they hold
        layer, _, name = key.partition("/")
        table = house.open(settings.table_path(layer, name), key)
        if table is not None:
            facts = table_facts(table, None, key)
            result.append(TableStatus(
                table=key, exists=True, version=facts.version, committed_at=facts.committed_at,
                rows=facts.rows, files=facts.files, size_bytes=facts.size_bytes, declared=False))
    return result


def _lag(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value}B"


_COLUMNS = ("table", "version", "committed (UTC)", "rows", "files", "size", "behind", "data age",
            "state rows", "state size", "last run")


def format_status(statuses: Sequence[TableStatus]) -> str:
    """A fixed-width table, one line per table, then the last error of any failed table."""
    rows = []
    for s in statuses:
        if not s.exists:
            rows.append((s.table, "-", "-", "-", "-", "-", "-", "-", "-", "-", "not created"))
            continue
        last = ("not declared" if not s.declared else "REFRESH" if s.refresh is not None
                else "-" if s.last_run_succeeded is None
                else "ok" if s.last_run_succeeded else "FAILED")
        rows.append((
            s.table, str(s.version),
            s.committed_at.strftime("%Y-%m-%d %H:%M:%S") if s.committed_at else "-",
            str(s.rows), "-" if s.files is None else str(s.files), _bytes(s.size_bytes),
            _lag(s.behind_seconds), _lag(s.lag_seconds),
            "-" if s.state_rows is None else str(s.state_rows), _bytes(s.state_bytes), last,
        ))
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(_COLUMNS, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines += [f"error: {s.table}: {s.last_error}" for s in statuses
              if s.last_run_succeeded is False and s.last_error]
    for s in statuses:
        if s.refresh is not None:  # a run refuses it: what changed, and what to run
            lines.append(f"needs a full refresh: {s.table}: {'; '.join(s.refresh.changes)}; run: "
                         f"{s.refresh.command} (or put the declaration back)")
    return "\n".join(lines)


def needs_attention(statuses: Sequence[TableStatus]) -> bool:
    """A table whose last run failed, or whose declaration a run refuses."""
    return any(s.last_run_succeeded is False or s.refresh is not None for s in statuses)
