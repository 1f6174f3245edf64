"""Checks of a loaded pipeline's meaning, all before Spark starts.

:func:`validate` returns the graph and the derived tables of a pipeline, or raises
:class:`~medallion.pipeline.errors.PipelineError` naming the key path and the file. It checks:

* sources: alternatives name a source, one of each group is active, an alternative's bronze table
  holds the columns of the one it replaces;
* the graph: one writer per table, inputs that exist, no cycle (:mod:`medallion.pipeline.graph`);
* dimensions: key, columns, ordering and filter over the source's bronze columns;
* silver: raw fields (CSV and Parquet: the declared columns; JSON: any), types and formats, rules
  and expressions over known columns (parsed with sqlglot), the deduplication key and event time
  among the table's columns, enrichments matching their dimension, kept input columns;
* gold: an input a stream can read (not a table kept by MERGE), filter, grouping and aggregate
  columns among the input's, the window over a timestamp, aggregates valid for their column's
  type, the output mode possible for the window;
* Python steps (``module:function``): importable and callable, without being called;
* comments and expectations: the columns they name exist.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from medallion.pipeline.errors import PipelineError
from medallion.pipeline.graph import PipelineGraph, build_graph
from medallion.pipeline.kinds import (
    CORRUPT_RECORD,
    INGESTED_AT,
    ISO_8601_WITH_ZONE,
    SOURCE_FILE,
    AggregateFunction,
    DedupScope,
    OutputMode,
    WindowKind,
)
from medallion.pipeline.load import PIPELINES_DIR, load_pipelines, pipeline_files
from medallion.pipeline.model import (
    DELETED,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    ChangesSpec,
    ColumnSpec,
    EnrichmentSpec,
    Field,
    GoldSpec,
    SilverSpec,
    TableDoc,
)
from medallion.pipeline.spec import PipelineSpec, TableDecl
from medallion.pipeline.sql import SqlError, non_boolean_type, referenced_columns
from medallion.pipeline.steps import StepNotFound, find_step
from medallion.pipeline.types import SqlType, struct_path
from medallion.pipeline.views import name_problem, query_problem

_ZONE_OFFSET = re.compile(r"^(UTC|GMT|Z|[+-]\d{2}:\d{2})$")
_COLUMN_KWARGS = ("column", "column_A", "column_B")
_NEEDS_COLUMN = {AggregateFunction.SUM, AggregateFunction.MIN, AggregateFunction.MAX, AggregateFunction.AVG,
                 AggregateFunction.COUNT_DISTINCT, AggregateFunction.APPROX_COUNT_DISTINCT}
# Delta's liquid clustering: how many columns, of which types, among how many first columns (the
# ones ``delta.dataSkippingNumIndexedCols`` keeps statistics of by default).
MAX_CLUSTERING_COLUMNS = 4
CLUSTERABLE_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE",
                               "DECIMAL", "STRING", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"})
STATS_COLUMNS = 32
_NUMERIC_ONLY = {AggregateFunction.SUM, AggregateFunction.AVG}


class _Checker:
    """Raises errors that name the key path and the file the key came from."""

    def __init__(self, spec: PipelineSpec) -> None:
        self.spec = spec

    def fail(self, key: str, problem: str) -> PipelineError:
        """The error for ``key``."""
        return PipelineError(key, self.spec.source_of(key), problem)

    def columns_exist(self, key: str, names: Iterable[str], available: Iterable[str], what: str) -> None:
        """Every one of ``names`` is among ``available``."""
        known = list(available)
        for name in names:
            if name not in known:
                raise self.fail(key, f"unknown column {name!r} in {what} (columns: {', '.join(known)})")

    def sql(self, key: str, text: str, available: Iterable[str] | None, what: str,
            qualified: bool = False) -> tuple[str, ...]:
        """The columns ``text`` names, each checked against ``available`` (None: any name)."""
        try:
            names = referenced_columns(text, qualified)
        except SqlError as exc:
            raise self.fail(key, str(exc)) from None
        if available is not None:
            self.columns_exist(key, names, available, what)
        return names

    def predicate(self, key: str, text: str, fields: Iterable[Field], what: str) -> None:
        """``text`` names only columns of ``fields``, and is true or false, not a value."""
        fields = list(fields)
        self.sql(key, text, [f.name for f in fields], what)
        kind = non_boolean_type(text, {f.name: str(f.type) for f in fields})
        if kind is not None:
            raise self.fail(key, f"{what} must be true or false, and {text!r} is {kind} "
                                 "(a comparison, say: amount > 0)")

    def python_step(self, key: str, step: str) -> None:
        """``module:function`` imports and names something callable (it is not called)."""
        try:
            find_step(step)
        except StepNotFound as exc:
            raise self.fail(key, str(exc)) from None

    def clustering(self, key: str, doc: TableDoc, table: TableDecl) -> None:
        """``cluster_by``: Delta's liquid clustering takes up to 4 columns of a type its file
        statistics cover, among the first 32 (those it keeps statistics of), and excludes
        Z-ordering."""
        if not doc.cluster_by:
            return
        where = f"{key}.cluster_by"
        if doc.zorder:
            raise self.fail(where, "a table is either clustered (cluster_by) or Z-ordered "
                                   "(zorder), not both: Delta refuses to Z-order a clustered table")
        self.columns_exist(where, doc.cluster_by, table.column_names, f"the columns of {table.key}")
        if len(doc.cluster_by) > MAX_CLUSTERING_COLUMNS:
            raise self.fail(where, f"{len(doc.cluster_by)} columns; Delta clusters by at most "
                                   f"{MAX_CLUSTERING_COLUMNS}")
        for column in doc.cluster_by:
            position = table.column_names.index(column)
            kind = table.column_type(column)
            if kind is None or kind.name not in CLUSTERABLE_TYPES:
                raise self.fail(where, f"column {column} is {kind}; Delta clusters by columns of "
                                       f"type {', '.join(sorted(CLUSTERABLE_TYPES))} only")
            if position >= STATS_COLUMNS:
                raise self.fail(where, f"column {column} is column {position + 1} of "
                                       f"{table.key}; Delta keeps the statistics clustering "
                                       f"needs of the first {STATS_COLUMNS} only")

    def doc(self, key: str, doc: TableDoc, table: TableDecl) -> None:
        """Column comments, Z-order and clustering columns and expectation arguments name columns
        of the table."""
        self.columns_exist(f"{key}.zorder", doc.zorder, table.column_names, f"the columns of {table.key}")
        self.clustering(key, doc, table)
        for column in doc.column_comments:
            self.columns_exist(f"{key}.column_comments.{column}", [column], table.column_names,
                               f"the comments of {table.key}")
        for expectation in doc.expectations:
            where = f"{key}.expectations.{expectation.name}.kwargs"
            for argument in _COLUMN_KWARGS:
                value = expectation.kwargs.get(argument)
                if value is not None:
                    self.columns_exist(f"{where}.{argument}", [str(value)], table.column_names,
                                       f"expectation {expectation.name} of {table.key}")
            listed = expectation.kwargs.get("column_list")
            if isinstance(listed, list):
                self.columns_exist(f"{where}.column_list", [str(c) for c in listed], table.column_names,
                                   f"expectation {expectation.name} of {table.key}")


def validate(spec: PipelineSpec) -> tuple[PipelineGraph, tuple[TableDecl, ...]]:
    """Check ``spec`` completely; return its graph and its tables (as :meth:`PipelineSpec.tables`)."""
    check = _Checker(spec)
    _check_sources(check, spec)
    graph = build_graph(spec)
    _check_dimensions(check, spec)
    known: dict[str, TableDecl] = {}
    for table in spec.tables_of_sources():
        known[table.key] = table
    silver = {s.key: s for s in spec.silver}
    gold = {g.key: g for g in spec.gold}
    for key in graph.order:  # inputs are derived (and checked) before the tables built from them
        if key in silver:
            for table in _check_silver(check, spec, silver[key], known):
                known[table.key] = table
        elif key in gold:
            for table in _check_gold(check, spec, gold[key], known):
                known[table.key] = table
    for source in spec.sources:
        check.doc(f"sources.{source.name}.bronze", source.bronze.doc, known[source.bronze_key])
    tables = spec.tables()
    _check_views(check, spec, tables)
    return graph, tables


@dataclass(frozen=True)
class CheckedPipeline:
    """A pipeline that :func:`check_pipelines` found valid, with its graph and its tables."""

    spec: PipelineSpec
    graph: PipelineGraph
    tables: tuple[TableDecl, ...]


def check_pipelines(conf_dir: Path, env: str | None) -> tuple[CheckedPipeline, ...]:
    """Every pipeline of ``<conf_dir>/pipelines`` with ``env``'s overlays, loaded and checked, on
    its own and against the others: what ``medallion run`` takes and ``medallion pipelines``
    reports valid are the same.

    A folder without ``pipelines/`` (or with no ``<name>.yaml`` in it) is refused, since the
    engine would otherwise run nothing and say nothing. Two pipelines may not write one table, nor
    declare one catalog name (a table's or a view's). Errors name the key and the file.
    """
    folder = conf_dir / PIPELINES_DIR
    if not folder.is_dir():
        raise PipelineError("<folder>", str(folder),
                            f"no pipelines folder: a configuration folder holds base.yaml, its "
                            f"overlays and {PIPELINES_DIR}/<name>.yaml, one file per pipeline (copy "
                            f"the project's conf/{PIPELINES_DIR}/ beside your base.yaml)")
    if not pipeline_files(conf_dir):
        raise PipelineError("<folder>", str(folder),
                            "declares no pipeline: add one <name>.yaml (see docs/pipelines.md)")
    checked = tuple(CheckedPipeline(spec, *validate(spec)) for spec in load_pipelines(conf_dir, env))
    writers: dict[str, str] = {}
    for pipeline in checked:
        for table in pipeline.tables:
            if table.key in writers:
                raise PipelineError(table.declared_at or table.key, pipeline.spec.file,
                                    f"{table.key} is also written by pipeline "
                                    f"{writers[table.key]}: a table has one writer")
            writers[table.key] = pipeline.spec.name
    named = {key.replace("/", "."): writer for key, writer in writers.items()}
    views: dict[str, str] = {}
    for pipeline in checked:
        spec = pipeline.spec
        for view in spec.views:
            key = f"views.{view.name}"
            if view.name in views or view.name in named:
                what = "view" if view.name in views else "table"
                raise PipelineError(key, spec.source_of(key), f"pipeline "
                                    f"{views.get(view.name) or named[view.name]} declares a {what} "
                                    "of this name: a catalog name has one declaration")
            views[view.name] = spec.name
    return checked


def _check_views(check: _Checker, spec: PipelineSpec, tables: tuple[TableDecl, ...]) -> None:
    """A pipeline's views read its own tables (and views); a view over several pipelines' tables
    goes in ``catalog.views`` of the settings."""
    names = [table.qualified_name for table in tables]
    readable = [*names, *(view.name for view in spec.views)]
    for view in spec.views:
        key = f"views.{view.name}"
        problem = name_problem(view.name, names)
        if problem:
            raise check.fail(key, problem)
        problem = query_problem(view.sql, readable, "this pipeline does not declare")
        if problem:
            raise check.fail(f"{key}.sql", problem + " (a view over several pipelines' tables "
                                                    "goes in catalog.views of conf/base.yaml)")


def _check_sources(check: _Checker, spec: PipelineSpec) -> None:
    by_name = {s.name: s for s in spec.sources}
    for source in spec.sources:
        key = f"sources.{source.name}"
        reserved = {SOURCE_FILE, INGESTED_AT, CORRUPT_RECORD}
        for index, column in enumerate(source.header or tuple(f.name for f in source.schema)):
            if column in reserved:
                where = f"{key}.header.{index}" if source.header else f"{key}.schema.{column}"
                raise check.fail(where, f"{column!r} is a column bronze adds itself")
        if source.alternative_to is None:
            continue
        primary = by_name.get(source.alternative_to)
        if primary is None or primary is source or primary.alternative_to is not None:
            raise check.fail(f"{key}.alternative_to",
                             f"{source.alternative_to!r} is not a source this one can replace "
                             f"(sources that replace none: "
                             f"{', '.join(s.name for s in spec.sources if not s.alternative_to)})")
        theirs = {f.name: f.type for f in source.bronze_fields()}
        for wanted in primary.bronze_fields():
            if theirs.get(wanted.name) != wanted.type:
                raise check.fail(f"{key}.bronze",
                                 f"replaces {primary.name}, so {source.bronze_key} must hold "
                                 f"{primary.bronze_key}'s column {wanted.ddl()}")
    for primary in spec.sources:
        if primary.alternative_to is not None:
            continue
        group = [primary, *(s for s in spec.sources if s.alternative_to == primary.name)]
        active = [s for s in group if s.active]
        if len(group) > 1 and len(active) != 1:
            names = ", ".join(s.name for s in group)
            raise check.fail(f"sources.{(active[-1] if active else group[0]).name}.active",
                             f"exactly one of {names} must be active, not {len(active)}")


def _check_dimensions(check: _Checker, spec: PipelineSpec) -> None:
    sources = {s.name: s for s in spec.sources}
    for dimension in spec.dimensions:
        key = f"dimensions.{dimension.name}"
        if dimension.table is not None:
            continue  # a change flow's table (the graph checks it)
        assert dimension.source is not None
        source = sources.get(dimension.source)
        if source is None:
            raise check.fail(f"{key}.source", f"no source {dimension.source!r} "
                                              f"(sources: {', '.join(sources)})")
        available = [f.name for f in source.bronze_fields()]
        what = f"dimension {dimension.name} (columns of {source.bronze_key})"
        check.columns_exist(f"{key}.key", dimension.key, available, what)
        check.columns_exist(f"{key}.columns", dimension.columns, available, what)
        check.columns_exist(f"{key}.latest_by", dimension.latest_by, available, what)
        overlap = set(dimension.key) & set(dimension.columns)
        if overlap:
            raise check.fail(f"{key}.columns", f"{', '.join(sorted(overlap))} is already the key")
        if dimension.where is not None:
            check.predicate(f"{key}.where", dimension.where, source.bronze_fields(), what)


def _check_as_of(check: _Checker, spec: PipelineSpec, enrichment: EnrichmentSpec,
                 declared: list[str], silver: SilverSpec, known: Mapping[str, TableDecl]) -> None:
    """``enrich.<dim>.as_of``: a TIMESTAMP column of the table, compared with the validity of
    the versions of an SCD type 2 dimension sequenced by one TIMESTAMP column."""
    entry = f"silver.{silver.name}.enrich.{enrichment.dimension}.as_of"
    assert enrichment.as_of is not None
    check.columns_exist(entry, [enrichment.as_of], declared, f"the columns of {silver.key}")
    kind = next(c.type for c in silver.columns if c.name == enrichment.as_of)
    if not kind.is_timestamp:
        raise check.fail(entry, f"{enrichment.as_of} is {kind}, not a TIMESTAMP")
    dimension = spec.dimension(enrichment.dimension)
    kept = next((s for s in spec.silver if s.key == dimension.table), None)
    if kept is None or kept.changes is None or kept.changes.scd != 2:
        raise check.fail(entry, f"dimension {dimension.name} keeps no history: as_of needs a "
                                "dimension kept from a table with changes.scd: 2")
    sequence = kept.changes.sequence_by
    sequence_type = known[kept.key].column_type(sequence[0]) if len(sequence) == 1 else None
    if sequence_type is None or not sequence_type.is_timestamp:
        raise check.fail(entry, f"{kept.key}'s versions are sequenced by {', '.join(sequence)}, "
                                "not by one TIMESTAMP column, so they have no time to be valid at")


def _raw_fields(spec: PipelineSpec, silver: SilverSpec, source: TableDecl) -> list[str] | None:
    """What a column may be taken from: None for JSON (any field may occur)."""
    if silver.parse.reads_json:
        return None
    bronze = next((s for s in spec.sources if s.bronze_key == silver.input), None)
    fields = bronze.raw_fields if bronze is not None else None
    if fields is not None:
        return list(fields)
    return [name for name in source.column_names if name not in silver.keep]


def _check_column(check: _Checker, column: ColumnSpec, key: str, raw: list[str] | None,
                  source: TableDecl, kept: Sequence[str] = ()) -> None:
    if column.expr is not None:
        # An expression also reads the kept input columns (an export's date in its file's name).
        readable = None if raw is None else list(dict.fromkeys((*raw, *kept)))
        check.sql(f"{key}.expr", column.expr, readable, "an expression over the raw record")
    elif raw is not None:
        root, *inside = column.field_name.split(".")
        source_key = f"{key}.source" if column.source else key
        if column.field_name in raw or not inside:
            check.columns_exist(source_key, [column.field_name], raw, "the raw record")
        else:  # a field of a struct column (a Parquet source's, say)
            check.columns_exist(source_key, [root], raw, "the raw record")
            root_type = source.column_type(root)
            if root_type is None or struct_path(root_type, inside) is None:
                raise check.fail(source_key, f"{column.field_name!r} is not a field of {root} "
                                             f"({root_type})")
    elif not all(part.isidentifier() for part in column.field_name.split(".")):
        raise check.fail(f"{key}.source", f"{column.field_name!r} is not a field path like a.b")
    temporal = column.type.is_timestamp or column.type.name == "DATE"
    if column.format is not None and not temporal:
        raise check.fail(f"{key}.format", f"a format reads dates and timestamps, not {column.type}")
    if column.zone is not None:
        if not column.type.is_timestamp or column.format == ISO_8601_WITH_ZONE:
            raise check.fail(f"{key}.zone", "a zone is for timestamp text that carries none "
                                            f"(type {column.type}, format {column.format})")
        if not _ZONE_OFFSET.match(column.zone):
            try:
                zoneinfo.ZoneInfo(column.zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise check.fail(f"{key}.zone", f"{column.zone!r} is not a time zone "
                                                "(Region/City, UTC or +hh:mm)") from None
    if column.trim and not column.type.is_string:
        raise check.fail(f"{key}.trim", f"only text is trimmed, and {column.name} is {column.type}")


def _check_silver(check: _Checker, spec: PipelineSpec, silver: SilverSpec,
                  known: Mapping[str, TableDecl]) -> tuple[TableDecl, ...]:
    key = f"silver.{silver.name}"
    source = known[silver.input]
    if silver.parse.reads_json and source.column_type(silver.raw_column) != SqlType("STRING"):
        raise check.fail(f"{key}.raw_column", f"{silver.input} has no text column {silver.raw_column!r} "
                                              f"(columns: {', '.join(source.column_names)})")
    check.columns_exist(f"{key}.keep", silver.keep, source.column_names, f"the columns of {silver.input}")
    raw = _raw_fields(spec, silver, source)
    declared = [c.name for c in silver.columns]
    for column in silver.columns:
        column_key = f"{key}.columns.{column.name}"
        if column.name in silver.keep:
            raise check.fail(column_key, f"{column.name} is also kept from {silver.input}")
        _check_column(check, column, column_key, raw, source, silver.keep)
    # Rules run on the typed row, before enrichment: its columns and the kept ones.
    checked = [*declared, *silver.keep]
    typed = [*(Field(c.name, c.type) for c in silver.columns),
             *(f for f in source.fields if f.name in silver.keep)]
    if silver.changes is not None:
        _check_changes(check, silver, silver.changes, typed)
    for rule in silver.all_rules():
        rule_key = (f"{key}.columns.{rule.column}.rules.{rule.name}" if rule.column
                    else f"{key}.rules.{rule.name}")
        check.predicate(rule_key, rule.predicate, typed, f"rule {rule.name} of {silver.key}")
    if not silver.dedup.key:
        raise check.fail(f"{key}.dedup.key", "required: the column(s) that identify a row")
    check.columns_exist(f"{key}.dedup.key", silver.dedup.key, checked,
                        f"the deduplication key of {silver.key}")
    check.columns_exist(f"{key}.dedup.order_by", silver.dedup.order_by, checked,
                        f"the deduplication order of {silver.key}")
    if silver.event_time is not None:
        check.columns_exist(f"{key}.event_time", [silver.event_time], declared,
                            f"the columns of {silver.key}")
        event_type = next(c.type for c in silver.columns if c.name == silver.event_time)
        if not event_type.is_timestamp:
            raise check.fail(f"{key}.event_time", f"{silver.event_time} is {event_type}, not a TIMESTAMP")
    elif silver.dedup.scope is not DedupScope.TABLE:
        raise check.fail(f"{key}.dedup.scope",
                         f"deduplication scope {silver.dedup.scope.value} needs an event_time")
    names = set(checked)
    for enrichment in silver.enrichments:
        entry = f"{key}.enrich.{enrichment.dimension}"
        dimension = spec.dimension(enrichment.dimension)
        check.columns_exist(f"{entry}.join", [c for c, _ in enrichment.join], declared,
                            f"the join of {silver.key}")
        joined = [k for _, k in enrichment.join]
        if sorted(joined) != sorted(dimension.key):
            raise check.fail(f"{entry}.join", f"must pair a column with each key of dimension "
                                            f"{dimension.name} ({', '.join(dimension.key)}), got "
                                            f"{', '.join(joined)}")
        if enrichment.as_of is not None:
            _check_as_of(check, spec, enrichment, declared, silver, known)
        offered = (dimension.columns if dimension.table is None else
                   [n for n in known[dimension.table].column_names if n not in dimension.key])
        check.columns_exist(f"{entry}.columns",
                            [enrichment.source_of(c) for c in enrichment.columns],
                            offered, f"dimension {dimension.name}")
        check.columns_exist(f"{entry}.defaults", enrichment.defaults, enrichment.columns,
                            f"the columns taken from {dimension.name}")
        for name in enrichment.columns:
            if name in names:
                raise check.fail(f"{entry}.columns", f"{name} is already a column of {silver.key}"
                                 + ("" if enrichment.renamed else
                                    f" (take it under another name: columns: {{{dimension.name}_"
                                    f"{name}: {name}}})"))
            names.add(name)
    if silver.python is not None:
        check.python_step(f"{key}.python", silver.python)
    tables = spec.tables_of_silver(silver, known)
    if silver.changes is not None:
        values = [n for n in tables[0].column_names if n not in silver.changes.keys]
        for option in ("track_history", "track_history_except"):
            check.columns_exist(f"{key}.changes.{option}_columns",
                                getattr(silver.changes, option) or (), values,
                                f"the columns of {silver.key} beside its keys")
    check.doc(key, silver.doc, tables[0])
    return tables


def _check_changes(check: _Checker, silver: SilverSpec, changes: ChangesSpec,
                   typed: Sequence[Field]) -> None:
    """A change flow's keys and sequence are declared columns, the sequence orderable, the
    delete predicate true or false, and no column takes a name the flow gives its own."""
    key = f"silver.{silver.name}.changes"
    declared = [c.name for c in silver.columns]
    check.columns_exist(f"{key}.keys", changes.keys, declared, f"the columns of {silver.key}")
    order = f"{key}.{changes.order_key}"
    check.columns_exist(order, changes.sequence_by, declared, f"the columns of {silver.key}")
    if set(changes.keys) & set(changes.sequence_by):
        raise check.fail(order, "a key column cannot order its own changes")
    for column in silver.columns:
        if column.name in changes.sequence_by and not column.type.is_orderable:
            raise check.fail(order, f"{column.name} is {column.type}, which has no order")
        if column.name in (DELETED, VALID_FROM, VALID_TO, IS_CURRENT):
            raise check.fail(f"silver.{silver.name}.columns.{column.name}",
                             f"{column.name} is a column a change flow adds itself")
    if changes.delete_when is not None:
        check.predicate(f"{key}.delete_when", changes.delete_when, typed,
                        f"the delete predicate of {silver.key}")
    if changes.keep_deletes_for is not None and INGESTED_AT not in silver.keep:
        raise check.fail(f"{key}.keep_deletes_for", f"counts from {INGESTED_AT}, which "
                                                    f"silver.{silver.name}.keep does not keep")


def _check_gold(check: _Checker, spec: PipelineSpec, gold: GoldSpec,
                known: Mapping[str, TableDecl]) -> tuple[TableDecl, ...]:
    key = f"gold.{gold.name}"
    source = known[gold.input]
    if source.mode is OutputMode.UPDATE:
        # A Delta stream reads appends only: a MERGE into its input stops the query.
        raise check.fail(f"{key}.input", f"{gold.input} is kept up to date in place (mode update), "
                                         "which a stream cannot read; read its input instead, or "
                                         "declare it mode append")
    available = source.column_names
    what = f"the columns of {gold.input}"
    if gold.filter is not None:
        check.predicate(f"{key}.filter", gold.filter, source.fields, f"the filter of {gold.key}")
    if gold.python is not None:
        check.python_step(f"{key}.python", gold.python)
        check.columns_exist(f"{key}.keys", gold.keys, [f.name for f in gold.columns],
                            f"the columns of {gold.key}")
    elif gold.join is not None:
        _check_join(check, spec, gold, known)
    else:
        assert gold.window is not None
        window = gold.window
        if not window.column:
            raise check.fail(f"{key}.window.column",
                             f"{gold.input} declares no event_time: name the window's column")
        check.columns_exist(f"{key}.window.column", [window.column], available, what)
        window_type = source.column_type(window.column)
        assert window_type is not None
        if not window_type.is_timestamp:
            raise check.fail(f"{key}.window.column",
                             f"a window needs a TIMESTAMP column, and {window.column} is {window_type}")
        if window.kind is WindowKind.SESSION and gold.mode is OutputMode.UPDATE \
                and not gold.recomputed:
            raise check.fail(f"{key}.mode", "Spark's streaming aggregation keeps session windows "
                                            "in append mode only: closed sessions are appended "
                                            "(refresh: recompute keeps them in mode update)")
        check.columns_exist(f"{key}.group_by", gold.group_by, available, what)
        taken = set(window.bounds)
        for group in gold.group_by:
            if group in taken:
                raise check.fail(f"{key}.group_by", f"{group} is a name of the window's bounds")
            taken.add(group)
        for aggregate in gold.aggregates:
            _check_aggregate(check, f"{key}.aggregates.{aggregate.name}", gold, aggregate.name, source,
                             taken)
            taken.add(aggregate.name)
    tables = tuple(t for t in spec.tables_of_gold(gold, known))
    check.doc(key, gold.doc, tables[0])
    return tables


def _event_time(check: _Checker, spec: PipelineSpec, key: str, table: TableDecl) -> str:
    """The event time a stream of ``table`` is watermarked on (its silver ``event_time``)."""
    silver = next((s for s in spec.silver if s.key == table.key and s.event_time), None)
    if silver is None or silver.event_time is None:
        raise check.fail(key, f"{table.key} declares no event_time: a stream-stream join needs a "
                              "watermark on both sides")
    return silver.event_time


def _check_join(check: _Checker, spec: PipelineSpec, gold: GoldSpec,
                known: Mapping[str, TableDecl]) -> None:
    assert gold.join is not None
    key, join = f"gold.{gold.name}", gold.join
    left = known[gold.input]
    right = known.get(join.input)
    if right is None:
        raise check.fail(f"{key}.join.input", f"unknown table {join.input!r}")
    if right.mode is OutputMode.UPDATE:
        raise check.fail(f"{key}.join.input", f"{join.input} is kept up to date in place (mode "
                                              "update), which a stream cannot read")
    _event_time(check, spec, f"{key}.input", left)
    _event_time(check, spec, f"{key}.join.input", right)
    if join.filter is not None:
        check.predicate(f"{key}.join.filter", join.filter, right.fields,
                        f"the join filter of {gold.key}")
    check.columns_exist(f"{key}.join.equal", join.equal, left.column_names,
                        f"the columns of {gold.input}")
    check.columns_exist(f"{key}.join.equal", join.equal, right.column_names,
                        f"the columns of {join.input}")
    sides = {"left": left, "right": right}
    for column in gold.select:
        where = f"{key}.select.{column.name}"
        if column.reference is not None:
            side, name = column.reference
            check.columns_exist(where, [name], sides[side].column_names,
                                f"the columns of {sides[side].key} ({side})")
            continue
        for name in check.sql(where, column.expr, None, f"column {column.name}", qualified=True):
            side, _, field = name.partition(".")
            if side not in sides or not field:
                raise check.fail(where, f"{name!r}: name columns as left.<column> (of "
                                        f"{gold.input}) or right.<column> (of {join.input})")
            check.columns_exist(where, [field], sides[side].column_names,
                                f"the columns of {sides[side].key} ({side})")
    output = [column.name for column in gold.select]
    check.columns_exist(f"{key}.keys", gold.keys, output, f"the columns of {gold.key}")
    check.columns_exist(f"{key}.latest_by", gold.latest_by, output, f"the columns of {gold.key}")


def _check_aggregate(check: _Checker, key: str, gold: GoldSpec, name: str, source: TableDecl,
                     taken: set[str]) -> None:
    aggregate = next(a for a in gold.aggregates if a.name == name)
    if name in taken:
        raise check.fail(key, f"{name} is already a column of {gold.key}")
    function = aggregate.function
    if aggregate.column is None:
        if function in _NEEDS_COLUMN:
            raise check.fail(f"{key}.column", f"{function.value} needs a column")
        input_type = None
    else:
        check.columns_exist(f"{key}.column", [aggregate.column], source.column_names,
                            f"aggregate {name} (columns of {gold.input})")
        input_type = source.column_type(aggregate.column)
        assert input_type is not None
        if function in _NUMERIC_ONLY and not input_type.is_numeric:
            raise check.fail(f"{key}.column", f"{function.value} needs a number, and {aggregate.column} "
                                              f"is {input_type}")
        if not input_type.is_orderable and function in (AggregateFunction.MIN, AggregateFunction.MAX):
            raise check.fail(f"{key}.column", f"{function.value} cannot order {input_type}")
    if aggregate.default is not None:
        result = aggregate.result_type(input_type)
        if function not in (AggregateFunction.SUM, AggregateFunction.MIN, AggregateFunction.MAX,
                            AggregateFunction.AVG) or not result.is_numeric:
            raise check.fail(f"{key}.default", f"{function.value} of {aggregate.column or '*'} is never "
                                               "null, or not a number: a numeric default does not apply")
