"""A declared join's batches, computed from its two inputs' Delta tables: no join state.

Spark's stream-stream join keeps every row of both sides in its state store until the watermark
lets it go, so a first run or a catch-up first writes hours of rows there, then removes them in a
batch without data. Here the query streams only what moves the join's watermark (each side's
event time, after its filter), and each batch reads the rows it can still match from the tables
themselves, as of the versions the batch's offsets name, so a replayed batch reads what its first
attempt read:

* the open left rows: those after the watermark the batch starts with (a left row at or behind
  it when it arrives is dropped, and counted as late);
* the right rows they can match: after that watermark less ``within``, however late they came;
* joined by the declared transform (:func:`~medallion.engine.gold.compile.compile_join`); a left row with
  a match is written with it (the MERGE keeps the latest match per key), one without a match
  with nulls once the watermark after this batch has passed it (left outer joins only).

The watermark is the join's own clock, kept beside the checkpoint (``join_clock/<batch>``): the
newest event time seen on each side, and the lesser of the two less the pipeline's watermark
delay, never moving back. Batch ``N`` starts from the clock batch ``N - 1`` left (a checkpoint
that a join of the earlier engine wrote starts from the watermark of its offsets) and writes its
own before the table's write; a replay rewrites it with the same values.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config.durations import parse_duration_seconds
from medallion.engine.gold.compile import (
    JOIN_LEFT_TIME,
    JOIN_MATCHED,
    compile_join,
    join_event_times,
)
from medallion.io.checkpoints import read_log_file
from medallion.io.hadoopfs import delete_path, path_exists, read_text, rename_path, write_text
from medallion.io.sources.delta import read_table, version_read
from medallion.pipeline.kinds import JoinKind
from medallion.pipeline.model import GoldSpec
from medallion.pipeline.spec import PipelineSpec

log = logging.getLogger(__name__)

TIME = "__join_time"  # the streamed rows: an event time
SIDE = "__join_side"  # and its side: 0 left, 1 right
LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class JoinClock:
    """The newest event time seen on each side and the watermark, in epoch milliseconds (None:
    no row yet, no watermark yet)."""

    left: int | None = None
    right: int | None = None
    watermark: int | None = None

    def advanced(self, left: int | None, right: int | None, delay_ms: int) -> JoinClock:
        """The clock after a batch whose newest times per side are ``left`` and ``right``."""
        newest_left, newest_right = _greater(self.left, left), _greater(self.right, right)
        moved = (None if newest_left is None or newest_right is None
                 else min(newest_left, newest_right) - delay_ms)
        return JoinClock(newest_left, newest_right, _greater(self.watermark, moved))

    def to_json(self) -> str:
        return json.dumps({"left": self.left, "right": self.right, "watermark": self.watermark})

    @staticmethod
    def from_json(text: str) -> JoinClock:
        values = json.loads(text)
        if not isinstance(values, dict):
            raise ValueError(f"not a join clock: {text[:80]!r}")
        return JoinClock(*(_millis(values.get(name)) for name in ("left", "right", "watermark")))


def _greater(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _millis(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"not a time in milliseconds: {value!r}")
    return value


def clock_file(checkpoint: str, batch: int) -> str:
    return f"{checkpoint}/join_clock/{batch}"


def clock_before(spark: SparkSession, table: str, checkpoint: str, batch: int,
                 metadata: dict | None) -> JoinClock:
    """The clock batch ``batch`` starts from: the one its previous batch left; without one (the
    first batch, or a checkpoint of the earlier engine's join) the watermark in ``metadata``, the
    first entry of the batch's offsets."""
    previous = clock_file(checkpoint, batch - 1)
    if batch > 0 and path_exists(spark, previous):
        try:
            return JoinClock.from_json(read_text(spark, previous))
        except ValueError as exc:
            log.warning("%s: the join's clock %s cannot be read (%s); batch %d starts from its "
                        "offsets' watermark", table, previous, exc, batch)
    watermark = (metadata or {}).get("batchWatermarkMs")
    return JoinClock(watermark=watermark if isinstance(watermark, int) and watermark > 0 else None)


RETIRED_STATE = "state-of-sparks-join"  # where a checkpoint's join state is put aside


def retire_join_state(spark: SparkSession, table: str, checkpoint: str) -> None:
    """Put aside the state that Spark's stream-stream join (which earlier versions of the engine
    ran) left in the checkpoint: the query no longer keeps one, and Spark refuses to start a query
    without the stateful operators its checkpoint's state describes. Kept beside it, not
    deleted; a move that a kill interrupted is made again."""
    state, retired = f"{checkpoint}/state", f"{checkpoint}/{RETIRED_STATE}"
    if not path_exists(spark, state):
        return
    if path_exists(spark, retired):
        delete_path(spark, retired)  # an earlier move's copy, interrupted (object stores copy)
    if not rename_path(spark, state, retired):
        raise OSError(f"{table}: could not move {state} to {retired}")
    log.info("%s: the state of Spark's stream-stream join in %s is no longer used; kept in %s",
             table, checkpoint, retired)


def _at(millis: int) -> F.Column:
    return F.timestamp_millis(F.lit(millis))


@dataclass
class JoinBatches:
    """Turns a batch of the join's streamed event times into the rows the table is written with
    (the ``compute`` step of the gold writer); counts the left rows dropped as late."""

    spark: SparkSession
    table: str
    checkpoint: str
    paths: tuple[str, str]  # the left and right inputs' tables
    pipeline: PipelineSpec
    gold: GoldSpec
    late_dropped: int = 0

    def __post_init__(self) -> None:
        join = self.gold.join
        assert join is not None, f"{self.gold.key} declares no join"
        self._times = join_event_times(self.pipeline, self.gold)
        self._transform = compile_join(self.pipeline, self.gold, markers=True)
        self._within_ms = 1000 * parse_duration_seconds(join.within, f"{self.gold.key}.join.within",
                                                        "the declaration")
        self._delay_ms = 1000 * parse_duration_seconds(
            self.pipeline.watermark_of(self.gold), f"{self.pipeline.name}.watermark",
            "the declaration")
        self._outer = join.kind is JoinKind.LEFT_OUTER

    def __call__(self, batch: DataFrame, batch_id: int) -> DataFrame:
        # The batch's offsets: its metadata, then each source's end offset (None: ``-``).
        offsets = read_log_file(self.spark, f"{self.checkpoint}/offsets/{batch_id}")
        clock = clock_before(self.spark, self.table, self.checkpoint, batch_id, offsets[0])
        watermark = clock.watermark
        late = F.col(TIME) <= _at(watermark) if watermark is not None else F.lit(False)
        sides = {row[SIDE]: row for row in batch.groupBy(SIDE).agg(
            F.max(F.unix_millis(TIME)).alias("newest"),
            F.count(F.when(late, True)).alias("late")).collect()}
        newest_left, newest_right = ((sides[s]["newest"] if s in sides else None) for s in (LEFT, RIGHT))
        after = clock.advanced(newest_left, newest_right, self._delay_ms)
        write_text(self.spark, clock_file(self.checkpoint, batch_id), after.to_json())
        late_left = sides[LEFT]["late"] if LEFT in sides else 0
        if late_left:
            log.info("%s batch %d: %d left rows at or behind the watermark, dropped",
                     self.table, batch_id, late_left)
        self.late_dropped += late_left

        sources = offsets[1:]
        left_time, right_time = self._times
        # As of the versions the offsets name (version 0, the empty table, when none was read),
        # in the session Spark runs the query's batches in, as the batch's other frames are.
        session = batch.sparkSession
        left = read_table(session, self.paths[0], max(version_read(_source(sources, 0)), 0))
        right = read_table(session, self.paths[1], max(version_read(_source(sources, 1)), 0))
        if watermark is not None:  # what can still match: open left rows, and what they reach
            left = left.where(F.col(left_time) > _at(watermark))
            right = right.where(F.col(right_time) > _at(watermark - self._within_ms))
        rows = self._transform(left, right)
        written = F.col(JOIN_MATCHED)
        if self._outer and after.watermark is not None:
            written = written | (F.col(JOIN_LEFT_TIME) <= _at(after.watermark))
        return rows.where(written).drop(JOIN_LEFT_TIME, JOIN_MATCHED)


def _source(sources: list[dict | None], index: int) -> dict:
    offset = sources[index] if index < len(sources) else None
    if not isinstance(offset, dict):
        raise ValueError(f"source {index} of the join's batch has no offset")
    return offset


def join_stream(pipeline: PipelineSpec, gold: GoldSpec, left: DataFrame,
                right: DataFrame) -> DataFrame:
    """What a join's query streams: each side's event time after its filter, and the side."""
    join = gold.join
    assert join is not None
    left_time, right_time = join_event_times(pipeline, gold)
    if gold.filter is not None:
        left = left.where(F.expr(gold.filter))
    if join.filter is not None:
        right = right.where(F.expr(join.filter))
    return (left.select(F.col(left_time).alias(TIME), F.lit(LEFT).alias(SIDE))
            .unionByName(right.select(F.col(right_time).alias(TIME), F.lit(RIGHT).alias(SIDE))))
