"""The graph of a pipeline as text, what ``medallion pipelines`` prints (a dry run: no Spark)."""

from __future__ import annotations

from collections.abc import Mapping

from medallion.pipeline.graph import Flow, FlowKind, PipelineGraph
from medallion.pipeline.kinds import DedupScope, Layer, TableRole
from medallion.pipeline.spec import PipelineSpec, TableDecl
from medallion.pipeline.sql import read_tables


def _flow_line(spec: PipelineSpec, flow: Flow) -> str:
    """What the flow does and reads, in one line."""
    if flow.kind is FlowKind.INGEST:
        source = next(s for s in spec.sources if s.bronze_key == flow.target)
        text = f"ingest {source.format.value} from {flow.external}"
        if source.alternative_to:
            text += f"; alternative to source {source.alternative_to}"
        return text + ("" if flow.active else " (inactive)")
    inputs = []
    for item in flow.inputs:
        name = " | ".join((item.table, *item.alternatives))
        inputs.append(f"lookup {item.via} ({name})" if item.via else name)
    return f"{flow.kind.value} {', '.join(inputs)}"


_SCOPES = {DedupScope.TABLE: "the whole table", DedupScope.WATERMARK: "the watermark",
           DedupScope.EVENT_DATE: "the batch's event dates"}


def _silver_details(spec: PipelineSpec, key: str, by_key: Mapping[str, TableDecl]) -> list[str]:
    silver = next(s for s in spec.silver if s.key == key)
    changes = silver.changes
    if changes is None:
        lines = [f"parse {silver.parse.value}; key {', '.join(silver.dedup.key)} "
                 f"(dedup against {_SCOPES[silver.dedup.scope]}"
                 + (f", first by {', '.join(silver.dedup.order_by)})" if silver.dedup.order_by else ")")]
    else:
        tracked, untracked = ", ".join(changes.track_history or ()), ", ".join(changes.track_history_except)
        kept = ("the latest row per key" if changes.scd == 1 else
                "each key's history" + (f", a new version when {tracked} change" if tracked else
                                        f", a new version unless only {untracked} change"
                                        if untracked else ""))
        if changes.snapshot:
            what = (f"full exports of key {', '.join(changes.keys)} in order of "
                    f"{changes.sequence_by[0]}, SCD type {changes.scd} ({kept}); "
                    "changes: what differs from the export before, deletes: the keys it lacks")
        else:
            what = (f"changes of key {', '.join(changes.keys)} in order of "
                    f"{', '.join(changes.sequence_by)}, SCD type {changes.scd} ({kept}); "
                    + (f"deletes when {changes.delete_when}" if changes.delete_when else "no deletes")
                    + (f", kept {changes.keep_deletes_for} after ingestion"
                       if changes.keep_deletes_for else ""))
        lines = [f"parse {silver.parse.value}; {what}",
                 f"MERGE on {', '.join(by_key[key].merge_keys)}, from {silver.changes_key}"]
    if silver.event_time:
        lines.append(f"event time {silver.event_time}, watermark {silver.watermark or spec.watermark}")
    for enrichment in silver.enrichments:
        pairs = ", ".join(f"{c} = {k}" for c, k in enrichment.join)
        defaults = ", ".join(f"{c} '{v}'" for c, v in enrichment.defaults.items())
        taken = ", ".join(name if name == enrichment.source_of(name) else
                          f"{name} = {enrichment.source_of(name)}" for name in enrichment.columns)
        as_of = f" as of {enrichment.as_of}" if enrichment.as_of else ""
        lines.append(f"enrich with {enrichment.dimension}{as_of} on {pairs}: {taken}"
                     + (f" (on a miss: {defaults})" if defaults else ""))
    read = by_key.get(silver.input)
    lines.append("quarantine reasons: "
                 + ", ".join(silver.reasons(None if read is None else read.column_names)))
    if silver.python:
        lines.append(f"python step {silver.python}")
    return lines


def _gold_details(spec: PipelineSpec, table: TableDecl) -> list[str]:
    gold = next(g for g in spec.gold if g.key == table.key)
    lines = []
    if gold.filter:
        lines.append(f"filter {gold.filter}")
    if gold.window is not None:
        groups = f" by {', '.join(gold.group_by)}" if gold.group_by else ""
        lines.append(f"window {gold.window.describe()} on {gold.window.column}{groups}, "
                     f"watermark {spec.watermark_of(gold)}")
        lines.append("aggregates " + ", ".join(f"{a.name} = {a.describe()}" for a in gold.aggregates))
    if gold.python:
        lines.append(f"python step {gold.python}")
    keys = f", MERGE on {', '.join(table.merge_keys)}" if table.merge_keys else ""
    lines.append(f"mode {table.mode.value}{keys}")
    return lines


def render_graph(spec: PipelineSpec, graph: PipelineGraph, tables: tuple[TableDecl, ...]) -> str:
    """The pipeline's tables per layer, each with its flow, inputs, columns and keys, then the edges."""
    by_key = {t.key: t for t in tables}
    lines = [f"pipeline {spec.name} ({spec.file})"]
    if spec.description:
        lines.append(f"  {spec.description}")
    for layer in Layer:
        keys = [k for k in graph.order if graph.tables[k] is layer]
        if not keys:
            continue
        lines.append(f"{layer.value}:")
        for key in keys:
            table = by_key[key]
            flow = graph.writer_of(key)
            if key != flow.target:  # a quarantine is written by its table's flow
                what = "applied changes" if table.role is TableRole.CHANGES else "rejected rows"
                lines.append(f"  {key}  <- {flow.name} ({what} of {flow.target})")
                continue
            lines.append(f"  {key}  <- {flow.name}: {_flow_line(spec, flow)}")
            lines.append(f"      columns: {table.schema_ddl}")
            if layer is Layer.SILVER:
                lines += [f"      {line}" for line in _silver_details(spec, key, by_key)]
            elif layer is Layer.GOLD:
                lines += [f"      {line}" for line in _gold_details(spec, table)]
            if table.doc.expectations:
                lines.append("      expectations: " + ", ".join(
                    f"{e.name} ({e.severity.value})" for e in table.doc.expectations))
    if spec.dimensions:
        lines.append("dimensions:")
        for dimension in spec.dimensions:
            if dimension.table is not None:
                lines.append(f"  {dimension.name}: the rows of {dimension.table} per "
                             f"{', '.join(dimension.key)}")
                continue
            source = next(s for s in spec.sources if s.name == dimension.source)
            where = f" where {dimension.where}" if dimension.where else ""
            trimmed = "trimmed " if dimension.trim else ""
            lines.append(f"  {dimension.name}: latest row of {source.bronze_key} per {trimmed}"
                         f"{', '.join(dimension.key)} (by {', '.join(dimension.latest_by)} descending)"
                         f"{where}: {', '.join(dimension.columns)}")
    if spec.views:
        lines.append("views:")
        for view in spec.views:
            reads = read_tables(view.sql)
            lines.append(f"  {view.name}: reads {', '.join(reads) if reads else '(see its SQL)'}")
    lines.append("edges:")
    lines += [f"  {source} -> {target} ({role.value})" for source, target, role in graph.edges()]
    lines.append("order: " + ", ".join(graph.order))
    return "\n".join(lines)
