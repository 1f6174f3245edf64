"""How a layer starts its queries, the same for bronze, silver and gold.

Each query first decides whether it has work (a landing folder with new files, an input table with
versions it has not read); the tables of the queries with work are then made side by side
(:func:`~medallion.io.sinks.delta.ensure_tables`: on a new lakehouse each creation is a Delta commit,
a catalog entry and a small Spark job, mostly waiting driver work); then each query starts and
finds its tables there. A query without work is idle: nothing is made for it and nothing started.
Before its tables are made, each query with work checks that it can carry on from what the
lakehouse holds, and its tables that exist get the columns their declaration added
(:mod:`~medallion.io.sinks.evolution`).
Any error is named after the table whose query it is. A query refused there, or whose new input
is refused (:class:`~medallion.errors.InputRefused`), is not started, and the layer's other
queries are: the run says so once they are done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyspark.sql import SparkSession

from medallion.engine.streaming import RunningQuery
from medallion.errors import InputRefused
from medallion.io.failures import failing_as
from medallion.io.sinks.delta import TableToMake, ensure_tables
from medallion.io.sinks.evolution import align_tables
from medallion.io.sources.delta import newest_table_version


def idle(spark: SparkSession, key: str, inputs: Sequence[tuple[str, str]]) -> RunningQuery:
    """The idle query of table ``key``; when an input (``(name, path)``) was never written, its
    note says so: an all-zero line would not tell a layer run before the one it reads from."""
    unwritten = [name for name, path in inputs if newest_table_version(spark, path) < 0]
    note = (f"nothing to read yet: {', '.join(unwritten)} never written (its layer has not run, "
            "or nothing has landed for it)") if unwritten else ""
    return RunningQuery(key, None, note=note, idle=True)


@dataclass(frozen=True)
class PlannedQuery:
    """One query of a layer, before it starts: the layer's job says how to decide, make and start."""

    key: str  # the table it writes, named in its errors
    due: Callable[[], bool]  # whether it has work; asked once
    tables: Callable[[], list[TableToMake]]  # what it reads and writes that must exist first
    start: Callable[[bool], RunningQuery]  # start it, given what ``due`` said (idle when False)
    # With work, before its tables are changed or made: refuse a lakehouse it cannot carry on from
    check: Callable[[], None] | None = None


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
    refused.update(_carry_on(spark, [q for q, has_work in zip(queries, due, strict=True) if has_work]))
    due = [has_work and planned.key not in refused
           for planned, has_work in zip(queries, due, strict=True)]
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


def _carry_on(spark: SparkSession, queries: Sequence[PlannedQuery]) -> dict[str, InputRefused]:
    """Each query's own check, then its existing tables brought to their declaration
    (:func:`~medallion.io.sinks.evolution.align_tables`), the queries side by side (each table's
    first read is a Delta snapshot the query's writes then reuse); the refusals, by table."""
    def prepare(planned: PlannedQuery) -> InputRefused | None:
        try:
            with failing_as(planned.key):
                if planned.check is not None:
                    planned.check()
                align_tables(spark, planned.tables())
        except InputRefused as exc:
            return exc
        return None

    if len(queries) < 2:
        outcomes = [prepare(planned) for planned in queries]
    else:
        with ThreadPoolExecutor(max_workers=min(len(queries), 4),
                                thread_name_prefix="medallion-align") as pool:
            outcomes = list(pool.map(prepare, queries))
    return {planned.key: outcome for planned, outcome in zip(queries, outcomes, strict=True)
            if outcome is not None}
