"""The dependency graph of a pipeline: tables, the flows that write them, and what each flow reads.

Built from the declaration alone, before any column is derived: every table has exactly one flow
writing it, every input names a table of the pipeline, and there is no cycle. The engine builds
a layer's tables in :func:`stages` of this order (bronze before silver before gold, and a table
before every table built from it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from medallion.pipeline.errors import PipelineError
from medallion.pipeline.kinds import Layer, Severity, SourceFormat
from medallion.pipeline.spec import PipelineSpec


class FlowKind(str, Enum):
    """How a flow builds its tables; the engine has one implementation per kind."""

    INGEST = "ingest"  # landing files or Kafka topics -> bronze, every record kept
    CLEANSE = "cleanse"  # parse, check, deduplicate, enrich -> silver and its quarantine
    AGGREGATE = "aggregate"  # windowed aggregation -> gold
    TRANSFORM = "transform"  # a declared Python step -> gold
    JOIN = "join"  # stream-stream join of two inputs, by time range and equal keys -> gold


class InputRole(str, Enum):
    """How a flow reads an input table."""

    STREAM = "stream"  # what is new in each micro-batch
    LOOKUP = "lookup"  # the whole table as it stands, at each micro-batch (a dimension)


@dataclass(frozen=True)
class FlowInput:
    """A table a flow reads; ``alternatives`` stand in for it when their source is the active one."""

    table: str
    role: InputRole = InputRole.STREAM
    alternatives: tuple[str, ...] = ()
    via: str | None = None  # the dimension a lookup goes through
    declared_at: str = ""  # key path of the reference, for messages


@dataclass(frozen=True)
class Flow:
    """One streaming query: what it reads, what it writes, and where it is declared."""

    name: str
    kind: FlowKind
    targets: tuple[str, ...]  # the table it builds first, then its quarantine if any (and a
    # change flow's applied changes)
    inputs: tuple[FlowInput, ...] = ()
    external: str = ""  # ingest: the landing folder or the topics
    active: bool = True  # false: an alternative source not chosen
    declared_at: str = ""

    @property
    def target(self) -> str:
        """The table the flow is for (its quarantine, if any, comes after it in ``targets``)."""
        return self.targets[0]


@dataclass(frozen=True)
class PipelineGraph:
    """Tables (``layer/name`` -> layer) and flows, with the order to build them in."""

    pipeline: str
    tables: Mapping[str, Layer]
    flows: tuple[Flow, ...]
    order: tuple[str, ...]  # every table, each after the tables it is built from

    def writer_of(self, table: str) -> Flow:
        """The flow that writes ``table``."""
        return next(f for f in self.flows if table in f.targets)

    def flows_in_order(self) -> tuple[Flow, ...]:
        """The flows in the order of the tables they are for."""
        position = {table: i for i, table in enumerate(self.order)}
        return tuple(sorted(self.flows, key=lambda f: position[f.target]))

    def edges(self) -> tuple[tuple[str, str, InputRole], ...]:
        """``(input table, target table, role)`` for every input of every flow, alternatives too."""
        found = []
        for flow in self.flows_in_order():
            for source in flow.inputs:
                for table in (source.table, *source.alternatives):
                    found.append((table, flow.target, source.role))
        return tuple(found)

    def upstream(self, table: str) -> tuple[str, ...]:
        """Every table ``table`` is built from, directly or not, in build order."""
        direct: dict[str, set[str]] = {}
        for source, target, _ in self.edges():
            direct.setdefault(target, set()).add(source)
        seen: set[str] = set()
        pending = [table]
        while pending:
            for parent in direct.get(pending.pop(), ()):
                if parent not in seen:
                    seen.add(parent)
                    pending.append(parent)
        return tuple(t for t in self.order if t in seen)


def stages(graphs: Sequence[PipelineGraph], layer: Layer) -> tuple[tuple[str, ...], ...]:
    """The tables ``layer``'s flows are for, of every graph, in the stages a run that drains its
    inputs builds them in: a flow reading a table of its own layer in a stage after that table's
    writer; the flows of a stage side by side, in the graphs' order. One stage when no flow of
    the layer reads another (a gold table read by another gold table makes two)."""
    depth: dict[str, int] = {}
    for graph in graphs:
        for flow in graph.flows_in_order():  # a table's writer before the flows reading it
            if graph.tables[flow.target] is not layer:
                continue
            read = [table for source in flow.inputs for table in (source.table, *source.alternatives)
                    if graph.tables.get(table) is layer]
            depth[flow.target] = max((1 + depth[table] for table in read), default=0)
    found: list[list[str]] = []
    for table, level in depth.items():
        found += [[] for _ in range(level + 1 - len(found))]
        found[level].append(table)
    return tuple(tuple(stage) for stage in found)


def _flows(spec: PipelineSpec) -> list[Flow]:
    flows = []
    for source in spec.sources:
        external = (f"kafka topics {', '.join(source.topics)}" if source.format is SourceFormat.KAFKA
                    else f"landing {source.path}/{source.glob}")
        flows.append(Flow(f"ingest:{source.name}", FlowKind.INGEST, (source.bronze_key,),
                          external=external, active=source.active,
                          declared_at=f"sources.{source.name}.bronze.table"))
    dimensions = {d.name: d for d in spec.dimensions}
    sources = {s.name: s for s in spec.sources}
    changed = [s.key for s in spec.silver if s.changes is not None]
    for kept in spec.dimensions:
        if kept.table is not None and kept.table not in changed:
            where = f"dimensions.{kept.name}.table"
            raise PipelineError(where, spec.source_of(where),
                                f"{kept.table} is not a silver table kept by a change flow "
                                f"(those: {', '.join(changed) or 'none'})")
    for silver in spec.silver:
        inputs = [FlowInput(silver.input, InputRole.STREAM, spec.alternatives_of(silver.input),
                            declared_at=f"silver.{silver.name}.input")]
        for enrichment in silver.enrichments:
            key = f"silver.{silver.name}.enrich.{enrichment.dimension}"
            dimension = dimensions.get(enrichment.dimension)
            if dimension is None:
                raise PipelineError(key, spec.source_of(key),
                                    f"no dimension {enrichment.dimension!r} "
                                    f"(dimensions: {', '.join(dimensions) or 'none'})")
            if dimension.table is None and dimension.source not in sources:
                where = f"dimensions.{dimension.name}.source"
                raise PipelineError(where, spec.source_of(where),
                                    f"no source {dimension.source!r} (sources: {', '.join(sources)})")
            looked_up = spec.dimension_input(dimension)
            inputs.append(FlowInput(looked_up, InputRole.LOOKUP, spec.alternatives_of(looked_up),
                                    via=dimension.name, declared_at=key))
        applied = (silver.changes_key,) if silver.changes is not None else ()
        flows.append(Flow(f"cleanse:{silver.name}", FlowKind.CLEANSE,
                          (silver.key, silver.quarantine_key, *applied),
                          tuple(inputs), declared_at=f"silver.{silver.name}"))
    for gold in spec.gold:
        drops = any(e.severity is Severity.DROP for e in gold.doc.expectations)
        targets = (gold.key, f"{gold.key}_quarantine") if drops else (gold.key,)
        kind = (FlowKind.JOIN if gold.join else FlowKind.TRANSFORM if gold.python
                else FlowKind.AGGREGATE)
        inputs = [FlowInput(gold.input, InputRole.STREAM, spec.alternatives_of(gold.input),
                            declared_at=f"gold.{gold.name}.input")]
        if gold.join is not None and gold.join.input != gold.input:
            inputs.append(FlowInput(gold.join.input, InputRole.STREAM,
                                    spec.alternatives_of(gold.join.input),
                                    declared_at=f"gold.{gold.name}.join.input"))
        flows.append(Flow(f"{kind.value}:{gold.name}", kind, targets, tuple(inputs),
                          declared_at=f"gold.{gold.name}"))
    return flows


def build_graph(spec: PipelineSpec) -> PipelineGraph:
    """The graph of ``spec``; raises :class:`PipelineError` for two writers, an unknown input, a cycle."""
    flows = _flows(spec)
    writers: dict[str, Flow] = {}
    for flow in flows:
        for table in flow.targets:
            if table in writers:
                key = flow.declared_at
                raise PipelineError(key, spec.source_of(key),
                                    f"{table} is already written by {writers[table].name} "
                                    f"(declared at {writers[table].declared_at}); a table has one writer")
            writers[table] = flow
    for flow in flows:
        for source in flow.inputs:
            if source.table not in writers:
                raise PipelineError(source.declared_at, spec.source_of(source.declared_at),
                                    f"no table {source.table!r} in pipeline {spec.name} "
                                    f"(tables: {', '.join(writers)})")
    tables = {table: Layer(table.partition("/")[0]) for table in writers}
    order = _topological_order(spec, flows, list(writers))
    return PipelineGraph(spec.name, tables, tuple(flows), order)


def _topological_order(spec: PipelineSpec, flows: list[Flow], tables: list[str]) -> tuple[str, ...]:
    """Kahn's algorithm, declaration order among ready tables; a cycle is reported with its path."""
    parents: dict[str, list[tuple[str, str]]] = {t: [] for t in tables}  # table -> (input, declared_at)
    for flow in flows:
        for source in flow.inputs:
            for table in (source.table, *source.alternatives):
                for target in flow.targets:
                    parents[target].append((table, source.declared_at))
    _check_cycles(spec, parents)
    done: list[str] = []
    remaining = list(tables)
    while remaining:
        ready = next(t for t in remaining if all(p in done for p, _ in parents[t]))
        done.append(ready)
        remaining.remove(ready)
    return tuple(done)


def _check_cycles(spec: PipelineSpec, parents: Mapping[str, list[tuple[str, str]]]) -> None:
    """Depth-first search; a table met again on the current path closes a cycle."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(table: str, path: list[str]) -> None:
        state[table] = 1
        for parent, declared_at in parents[table]:
            if state.get(parent) == 1:
                loop = " <- ".join([*path[path.index(parent):], table, parent] if parent in path
                                   else [table, parent])
                raise PipelineError(declared_at, spec.source_of(declared_at),
                                    f"a cycle: {loop} (each table is built from the next)")
            if state.get(parent) is None:
                visit(parent, [*path, table])
        state[table] = 2

    for table in parents:
        if table not in state:
            visit(table, [])
