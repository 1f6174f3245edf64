"""A window aggregate kept by recompute (``refresh: recompute``): no state store.

The query streams only what locates new input (the grouping columns and the window's column,
after the filter). Each batch reads its input table as of the version the batch's
offsets name (a replayed batch reads what its first attempt read), recomputes from it exactly the
windows the batch touches with the declared transform (:func:`~medallion.engine.gold.compile.compile_gold`
on a static frame), and replaces them in the table in one MERGE with the batch's transaction id
(:func:`~medallion.io.sinks.delta.replace_batch`): a row of the region it recomputed that the
recomputation no longer has is deleted in the same commit.

* **Tumbling and sliding windows**: the windows each new row falls in. Their starts are covered by
  at most :data:`MAX_RANGES` ranges (:func:`covering_ranges`); the input is read only in the event
  times those windows span, as literal bounds on the column, so Delta skips the files outside
  them; of the recomputed windows, only each new row's windows of its own groups are written (the
  input only grows, so no other row of the table changes).
* **Sessions**: per group a new row touches, the intervals of its new rows (``[t, t + gap)``) and
  of the sessions the table holds are merged where they overlap or touch; each merged span that
  holds a new row is recomputed from the input rows of that group in that span. A span is a union
  of whole sessions and new rows, and no input row outside it can join one inside (it would be
  closer than the gap to it, so inside it), so sessions merge and split as the data says.
* **A checkpoint's first batch** recomputes the whole table as of its version and replaces it
  (the later batches of rows of that version or older have nothing left to do), so a first run is one batch
  aggregation, and a table whose declaration changed, or whose checkpoint was lost or damaged,
  starts over from a new checkpoint (:func:`start_over_reason`, announced by the run and by
  ``plan``).

A late row, however late, corrects its windows: there is no watermark behind which rows are
dropped.

* **Mode append** (tumbling and sliding windows): the watermark is the input's newest event time
  as of a version, less the delay, so it is kept by the input's versions and a replayed batch
  finds the same one (its stream has no file limit, so its batches end between versions). Each
  batch recomputes the windows the watermark closed since the batch before
  (:func:`closed_window_starts`) from every input row in them, to be appended once; a row of the
  batch whose windows had all closed before is refused and counted, as the stateful query drops
  it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from medallion.config.durations import parse_duration_seconds
from medallion.engine.gold.compile import compile_gold
from medallion.errors import CheckpointError
from medallion.io.checkpoints import read_log_file
from medallion.io.hadoopfs import delete_path, path_exists, read_text, write_text
from medallion.io.sources.delta import newest_table_version, read_table, version_read
from medallion.pipeline.evolution import DECLARATION_FILE, state_changes
from medallion.pipeline.kinds import OutputMode, WindowKind
from medallion.pipeline.model import GoldSpec
from medallion.pipeline.spec import PipelineSpec

log = logging.getLogger(__name__)

MAX_RANGES = 32  # event-time ranges a batch's read of its input is bounded by
_T = "__recompute_time"  # a row's event time, in microseconds
_LO, _HI, _NEW = "__span_lo", "__span_hi", "__span_new"


# ---- pure: which windows, which ranges -------------------------------------------------------


def window_start_range(bucket_start: int, size: int, slide: int) -> tuple[int, int]:
    """The first and last start of the windows (``size`` long, every ``slide``, aligned to the
    epoch) that hold a time in the slide-long bucket starting at ``bucket_start`` (one unit for
    all three)."""
    return bucket_start - (math.ceil(size / slide) - 1) * slide, bucket_start


def closed_window_starts(before: int | None, now: int | None, size: int, slide: int
                         ) -> tuple[int | None, int] | None:
    """The first and last start of the windows (``size`` long, every ``slide``, aligned to the
    epoch) that a watermark moving from ``before`` to ``now`` closes: those that end after
    ``before`` and at or before ``now`` (None: none). ``before`` None (no watermark yet): every
    window ending at or before ``now``, the first start then None."""
    if now is None:
        return None
    last = (now - size) // slide * slide
    if before is None:
        return None, last
    first = (before - size) // slide * slide + slide
    return (first, last) if first <= last else None


def covering_ranges(ranges: Sequence[tuple[int, int]], limit: int = MAX_RANGES
                    ) -> list[tuple[int, int]]:
    """Inclusive ranges, sorted, that cover ``ranges``: overlapping ones merged, then, while more
    than ``limit`` remain, the two closest joined (covering the gap between them)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    if len(merged) <= max(limit, 1):
        return merged
    gaps = sorted(range(len(merged) - 1), key=lambda i: (merged[i + 1][0] - merged[i][1], i))
    joined = set(gaps[:len(merged) - max(limit, 1)])  # gap i joins range i with range i + 1
    covered: list[tuple[int, int]] = []
    for index, (low, high) in enumerate(merged):
        if index - 1 in joined:
            covered[-1] = (covered[-1][0], high)
        else:
            covered.append((low, high))
    return covered


