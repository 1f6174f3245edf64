"""Gold tables compiled from their declaration: ``GoldSpec`` -> ``DataFrame -> DataFrame``.

The same transform runs on a stream (the gold job) and on a static frame (tests, backfill's
recomputation). For a declared aggregate it is: the watermark on the window's column, the
``filter``, a group per window (tumbling or sliding ``window``, ``session_window``) and grouping
columns, the aggregates, then the columns in the order and with the types that
:meth:`~medallion.pipeline.spec.PipelineSpec.gold_fields` derives (the table's schema). Window
bounds follow Spark's: a window is ``[start, end)``, a session ends at its last event plus the gap.

Aggregates, as Spark computes them in a streaming aggregation:

* ``count``: rows (no column) or non-null values of the column;
* ``sum``, ``min``, ``max``, ``avg``: nulls ignored; ``default`` replaces a null result (no value);
  the result is cast to the derived type (``sum`` of ``DECIMAL(p,s)`` is ``DECIMAL(p+10,s)``);
* ``count_distinct``: exact, as the size of the set of non-null values (Spark refuses distinct
  aggregates on streams, a set is allowed): the state holds each window's distinct values;
* ``approx_count_distinct``: HyperLogLog++, a fixed-size state per window.

A join (``join:``) is given two inputs, each filtered, joined on equal keys and ``right``'s time
in ``[left's - within, left's]`` (both ends included), inner or left outer, then the ``select``
expressions cast to the table's types. The gold job gives it the rows of the two Delta tables that
a batch can still match (:mod:`medallion.engine.gold.joinbatch`); with ``markers`` it also returns the
left row's time and whether a right row matched, which decide the rows the batch writes. Of the
rows one key gets (several matches), the writer keeps the one greatest by ``latest_by``:
:func:`latest_per_key` in a batch, the MERGE across batches.

A join's equal keys also carry a time bucket (``__join_bucket``, :func:`_time_buckets`), which
changes no result: a batch holding hours of a key's rows (a first run, a catch-up) would compare
each with all the others. Left rows are put in the bucket of their time (``4 × within`` wide); a
right row in the bucket of its time and, when its time plus ``within`` reaches the next bucket,
in that one too (a quarter of them), so the pair of every match shares exactly one bucket and
meets once. Only right rows are doubled: they are never emitted unmatched.

A Python step (``python: module:function``) is given the input, with the watermark on its event
time and after ``filter``, and returns the declared ``columns``; they are selected in order and
cast to their declared types, so the table's schema holds whatever the function returns.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.config.durations import parse_duration_seconds
from medallion.pipeline.kinds import AggregateFunction, WindowKind
from medallion.pipeline.model import AggregateSpec, Field, GoldSpec, WindowSpec
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.steps import find_step

Transform = Callable[[DataFrame], DataFrame]
JoinTransform = Callable[[DataFrame, DataFrame], DataFrame]

_WINDOW = "__window"  # the window struct's column between the grouping and the final select


def gold_fields(pipeline: PipelineSpec, gold: GoldSpec) -> tuple[Field, ...]:
    """The gold table's columns, as the declaration derives them."""
    return pipeline.table(gold.key).fields


def _window_column(window: WindowSpec) -> Column:
    if window.kind is WindowKind.SESSION:
        assert window.gap is not None
        return F.session_window(window.column, window.gap)
    assert window.size is not None
    if window.kind is WindowKind.SLIDING:
        assert window.slide is not None
        return F.window(window.column, window.size, window.slide)
    return F.window(window.column, window.size)


def _aggregate(aggregate: AggregateSpec, result: Field) -> Column:
    """The aggregate's column, typed as the table declares it."""
    function, column = aggregate.function, aggregate.column
    if function is AggregateFunction.COUNT:
        value = F.count(F.lit(1)) if column is None else F.count(column)
    elif function is AggregateFunction.COUNT_DISTINCT:
        assert column is not None
        value = F.size(F.collect_set(column))  # collect_set drops nulls, as COUNT(DISTINCT) does
    elif function is AggregateFunction.APPROX_COUNT_DISTINCT:
        assert column is not None
        value = F.approx_count_distinct(column)
    else:
        assert column is not None
        value = {AggregateFunction.SUM: F.sum, AggregateFunction.MIN: F.min,
                 AggregateFunction.MAX: F.max, AggregateFunction.AVG: F.avg}[function](column)
    if aggregate.default is not None:
        value = F.coalesce(value, F.lit(aggregate.default).cast(str(result.type)))
    return value.cast(str(result.type)).alias(aggregate.name)


def _event_time(pipeline: PipelineSpec, gold: GoldSpec) -> str | None:
    return _event_time_of(pipeline, gold.input)


def _event_time_of(pipeline: PipelineSpec, table: str) -> str | None:
    silver = next((s for s in pipeline.silver if s.key == table), None)
    return silver.event_time if silver is not None else None


_BUCKET = "__join_bucket"  # the time bucket a join's rows carry as one more equal key
_BUCKETS_PER_WITHIN = 4  # a bucket is this many ``within`` wide (1 / this of right rows doubled)


def _time_buckets(within_seconds: int, left_time: str, right_time: str
                  ) -> tuple[Column, Column]:
    """The bucket of a left row, and the buckets (exploded) a right row goes to.

    A right row at ``r`` matches left rows at ``l`` in ``[r, r + within]``: the buckets of ``r``
    and of ``r + within``, equal or adjacent, since a bucket is at least ``within`` wide.
    """
    width = max(within_seconds, 1) * _BUCKETS_PER_WITHIN * 1_000_000  # microseconds

    def bucket(micros: Column) -> Column:
        return F.floor(micros / F.lit(width))

    left = bucket(F.unix_micros(F.col(left_time)))
    right = bucket(F.unix_micros(F.col(right_time)))
    reach = bucket(F.unix_micros(F.col(right_time)) + F.lit(within_seconds * 1_000_000))
    return left, F.explode(F.when(reach > right, F.array(right, right + 1))
                           .otherwise(F.array(right)))


