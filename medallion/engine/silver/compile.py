"""A declared silver table compiled into pure transformations: parse, type, check, deduplicate, enrich.

:func:`compile_silver` turns a :class:`~medallion.pipeline.model.SilverSpec` into a
:class:`SilverTransforms`, every step a ``DataFrame -> DataFrame`` function that the silver job
(:mod:`medallion.engine.silver.job`) applies to each micro-batch. Nothing here reads or writes a table.

Parsing and typing are :mod:`medallion.engine.silver.parse`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from medallion.engine.silver.changes import ChangeShape, distinct_changes
from medallion.engine.silver.parse import REASONS, RECORD, Transform, blank, parse_record, record_fields
from medallion.pipeline.kinds import (
    DedupScope,
)
from medallion.pipeline.model import (
    DELETED,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    DimensionSpec,
    EnrichmentSpec,
    SilverSpec,
)
from medallion.pipeline.spec import PipelineSpec, TableDecl
from medallion.pipeline.steps import find_step


@dataclass(frozen=True)
class BatchTimes:
    """Where a batch's valid rows lie in event time, for the dedup scopes that bound the lookup.

    ``days``: the UTC days they are on, as ``[start, end)`` ranges, contiguous days merged;
    ``earliest``: the oldest event time; ``nulls``: some rows have no event time. Times are
    microseconds since the epoch, as Spark keeps them: Python's ``datetime`` stops at years 1 and
    9999, and a batch with an event on 9999-12-31 (its day ends in year 10000) or on 0001-01-01
    would otherwise fail every time it ran.
    """

    days: tuple[tuple[int, int], ...]
    earliest: int | None
    nulls: bool


@dataclass(frozen=True)
class BatchCounts:
    """A parsed batch's rows, its quarantined rows, and where its valid rows lie in event time
    (``reach``, when asked for)."""

    rows_in: int
    quarantined: int
    reach: BatchTimes | None


def _times_columns(time: Column, valid: Column) -> list[Column]:
    """Aggregates over a batch giving the :class:`BatchTimes` of its ``valid`` rows."""
    day = F.date_trunc("day", time)
    spans = F.struct(F.unix_micros(day).alias("day"),
                     F.unix_micros(day + F.expr("INTERVAL 1 DAY")).alias("end"))
    return [F.array_sort(F.collect_set(F.when(valid & time.isNotNull(), spans))).alias("_days"),
            F.unix_micros(F.min(F.when(valid, time))).alias("_earliest"),
            F.count_if(valid & time.isNull()).alias("_nulls")]


def _times_of(found: Row) -> BatchTimes:
    days: list[tuple[int, int]] = []
    for start, end in found["_days"]:  # in order; contiguous days merged
        if days and days[-1][1] == start:
            days[-1] = (days[-1][0], end)
        else:
            days.append((start, end))
    return BatchTimes(tuple(days), found["_earliest"], found["_nulls"] > 0)


def batch_counts(parsed: DataFrame, event_time: str | None) -> BatchCounts:
    """The :class:`BatchCounts` of a parsed batch, in one pass over it (one Spark job); its
    reach only with ``event_time``."""
    valid = F.size(REASONS) == 0
    found = parsed.agg(
        F.count(F.lit(1)).alias("rows_in"), F.count_if(~valid).alias("quarantined"),
        *(_times_columns(F.col(event_time), valid) if event_time else ())).first()
    assert found is not None  # a global aggregate has one row
    return BatchCounts(int(found["rows_in"]), int(found["quarantined"]),
                       _times_of(found) if event_time else None)


@dataclass(frozen=True)
class SilverTransforms:
    """The steps of one silver table, in the order the job applies them to a micro-batch.

    ``parse``: typed columns, kept columns, ``reasons`` (empty: valid) and the raw record.
    ``valid`` / ``quarantined``: the rows that passed, as the table's columns / the rows that
    failed, as the quarantine's. ``deduplicate``: one row per key in the batch. ``enrich(dims)``:
    the dimensions' columns joined on (``dims`` maps a dimension to its latest rows).
    ``finish``: the Python step, if any, and the table's column order.
    """

    silver: SilverSpec
    table: TableDecl
    quarantine: TableDecl
    record: tuple[str, ...]  # the input columns a quarantine row keeps as they arrived
    watermark: str  # how far back a key is compared with, for dedup scope watermark
    parse: Transform
    valid: Transform
    quarantined: Transform
    deduplicate: Transform
    finish: Transform
    enrich: Callable[[Mapping[str, DataFrame]], Transform]
    changes: ChangeShape | None = None  # a change flow's: its finished rows are changes

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The deduplication key."""
        return self.silver.dedup.key

    def remove_known(self, known: DataFrame) -> Transform:
        """Drop the rows whose key is among ``known``'s (rows silver holds already)."""
        keys = self.key_columns

        def transform(rows: DataFrame) -> DataFrame:
            others = known.select(*[F.col(k).alias(f"_known_{k}") for k in keys])
            condition = None
            for k in keys:
                equal = rows[k].eqNullSafe(others[f"_known_{k}"])
                condition = equal if condition is None else condition & equal
            return rows.join(others, on=condition, how="left_anti")

        return transform

    @property
    def bounded_lookup(self) -> bool:
        """The dedup scope compares keys with part of the table only, chosen by the batch's
        event times (:func:`batch_counts`)."""
        return self.silver.dedup.scope is not DedupScope.TABLE and self.silver.event_time is not None

    def known_rows(self, table: DataFrame, reach: BatchTimes | None) -> DataFrame:
        """What a batch's keys are compared with, by the dedup scope: the whole table (``table``);
        the rows whose event time is at most the watermark before the batch's earliest
        (``watermark``); the rows whose event time is on a date of the batch's rows
        (``event_date``), as literal ranges that let Delta skip every file of other dates."""
        keys = table.select(*self.key_columns)
        time = self.silver.event_time
        if not self.bounded_lookup or time is None:
            return keys
        within: Column | None = None
        if reach is not None and self.silver.dedup.scope is DedupScope.WATERMARK:
            if reach.earliest is not None:
                within = (F.col(time) >= F.timestamp_micros(F.lit(reach.earliest))
                          - F.expr(f"INTERVAL {self.watermark}"))
        elif reach is not None:
            for start, end in reach.days:
                day = ((F.col(time) >= F.timestamp_micros(F.lit(start)))
                       & (F.col(time) < F.timestamp_micros(F.lit(end))))
                within = day if within is None else within | day
            if reach.nulls:
                within = F.col(time).isNull() if within is None else within | F.col(time).isNull()
        # The filter goes on the table before the key columns are taken, so Delta prunes files.
        return keys.limit(0) if within is None else table.where(within).select(*self.key_columns)

    def rejected_to_quarantine(self, parsed: DataFrame) -> Transform:
        """Valid rows a quality gate rejected (table columns plus ``reasons``), as quarantine rows.

        The raw record comes back from ``parsed`` (the batch as parsed), matched on the key and
        the kept columns, so the quarantine keeps what arrived, not a re-serialised copy.
        """
        match = [*dict.fromkeys((*self.key_columns, *self.silver.keep))]

        def transform(rejected: DataFrame) -> DataFrame:
            records = (parsed.where(F.size(REASONS) == 0)
                       .select(*[F.col(c).alias(f"_m_{c}") for c in match], RECORD)
                       .dropDuplicates([f"_m_{c}" for c in match]))
            condition = None
            for c in match:
                equal = rejected[c].eqNullSafe(records[f"_m_{c}"])
                condition = equal if condition is None else condition & equal
            joined = rejected.join(records, on=condition, how="left")
            return joined.transform(_quarantine_shape(self.quarantine, self.record))

        return transform


