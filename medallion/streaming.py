"""Running streaming queries to completion and telling what they did."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

from medallion.errors import JobError

log = logging.getLogger(__name__)


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
    offsets_missing: int = 0  # Kafka offsets asked for but no longer in the topic
    seconds: float = 0.0
    gate_seconds: float = 0.0  # time spent in the table's quality gate
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
    # What stopped the query, when the writer knows better than the engine's error text (say, a
    # failed quality gate: the table, the expectation and what was observed).
    cause: Callable[[], str | None] | None = None


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
                raise JobError(running.table, _cause(exc, running)) from exc
            runs.append(_summarise(running))
            log.info("%s: done %s", running.table, runs[-1])
    finally:
        for running in queries:
            if running.query is not None and running.query.isActive:
                running.query.stop()
    return runs


def _cause(exc: BaseException, running: RunningQuery | None = None) -> str:
    """Why a query failed: what its writer recorded (a quality gate names the expectation and
    what it observed), else the first meaningful line of the error (Spark puts the cause first)."""
    from medallion.sources.kafka import describe_kafka_failure

    known = running.cause() if running is not None and running.cause is not None else None
    if known:
        return known
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip() and not line.strip()
                  .startswith(("Traceback", "File ", "JVM stacktrace"))), type(exc).__name__)
    # Kafka's data loss is told deep in the JVM trace: bring topic, partition, offsets up.
    loss = describe_kafka_failure(f"{text}\n{getattr(exc, '_stackTrace', '') or ''}")
    return f"{loss} [{first[:1000]}]" if loss else first[:2000]


@contextmanager
def failing_as(table: str) -> Iterator[None]:
    """Turn any error while setting up or starting ``table``'s query into a ``JobError``."""
    try:
        yield
    except JobError:
        raise
    except Exception as exc:  # Spark's errors come as many types; each names its cause
        raise JobError(table, _cause(exc)) from exc


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
                    raise JobError(running.table, _cause(exc, running)) from exc
        return [_summarise(each) for each in queries]
    finally:
        for running in active:
            if running.query is not None and running.query.isActive:
                running.query.stop()