# ---- declaration changes, lost checkpoints: starting over ------------------------------------


def start_over_marker(checkpoint: str) -> str:
    """The file that says a start over of ``checkpoint`` began and has not ended."""
    return f"{checkpoint.rstrip('/')}.start-over"


def start_over_reason(spark: SparkSession, table: str, table_path: str, checkpoint: str,
                      definition: dict, carry_on: object) -> str | None:
    """Why the recomputed ``table`` must start over from a new checkpoint (None: it carries on).

    ``carry_on`` checks that the checkpoint can be carried on from (it raises
    :class:`~medallion.errors.CheckpointError` when it is damaged or behind the table)."""
    if path_exists(spark, start_over_marker(checkpoint)):
        return "a start over was interrupted"
    if not path_exists(spark, f"{checkpoint}/offsets"):
        return ("its checkpoint is missing" if newest_table_version(spark, table_path) > 0
                else None)
    file = f"{checkpoint}/{DECLARATION_FILE}"
    try:
        recorded = json.loads(read_text(spark, file)) if path_exists(spark, file) else None
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        return "its checkpoint records no declaration"
    changed = state_changes(recorded, definition)
    if changed:
        return f"its declaration changed ({'; '.join(changed)})"
    try:
        carry_on()  # type: ignore[operator]
    except CheckpointError as exc:
        return f"its checkpoint cannot be carried on from ({exc})"
    return None


def start_over(spark: SparkSession, table: str, checkpoint: str, definition: dict,
               reason: str, source: str) -> None:
    """Put the checkpoint away and record ``definition`` for the new one; its first batch then
    recomputes the table. A kill in between leaves the marker, and the next run starts over."""
    log.warning("%s: %s; the table is recomputed from %s", table, reason, source)
    marker = start_over_marker(checkpoint)
    write_text(spark, marker, reason + "\n")
    delete_path(spark, checkpoint)
    write_text(spark, f"{checkpoint}/{DECLARATION_FILE}",
               json.dumps(definition, sort_keys=True, indent=1) + "\n")
    delete_path(spark, marker)


# ---- the batches -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recomputed:
    """A batch's recomputed rows and the rows of the table they replace (``region``, their keys;
    None: none), within ``low``..``high`` of the table's window start (None: anywhere)."""

    rows: DataFrame
    region: DataFrame | None
    low: object = None
    high: object = None
    cached: tuple[DataFrame, ...] = ()  # what the batch persisted, in order, released after its write

    def release(self) -> None:
        # The frames made from others first: unpersisting a frame that a cached one was made
        # from plans that one again (and its reads of Delta tables list their files again).
        for frame in reversed(self.cached):
            frame.unpersist()


