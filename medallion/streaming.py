"""Running streaming queries to completion and telling what they did."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

if TYPE_CHECKING:
    from medallion.monitoring import ProgressCollector

log = logging.getLogger(__name__)


class JobError(RuntimeError):
    """A job failed; the message names the table and the cause."""

    def __init__(self, table: str, cause: str) -> None:
        super().__init__(f"{table}: {cause}")
        self.table = table


@dataclass
class TableRun:
    """What one streaming query did to one table during a run."""

    table: str
    batches: int = 0
    rows_in: int = 0
    rows_out: int = 0
    quarantined: int = 0
    duplicates_removed: int = 0
    late_rows_dropped: int = 0
    seconds: float = 0.0
    note: str = ""


@dataclass
class RunningQuery:
    """A started query, the table it writes, and where its output rows are counted."""

    table: str
    query: StreamingQuery | None  # None: nothing to run (the note says why)
    note: str = ""
    started: float = field(default_factory=time.monotonic)
    rows_out: Callable[[], int] | None = None
    extra: Callable[[TableRun], None] | None = None


def _summarise(running: RunningQuery) -> TableRun:
    run = TableRun(table=running.table, seconds=time.monotonic() - running.started,
                   note=running.note)
    if running.query is None:
        return run
    for progress in running.query.recentProgress:
        if progress.numInputRows > 0:
            run.batches += 1
        run.rows_in += progress.numInputRows
        for state in progress.stateOperators:
            run.late_rows_dropped += state.numRowsDroppedByWatermark
    run.rows_out = running.rows_out() if running.rows_out else run.rows_in
    if running.extra:
        running.extra(run)
    return run


def _record(monitor: ProgressCollector | None, running: RunningQuery, run: TableRun | None,
            error: str | None = None) -> None:
    """Tell the monitor how a table's query ended (``run`` None: it failed with ``error``)."""
    if monitor is None:
        return
    from medallion.monitoring import RunOutcome, utcnow

    now = utcnow()
    started = now - timedelta(seconds=time.monotonic() - running.started)
    monitor.record_outcome(RunOutcome(
        table=running.table, started_at=started, finished_at=now, succeeded=run is not None,
        rows_in=run.rows_in if run else 0, rows_out=run.rows_out if run else 0, error=error))


def await_all(queries: list[RunningQuery],
              monitor: ProgressCollector | None = None) -> list[TableRun]:
    """Wait for every query to finish; stop the rest and raise if one fails.

    Each table's outcome (succeeded, or failed and why) is given to ``monitor`` if there is one.
    """
    runs: list[TableRun] = []
    try:
        for running in queries:
            try:
                if running.query is not None:
                    running.query.awaitTermination()
            except StreamingQueryException as exc:
                _record(monitor, running, None, _cause(exc))
                raise JobError(running.table, _cause(exc)) from exc
            runs.append(_summarise(running))
            _record(monitor, running, runs[-1])
            log.info("%s: done %s", running.table, runs[-1])
    finally:
        for running in queries:
            if running.query is not None and running.query.isActive:
                running.query.stop()
    return runs


def _cause(exc: StreamingQueryException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:2000]


def serve(queries: list[RunningQuery], monitor: ProgressCollector | None = None,
          flush_every: float = 60.0) -> list[TableRun]:
    """Keep long-running queries going until one stops or fails; then stop them all.

    The monitor's buffered progress rows are written every ``flush_every`` seconds meanwhile.
    """
    active = [running for running in queries if running.query is not None]
    last_flush = time.monotonic()
    try:
        while active:
            for running in active:
                assert running.query is not None
                try:
                    if running.query.awaitTermination(timeout=5):
                        runs = [_summarise(each) for each in queries]
                        for each, run in zip(queries, runs, strict=True):
                            _record(monitor, each, run)
                        return runs
                except StreamingQueryException as exc:
                    _record(monitor, running, None, _cause(exc))
                    raise JobError(running.table, _cause(exc)) from exc
            if monitor is not None and time.monotonic() - last_flush >= flush_every:
                last_flush = time.monotonic()
                try:
                    monitor.flush()
                except Exception:  # monitoring must not stop the pipeline
                    log.exception("monitoring: flush failed; will retry")
        return [_summarise(each) for each in queries]
    finally:
        for running in active:
            if running.query is not None and running.query.isActive:
                running.query.stop()
