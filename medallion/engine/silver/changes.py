"""Change records into tables: SCD type 1 (the latest row per key) and SCD type 2 (each key's
history as versions), as pure transformations of a set of changes.

A change is a row with the table's key columns, one or more sequence columns (what orders the
changes of one key), a delete flag and the row's values. The table a change flow keeps depends
only on the set of changes it has applied, not on the order they arrived in nor on the batches
they came in: each function here takes every change of some keys and returns those keys' rows.
A batch applies its changes by recomputing the rows of the keys it touches from their changes.

Changes with one key and one sequence (re-deliveries) count once: of several that differ, a
delete before an upsert, then the greatest by the values in the order of the columns' names, a
null below any value; of equal ones, the least by the carried columns (the input's file before
its ingestion time), so that even what a change carries along does not depend on arrival order.

A snapshot flow's rows are full exports instead, the sequence their position: its changes are
what each export changes from the one before it (:func:`snapshot_changes`), and its applied
changes keep, beside them, one row per export with no key (:func:`export_marks`). An export
that arrives after a later one is placed between the two: the changes of the export after it
are made again from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.io.sinks.delta import ranks_above
from medallion.pipeline.kinds import INGESTED_AT
from medallion.pipeline.model import IS_CURRENT, VALID_FROM, VALID_TO

_RANK = "__rank"
_HELD = "__held"
_STARTS = "__starts"
_VERSION = "__version"
_NEXT = "__next"
_LAST = "__last"
_ORDINAL = EXPORT_ORDINAL = "__ordinal"  # export_nodes: an export's rank by position
_BEFORE = "__before"
_AFTER = "__after"
_UNREAD = "__unread"
_IN_BATCH = EXPORT_IN_BATCH = "__in_batch"  # export_nodes: an export of the batch
_MARKED = "__marked"
_TARGET = EXPORT_TARGET = "__target"  # export_nodes: an export whose changes are made again
_AT = "__at"
_NODE = "__node"
_RUN = "__run"
_HOLDS = "__holds"


@dataclass(frozen=True)
class ChangeShape:
    """Where a change row keeps what its flow needs: ``keys`` and ``sequence`` columns, the
    ``delete`` flag's column, the ``values`` the table holds, and with SCD2 the ``tracked``
    values whose change starts a new version (None: every value)."""

    @property
    def rank(self) -> tuple[str, ...]:
        """What orders re-deliveries of one change, the last counting: the delete flag, then the
        values by name (nulls least)."""
        return (self.delete, *sorted(self.values))

    @property
    def order(self) -> tuple[tuple[str, bool], ...]:
        """Which of several deliveries of one change counts (:func:`ranks_above`): the last by
        :attr:`rank`, then of equal ones the first by the carried columns, the ingestion time
        last (it is the one that differs between two runs that read the same input)."""
        settled = sorted(self.carried, key=lambda c: c == INGESTED_AT)
        return (*((c, True) for c in self.rank), *((c, False) for c in settled))

    @property
    def supersedes(self) -> str:
        """SQL: a delivery ``s`` of a change counts instead of the delivery ``t`` held."""
        return ranks_above(self.order)

    keys: tuple[str, ...]
    sequence: tuple[str, ...]
    delete: str
    values: tuple[str, ...]
    tracked: tuple[str, ...] | None = None
    carried: tuple[str, ...] = ()  # along with the values, but a change that differs only here does not

    def __post_init__(self) -> None:
        named = (*self.keys, *self.sequence, self.delete)
        if len(set(named)) != len(named):
            raise ValueError(f"keys, sequence and delete flag overlap: {named}")
        if self.tracked is not None and not set(self.tracked) <= set(self.values):
            raise ValueError(f"tracked columns {self.tracked} are not among the values {self.values}")

    @property
    def position(self) -> Column:
        """The sequence as one comparable value: the column itself, or a struct of several."""
        if len(self.sequence) == 1:
            return F.col(self.sequence[0])
        return F.struct(*(F.col(c) for c in self.sequence))


def distinct_changes(changes: DataFrame, shape: ChangeShape) -> DataFrame:
    """One change per key and sequence: of re-deliveries, the first in :attr:`ChangeShape.order`."""
    ranked = [F.col(c).desc_nulls_last() if greatest else F.col(c).asc_nulls_last()
              for c, greatest in shape.order]
    order = Window.partitionBy(*shape.keys, *shape.sequence).orderBy(*ranked)
    return (changes.withColumn(_RANK, F.row_number().over(order))
            .where(F.col(_RANK) == 1).drop(_RANK))


def fresh_changes(changes: DataFrame, applied: DataFrame, shape: ChangeShape) -> DataFrame:
    """Of a batch's ``changes`` (one per key and sequence), those that change what ``applied``
    holds: a key and sequence it has not, or a re-delivery that comes before the one it has in
    :attr:`ChangeShape.order` (as the MERGE into ``applied`` decides with
    :attr:`ChangeShape.supersedes`, :func:`~medallion.io.sinks.delta.upsert_batch`)."""
    identity = (*shape.keys, *shape.sequence)
    ordered = dict.fromkeys(c for c, _ in shape.order)
    held = applied.select(*identity, *ordered, F.lit(True).alias(_HELD)).alias("t")
    same = reduce(lambda a, b: a & b,
                  (F.col(f"s.`{c}`").eqNullSafe(F.col(f"t.`{c}`")) for c in identity))
    return (changes.alias("s").join(held, same, "left")
            .where(F.col(f"t.{_HELD}").isNull() | F.expr(shape.supersedes))
            .select("s.*"))


def superseded_changes(applied: DataFrame, shape: ChangeShape) -> DataFrame:
    """Of a type-1 flow's applied changes (one per key and sequence), the key and sequence of each
    below its key's latest: SCD type 1 needs only the latest (a delete included), which still
    refuses every older change that arrives later."""
    latest = Window.partitionBy(*shape.keys).orderBy(*(F.col(c).desc() for c in shape.sequence))
    return (applied.withColumn(_RANK, F.row_number().over(latest))
            .where(F.col(_RANK) > 1).select(*shape.keys, *shape.sequence))


def expired_deletes(applied: DataFrame, shape: ChangeShape, before: datetime) -> DataFrame:
    """Of a type-1 flow's applied changes, the key and sequence of each key's latest change when
    it is a delete ingested before ``before``: kept, it refuses every older change of the key
    that arrives later; forgotten, such a change is applied as the key's first."""
    latest = Window.partitionBy(*shape.keys).orderBy(*(F.col(c).desc() for c in shape.sequence))
    return (applied.withColumn(_RANK, F.row_number().over(latest))
            .where((F.col(_RANK) == 1) & F.col(shape.delete) & (F.col(INGESTED_AT) < F.lit(before)))
            .select(*shape.keys, *shape.sequence))


