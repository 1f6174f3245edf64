"""A pipeline's declaration as a whole, and every table it writes derived from it in one place.

Its parts are :mod:`medallion.pipeline.model`'s typed, frozen objects.

A :class:`PipelineSpec` is what ``conf/pipelines/<name>.yaml`` says once loaded
(:mod:`medallion.pipeline.load`) and checked (:mod:`medallion.pipeline.validate`). Everything the
engine, the catalog and ``medallion status`` need about a table is derived here from the
declaration, in one place: :meth:`PipelineSpec.tables` lists every table the pipeline writes, with
its layer, columns and types, comments, expectations, time column, output mode and MERGE keys.

Derivation rules (``docs/pipelines.md`` tells them to users):

* bronze columns come from the source's format (JSON Lines: ``raw``; CSV: the header, as text, plus
  ``_corrupt_record``; Parquet: the declared schema; Kafka: value as ``raw``, key, topic, partition,
  offset, ``kafka_timestamp``), then ``source_file`` and ``ingested_at``;
* silver columns are the declared columns, then each enrichment's columns, then the input columns
  it keeps (``keep``); its quarantine holds the raw record, the key columns, ``reasons`` and the
  kept columns;
* gold columns are the window bounds and grouping columns (sessions: grouping first, as a session
  belongs to its key), then the aggregates, typed as Spark types them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from medallion.config.model import ViewSpec
from medallion.pipeline.kinds import (
    INGESTED_AT,
    Layer,
    OutputMode,
    Severity,
    TableRole,
    WindowKind,
)
from medallion.pipeline.model import (
    DELETED,
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    DimensionSpec,
    Field,
    GoldSpec,
    SilverSpec,
    SourceSpec,
    TableDoc,
)
from medallion.pipeline.types import (
    BOOLEAN,
    STRING,
    STRING_ARRAY,
    TIMESTAMP,
    SqlType,
)


@dataclass(frozen=True)
class TableDecl:
    """A table the pipeline writes, derived from its declaration: what the engine, the catalog and
    ``medallion status`` need (its path ``<lakehouse>/<layer>/<name>``, checkpoint
    ``<lakehouse>/_checkpoints/<layer>/<name>``, schema, comments, gates, keys)."""

    layer: Layer
    name: str
    role: TableRole
    fields: tuple[Field, ...]
    doc: TableDoc = TableDoc()
    time_column: str | None = INGESTED_AT  # its newest event time (freshness) is read from this
    mode: OutputMode = OutputMode.APPEND
    merge_keys: tuple[str, ...] = ()
    quarantine: str | None = None  # key of the table its rejected rows go to
    declared_at: str = ""  # key path of the declaration, for messages
    # Made with deletion vectors: a MERGE marks the rows it replaces instead of rewriting their
    # files. A change flow's tables, whose every batch replaces rows of keys spread over all files.
    deletion_vectors: bool = False

    @property
    def key(self) -> str:
        """``<layer>/<name>``, as users and logs say it."""
        return f"{self.layer.value}/{self.name}"

    @property
    def qualified_name(self) -> str:
        """Catalog name, ``<layer>.<name>``."""
        return f"{self.layer.value}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        """The columns' names, in order."""
        return tuple(f.name for f in self.fields)

    @property
    def schema_ddl(self) -> str:
        """The schema as Spark DDL, ``name TYPE, ...``."""
        return ", ".join(f.ddl() for f in self.fields)

    def column_type(self, name: str) -> SqlType | None:
        """The type of column ``name``; None when there is no such column."""
        return next((f.type for f in self.fields if f.name == name), None)


QUARANTINE_REASONS = Field("reasons", STRING_ARRAY)