JOIN_LEFT_TIME = "__join_left_time"  # with markers: the left row's event time
JOIN_MATCHED = "__join_matched"  # with markers: whether a right row matched the left one


def join_event_times(pipeline: PipelineSpec, gold: GoldSpec) -> tuple[str, str]:
    """The event-time columns of a join's left and right inputs."""
    join = gold.join
    assert join is not None, f"{gold.key} declares no join"
    left_time, right_time = _event_time_of(pipeline, gold.input), _event_time_of(pipeline, join.input)
    assert left_time and right_time, f"{gold.key}: both inputs have an event time (validated)"
    return left_time, right_time


def compile_join(pipeline: PipelineSpec, gold: GoldSpec, *, time_buckets: bool = True,
                 markers: bool = False) -> JoinTransform:
    """The transform that joins ``gold``'s input (left) with its join's input (right).

    ``time_buckets`` False: the equal keys alone (the buckets change no result; a test shows it).
    ``markers``: also :data:`JOIN_LEFT_TIME` and :data:`JOIN_MATCHED`, after the declared columns.
    """
    join = gold.join
    assert join is not None, f"{gold.key} declares no join"
    left_time, right_time = join_event_times(pipeline, gold)
    fields = gold_fields(pipeline, gold)
    types = {f.name: str(f.type) for f in fields}
    within = parse_duration_seconds(join.within, f"{gold.key}.join.within", "the declaration")
    equal = (*join.equal, _BUCKET) if time_buckets else join.equal

    def joined(left: DataFrame, right: DataFrame) -> DataFrame:
        if gold.filter is not None:
            left = left.where(F.expr(gold.filter))
        if join.filter is not None:
            right = right.where(F.expr(join.filter))
        if time_buckets:
            left_bucket, right_buckets = _time_buckets(within, left_time, right_time)
            left, right = left.withColumn(_BUCKET, left_bucket), right.withColumn(_BUCKET, right_buckets)
        left, right = left.alias("left"), right.alias("right")
        condition = F.expr(
            " AND ".join([*(f"left.{c} = right.{c}" for c in equal),
                          f"right.{right_time} >= left.{left_time} - INTERVAL {join.within}",
                          f"right.{right_time} <= left.{left_time}"]))
        rows = left.join(right, condition, join.kind.value)
        marked = ([F.col(f"left.{left_time}").alias(JOIN_LEFT_TIME),
                   F.col(f"right.{right_time}").isNotNull().alias(JOIN_MATCHED)] if markers else [])
        return rows.select(*(F.expr(s.expr).cast(types[s.name]).alias(s.name)
                             for s in gold.select), *marked)

    return joined


def latest_per_key(rows: DataFrame, keys: tuple[str, ...], latest_by: tuple[str, ...]) -> DataFrame:
    """One row per ``keys``: the greatest by ``latest_by`` (nulls lowest); all rows when either
    is empty."""
    if not keys or not latest_by:
        return rows
    order = Window.partitionBy(*keys).orderBy(*(F.col(c).desc_nulls_last() for c in latest_by))
    return (rows.withColumn("__rank", F.row_number().over(order))
            .where(F.col("__rank") == 1).drop("__rank"))


def compile_gold(pipeline: PipelineSpec, gold: GoldSpec) -> Transform:
    """The transform that computes ``gold`` from its input table (a stream or a static frame)."""
    watermark = pipeline.watermark_of(gold)
    fields = gold_fields(pipeline, gold)
    if gold.python is not None:
        return _python_transform(gold, fields, _event_time(pipeline, gold), watermark)
    window = gold.window
    assert window is not None, f"{gold.key}: a declared aggregate has a window (validated)"
    by_name = {f.name: f for f in fields}
    start, end = window.bounds

    def aggregate(rows: DataFrame) -> DataFrame:
        watermarked = rows.withWatermark(window.column, watermark)
        if gold.filter is not None:
            watermarked = watermarked.where(F.expr(gold.filter))
        grouped = watermarked.groupBy(_window_column(window).alias(_WINDOW), *gold.group_by)
        aggregated = grouped.agg(*(_aggregate(a, by_name[a.name]) for a in gold.aggregates))
        columns = {start: F.col(f"{_WINDOW}.start"), end: F.col(f"{_WINDOW}.end")}
        return aggregated.select(*(columns[f.name].alias(f.name) if f.name in columns else F.col(f.name)
                                   for f in fields))

    return aggregate


def _python_transform(gold: GoldSpec, fields: tuple[Field, ...], event_time: str | None,
                      watermark: str) -> Transform:
    assert gold.python is not None
    step = find_step(gold.python)  # validation found it before Spark started

    def transform(rows: DataFrame) -> DataFrame:
        if event_time is not None:
            rows = rows.withWatermark(event_time, watermark)
        if gold.filter is not None:
            rows = rows.where(F.expr(gold.filter))
        result = step(rows)
        missing = [f.name for f in fields if f.name not in result.columns]
        if missing:
            raise ValueError(f"{gold.key}: the Python step {gold.python} returned no column "
                             f"{', '.join(missing)} (it returned {', '.join(result.columns)})")
        return result.select(*(F.col(f.name).cast(str(f.type)).alias(f.name) for f in fields))

    return transform
