"""Running streaming queries to completion and telling what they did."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

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


def await_all(queries: list[RunningQuery]) -> list[TableRun]:
    """Wait for every query to finish; stop the rest and raise if one fails."""
    runs: list[TableRun] = []
    try:
        for running in queries:
            try:
                if running.query is not None:
                    running.query.awaitTermination()
            except StreamingQueryException as exc:
                raise JobError(running.table, _cause(exc)) from exc
            runs.append(_summarise(running))
            log.info("%s: done %s", running.table, runs[-1])
    finally:
        for running in queries:
            if running.query is not None and running.query.isActive:
                running.query.stop()
    return runs


def _cause(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    java = getattr(exc, "java_exception", None)
    if java is not None:  # Py4J's own first line only names the JVM call; the exception says more
        with contextlib.suppress(Exception):  # the JVM may be gone: keep Py4J's line
            first = str(java.toString()).splitlines()[0]
    root = root_cause(exc)
    if root and root not in first:
        first = f"{first} (root cause: {root})"
    return first[:2000]


def _java_throwable(exc: BaseException) -> Any:
    """The JVM exception behind a PySpark or Py4J error, if there is one."""
    return getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)


def root_cause(exc: BaseException) -> str:
    """The innermost JVM cause of ``exc`` as ``Class: message`` (empty when there is none).

    A storage outage surfaces as a stage failure wrapping a Hadoop error wrapping the SDK's
    connection error; the innermost one says what actually went wrong.
    """
    throwable = _java_throwable(exc)
    try:
        seen = 0
        while throwable is not None and throwable.getCause() is not None and seen < 30:
            throwable = throwable.getCause()
            seen += 1
        return "" if throwable is None else str(throwable.toString()).splitlines()[0][:500]
    except Exception:  # noqa: BLE001 - the JVM may be gone; the message is a courtesy
        return ""


def describe_failure(exc: BaseException) -> str:
    """One line saying why a job failed, with the JVM's root cause when there is one."""
    return _cause(exc)


def serve(queries: list[RunningQuery]) -> list[TableRun]:
    """Keep long-running queries going until one stops or fails; then stop them all."""
    active = [running for running in queries if running.query is not None]
    try:
        while active:
            for running in active:
                assert running.query is not None
                try:
                    if running.query.awaitTermination(timeout=5):
                        return [_summarise(each) for each in queries]
                except StreamingQueryException as exc:
                    raise JobError(running.table, _cause(exc)) from exc
        return [_summarise(each) for each in queries]
    finally:
        for running in active:
            if running.query is not None and running.query.isActive:
                running.query.stop()