QUARANTINED_AT = Field("quarantined_at", TIMESTAMP)


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline, as declared in ``conf/pipelines/<name>.yaml`` (and its overlay)."""

    name: str
    file: str
    watermark: str
    sources: tuple[SourceSpec, ...] = ()
    dimensions: tuple[DimensionSpec, ...] = ()
    silver: tuple[SilverSpec, ...] = ()
    gold: tuple[GoldSpec, ...] = ()
    views: tuple[ViewSpec, ...] = ()  # catalog views over this pipeline's tables
    description: str = ""
    # dotted key -> the file it came from (a key an overlay set names the overlay)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def source_of(self, key: str) -> str:
        """The file that declared ``key`` (or its nearest declared parent)."""
        while key:
            if key in self.origins:
                return self.origins[key]
            key = key.rpartition(".")[0]
        return self.file

    def declared_at(self, key: str) -> str:
        """``key`` and the file that declares it (an overlay that set it, else the pipeline's own
        file, under whichever configuration folder was loaded), as messages name a declaration."""
        return f"{key} in {self.source_of(key)}"

    def source(self, name: str) -> SourceSpec:
        """The source called ``name``."""
        return next(s for s in self.sources if s.name == name)

    def dimension(self, name: str) -> DimensionSpec:
        """The dimension called ``name``."""
        return next(d for d in self.dimensions if d.name == name)

    def dimension_input(self, dimension: DimensionSpec) -> str:
        """The table a dimension is looked up in: its silver table, or its source's bronze table."""
        if dimension.table is not None:
            return dimension.table
        assert dimension.source is not None
        return self.source(dimension.source).bronze_key

    def watermark_of(self, gold: GoldSpec) -> str:
        """The lateness a gold table tolerates: its own, else its silver input's, else the pipeline's."""
        silver = next((s for s in self.silver if s.key == gold.input), None)
        return gold.watermark or (silver.watermark if silver else None) or self.watermark

    def alternatives_of(self, bronze_key: str) -> tuple[str, ...]:
        """Bronze tables that stand in for ``bronze_key`` when their source is chosen instead."""
        primary = next((s for s in self.sources if s.bronze_key == bronze_key), None)
        if primary is None:
            return ()
        return tuple(s.bronze_key for s in self.sources if s.alternative_to == primary.name)

    def tables(self) -> tuple[TableDecl, ...]:
        """Every table the pipeline writes, bronze, silver (and quarantines), gold, in that order.

        Assumes a checked spec (:func:`medallion.pipeline.validate.validate`): references resolve.
        """
        found: dict[str, TableDecl] = {t.key: t for t in self.tables_of_sources()}
        pending = list(self.silver)
        while pending:  # a silver table a dimension is kept from before the tables it enriches
            silver = next(s for s in pending if all(
                self.dimension_input(self.dimension(e.dimension)) in found for e in s.enrichments))
            pending.remove(silver)
            for decl in self.tables_of_silver(silver, found):
                found[decl.key] = decl
        for gold in self.gold:
            for decl in self.tables_of_gold(gold, found):
                found[decl.key] = decl
        return tuple(found.values())

    def tables_of_sources(self) -> tuple[TableDecl, ...]:
        """The bronze tables, one per source."""
        return tuple(TableDecl(Layer.BRONZE, s.bronze.table, TableRole.BRONZE, s.bronze_fields(),
                               s.bronze.doc, declared_at=f"sources.{s.name}.bronze")
                     for s in self.sources)

    def table(self, key: str) -> TableDecl:
        """The table ``<layer>/<name>`` (or ``<layer>.<name>``); KeyError if the pipeline has none."""
        wanted = key.replace(".", "/", 1)
        for decl in self.tables():
            if decl.key == wanted:
                return decl
        raise KeyError(f"pipeline {self.name} has no table {key!r}")

    def silver_fields(self, silver: SilverSpec, known: Mapping[str, TableDecl]) -> tuple[Field, ...]:
        """A silver table's columns: declared, then enrichments', then the kept input columns."""
        fields = [Field(c.name, c.type) for c in silver.columns]
        for enrichment in silver.enrichments:
            looked_up = known[self.dimension_input(self.dimension(enrichment.dimension))]
            for name in enrichment.columns:
                fields.append(Field(name, looked_up.column_type(enrichment.source_of(name)) or STRING))
        source = known[silver.input]
        fields += [Field(name, source.column_type(name) or STRING) for name in silver.keep]
        return tuple(fields)

    def tables_of_silver(self, silver: SilverSpec,
                         known: Mapping[str, TableDecl]) -> tuple[TableDecl, ...]:
        """A silver table and its quarantine (a change flow's: and its applied changes), given the
        tables already derived (its inputs')."""
        fields = self.silver_fields(silver, known)
        by_name = {f.name: f for f in fields}
        source = known[silver.input]
        if silver.parse.reads_json:
            record: tuple[Field, ...] = (Field(silver.raw_column, STRING),)
        else:
            record = tuple(f for f in source.fields if f.name not in silver.keep)
        record_names = {f.name for f in record}
        # The key as far as it could be read: the quarantine can be searched by it.
        keys = tuple(by_name[k] for k in silver.dedup.key if k not in record_names)
        kept = tuple(by_name[k] for k in silver.keep)
        table = TableDecl(Layer.SILVER, silver.name, TableRole.SILVER, fields, silver.doc,
                          time_column=silver.event_time or INGESTED_AT,
                          quarantine=silver.quarantine_key, declared_at=f"silver.{silver.name}")
        changes = silver.changes
        if changes is not None:
            sequence = [by_name[c] for c in changes.sequence_by]
            position = (sequence[0].type if len(sequence) == 1 else
                        SqlType("STRUCT", args=tuple(f.type for f in sequence),
                                fields=tuple(f.name for f in sequence)))
            history = ((Field(VALID_FROM, position), Field(VALID_TO, position),
                        Field(IS_CURRENT, BOOLEAN)) if changes.scd == 2 else ())
            table = replace(table, fields=(*fields, *history), mode=OutputMode.UPDATE,
                            merge_keys=(*changes.keys, *((VALID_FROM,) if history else ())),
                            deletion_vectors=True)
        quarantine = TableDecl(
            Layer.SILVER, f"{silver.name}_quarantine", TableRole.QUARANTINE,
            (*record, *keys, QUARANTINE_REASONS, *kept),
            TableDoc(comment=f"Every row of {silver.input} that is not a valid row of {silver.key}, "
                             "with the reasons it failed."),
            time_column=INGESTED_AT if INGESTED_AT in silver.keep else None,
            declared_at=f"silver.{silver.name}")
        if changes is None:
            return table, quarantine
        applied = TableDecl(
            Layer.SILVER, f"{silver.name}_changes", TableRole.CHANGES, (*fields, Field(DELETED, BOOLEAN)),
            TableDoc(comment=f"The changes {silver.key} is kept from, one per key and sequence, "
                             f"{DELETED} true where one deletes its key."),
            time_column=table.time_column, declared_at=f"silver.{silver.name}.changes",
            deletion_vectors=True)
        return table, quarantine, applied

    def gold_fields(self, gold: GoldSpec, known: Mapping[str, TableDecl]) -> tuple[Field, ...]:
        """A gold table's columns, derived from window, grouping and aggregates (or declared)."""
        if gold.python is not None:
            return gold.columns
        source = known[gold.input]
        if gold.join is not None:
            sides = {"left": source, "right": known[gold.join.input]}
            fields = []
            for column in gold.select:
                reference = column.reference
                if column.type is not None:
                    fields.append(Field(column.name, column.type))
                elif reference is not None:
                    side, name = reference
                    fields.append(Field(column.name, sides[side].column_type(name) or STRING))
            return tuple(fields)
        assert gold.window is not None
        start, end = gold.window.bounds
        bounds = (Field(start, TIMESTAMP), Field(end, TIMESTAMP))
        groups = tuple(Field(g, source.column_type(g) or STRING) for g in gold.group_by)
        aggregates = tuple(
            Field(a.name, a.result_type(source.column_type(a.column) if a.column else None))
            for a in gold.aggregates)
        if gold.window.kind is WindowKind.SESSION:
            return (*groups, *bounds, *aggregates)
        return (*bounds, *groups, *aggregates)

    def _joined_time(self, gold: GoldSpec, fields: tuple[Field, ...]) -> str:
        """A join's time column: the one selected as its input's event time (else the first)."""
        silver = next((s for s in self.silver if s.key == gold.input), None)
        event_time = silver.event_time if silver is not None else None
        return next((s.name for s in gold.select if s.reference == ("left", event_time)),
                    fields[0].name)

    def tables_of_gold(self, gold: GoldSpec, known: Mapping[str, TableDecl]) -> tuple[TableDecl, ...]:
        """A gold table, and its quarantine when an expectation drops rows."""
        fields = self.gold_fields(gold, known)
        drops = any(e.severity is Severity.DROP for e in gold.doc.expectations)
        time_column = gold.window.bounds[1] if gold.window else self._joined_time(gold, fields)
        table = TableDecl(Layer.GOLD, gold.name, TableRole.GOLD, fields, gold.doc,
                          time_column=time_column, mode=gold.mode, merge_keys=gold.merge_keys,
                          quarantine=f"{gold.key}_quarantine" if drops else None,
                          declared_at=f"gold.{gold.name}")
        if not drops:
            return (table,)
        quarantine = TableDecl(
            Layer.GOLD, f"{gold.name}_quarantine", TableRole.QUARANTINE,
            (*fields, QUARANTINE_REASONS, QUARANTINED_AT),
            TableDoc(comment=f"Rows of {gold.key} that a quality gate dropped, with the expectations "
                             "they failed."),
            time_column=QUARANTINED_AT.name, declared_at=f"gold.{gold.name}")
        return table, quarantine
