"""How a layer starts its queries, the same for bronze, silver and gold.

Each query first decides whether it has work (a landing folder with new files, an input table with
versions it has not read); the tables of the queries with work are then made side by side
(:func:`~medallion.sinks.delta.ensure_tables`: on a new lakehouse each creation is a Delta commit,
a catalog entry and a small Spark job, mostly waiting driver work); then each query starts and
finds its tables there. A query without work is idle: nothing is made for it and nothing started.
Any error is named after the table whose query it is. A query whose new input is refused
(:class:`~medallion.errors.InputRefused`) is not started, and the layer's other queries are: the
run says so once they are done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from medallion.errors import InputRefused
from medallion.sinks.delta import TableToMake, ensure_tables
from medallion.streaming import RunningQuery, failing_as


@dataclass(frozen=True)
class PlannedQuery:
    """One query of a layer, before it starts: the layer's job says how to decide, make and start."""

    key: str  # the table it writes, named in its errors
    due: Callable[[], bool]  # whether it has work; asked once
    tables: Callable[[], list[TableToMake]]  # what it reads and writes that must exist first
    start: Callable[[bool], RunningQuery]  # start it, given what ``due`` said (idle when False)


def start_layer(spark: SparkSession, queries: Sequence[PlannedQuery],
                shared: Sequence[TableToMake] = ()) -> list[RunningQuery]:
    """Start ``queries``: decide each one's work, make the tables of those with work (and the
    ``shared`` ones, whether or not any query has work) side by side, then start each."""
    due, refused = [], {}
    for planned in queries:
        try:
            with failing_as(planned.key):
                due.append(planned.due())
        except InputRefused as exc:  # that query stays unstarted; the others go on
            refused[planned.key] = exc
            due.append(False)
    ensure_tables(spark, [*shared, *(table for planned, has_work in zip(queries, due, strict=True)
                                     if has_work for table in planned.tables())])
    started = []
    for planned, has_work in zip(queries, due, strict=True):
        if planned.key in refused:
            started.append(RunningQuery(planned.key, None, refused=refused[planned.key]))
            continue
        with failing_as(planned.key):
            started.append(planned.start(has_work))
    return started