def scd1_rows(changes: DataFrame, shape: ChangeShape) -> DataFrame:
    """SCD type 1: per key, the values of its change with the highest sequence, unless that
    change deletes the key (then no row). Columns: the keys, the values, the sequence."""
    latest = Window.partitionBy(*shape.keys).orderBy(*(F.col(c).desc() for c in shape.sequence))
    return (distinct_changes(changes, shape)
            .withColumn(_RANK, F.row_number().over(latest))
            .where((F.col(_RANK) == 1) & ~F.col(shape.delete))
            .select(*shape.keys, *shape.values, *shape.sequence, *shape.carried))


def scd2_versions(changes: DataFrame, shape: ChangeShape) -> DataFrame:
    """SCD type 2: each key's history. In sequence order, an upsert starts a version and ends the
    one before it; a delete ends the current version and starts none; with ``tracked`` columns, an
    upsert that changes none of them updates the version it falls in, in place.

    Columns: the keys, the values (the version's last upsert's), ``valid_from``, ``valid_to`` (the
    sequence of the change that ended the version, null while current) and ``is_current``."""
    ordered = Window.partitionBy(*shape.keys).orderBy(*(F.col(c) for c in shape.sequence))
    tracked = shape.tracked if shape.tracked is not None else None
    previous = F.lag(F.struct(F.col(shape.delete).alias(shape.delete),
                              *(F.col(c) for c in (tracked or ())))).over(ordered)
    upsert = ~F.col(shape.delete)
    if tracked is None:
        starts = upsert
    else:
        unchanged = reduce(lambda a, b: a & b,
                           (F.col(c).eqNullSafe(previous[c]) for c in tracked), F.lit(True))
        starts = upsert & (previous.isNull() | previous[shape.delete] | ~unchanged)
    steps = (distinct_changes(changes, shape)
             .withColumn(_NEXT, F.lead(shape.position).over(ordered))
             .withColumn(_STARTS, starts.cast("int"))
             .withColumn(_VERSION, F.sum(_STARTS).over(
                 ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))))
    version = Window.partitionBy(*shape.keys, _VERSION)
    last_upsert = version.orderBy(F.col(shape.delete).asc(), *(F.col(c).desc() for c in shape.sequence))
    return (steps.where(F.col(_VERSION) > 0)
            .withColumn(VALID_FROM, F.min(F.when(F.col(_STARTS) == 1, shape.position)).over(version))
            .withColumn(_LAST, F.row_number().over(last_upsert))
            .where((F.col(_LAST) == 1) & upsert)
            .select(*shape.keys, *shape.values, *shape.sequence, *shape.carried, VALID_FROM,
                    F.col(_NEXT).alias(VALID_TO), F.col(_NEXT).isNull().alias(IS_CURRENT)))


