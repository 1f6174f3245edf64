"""Monitoring of the streaming queries: every micro-batch's progress and every run's outcome.

A :class:`ProgressCollector` is a ``StreamingQueryListener``: Spark calls it on the driver after
each micro-batch. The callback only logs one JSON line and buffers a row; writing to Delta from
inside the callback would run a Spark job on the listener bus thread, which slows the stream or
deadlocks it. The buffer is written by :meth:`ProgressCollector.flush`, called after each layer
of a run (or periodically by a long-running service), as a blind append (by delta-rs from the
driver, :func:`medallion.io.sinks.delta.append_rows`) whose commit carries the flush's mark (the
collector's pipeline run and the flush's number, as ``userMetadata``). A flush retried after a
failure first looks for its mark in the commits made since its first attempt, so a commit that did
in fact land is not written twice. Such an append costs the same however long the history grows:
it reads neither the table's files (as a transaction id check would, on every flush) nor its rows
(as a MERGE would).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from medallion.engine.live import BatchCallback
from medallion.io.sinks.delta import append_rows, ensure_table, marked_since, seen_version
from medallion.io.tables import QUERY_PROGRESS, RUN_OUTCOMES
from medallion.project import Settings
from medallion.spark.session import counts_state_rows

log = logging.getLogger(__name__)
progress_log = logging.getLogger("medallion.progress")

# Consecutive batches whose input rate beats the processing rate before backpressure is reported.
BACKPRESSURE_BATCHES = 3


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def progress_row(progress: Mapping[str, Any], state_rows_counted: bool = True) -> dict[str, Any]:
    """One row of ``_monitoring/query_progress`` from a progress report (its JSON as a dict).

    ``state_rows_counted`` False: the stores do not count their rows (``state_store.count_rows``)
    and report 0, so ``state_rows`` is null (unknown), not 0.
    """
    states = progress.get("stateOperators") or []
    durations = progress.get("durationMs") or {}
    event_time = progress.get("eventTime") or {}
    return {
        "query_name": progress.get("name") or "",
        "query_id": str(progress["id"]),
        "run_id": str(progress["runId"]),
        "batch_id": int(progress["batchId"]),
        "batch_timestamp": _timestamp(progress.get("timestamp")),
        "num_input_rows": int(progress.get("numInputRows") or 0),
        "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0),
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0),
        "batch_duration_ms": int(durations.get("triggerExecution") or progress.get("batchDuration") or 0),
        "add_batch_ms": int(durations.get("addBatch") or 0),
        "watermark": _timestamp(event_time.get("watermark")),
        "max_event_time": _timestamp(event_time.get("max")),
        "state_rows": sum(int(s.get("numRowsTotal") or 0) for s in states)
        if state_rows_counted or not states else None,
        "state_memory_bytes": sum(int(s.get("memoryUsedBytes") or 0) for s in states),
        "rows_dropped_by_watermark": sum(int(s.get("numRowsDroppedByWatermark") or 0) for s in states),
        "progress_json": json.dumps(progress, sort_keys=True, default=str),
    }


@dataclass
class RunOutcome:
    """How one table's query ended in one pipeline run."""

    table: str
    started_at: datetime
    finished_at: datetime
    succeeded: bool
    rows_in: int = 0
    rows_out: int = 0
    error: str | None = None
    # Not started: its checkpoint and input said there was nothing new. Written with the outcomes
    # of tables that did work; a run where every table was idle writes nothing (a Delta commit in
    # a JVM just started costs more than the rest of such a run).
    idle: bool = False


@dataclass
class _Flush:
    """One flush's rows, kept until written: a retry writes the same rows under the same mark, and
    only to the tables where no commit since ``before`` (the versions seen before the first
    attempt) carries that mark."""

    number: int
    rows: list[dict[str, Any]]
    outcomes: list[RunOutcome]
    before: dict[str, int] = field(default_factory=dict)