def _quarantine_shape(quarantine: TableDecl, record: tuple[str, ...]) -> Transform:
    """Rows with the record struct, the table's columns and ``reasons``, as quarantine rows: the
    record's fields as they arrived, then the key as far as it was read, reasons, kept columns."""

    texts = {f.name for f in quarantine.fields if f.type.is_string}

    def field(name: str) -> Column:
        value = F.col(f"`{RECORD}`.`{name}`")
        # Parquet's strings are UTF-8: bytes that are not (kept as they arrived in bronze) become
        # U+FFFD here, so that every reader of the quarantine can read it.
        return (F.make_valid_utf8(value) if name in texts else value).alias(name)

    def transform(rows: DataFrame) -> DataFrame:
        return rows.select(*[field(name) if name in record else F.col(name)
                             for name in quarantine.column_names])

    return transform


def _valid(silver: SilverSpec) -> Transform:
    own = [*(c.name for c in silver.columns), *silver.keep]

    def transform(parsed: DataFrame) -> DataFrame:
        return parsed.where(F.size(REASONS) == 0).select(*own)

    return transform


def _quarantined(quarantine: TableDecl, record: tuple[str, ...]) -> Transform:
    shape = _quarantine_shape(quarantine, record)

    def transform(parsed: DataFrame) -> DataFrame:
        return parsed.where(F.size(REASONS) > 0).transform(shape)

    return transform