def _micros(column: str) -> Column:
    return F.unix_micros(F.col(column))


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _instant(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _at(micros: int) -> Column:
    """A TIMESTAMP literal: a bound Delta's data skipping compares with each file's statistics."""
    return F.lit(_instant(micros))


def _any(conditions: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a | b, conditions)


def _same(left: str, right: str, columns: Sequence[str]) -> Column:
    """Null-safe equality of ``columns`` between two aliased frames (true without columns)."""
    return reduce(lambda a, b: a & b, (F.col(f"{left}.`{c}`").eqNullSafe(F.col(f"{right}.`{c}`"))
                                       for c in columns), F.lit(True))


class RecomputeBatches:
    """Turns a batch of new input (its located rows, :func:`located`) into the recomputed rows
    of the windows it touches and the table's rows they replace."""

    def __init__(self, pipeline: PipelineSpec, gold: GoldSpec, checkpoint: str, input_path: str,
                 table_path: str) -> None:
        assert gold.window is not None, f"{gold.key}: recompute keeps window aggregates"
        self.gold, self.window = gold, gold.window
        self.checkpoint, self.input_path, self.table_path = checkpoint, input_path, table_path
        self.first_batch_rows = 0  # the input a checkpoint's first batch recomputed the table from
        self.late_dropped = 0  # mode append: rows of windows closed before they came
        self.appends = gold.mode is OutputMode.APPEND
        self._whole_table: int | None = None
        self._newest: dict[int, int | None] = {}  # the input's newest event time, by version
        self.transform = compile_gold(pipeline, gold)
        self.keys = gold.merge_keys
        self.start_column = self.window.bounds[0]
        where = f"{gold.key}.window"

        def micros(value: str | None, name: str) -> int:
            assert value is not None
            return 1_000_000 * parse_duration_seconds(value, f"{where}.{name}", "the declaration")

        self.delay = 1_000_000 * parse_duration_seconds(
            pipeline.watermark_of(gold), f"{gold.key}.watermark", "the declaration")
        if self.window.kind is WindowKind.SESSION:
            self.gap = micros(self.window.gap, "gap")
        else:
            self.size = micros(self.window.size, "size")
            self.slide = (micros(self.window.slide, "slide") if self.window.kind is WindowKind.SLIDING
                          else self.size)

    def located(self, rows: DataFrame) -> DataFrame:
        """What the query streams of its input: the rows the filter keeps, their groups and
        event time."""
        if self.gold.filter is not None:
            rows = rows.where(F.expr(self.gold.filter))
        return rows.select(*self.gold.group_by, self.window.column)

    def _version_of(self, session: SparkSession, batch_id: int) -> int:
        """The version of the input a batch's offsets say it read all of."""
        entries = read_log_file(session, f"{self.checkpoint}/offsets/{batch_id}")
        offset = entries[1] if len(entries) > 1 else None
        if not isinstance(offset, dict):
            raise ValueError(f"{self.gold.key}: batch {batch_id} has no offset of its input")
        return max(version_read(offset), 0)

    def __call__(self, batch: DataFrame, batch_id: int) -> Recomputed | None:
        session = batch.sparkSession
        version = self._version_of(session, batch_id)
        if batch_id > 0 and version <= self._whole_table_version(session):
            return None  # its rows are of the snapshot batch 0 recomputed the whole table from
        source = read_table(session, self.input_path, version)
        if self.appends:
            return self._closed(session, source, batch, batch_id, version)
        if batch_id == 0:
            # The batch's own rows are never read: the run counts the input it recomputed from
            # (from the Delta log's statistics, without reading a file).
            self.first_batch_rows += source.count()
            log.info("%s: the first batch of its checkpoint recomputes the whole table from %s "
                     "version %d", self.gold.key, self.gold.input, version)
            held = read_table(session, self.table_path).select(*self.keys)
            return Recomputed(self.transform(source), held)
        times = batch.where(F.col(self.window.column).isNotNull())
        if self.window.kind is WindowKind.SESSION:
            return self._sessions(session, source, times)
        return self._windows(session, source, times)

    def _whole_table_version(self, session: SparkSession) -> int:
        """The version of the input the checkpoint's first batch recomputed the whole table as
        of (-1 once Spark has cleaned up that batch's offsets, long after its snapshot)."""
        if self._whole_table is None:
            first = f"{self.checkpoint}/offsets/0"
            entries = read_log_file(session, first) if path_exists(session, first) else []
            offset = entries[1] if len(entries) > 1 else None
            self._whole_table = version_read(offset) if isinstance(offset, dict) else -1
        return self._whole_table

    def _watermark(self, session: SparkSession, version: int) -> int | None:
        """The watermark as of a version of the input: its newest event time (of every row, as
        the stateful query's, before the filter) less the delay (None: no event time yet). The
        input only grows, so it only moves forward."""
        if version not in self._newest:
            newest = read_table(session, self.input_path, version).agg(
                F.max(_micros(self.window.column))).first()
            self._newest[version] = None if newest is None or newest[0] is None else int(newest[0])
        found = self._newest[version]
        return None if found is None else found - self.delay

    def _closed(self, session: SparkSession, source: DataFrame, batch: DataFrame, batch_id: int,
                version: int) -> Recomputed | None:
        """Mode append: the windows the watermark closed since the batch before (at a
        checkpoint's first batch, every window it has closed), recomputed from the input as of
        the batch's version, to be appended once. A row of the batch whose windows had all closed
        before it came is refused and counted; every other row is in its windows when they close,
        since they are recomputed from every row of the input in them."""
        now = self._watermark(session, version)
        if batch_id == 0:
            before = None
            self.first_batch_rows += source.count()
            log.info("%s: the first batch of its checkpoint appends the windows closed in %s "
                     "version %d", self.gold.key, self.gold.input, version)
        else:
            previous = max(self._version_of(session, batch_id - 1),
                           self._whole_table_version(session))
            before = self._watermark(session, previous)
            if before is not None:
                at = _micros(self.window.column)
                last_end = F.floor(at / F.lit(self.slide)) * F.lit(self.slide) + F.lit(self.size)
                self.late_dropped += batch.where(last_end <= F.lit(before)).count()
        starts = closed_window_starts(before, now, self.size, self.slide)
        if starts is None:
            return None
        first, last = starts
        column, start = F.col(self.window.column), F.col(self.start_column)
        read = source.where(column < _at(last + self.size))
        closed = start <= _at(last)
        if first is not None:
            read, closed = read.where(column >= _at(first)), closed & (start >= _at(first))
        return Recomputed(self.transform(read).where(closed), None)

    def _windows(self, session: SparkSession, source: DataFrame, batch: DataFrame
                 ) -> Recomputed | None:
        slide, size, column = self.slide, self.size, self.window.column
        groups = list(self.gold.group_by)
        # Read once from the input's new files (its rows then count once in the run's summary).
        batch = batch.persist()
        buckets = [row[0] for row in batch.select(
            (F.floor(_micros(column) / F.lit(slide)) * F.lit(slide)).alias("b")).distinct().collect()]
        if not buckets:
            batch.unpersist()
            return None
        starts = covering_ranges([window_start_range(int(b), size, slide) for b in buckets])
        read = source.where(_any([(F.col(column) >= _at(low)) & (F.col(column) < _at(high + size))
                                  for low, high in starts]))
        start = F.col(self.start_column)
        wanted = _any([(start >= _at(low)) & (start <= _at(high)) for low, high in starts])
        # The windows the batch's rows fall in, per group: only those change (the input only
        # grows, so each of them keeps a row, and no other window's row changes).
        at = _micros(column)
        first = (F.floor((at - F.lit(size)) / F.lit(slide)) + 1) * F.lit(slide)
        last = F.floor(at / F.lit(slide)) * F.lit(slide)
        touched = (batch.select(*groups, F.explode(F.sequence(first, last, F.lit(slide))).alias(_LO))
                   .distinct()
                   .select(*groups, F.timestamp_micros(_LO).alias(self.start_column))
                   .persist())
        keys = [*groups, self.start_column]
        rows = (self.transform(read).where(wanted).alias("r")
                .join(touched.alias("k"), _same("r", "k", keys), "left_semi"))
        held = (read_table(session, self.table_path).where(wanted).alias("t")
                .join(touched.alias("k"), _same("t", "k", keys), "left_semi")
                .select(*self.keys))
        return Recomputed(rows, held, _instant(starts[0][0]), _instant(starts[-1][1]),
                          cached=(batch, touched))

    def _sessions(self, session: SparkSession, source: DataFrame, batch: DataFrame
                  ) -> Recomputed | None:
        groups, gap, column = list(self.gold.group_by), self.gap, self.window.column
        start_col, end_col = self.window.bounds
        new = (batch.select(*groups, _micros(column).alias(_LO)).distinct()
               .select(*groups, _LO, (F.col(_LO) + F.lit(gap)).alias(_HI), F.lit(1).alias(_NEW))
               .persist())
        # Bounded by gap-long buckets: a batch of millions of rows gives the driver a few values.
        reach = _bucketed(new, gap)
        if not reach:
            new.unpersist()
            return None
        ranges = covering_ranges(reach)
        touched = new.select(*groups).distinct().alias("g")
        table = read_table(session, self.table_path)
        near = _any([(F.col(end_col) >= _at(low)) & (F.col(start_col) <= _at(high))
                     for low, high in ranges])
        held = (table.where(near).alias("t")
                .join(F.broadcast(touched), _same("t", "g", groups), "left_semi")
                .select(*groups, _micros(start_col).alias(_LO), _micros(end_col).alias(_HI),
                        F.lit(0).alias(_NEW))
                .localCheckpoint(eager=True))
        # The table's sessions are read once, before the batch's MERGE changes them, and kept
        # apart from the table: a frame cached from a read of it is planned again after each
        # write to it.
        spans = _merged_spans(new.unionByName(held), groups).persist()
        found = _bucketed(spans, gap)
        span_ranges = covering_ranges(found)
        read = source.where(_any([(F.col(column) >= _at(low)) & (F.col(column) < _at(high))
                                  for low, high in span_ranges])).alias("s")
        inside = read.join(F.broadcast(spans.alias("p")), _same("s", "p", groups)
                           & (_micros(f"s.{column}") >= F.col(f"p.{_LO}"))
                           & (_micros(f"s.{column}") < F.col(f"p.{_HI}")), "left_semi")
        replaced = (held.alias("h")
                    .join(F.broadcast(spans.alias("p")), _same("h", "p", groups)
                          & (F.col(f"h.{_LO}") >= F.col(f"p.{_LO}"))
                          & (F.col(f"h.{_HI}") <= F.col(f"p.{_HI}")), "left_semi")
                    .select(F.timestamp_micros(_LO).alias(start_col),
                            F.timestamp_micros(_HI).alias(end_col), *groups))
        low, high = min(lo for lo, _ in found), max(hi for _, hi in found)
        return Recomputed(self.transform(inside), replaced.select(*self.keys),
                          _instant(low), _instant(high),
                          cached=(new, held, spans))


def _bucketed(intervals: DataFrame, width: int) -> list[tuple[int, int]]:
    """The ``[_LO, _HI)`` intervals widened to multiples of ``width``, distinct, as inclusive
    ranges."""
    low = F.floor(F.col(_LO) / F.lit(width)) * F.lit(width)
    high = F.ceil(F.col(_HI) / F.lit(width)) * F.lit(width)
    return [(int(r[0]), int(r[1])) for r in intervals.select(low, high).distinct().collect()]


def _merged_spans(intervals: DataFrame, groups: Sequence[str]) -> DataFrame:
    """Per group, the intervals merged where they overlap or touch; the merged spans that hold a
    new interval (``_NEW`` 1)."""
    order = Window.partitionBy(*groups).orderBy(_LO, _HI)
    reach = F.max(_HI).over(order.rowsBetween(Window.unboundedPreceding, -1))
    island = F.sum(F.when(reach.isNull() | (F.col(_LO) > reach), 1).otherwise(0)).over(
        order.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (intervals.withColumn("__island", island)
            .groupBy(*groups, "__island")
            .agg(F.min(_LO).alias(_LO), F.max(_HI).alias(_HI), F.max(_NEW).alias(_NEW))
            .where(F.col(_NEW) == 1).drop("__island", _NEW))
