"""Change records into tables: SCD type 1 (the latest row per key) and SCD type 2 (each key's
history as versions), as pure transformations of a set of changes.

A change is a row with the table's key columns, one or more sequence columns (what orders the
changes of one key), a delete flag and the row's values. The table a change flow keeps depends
only on the set of changes it has applied, not on the order they arrived in nor on the batches
they came in: each function here takes every change of some keys and returns those keys' rows.
A batch applies its changes by recomputing the rows of the keys it touches from their changes.

Changes with one key and one sequence (re-deliveries) count once: of several that differ, a
delete before an upsert, then the greatest by the values in the order of the columns' names, a
null below any value.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from medallion.io.sinks.delta import greater_than
from medallion.pipeline.model import IS_CURRENT, VALID_FROM, VALID_TO

_RANK = "__rank"
_HELD = "__held"
_STARTS = "__starts"
_VERSION = "__version"
_NEXT = "__next"
_LAST = "__last"


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
    """One change per key and sequence: of re-deliveries, the one that ranks last."""
    # The carried columns last, so that one of equal changes is the same one at every run.
    ranked = [*(F.col(c).desc_nulls_last() for c in shape.rank),
              *(F.col(c).asc_nulls_last() for c in shape.carried)]
    order = Window.partitionBy(*shape.keys, *shape.sequence).orderBy(*ranked)
    return (changes.withColumn(_RANK, F.row_number().over(order))
            .where(F.col(_RANK) == 1).drop(_RANK))


def fresh_changes(changes: DataFrame, applied: DataFrame, shape: ChangeShape) -> DataFrame:
    """Of a batch's ``changes`` (one per key and sequence), those that change what ``applied``
    holds: a key and sequence it has not, or a re-delivery that ranks above the one it has (as
    the MERGE into ``applied`` decides, :func:`~medallion.io.sinks.delta.upsert_batch`)."""
    identity = (*shape.keys, *shape.sequence)
    held = applied.select(*identity, *shape.rank, F.lit(True).alias(_HELD)).alias("t")
    same = reduce(lambda a, b: a & b,
                  (F.col(f"s.`{c}`").eqNullSafe(F.col(f"t.`{c}`")) for c in identity))
    return (changes.alias("s").join(held, same, "left")
            .where(F.col(f"t.{_HELD}").isNull() | F.expr(greater_than(shape.rank)))
            .select("s.*"))


def superseded_changes(applied: DataFrame, shape: ChangeShape) -> DataFrame:
    """Of a type-1 flow's applied changes (one per key and sequence), the key and sequence of each
    below its key's latest: SCD type 1 needs only the latest (a delete included), which still
    refuses every older change that arrives later."""
    latest = Window.partitionBy(*shape.keys).orderBy(*(F.col(c).desc() for c in shape.sequence))
    return (applied.withColumn(_RANK, F.row_number().over(latest))
            .where(F.col(_RANK) > 1).select(*shape.keys, *shape.sequence))


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
