"""Running streaming queries to completion and telling what they did."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from medallion.errors import InputRefused, JobError
from medallion.io.failures import describe_failure

if TYPE_CHECKING:
    from medallion.engine.monitoring import ProgressCollector

log = logging.getLogger(__name__)


# Spark's in-memory cache compresses each column of a cached batch by default. The batch writers
# cache a micro-batch only for the few jobs of that batch that read it again (its counts, the
# quarantine, the gate, the writes) and drop it at the batch's end, so compressing it costs more
# than it saves: uncompressed, silver over 1M events took 26.4 s instead of 29.3 s as a process's
# first run (three processes each, alternating) and 14.8 s instead of 16.5 s warm, for 318 MB of
# cache instead of 255 MB.
BATCH_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


def cache_batch(batch: DataFrame) -> DataFrame:
    """``batch`` (a micro-batch, or a frame made from one) persisted for the jobs of its batch,
    uncompressed. The setting goes to the session Spark runs the query's batches in, a copy of
    the session that started the query: other queries, and the session's own caches (an
    analyst's ``CACHE TABLE``), keep Spark's default."""
    batch.sparkSession.conf.set(BATCH_CACHE_COMPRESSED, "false")
    return batch.persist()


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
    idle: bool = False  # not started: nothing new for it (``medallion.engine.idle``)
    refused: InputRefused | None = None  # not started: refused before it (why)


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
    from medallion.engine.monitoring import RunOutcome, utcnow

    now = utcnow()
    started = now - timedelta(seconds=time.monotonic() - running.started)
    monitor.record_outcome(RunOutcome(
        table=running.table, started_at=started, finished_at=now, succeeded=run is not None,
        rows_in=run.rows_in if run else 0, rows_out=run.rows_out if run else 0, error=error,
        idle=running.idle))


def await_all(queries: list[RunningQuery],
              monitor: ProgressCollector | None = None) -> list[TableRun]:
    """Wait for every query to finish (available-now or once); raise the first failure then.

    A query that fails does not stop the others: they finish what they were given, as they
    would have alone. Stopping one interrupts its batch mid-write (Spark's check of whether the
    interruption of a Python batch function was a stop can then overflow the stream thread's
    stack, and the JVM prints a thousand lines), and its work is done again by the next run.
    Each table's outcome (succeeded, or failed and why) is given to ``monitor`` if there is one.
    """
    runs: list[TableRun] = []
    failed: JobError | None = None
    try:
        for running in queries:
            if running.refused is not None:  # recorded as failed; the run raises once done
                _record(monitor, running, None, running.refused.cause)
                runs.append(TableRun(table=running.table, note=f"not run: {running.refused.note}"))
                continue
            try:
                if running.query is not None:
                    running.query.awaitTermination()
            except StreamingQueryException as exc:
                cause = _cause(exc, running)
                _record(monitor, running, None, cause)
                if failed is None:
                    failed = JobError(running.table, cause)
                    failed.__cause__ = exc
                else:
                    log.error("%s failed as well: %s", running.table, cause)
                continue
            runs.append(_summarise(running))
            _record(monitor, running, runs[-1])
            log.info("%s: done %s", running.table, runs[-1])
        if failed is not None:
            raise failed
    finally:
        for running in queries:
            if running.query is not None and running.query.isActive:
                running.query.stop()
    return runs


def _cause(exc: BaseException, running: RunningQuery | None = None) -> str:
    """Why a query failed, in one line: what its writer recorded (a quality gate names the
    expectation and what it observed), else the failure as Spark tells it."""
    known = running.cause() if running is not None and running.cause is not None else None
    return known or describe_failure(exc)


# A stop asked of the service this process runs (a signal's name), or None. Set from a signal
# handler, so a plain value the serving loop polls: no lock a handler could wait on.
_SERVICE: dict[str, str | None] = {}


@contextmanager
def service() -> Iterator[None]:
    """While a service (a processing-time run) starts and serves: :func:`ask_service_to_stop`
    then asks it to stop after the batches under way instead of leaving the signal to kill it."""
    _SERVICE["stop"] = None
    try:
        yield
    finally:
        _SERVICE.clear()


def ask_service_to_stop(signal_name: str) -> bool:
    """From a signal handler: ask the running service to stop once its batches under way have
    committed. False when no service runs, or a stop was asked already (the caller then stops
    at once)."""
    if "stop" not in _SERVICE or _SERVICE["stop"] is not None:
        return False
    _SERVICE["stop"] = signal_name
    return True


def _stop_asked() -> str | None:
    return _SERVICE.get("stop")


POLL_SECONDS = 0.5  # how often a service looks at its queries and for a stop asked of it


def serve(queries: list[RunningQuery], monitor: ProgressCollector | None = None,
          flush_every: float = 60.0) -> list[TableRun]:
    """Keep long-running queries going until one stops or fails, or a stop is asked (SIGTERM,
    Ctrl-C: :func:`ask_service_to_stop`); then stop them all.

    A stop asked lets each query commit the batch under way, then stops it between batches, and
    records every table's outcome as succeeded. The monitor's buffered progress rows are written
    every ``flush_every`` seconds meanwhile (and by the caller once this returns).
    """
    active = [running for running in queries if running.query is not None]
    last_flush = time.monotonic()
    try:
        while active:
            for running in active:
                assert running.query is not None
                if running.query.isActive:
                    continue
                _raise_if_failed(running, monitor)
                log.info("%s stopped; stopping the service", running.table)
                return _outcomes(queries, monitor)
            asked = _stop_asked()
            if asked is not None:
                log.info("%s: stopping the service once its batches under way commit", asked)
                _stop_between_batches(active)
                for running in active:  # one may have failed while the others were stopped
                    _raise_if_failed(running, monitor)
                return _outcomes(queries, monitor)
            if monitor is not None and time.monotonic() - last_flush >= flush_every:
                last_flush = time.monotonic()
                try:
                    monitor.flush()
                except Exception:  # monitoring must not stop the pipeline
                    log.exception("monitoring: flush failed; will retry")
            time.sleep(POLL_SECONDS)
        return [_summarise(each) for each in queries]
    finally:
        for running in active:
            if running.query is not None and running.query.isActive:
                running.query.stop()


def _raise_if_failed(running: RunningQuery, monitor: ProgressCollector | None) -> None:
    """For a query that has ended: its failure, recorded and raised, if it failed."""
    assert running.query is not None
    try:
        running.query.awaitTermination()  # returns at once; raises what failed it
    except StreamingQueryException as exc:
        _record(monitor, running, None, _cause(exc, running))
        raise JobError(running.table, _cause(exc, running)) from exc


def _outcomes(queries: list[RunningQuery], monitor: ProgressCollector | None) -> list[TableRun]:
    """Every table's run, each recorded as succeeded (the service ended without a failure)."""
    runs = [_summarise(each) for each in queries]
    for each, run in zip(queries, runs, strict=True):
        _record(monitor, each, run)
    return runs


def _stop_between_batches(active: list[RunningQuery]) -> None:
    """Stop each query when no batch of it is under way (downstream first, so that a layer's last
    commit is not what starts the next layer's batch). Stopping a query mid-batch would interrupt
    its write (done again by the next run, and a stack trace in the JVM's log)."""
    for running in reversed(active):
        query = running.query
        assert query is not None
        waited = time.monotonic()
        while query.isActive and query.status["isTriggerActive"]:
            if time.monotonic() - waited >= 10:
                log.info("%s: waiting for its batch under way to commit", running.table)
                waited = time.monotonic()
            time.sleep(0.1)
        query.stop()
