"""Which tables a full refresh of a table rebuilds with it, read from the declarations' graphs
(pure, no Spark: ``backfill`` deletes and reruns them, ``plan`` and ``status`` name them).
"""

from __future__ import annotations

from medallion.io.tables import SILVER_BATCH_METRICS, TableSpec, quarantine_of
from medallion.pipeline.graph import FlowKind
from medallion.project import Settings


def _writes(settings: Settings) -> list[tuple[tuple[str, ...], tuple[TableSpec, ...]]]:
    """Each flow of every pipeline's graph: the tables it reads (an input's alternatives too),
    the tables its one query writes.

    A silver query writes its table, its quarantine and its rows of the silver batch metrics, from
    its bronze input and its dimensions' tables. A gold query writes its table and its
    quarantine (made by the first row its gate drops), from its input(s).
    """
    flows: list[tuple[tuple[str, ...], tuple[TableSpec, ...]]] = []
    for pipeline, graph in zip(settings.pipelines, settings.graphs, strict=True):
        for flow in graph.flows:
            if flow.kind is FlowKind.INGEST:
                continue
            reads = tuple(table for source in flow.inputs
                          for table in (source.table, *source.alternatives))
            if flow.kind is FlowKind.CLEANSE:
                written = (*(TableSpec.from_decl(pipeline.table(t)) for t in flow.targets),
                           SILVER_BATCH_METRICS)
            else:
                spec = TableSpec.from_decl(pipeline.table(flow.target))
                written = (spec, quarantine_of(spec))
            flows.append((reads, written))
    return flows


def silver_tables(settings: Settings) -> set[str]:
    """Every declared silver table (not their quarantines)."""
    return {silver.key for pipeline in settings.pipelines for silver in pipeline.silver}


def downstream(settings: Settings) -> dict[str, tuple[TableSpec, ...]]:
    """What rebuilding each declared table rebuilds with it: the other tables its query writes
    (a silver table and its quarantine go together) and, transitively, every table computed from
    them (a dimension's table enriches silver, so it rebuilds silver too).

    The silver batch metrics are shared by every silver table: they are rebuilt whole when every
    silver table is (or when they are the target); otherwise only the rebuilt tables' rows go
    (:attr:`medallion.ops.backfill.Plan.metrics_of`)."""
    flows = _writes(settings)
    every_silver = silver_tables(settings)
    tables = {spec.key: spec for _, written in flows for spec in written}
    for pipeline in settings.pipelines:
        for source in pipeline.sources:
            tables.setdefault(source.bronze_key,
                              TableSpec.from_decl(pipeline.table(source.bronze_key)))
    found: dict[str, tuple[TableSpec, ...]] = {}
    for key in tables:
        closure: dict[str, TableSpec] = {}
        todo = [key]
        while todo:
            current = todo.pop()
            for reads, written in flows:
                if current in reads or any(w.key == current for w in written):
                    for spec in written:
                        if spec.key not in closure and spec.key != key:
                            closure[spec.key] = spec
                            if spec.key != SILVER_BATCH_METRICS.key:  # shared: not a path on
                                todo.append(spec.key)
        if key != SILVER_BATCH_METRICS.key and not every_silver <= closure.keys() | {key}:
            closure.pop(SILVER_BATCH_METRICS.key, None)
        found[key] = tuple(closure.values())
    return found