def _deduplicate(silver: SilverSpec) -> Transform:
    """One row per key: the first by ``order_by`` (then by every column, so a replay keeps the
    same row whatever order Spark reads the batch in)."""
    dedup = silver.dedup

    def transform(rows: DataFrame) -> DataFrame:
        tie_break = [F.col(c).asc_nulls_last() for c in rows.columns
                     if c not in dedup.key and c not in dedup.order_by
                     and _orderable(rows, c)]
        first = Window.partitionBy(*dedup.key).orderBy(*dedup.order_by, *tie_break)
        return (rows.withColumn("_delivery", F.row_number().over(first))
                .where(F.col("_delivery") == 1).drop("_delivery"))

    return transform


def _orderable(rows: DataFrame, column: str) -> bool:
    kind = rows.schema[column].dataType.typeName()
    return kind not in ("map", "variant", "array", "struct")


def latest_rows(dimension: DimensionSpec) -> Transform:
    """A dimension from its source's bronze rows: the latest row of each key.

    Rows failing ``where`` or with a null or blank key are left out; keys are trimmed when the
    dimension says so, so that ids differing only by spaces are one. The first row by
    ``latest_by`` (each descending) wins; among rows equal on those, the dimension's columns
    decide (descending, nulls last), so that a replay picks the same row whatever the order.
    """

    def transform(bronze: DataFrame) -> DataFrame:
        rows = bronze.where(F.expr(dimension.where)) if dimension.where else bronze
        for key in dimension.key:
            if dimension.trim:
                rows = rows.withColumn(key, F.trim(key))
            rows = rows.where(F.col(key).isNotNull() & ~blank(F.col(key)))
        latest = Window.partitionBy(*dimension.key).orderBy(
            *[F.col(c).desc() for c in dimension.latest_by],
            *[F.col(c).desc_nulls_last() for c in dimension.columns])
        return (rows.withColumn("_rank", F.row_number().over(latest))
                .where(F.col("_rank") == 1)
                .select(*dimension.key, *dimension.columns))

    return transform


def _keeps_history(pipeline: PipelineSpec, enrichment: EnrichmentSpec) -> bool:
    """Whether an enrichment's dimension is a table of versions (a change flow's, SCD type 2)."""
    table = pipeline.dimension(enrichment.dimension).table
    kept = next((s for s in pipeline.silver if s.key == table), None)
    return kept is not None and kept.changes is not None and kept.changes.scd == 2