def is_mark(shape: ChangeShape) -> Column:
    """Whether an applied change is a snapshot flow's export mark (it has no key)."""
    return F.col(shape.keys[0]).isNull()


def is_hold(shape: ChangeShape) -> Column:
    """Whether an applied change of a snapshot flow is a refused row's: its key unknown in
    that export (no delete flag), so held as it was in the export before."""
    return F.col(shape.delete).isNull()


def export_nodes(exports: DataFrame, applied: DataFrame, shape: ChangeShape) -> DataFrame:
    """Every export of a snapshot flow, taken before (``applied``'s marks) or in the batch
    (``exports``), and what the batch does with it.

    Columns: the position; the export's carried columns (the least of its rows'); its
    ``__ordinal`` by position; ``__in_batch``; ``__marked`` (taken before); ``__target``: what it
    changes from the export before is made again (the batch's exports, and the export after
    each, whose export before may be another now); ``__node``: its rows are compared (a target,
    or the export before one)."""
    (position,) = shape.sequence
    carried = shape.carried
    batch = (exports.groupBy(position).agg(*(F.min(c).alias(c) for c in carried))
             .withColumn(_IN_BATCH, F.lit(True)))
    marked = (applied.where(is_mark(shape)).select(position, *carried)
              .withColumn(_MARKED, F.lit(True)))
    every = (batch.alias("b").join(marked.alias("m"), position, "full")
             .select(position, *(F.least(F.col(f"b.`{c}`"), F.col(f"m.`{c}`")).alias(c) for c in carried),
                     F.coalesce(F.col(_IN_BATCH), F.lit(False)).alias(_IN_BATCH),
                     F.coalesce(F.col(_MARKED), F.lit(False)).alias(_MARKED)))
    # One row per export ever taken, a small table: each one's rank is how many are not after it.
    ranked = (every.join(every.select(F.col(position).alias(_AT)), F.col(_AT) <= F.col(position))
              .groupBy(*every.columns).agg(F.count(F.lit(1)).cast("int").alias(_ORDINAL)))
    after = ranked.select((F.col(_ORDINAL) + 1).alias(_ORDINAL), F.col(_IN_BATCH).alias(_AFTER))
    before = ranked.select((F.col(_ORDINAL) - 1).alias(_ORDINAL), F.col(_IN_BATCH).alias(_BEFORE))
    return (ranked.join(after, _ORDINAL, "left").join(before, _ORDINAL, "left")
            .withColumn(_TARGET, F.col(_IN_BATCH) | F.coalesce(F.col(_AFTER), F.lit(False)))
            .withColumn(_NODE, F.col(_TARGET) | F.coalesce(F.col(_BEFORE), F.lit(False)))
            .drop(_AFTER, _BEFORE))


