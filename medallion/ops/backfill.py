"""``medallion backfill``: reprocess a range of time, or rebuild a table and all it feeds.

Range backfill, without double counting:

* ``gold/<table>`` (or ``gold`` for every declared gold table): the windows that start in
  ``[from, to)`` (sessions: that start in it) are recomputed from the table's declared input with
  the transform compiled from its declaration (the stream's own) and replace the table's rows of
  that range in one atomic commit (``replaceWhere``). Of a table in mode append (closed windows,
  sessions), only the windows its stream has closed (ending by its watermark) are recomputed:
  the open ones are in the stream's state, which appends them once closed. A table a Python step
  computes has no declared window to cut a range by: it is rebuilt with ``--full-refresh``. Running it
  twice gives the same table. Unlike the stream, the recomputation keeps events that came later
  than the watermark: that is the point of a backfill.
* ``bronze/events``: the landing files modified in ``[from, to)`` are ingested again by a stream
  with its own checkpoint (per range, trigger available-now, exactly-once like every bronze
  ingestion); silver then removes the re-delivered events as duplicates, counting them, and the
  rest of the pipeline runs so the range reaches gold.

Full refresh (``--full-refresh``): the table, every table downstream of it and their checkpoints
are deleted, and the layers from the table's own one to gold run again on everything there is, so
the result equals a fresh run. Because it deletes data it needs a confirmation (or ``--yes``),
and ``--dry-run`` only prints the plan.

Publications (``kafka.publish``) of a rebuilt table, and of a gold table in mode append whose
range is recomputed, lose their checkpoints too: their stream could not go on (a rebuilt table is
another Delta table; a rewritten range is not an append), so the next publish sends the table
again from its start, and consumers keep the latest message per key as for any replay. A gold
table updated in place is published through its change data feed, which carries the recomputed
rows; its publication goes on.

No other run of the pipeline may write the lakehouse meanwhile (as for any job of it).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config.durations import parse_duration_seconds
from medallion.config.model import KafkaPublish, Trigger
from medallion.engine.bronze.job import bronze_spec, landing_folder
from medallion.engine.bronze.transforms import shape_bronze
from medallion.engine.gold.compile import latest_per_key
from medallion.engine.gold.job import GoldFlow, gold_flows
from medallion.engine.idle import files_under
from medallion.engine.publish import publish_checkpoint
from medallion.engine.streaming import RunningQuery, TableRun, await_all
from medallion.io.catalog import has_entry
from medallion.io.checkpoints import emitted_watermark
from medallion.io.hadoopfs import delete_path
from medallion.io.sinks.delta import ensure_table, guard_checkpoint, with_trigger
from medallion.io.sinks.evolution import check_declared_state
from medallion.io.sources.delta import newest_table_version, read_table
from medallion.io.sources.files import read_landing
from medallion.io.tables import (
    QUALITY_RESULTS,
    RUN_RECORDS,
    SILVER_BATCH_METRICS,
    TableSpec,
    lakehouse_tables,
    quarantine_of,
)
from medallion.ops.rebuilds import downstream, silver_tables
from medallion.pipeline.kinds import OutputMode, SourceFormat, WindowKind
from medallion.pipeline.model import SourceSpec
from medallion.pipeline.spec import PipelineSpec
from medallion.project import Settings

log = logging.getLogger(__name__)

LAYERS = ("bronze", "silver", "gold")


def gold_group(settings: Settings) -> tuple[TableSpec, ...]:
    """Every declared gold table and its quarantine (rows its gate dropped, written by its query)."""
    return tuple(s for flow in gold_flows(settings) for s in (flow.spec, quarantine_of(flow.spec)))


def writer_layer(spec: TableSpec) -> str:
    """The layer whose run writes a table (silver's batch metrics are written by silver)."""
    return "silver" if spec.key == SILVER_BATCH_METRICS.key else spec.layer


class BackfillError(ValueError):
    """The backfill asked for cannot be done (the message says why and what to do instead)."""


@dataclass(frozen=True)
class Plan:
    """What a backfill will do, printed before it does it."""

    target: str
    start: datetime | None
    end: datetime | None
    full_refresh: bool
    rewrites: tuple[TableSpec, ...]
    files: tuple[str, ...] = ()
    metrics_of: tuple[str, ...] = ()  # silver tables rebuilt whose rows of the shared metrics go
    republished: tuple[KafkaPublish, ...] = ()  # publications whose checkpoints go

    @property
    def first_layer(self) -> str:
        """The most upstream layer whose run writes one of the rewritten tables."""
        return min((writer_layer(spec) for spec in self.rewrites), key=LAYERS.index)

    def describe(self, absent: Collection[str] = ()) -> str:
        """Human-readable lines: the range, the tables rewritten, the files re-ingested.
        ``absent``: the tables of a full refresh not made yet (a gold quarantine no row ever went
        to), left out of what it deletes."""
        if self.full_refresh:
            lines = [f"full refresh of {self.target}: delete these tables and their checkpoints, "
                     "then process every input again:"]
            lines += [f"  {spec.key}" for spec in self.rewrites
                      if spec.key not in absent or spec.key == self.target]
            if self.metrics_of:
                lines.append(f"  {SILVER_BATCH_METRICS.key}: the rows of {', '.join(self.metrics_of)}")
            return "\n".join(lines + self._republished())
        span = f"[{self.start:%Y-%m-%dT%H:%M:%SZ}, {self.end:%Y-%m-%dT%H:%M:%SZ})"
        if self.files:
            lines = [f"backfill {self.target} {span}: ingest again {len(self.files)} landing files "
                     "(silver removes what it already has), then silver and gold run:"]
            return "\n".join([*lines, *(f"  {file}" for file in self.files)])
        lines = [f"backfill {span}: recompute from their inputs and replace the windows starting in it:"]
        return "\n".join([*lines, *(f"  {spec.key}" for spec in self.rewrites),
                          *self._republished()])

    def _republished(self) -> list[str]:
        if not self.republished:
            return []
        return ["and delete the checkpoints of these publications (the next publish sends the "
                "table again, whole):",
                *(f"  {entry.table} -> topic {entry.topic}" for entry in self.republished)]


def _gold_targets(settings: Settings, target: str) -> list[GoldFlow]:
    flows = gold_flows(settings)
    return [flow for flow in flows if target in ("gold", flow.spec.key)]


def _read_as_streams(settings: Settings, golds: Sequence[GoldFlow]) -> dict[str, list[str]]:
    """Of ``golds``' tables, those another gold table reads as a stream (an append-mode table
    can be a gold table's input), with the tables reading each."""
    targets = {g.spec.key for g in golds}
    readers: dict[str, list[str]] = {}
    for flow in gold_flows(settings):
        for read in flow.inputs:
            if read.key in targets:
                readers.setdefault(read.key, []).append(flow.spec.key)
    return readers


def _spec(settings: Settings, target: str) -> TableSpec:
    tables = lakehouse_tables(settings)
    found = next((spec for spec in tables if spec.key == target), None)
    if found is None:
        raise BackfillError(f"no table {target!r} (known: {', '.join(s.key for s in tables)})")
    return found


def plan_backfill(spark: SparkSession, settings: Settings, target: str, start: datetime | None,
                  end: datetime | None, full_refresh: bool = False) -> Plan:
    """Check the request and say what it will do; nothing is changed."""
    target = target.replace(".", "/").rstrip("/")
    if full_refresh:
        if target in ("gold",):
            group = gold_group(settings)
            return Plan(target, None, None, True, group,
                        republished=_publications_of(settings, group))
        feeds = downstream(settings)
        spec = next((s for s in gold_group(settings) if s.key == target), None) or _spec(settings, target)
        if spec in (*RUN_RECORDS, QUALITY_RESULTS):
            raise BackfillError(f"{target} is a record of past runs and checks; it is not rebuilt")
        if spec.key not in feeds:
            raise BackfillError(f"{target}: a full refresh is for the pipelines' tables "
                                f"({', '.join(feeds)})")
        rewrites = (spec, *feeds[spec.key])
        every_silver = silver_tables(settings)
        metrics_of = () if SILVER_BATCH_METRICS in rewrites else tuple(
            s.key for s in rewrites if s.key in every_silver)
        return Plan(target, None, None, True, rewrites, metrics_of=metrics_of,
                    republished=_publications_of(settings, rewrites))
    if start is None or end is None:
        raise BackfillError("a range backfill needs --from and --to (or --full-refresh)")
    if start >= end:
        raise BackfillError(f"--from {start.isoformat()} is not before --to {end.isoformat()}")
    if target == "gold" or target.startswith("gold/"):
        golds = _gold_targets(settings, target)
        if not golds:
            raise BackfillError(f"no gold table {target!r}")
        computed = [g.spec.key for g in golds if g.gold.python is not None]
        if computed:
            raise BackfillError(f"{', '.join(computed)}: a Python step computes it, with no declared "
                                "window to recompute a range of; rebuild it with --full-refresh")
        streamed = _read_as_streams(settings, golds)
        if streamed:
            raise BackfillError(
                "; ".join(f"{table} is read as a stream by {', '.join(readers)}" for table, readers
                          in streamed.items())
                + ": a range backfill replaces rows in place, and a Delta stream cannot read past "
                  "that (the next run would fail on it). Rebuild the table and those reading it "
                  f"with `medallion backfill {next(iter(streamed))} --full-refresh`")
        appended = [g.spec for g in golds if g.gold.mode is OutputMode.APPEND]
        return Plan(target, start, end, False, tuple(g.spec for g in golds),
                    republished=_publications_of(settings, appended))
    found = file_source_of(settings, target)
    if found is not None:
        files = landing_files_between(spark, settings, start, end, target)
        if not files:
            raise BackfillError(f"no landing file of {target} was modified in the range")
        return Plan(target, start, end, False, (bronze_spec(*found),), tuple(files))
    raise BackfillError(
        f"{target}: a range backfill is for gold tables (recomputed from silver) and the bronze "
        "tables of landing files (files ingested again, deduplicated by silver); rebuild other "
        "tables with --full-refresh")


def _publications_of(settings: Settings, tables: Sequence[TableSpec]) -> tuple[KafkaPublish, ...]:
    keys = {spec.key for spec in tables}
    return tuple(entry for entry in settings.kafka.publish if entry.table in keys)


def file_source_of(settings: Settings, target: str) -> tuple[PipelineSpec, SourceSpec] | None:
    """The landing-file source that runs and lands in bronze table ``target``, if any."""
    for pipeline in settings.pipelines:
        for source in settings.active_sources(pipeline):
            if source.bronze_key == target and source.format is not SourceFormat.KAFKA:
                return pipeline, source
    return None


def landing_files_between(spark: SparkSession, settings: Settings, start: datetime,
                          end: datetime, target: str) -> list[str]:
    """The landing files of the source of bronze table ``target`` whose modification time is in
    ``[start, end)``."""
    found = file_source_of(settings, target)
    if found is None:
        return []
    source = found[1]
    low, high = start.timestamp() * 1000, end.timestamp() * 1000
    listed = files_under(spark, landing_folder(settings, source), settings.s3) or ()
    return sorted(f.uri for f in listed
                  if f.read_by(source.file_glob) and low <= f.modified_ms < high)


def _range_filter(column: str, start: datetime, end: datetime) -> F.Column:
    return (F.col(column) >= F.lit(start)) & (F.col(column) < F.lit(end))


def _timestamp(instant: datetime) -> str:
    """A SQL TIMESTAMP literal of ``instant``, in UTC to the microsecond."""
    return f"TIMESTAMP'{instant.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S.%f}+00:00'"


def _predicate(column: str, start: datetime, end: datetime) -> str:
    return f"{column} >= {_timestamp(start)} AND {column} < {_timestamp(end)}"


def _start_column(gold: GoldFlow) -> str:
    """The gold column a range is cut by: the window's (or session's) start; a join's time."""
    if gold.gold.join is not None:
        return gold.pipeline.table(gold.spec.key).time_column or gold.spec.column_names[0]
    assert gold.gold.window is not None, f"{gold.spec.key} has no declared window"
    return gold.gold.window.bounds[0]


def _closed_by(gold: GoldFlow, watermark_ms: int) -> str:
    """The SQL condition of the windows a table in mode append has had written by its stream:
    those ending at or before its watermark. A window still open is in the stream's state, which
    appends it once closed: recomputed by a backfill too, it would be in the table twice."""
    assert gold.gold.window is not None, f"{gold.spec.key} has no declared window"
    closed = datetime.fromtimestamp(watermark_ms / 1000, tz=timezone.utc)
    return f"{gold.gold.window.bounds[1]} <= {_timestamp(closed)}"


def recompute_join(sources: Sequence[DataFrame], gold: GoldFlow, start: datetime,
                   end: datetime) -> DataFrame:
    """The rows of a join table whose time is in ``[start, end)``: the left input's rows of the
    range joined with all they can match (nothing is late in a recomputation), the latest kept."""
    join = gold.gold.join
    assert join is not None
    within = timedelta(seconds=parse_duration_seconds(join.within, "join.within",
                                                      gold.pipeline.file))
    left_time = gold.pipeline.table(gold.input.key).time_column or ""
    right_time = gold.pipeline.table(gold.inputs[1].key).time_column or ""
    left = sources[0].where(_range_filter(left_time, start, end))
    right = sources[1].where(_range_filter(right_time, start - within, end))
    rows = gold.transform(left, right)  # type: ignore[call-arg]
    return (latest_per_key(rows, gold.merge_keys, gold.gold.latest_by)
            .where(_range_filter(_start_column(gold), start, end))
            .select(*gold.spec.column_names))


def recompute_gold(source: DataFrame, gold: GoldFlow, start: datetime, end: datetime) -> DataFrame:
    """The rows of ``gold`` whose window (or session) starts in ``[start, end)``, from its input."""
    window = gold.gold.window
    assert window is not None, f"{gold.spec.key} has no declared window"
    rows = source
    if window.size is not None:
        # A window holds events of its own span only; a session may have begun long before: all
        # of the input then.
        size = timedelta(seconds=parse_duration_seconds(window.size, "window.size",
                                                        gold.pipeline.file))
        rows = source.where(_range_filter(window.column, start - size, end + size))
    windows = rows.transform(gold.transform)
    if window.kind is WindowKind.SESSION:
        # Spark's optimizer pushes a filter on a session's bounds below the merging of sessions,
        # where it filters the events by their own one-event sessions: a session the range's start
        # (or the stream's watermark) cuts through would lose its events on one side and come out
        # split. The sessions are made first, and cut afterwards (Spark 4.0 to 4.2).
        windows = windows.localCheckpoint(eager=True)
    return (windows.where(_range_filter(_start_column(gold), start, end))
            .select(*gold.spec.column_names))


def backfill_gold(spark: SparkSession, settings: Settings, plan: Plan) -> dict[str, int]:
    """Replace the windows of the plan's range in each gold table; return rows written per table."""
    assert plan.start is not None and plan.end is not None
    written = {}
    for gold in (g for g in gold_flows(settings) if g.spec in plan.rewrites):
        if any(newest_table_version(spark, table.path(settings)) < 0 for table in gold.inputs):
            log.info("%s: an input was never written; nothing to recompute", gold.spec.key)
            continue  # as a run leaves it: not created until its input has data
        path = gold.spec.path(settings)
        # A range recomputed with another definition than the rest of the table was made with
        # would not fit beside it.
        check_declared_state(spark, gold.spec.key, gold.spec.checkpoint(settings),
                             gold.state_definition)
        ensure_table(spark, gold.spec, path)
        predicate = _predicate(_start_column(gold), plan.start, plan.end)
        closed = None  # a table updated in place (or a join's) keeps one row per key by MERGE
        if gold.gold.mode is OutputMode.APPEND and gold.gold.join is None:
            watermark = emitted_watermark(spark, gold.spec.key, gold.spec.checkpoint(settings))
            if watermark is None:
                log.info("%s: its stream has closed no window yet; nothing to recompute",
                         gold.spec.key)
                continue
            closed = _closed_by(gold, watermark)  # the open ones: the stream's to write
            predicate = f"{predicate} AND {closed}"
            log.info("%s: recomputing the windows its stream has closed (%s)", gold.spec.key,
                     closed)
        inputs = [read_table(spark, table.path(settings)) for table in gold.inputs]
        rows = (recompute_join(inputs, gold, plan.start, plan.end) if gold.gold.join is not None
                else recompute_gold(inputs[0], gold, plan.start, plan.end))
        if closed is not None:
            rows = rows.where(closed)
        rows = rows.persist()
        try:
            written[gold.spec.key] = rows.count()
            # before the rewrite: killed between the two, the rerun finds the rewrite to do
            drop_publish_checkpoints(spark, settings, plan, gold.spec.key)
            (rows.write.format("delta").mode("overwrite")
             .option("replaceWhere", predicate)
             .save(path))
        finally:
            rows.unpersist()
        log.info("%s: %d rows of [%s, %s) recomputed from %s", gold.spec.key,
                 written[gold.spec.key], plan.start, plan.end, gold.input.key)
    return written


def _without_file_scheme(path: str) -> str:
    return "/" + path[len("file:"):].lstrip("/") if path.startswith("file:") else path


def _backfill_checkpoint(settings: Settings, target: str, files: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:16]
    return settings.checkpoint_path(f"backfill/{target}/{digest}")


def reingest_bronze(spark: SparkSession, settings: Settings, plan: Plan) -> list[TableRun]:
    """Ingest the plan's landing files again into their bronze table, with a checkpoint of their own.

    The checkpoint is named after the set of files: running the same backfill again (after a
    crash, say) resumes it instead of ingesting the files a third time.
    """
    found = file_source_of(settings, plan.target)
    assert found is not None, plan.target
    pipeline, source = found
    spec = bronze_spec(pipeline, source)
    path = spec.path(settings)
    ensure_table(spark, spec, path, settings.table_doc(spec.key))
    # file:/x, file:///x and /x name the same local file; compare without the scheme's slashes.
    chosen = sorted({_without_file_scheme(file) for file in plan.files})
    stream = (read_landing(spark, source, landing_folder(settings, source),
                           settings.streaming.max_files_per_trigger)
              .where(F.regexp_replace("source_file", "^file:/+", "/").isin(chosen))
              .transform(shape_bronze(source)))
    checkpoint = _backfill_checkpoint(settings, spec.key, plan.files)
    writer = (stream.writeStream.format("delta").outputMode("append")
              .queryName(f"backfill/{spec.key}")
              .option("checkpointLocation", checkpoint))
    query = with_trigger(writer, Trigger()).start(path)
    return await_all([RunningQuery(f"backfill/{spec.key}", query)])


def full_refresh(spark: SparkSession, settings: Settings, plan: Plan,
                 run: Callable[[list[str]], list[TableRun]]) -> list[TableRun]:
    """Delete the plan's tables and checkpoints, then ``run`` the layers from the first concerned."""
    layers = list(LAYERS[LAYERS.index(plan.first_layer):])  # known before anything is deleted
    drop_publish_checkpoints(spark, settings, plan)  # first: killed after it, a rerun is whole
    for spec in plan.rewrites:  # catalog entries first: Delta cannot resolve a deleted table
        if has_entry(spark, spec.qualified_name):
            spark.sql(f"DROP TABLE {spec.qualified_name}")  # external: the entry only
    for spec in plan.rewrites:
        for folder in (spec.path(settings), spec.checkpoint(settings)):
            if delete_path(spark, folder):
                log.warning("full refresh: deleted %s", folder)
    metrics = SILVER_BATCH_METRICS.path(settings)
    if plan.metrics_of and newest_table_version(spark, metrics) >= 0:
        # The shared metrics keep the other silver tables' rows (their accounting needs them).
        tables = ", ".join(f"'{key}'" for key in plan.metrics_of)
        spark.sql(f"DELETE FROM delta.`{metrics}` WHERE `table` IN ({tables})")
        log.warning("full refresh: deleted the rows of %s from %s", tables, SILVER_BATCH_METRICS.key)
    for spec in plan.rewrites:  # nothing left behind that a restart would trust
        guard_checkpoint(spark, spec.path(settings), spec.checkpoint(settings), spec.key)
    return run(layers)


def drop_publish_checkpoints(spark: SparkSession, settings: Settings, plan: Plan,
                             table: str | None = None) -> None:
    """Delete the checkpoints of the plan's publications (of ``table`` only, if given): the next
    publish sends their tables again from the start (see the module's docstring)."""
    for entry in plan.republished:
        if table is not None and entry.table != table:
            continue
        if delete_path(spark, publish_checkpoint(settings, entry)):
            log.warning("backfill: deleted the checkpoint of publishing %s to %s; the next publish "
                        "sends the table again, whole", entry.table, entry.topic)