def _enrich(pipeline: PipelineSpec, silver: SilverSpec,
            table: TableDecl) -> Callable[[Mapping[str, DataFrame]], Transform]:
    def with_dimensions(dimensions: Mapping[str, DataFrame]) -> Transform:
        def transform(rows: DataFrame) -> DataFrame:
            for number, enrichment in enumerate(silver.enrichments):
                prefix = f"_dim{number}_"
                dimension = dimensions[enrichment.dimension]
                history = _keeps_history(pipeline, enrichment)
                if history and enrichment.as_of is None:
                    dimension = dimension.where(F.col(IS_CURRENT))
                lookup = dimension.select(*[F.col(c).alias(prefix + c) for c in dimension.columns])
                condition = None
                for column, key in enrichment.join:
                    equal = rows[column] == lookup[prefix + key]
                    condition = equal if condition is None else condition & equal
                if history and enrichment.as_of is not None:
                    # the version valid at the row's time: from its start until the next one's
                    at = rows[enrichment.as_of]
                    assert condition is not None  # a dimension has a key
                    condition = (condition & (lookup[prefix + VALID_FROM] <= at)
                                 & (lookup[prefix + VALID_TO].isNull() | (at < lookup[prefix + VALID_TO])))
                joined = rows.join(lookup, on=condition, how="left")
                added = []
                for name in enrichment.columns:
                    value = F.col(prefix + enrichment.source_of(name))
                    if name in enrichment.defaults:
                        kind = table.column_type(name)
                        default = F.lit(enrichment.defaults[name])
                        value = F.coalesce(value, default.cast(str(kind)) if kind else default)
                    added.append(value.alias(name))
                rows = joined.select(*rows.columns, *added)
            return rows

        return transform

    return with_dimensions


def change_shape(silver: SilverSpec, table: TableDecl) -> ChangeShape:
    """Where a change flow's changes keep their keys, sequence, delete flag and values (of a
    table's columns, the kept input columns are carried along but do not make a change differ)."""
    changes = silver.changes
    assert changes is not None
    own = {*changes.keys, *changes.sequence_by, DELETED, *silver.keep}
    values = tuple(c for c in table.column_names if c not in own and c not in _HISTORY)
    tracked = changes.track_history
    if changes.track_history_except:
        tracked = tuple(c for c in values if c not in changes.track_history_except)
    return ChangeShape(keys=changes.keys, sequence=changes.sequence_by, delete=DELETED,
                       values=values, tracked=tracked, carried=silver.keep)


_HISTORY = (VALID_FROM, VALID_TO, IS_CURRENT)


def _marked(silver: SilverSpec, shape: ChangeShape) -> Transform:
    """Valid change rows with their delete flag, one per key and sequence (re-deliveries in the
    batch count once, the same one whatever order they came in)."""
    assert silver.changes is not None
    deletes = F.expr(silver.changes.delete_when) if silver.changes.delete_when else F.lit(False)

    def transform(rows: DataFrame) -> DataFrame:
        # Before enrichment: ranked by the values the change itself carries.
        own = replace(shape, values=tuple(c for c in shape.values if c in rows.columns))
        return distinct_changes(rows.withColumn(DELETED, deletes.cast("boolean")), own)

    return transform


def _finish(silver: SilverSpec, table: TableDecl) -> Transform:
    step = find_step(silver.python) if silver.python else None

    def transform(rows: DataFrame) -> DataFrame:
        if step is not None:
            rows = step(rows)
        return rows.select(*table.column_names)

    return transform


def compile_silver(pipeline: PipelineSpec, silver: SilverSpec,
                   input_table: TableDecl | None = None) -> SilverTransforms:
    """The transformations of a declared silver table.

    ``input_table``: the bronze table actually read (an alternative source's, e.g. Kafka instead
    of files); the declared input by default.
    """
    table = pipeline.table(silver.key)
    quarantine = pipeline.table(silver.quarantine_key)
    source = input_table or pipeline.table(silver.input)
    record = record_fields(silver, source)
    shape = change_shape(silver, table) if silver.changes is not None else None
    return SilverTransforms(
        silver=silver, table=table, quarantine=quarantine, record=record,
        watermark=silver.watermark or pipeline.watermark,
        parse=parse_record(silver, source),
        valid=_valid(silver),
        quarantined=_quarantined(quarantine, record),
        deduplicate=_deduplicate(silver) if shape is None else _marked(silver, shape),
        # A change flow's rows go to its applied changes first: the table is made from those.
        finish=_finish(silver, table if shape is None else pipeline.table(silver.changes_key)),
        enrich=_enrich(pipeline, silver, table),
        changes=shape,
    )