def held_on(applied: DataFrame, nodes: DataFrame, shape: ChangeShape) -> DataFrame:
    """The keys (and ``__ordinal``) whose changes are made again beyond the targets of
    ``nodes``: a key held (refused) in an export after one of the batch's holds what the
    batch's export gives it, and so on through each export after that holds it, up to the
    first that does not, whose change of that key is made again too."""
    (position,) = shape.sequence
    holds = (applied.where(~is_mark(shape) & is_hold(shape))
             .join(nodes.select(position, _ORDINAL), position).select(*shape.keys, _ORDINAL))
    # Runs of consecutive exports holding a key: each hold's ordinal less its rank.
    ranked = Window.partitionBy(*shape.keys).orderBy(_ORDINAL)
    runs = holds.withColumn(_RUN, F.col(_ORDINAL) - F.row_number().over(ranked))
    after = nodes.where(F.col(_TARGET) & ~F.col(_IN_BATCH)).select(F.col(_ORDINAL).alias(_AT))
    reached = (runs.join(F.broadcast(after), F.col(_ORDINAL) == F.col(_AT))
               .groupBy(*shape.keys, _RUN).agg(F.min(_AT).alias(_AT)))
    chained = runs.join(reached, [*shape.keys, _RUN])
    beyond = chained.where(F.col(_ORDINAL) > F.col(_AT)).select(*shape.keys, _ORDINAL)
    ends = (chained.groupBy(*shape.keys, _RUN).agg((F.max(_ORDINAL) + 1).alias(_ORDINAL))
            .select(*shape.keys, _ORDINAL))
    # Of a target export, every key's changes are made again already.
    return (beyond.unionByName(ends).join(nodes.where(~F.col(_TARGET)).select(_ORDINAL), _ORDINAL)
            .select(*shape.keys, _ORDINAL).distinct())


def export_contents(exports: DataFrame, applied: DataFrame, nodes: DataFrame, shape: ChangeShape,
                    unread: DataFrame | None = None, beyond: DataFrame | None = None) -> DataFrame:
    """The rows (keys, values, ``__ordinal``, ``__unread``) of each node of ``nodes``, and of
    the keys ``beyond`` names (:func:`held_on`) in their exports: an export taken before holds
    what its applied changes say it held (each key's latest change at or below it, unless a
    delete), the batch's rows replacing those of their keys.

    ``unread``: keys and positions of the batch's rows that were refused (quarantined): such a
    row says nothing of its key's values, so the key stays as it was in the export before. An
    export taken before keeps them as changes with no delete flag (:func:`is_hold`); of an
    export whose changes are made again, they are unread rows again."""
    (position,) = shape.sequence
    ordinals = nodes.select(position, _ORDINAL)
    taken = (nodes.where(F.col(_NODE) & F.col(_MARKED))
             .select(F.col(position).alias(_AT), _ORDINAL, _TARGET))
    changes = applied.where(~is_mark(shape))
    latest = Window.partitionBy(*shape.keys, _ORDINAL).orderBy(F.col(position).desc())
    probed = changes.where(~is_hold(shape)).join(F.broadcast(taken.drop(_TARGET)),
                                                 F.col(position) <= F.col(_AT))
    held_unread = (changes.where(is_hold(shape))
                   .join(F.broadcast(taken.where(_TARGET)), F.col(position) == F.col(_AT))
                   .select(*shape.keys, _ORDINAL))
    if beyond is not None:
        at = beyond.join(nodes.select(F.col(position).alias(_AT), _ORDINAL), _ORDINAL)
        probed = probed.unionByName(
            changes.where(~is_hold(shape)).join(at, list(shape.keys))
            .where(F.col(position) <= F.col(_AT)))
        held_unread = held_unread.unionByName(
            changes.where(is_hold(shape)).join(at, list(shape.keys))
            .where(F.col(position) == F.col(_AT)).select(*shape.keys, _ORDINAL))
    kept = (probed.withColumn(_RANK, F.row_number().over(latest))
            .where((F.col(_RANK) == 1) & ~F.col(shape.delete))
            .select(*shape.keys, *shape.values, _ORDINAL))
    batch = exports.join(ordinals, position).select(*shape.keys, *shape.values, _ORDINAL)
    rows = (kept.join(held_unread.unionByName(batch.select(*shape.keys, _ORDINAL)),
                      [*shape.keys, _ORDINAL], "left_anti")
            .unionByName(batch).withColumn(_UNREAD, F.lit(False)))
    refused = held_unread
    if unread is not None:
        refused = refused.unionByName(unread.join(ordinals, position).select(*shape.keys, _ORDINAL))
    types = dict(exports.dtypes)
    refused = (refused.join(rows.select(*shape.keys, _ORDINAL), [*shape.keys, _ORDINAL], "left_anti")
               .dropDuplicates([*shape.keys, _ORDINAL])
               .select(*shape.keys, *(F.lit(None).cast(types[c]).alias(c) for c in shape.values),
                       _ORDINAL, F.lit(True).alias(_UNREAD)))
    return rows.unionByName(refused)