class ProgressCollector(StreamingQueryListener):
    """Buffers every micro-batch's progress on the driver and writes it to ``_monitoring``."""

    def __init__(self, session: SparkSession, settings: Settings, trigger: str = "",
                 on_batch: BatchCallback | None = None) -> None:
        self._session = session
        self._on_batch = on_batch  # e.g. the terminal's live display
        self.settings = settings
        self._state_rows_counted = counts_state_rows(settings)
        self.trigger = trigger
        self.pipeline_run = str(uuid.uuid4())
        self._lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []
        self._outcomes: list[RunOutcome] = []
        # A flush that failed keeps its rows and its number for the retry: a retry of a commit
        # that did land then finds its mark and is skipped instead of appended again.
        self._unsent: _Flush | None = None
        self._flushes = 0
        self._behind: dict[str, int] = {}
        self._started: set[str] = set()
        self._terminated: set[str] = set()
        self.backpressure: set[str] = set()
        self._java: Any = None  # the listener the JVM calls, made when the session adds it

    # -- listener callbacks (the listener bus thread; no Spark jobs here) --
    @property
    def _jlistener(self) -> Any:
        """What Spark's listener bus calls: :class:`_JsonOnly`, not PySpark's own wrapper."""
        if self._java is None:
            jvm: Any = self._session.sparkContext._jvm
            streaming = jvm.org.apache.spark.sql.streaming
            self._java = streaming.PythonStreamingQueryListenerWrapper(_JsonOnly(self))
        return self._java

    def onQueryStarted(self, event: QueryStartedEvent) -> None:  # noqa: N802 (Spark's name)
        self._started_run(str(event.runId))

    def _started_run(self, run_id: str) -> None:
        with self._lock:
            self._started.add(run_id)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802
        self._progress(json.loads(event.progress.json))

    def _progress(self, progress: dict[str, Any]) -> None:
        row = progress_row(progress, self._state_rows_counted)
        progress_log.info(json.dumps({"event": "batch_progress", **{
            k: (v.isoformat() if isinstance(v, datetime) else v)
            for k, v in row.items() if k != "progress_json"}}, sort_keys=True))
        with self._lock:
            self._rows.append(row)
            self._check_backpressure(row)
        if self._on_batch is not None:
            self._on_batch(row)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        """Idle queries have nothing to report."""

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:  # noqa: N802
        self._terminated_run(str(event.runId))

    def _terminated_run(self, run_id: str) -> None:
        with self._lock:
            self._terminated.add(run_id)

    def _check_backpressure(self, row: dict[str, Any]) -> None:
        name = row["query_name"]
        if row["num_input_rows"] and row["input_rows_per_second"] > row["processed_rows_per_second"]:
            self._behind[name] = self._behind.get(name, 0) + 1
        else:
            self._behind[name] = 0
        if self._behind[name] >= BACKPRESSURE_BATCHES:
            self.backpressure.add(name)
            log.warning(
                "backpressure: %s has received rows faster than it processes them for %d batches "
                "(last: %.1f rows/s in, %.1f rows/s processed); add resources or lower "
                "streaming.max_files_per_trigger", name, self._behind[name],
                row["input_rows_per_second"], row["processed_rows_per_second"])

    # -- the driver's side --
    def record_outcome(self, outcome: RunOutcome) -> None:
        """Remember how a table's query ended, to be written with the next flush."""
        with self._lock:
            self._outcomes.append(outcome)

    def wait_for_events(self, timeout: float = 30.0) -> None:
        """Wait until every started query's termination event (and so its progress) has arrived.

        Listener events reach Python asynchronously but in order, so once a query's termination
        is seen, every progress report it made has been buffered.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._started <= self._terminated:
                    return
            time.sleep(0.1)
        log.warning("monitoring: some listener events did not arrive within %.0fs", timeout)

    def pending(self) -> int:
        """Rows buffered and not written yet."""
        with self._lock:
            unsent = len(self._unsent.rows) + len(self._unsent.outcomes) if self._unsent else 0
            return len(self._rows) + len(self._outcomes) + unsent

    def flush(self) -> int:
        """Write the buffered progress rows and run outcomes; return how many progress rows."""
        with self._lock:
            if self._unsent is None:
                if not self._rows and all(outcome.idle for outcome in self._outcomes):
                    return 0  # kept: written with the next outcome that is not idle
                self._unsent = _Flush(self._flushes, self._rows, self._outcomes)
                self._flushes += 1
                self._rows, self._outcomes = [], []
            unsent = self._unsent
        # Raises on failure, keeping ``_unsent`` for the next flush (same number, same mark).
        _append(self._session, self.settings, self.pipeline_run, self.trigger, unsent)
        with self._lock:
            self._unsent = None
        log.debug("monitoring: wrote %d progress rows, %d outcomes", len(unsent.rows),
                  len(unsent.outcomes))
        return len(unsent.rows)


class _JsonOnly:
    """The listener's face to the JVM (a Py4J proxy of Spark's ``PythonStreamingQueryListener``).

    PySpark's own wrapper turns each event into Python objects before calling the listener: a
    progress report costs some forty calls into the JVM (each source, the sink, every metric,
    and class lookups that search every jar of the class path) although the collector reads only
    its JSON. This one asks the JVM for that JSON alone, and for a run id: 2-4% of a 200-event
    increment's time, processor time the queries' batches share, and the
    end of each layer waits for its queries' last events.
    """

    def __init__(self, collector: ProgressCollector) -> None:
        self._collector = collector

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 (the Java interface's names)
        self._collector._started_run(jevent.runId().toString())

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        self._collector._progress(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        """Idle queries have nothing to report."""

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        self._collector._terminated_run(jevent.runId().toString())

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _append(spark: SparkSession, settings: Settings, pipeline_run: str, trigger: str,
            flush: _Flush) -> None:
    """Append one flush's rows to both monitoring tables, each commit once per (run, number)."""
    now, mark = utcnow(), f"medallion-monitoring {pipeline_run} {flush.number}"
    tables = []
    if flush.rows:
        tables.append((QUERY_PROGRESS, [{**row, "recorded_at": now} for row in flush.rows]))
    if flush.outcomes:
        tables.append((RUN_OUTCOMES, [
            {"pipeline_run": pipeline_run, "table": o.table, "trigger": trigger,
             "started_at": o.started_at, "finished_at": o.finished_at, "succeeded": o.succeeded,
             "rows_in": o.rows_in, "rows_out": o.rows_out, "error": o.error}
            for o in flush.outcomes]))
    for spec, rows in tables:
        path = spec.path(settings)
        ensure_table(spark, spec, path)
        if path not in flush.before:
            flush.before[path] = seen_version(spark, path)
        elif marked_since(spark, path, mark, flush.before[path]):
            continue  # an earlier attempt reached this table, and its commit landed
        append_rows(spark, settings.s3, spec, path, rows, mark)


def install(spark: SparkSession, settings: Settings, trigger: str = "",
            on_batch: BatchCallback | None = None) -> ProgressCollector:
    """Register a new collector with the session's streams (``on_batch`` is also given every
    micro-batch's progress row); remove it with :func:`uninstall`."""
    collector = ProgressCollector(spark, settings, trigger, on_batch)
    spark.streams.addListener(collector)
    return collector


def uninstall(spark: SparkSession, collector: ProgressCollector) -> None:
    """Stop sending events to ``collector``."""
    spark.streams.removeListener(collector)


def utcnow() -> datetime:
    """Now, in UTC (zone-aware, so PySpark does not read it in the process's local zone)."""
    return datetime.now(timezone.utc)