def export_marks(nodes: DataFrame, shape: ChangeShape, types: dict[str, str]) -> DataFrame:
    """The applied-changes row of each of the batch's exports (``nodes`` in the batch): no key,
    its position, the delete flag set, no values, its carried columns."""
    return (nodes.where(_IN_BATCH)
            .select(*(F.lit(None).cast(types[c]).alias(c) for c in shape.keys), *shape.sequence,
                    F.lit(True).alias(shape.delete),
                    *(F.lit(None).cast(types[c]).alias(c) for c in shape.values), *shape.carried))


def snapshot_changes(contents: DataFrame, nodes: DataFrame, shape: ChangeShape,
                     beyond: DataFrame | None = None) -> DataFrame:
    """The changes of each target export of ``nodes`` from the export before it (and of the keys
    ``beyond`` names, :func:`held_on`), given the ``contents`` (:func:`export_contents`): a row
    whose key the export before lacked, or held with other values, is an upsert; a key the export
    before held and this one lacks is a delete, with the values it had; an unread row is kept as
    a change with no delete flag (see :func:`is_hold`). Each change carries its export's carried
    columns, so a change is the same whichever order the exports arrived in."""
    (position,) = shape.sequence
    ordered = Window.partitionBy(*shape.keys).orderBy(_ORDINAL)
    # A run: a key's rows in consecutive exports. A refused row keeps the run's last values, or
    # none when the run has none yet (the key was absent before it).
    gap = (F.lag(_ORDINAL).over(ordered).isNull()
           | (F.lag(_ORDINAL).over(ordered) != F.col(_ORDINAL) - 1))
    run = Window.partitionBy(*shape.keys, _RUN).orderBy(_ORDINAL)
    values = F.struct(*(F.col(c) for c in shape.values)) if shape.values else F.struct(F.lit(True))
    held = F.when(~F.col(_UNREAD), values)
    steps = (contents.withColumn(_RUN, F.sum(gap.cast("int")).over(
                 ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
             .withColumn(_BEFORE, F.last(held, ignorenulls=True).over(
                 run.rowsBetween(Window.unboundedPreceding, -1)))
             .withColumn(_HOLDS, F.last(held, ignorenulls=True).over(
                 run.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
             .withColumn(_AFTER, F.lead(_ORDINAL).over(ordered)))
    same = reduce(lambda a, b: a & b,
                  (F.col(c).eqNullSafe(F.col(_BEFORE)[c]) for c in shape.values), F.lit(True))
    columns = (*shape.keys, _ORDINAL, shape.delete, *shape.values)
    upserts = (steps.where(~F.col(_UNREAD) & (F.col(_BEFORE).isNull() | ~same))
               .withColumn(shape.delete, F.lit(False)).select(*columns))
    # A key the next export lacks, held until then: deleted there.
    deletes = (steps.where(F.col(_HOLDS).isNotNull()
                           & (F.col(_AFTER).isNull() | (F.col(_AFTER) != F.col(_ORDINAL) + 1)))
               .select(*shape.keys, (F.col(_ORDINAL) + 1).alias(_ORDINAL),
                       F.lit(True).alias(shape.delete), *(F.col(_HOLDS)[c].alias(c) for c in shape.values)))
    holds = (steps.where(F.col(_UNREAD)).withColumn(shape.delete, F.lit(None).cast("boolean"))
             .select(*columns))
    made = upserts.unionByName(deletes).unionByName(holds)
    # Of an export made again, every key's changes; beyond, the keys held on.
    exported = nodes.select(_ORDINAL, position, _TARGET, *shape.carried)
    wanted = F.col(_TARGET)
    if beyond is not None:
        made = made.join(beyond.withColumn(_HELD, F.lit(True)), [*shape.keys, _ORDINAL], "left")
        wanted = wanted | F.col(_HELD).isNotNull()
    return (made.join(exported, _ORDINAL).where(wanted)
            .select(*shape.keys, position, shape.delete, *shape.values, *shape.carried))
