"""The project: the engine settings of one environment and every declared pipeline, checked
together before Spark starts. :func:`load_settings` makes the one object every command and job
is handed.

The pipelines are ``<conf_dir>/pipelines/<name>.yaml`` (with ``<name>.<env>.yaml`` overlays),
each checked on its own and against the others; the settings that name declared tables
(``kafka.publish``, ``catalog.views``, ``sources.<name>``) are checked against them here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from medallion.config.kafka import TOPIC
from medallion.config.load import read_settings, source_folder_setting
from medallion.config.model import (
    CatalogSettings,
    KafkaPublish,
    KafkaSettings,
    LineageSettings,
    MaintenanceSettings,
    Paths,
    QualitySettings,
    ReadFrom,
    S3Settings,
    SparkSettings,
    StateStoreSettings,
    StreamingSettings,
    ThriftSettings,
    ViewSpec,
)
from medallion.config.reader import SettingsReader, optional_string
from medallion.errors import ConfigError
from medallion.pipeline.graph import PipelineGraph, build_graph
from medallion.pipeline.model import ExpectationSpec, GoldSpec, SourceSpec, TableDoc
from medallion.pipeline.spec import PipelineSpec, TableDecl
from medallion.pipeline.validate import check_pipelines
from medallion.pipeline.views import name_problem, query_problem


@dataclass(frozen=True)
class Settings:
    """The whole configuration of one run."""

    env: str
    paths: Paths
    spark: SparkSettings
    streaming: StreamingSettings
    sources: Mapping[str, str]  # file source name -> landing folder, where not the declared one
    conf_dir: str  # the configuration folder these were loaded from, absolute
    quality: QualitySettings = field(default_factory=lambda: QualitySettings())
    catalog: CatalogSettings = CatalogSettings()
    thrift: ThriftSettings = ThriftSettings()
    read_from: ReadFrom = ReadFrom.FILES
    kafka: KafkaSettings = KafkaSettings()
    s3: S3Settings = S3Settings()
    state_store: StateStoreSettings = StateStoreSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    lineage: LineageSettings = LineageSettings()
    # What the engine runs: every pipeline of <conf_dir>/pipelines, with the environment's
    # overlays, validated (never empty once loaded by load_settings).
    pipelines: tuple[PipelineSpec, ...] = ()
    # The tables of the declared pipelines that ``only`` set aside (``run --pipeline``): declared,
    # though not run by these settings.
    set_aside: frozenset[str] = frozenset()

    @property
    def graphs(self) -> tuple[PipelineGraph, ...]:
        """The dependency graph of each pipeline run, in their order: the order the engine
        builds tables in (:func:`~medallion.pipeline.graph.stages`)."""
        return tuple(build_graph(spec) for spec in self.pipelines)

    def pipeline(self, name: str) -> PipelineSpec:
        """The declared pipeline called ``name``; KeyError naming the known ones if there is none."""
        for spec in self.pipelines:
            if spec.name == name:
                return spec
        raise KeyError(f"no pipeline {name!r} (pipelines: {', '.join(p.name for p in self.pipelines)})")

    def declared_table(self, key: str) -> tuple[PipelineSpec, TableDecl]:
        """The table ``<layer>/<name>`` (or ``<layer>.<name>``) a pipeline declares, with that pipeline.

        KeyError when no pipeline writes it (engine tables such as ``quality/results`` are not
        declared).
        """
        for spec in self.pipelines:
            try:
                return spec, spec.table(key)
            except KeyError:
                continue
        raise KeyError(f"no declared table {key!r}")

    def table_doc(self, key: str) -> TableDoc | None:
        """The declared comments and expectations of table ``key`` (``layer/name`` or
        ``layer.name``); None for a table no pipeline declares (the engine's own)."""
        try:
            return self.declared_table(key)[1].doc
        except KeyError:
            return None

    def expectations_of(self, key: str) -> tuple[ExpectationSpec, ...]:
        """What gates table ``key``: the expectations its pipeline declares for it; none when the
        gates are off (``quality.enabled: false``) or no pipeline declares the table."""
        doc = self.table_doc(key) if self.quality.enabled else None
        return doc.expectations if doc is not None else ()

    def gold_specs(self) -> tuple[tuple[PipelineSpec, GoldSpec], ...]:
        """Every declared gold table with its pipeline, pipelines in name order, tables as declared."""
        return tuple((spec, gold) for spec in self.pipelines for gold in spec.gold)

    def active_sources(self, pipeline: PipelineSpec) -> tuple[SourceSpec, ...]:
        """The sources of ``pipeline`` that land data in this configuration: every source without
        alternatives, and of a source and its alternatives the one that runs. With
        ``sources.read_from: kafka`` that is the Kafka one where a group has one; otherwise the
        one the declaration marks ``active``."""
        chosen = []
        for source in pipeline.sources:
            if source.alternative_to is not None:
                continue
            group = (source, *(s for s in pipeline.sources if s.alternative_to == source.name))
            kafka = [s for s in group if s.format.value == "kafka"]
            if len(group) > 1 and self.read_from is ReadFrom.KAFKA and kafka:
                chosen.append(kafka[0])
            elif len(group) > 1:
                chosen.append(next(s for s in group if s.active))
            else:
                chosen.append(source)
        return tuple(chosen)

    def input_of(self, pipeline: PipelineSpec, table: str) -> str:
        """The table a flow declared to read ``table`` reads: the bronze table of the source that
        runs in its place when ``table`` is the bronze table of a source not chosen."""
        alternatives = (table, *pipeline.alternatives_of(table))
        if len(alternatives) == 1:
            return table
        active = {s.bronze_key for s in self.active_sources(pipeline)}
        return next((key for key in alternatives if key in active), table)

    def only(self, names: Sequence[str]) -> Settings:
        """These settings narrowed to the pipelines ``names`` (``run --pipeline``): their tables
        alone are run, registered and published. ConfigError naming the declared ones otherwise."""
        declared = [p.name for p in self.pipelines]
        unknown = [name for name in names if name not in declared]
        if unknown:
            raise ConfigError("--pipeline", "the command line",
                              f"no declared pipeline {', '.join(map(repr, unknown))} "
                              f"(declared: {', '.join(declared)})")
        kept = tuple(p for p in self.pipelines if p.name in names)
        tables = declared_tables(kept)
        publish = tuple(entry for entry in self.kafka.publish if entry.table in tables)
        return replace(self, pipelines=kept, kafka=replace(self.kafka, publish=publish),
                       set_aside=self.set_aside | (declared_tables(self.pipelines).keys() - tables))

    def kafka_sources(self) -> tuple[SourceSpec, ...]:
        """Every declared Kafka source of every pipeline, the ones that run first."""
        declared = [s for p in self.pipelines for s in p.sources if s.format.value == "kafka"]
        active = [s for p in self.pipelines for s in self.active_sources(p)]
        return tuple(sorted(declared, key=lambda s: s not in active))

    @property
    def uses_kafka(self) -> bool:
        """Whether a job reads or writes Kafka (the session then needs the Kafka connector)."""
        reads = any(s.format.value == "kafka" for p in self.pipelines for s in self.active_sources(p))
        return reads or bool(self.kafka.publish)

    def table_path(self, layer: str, table: str) -> str:
        """Path of a Delta table: ``<lakehouse>/<layer>/<table>``."""
        return f"{self.paths.lakehouse}/{layer}/{table}"

    def checkpoint_path(self, name: str) -> str:
        """Checkpoint folder of one streaming query, outside every table's folder."""
        return f"{self.paths.lakehouse}/_checkpoints/{name}"

    def landing_path(self, entity: str) -> str:
        """Folder of the landing zone that holds one entity's files."""
        return f"{self.paths.landing}/{entity}"

    def source_folder(self, source: SourceSpec) -> str:
        """The landing folder of a file source, under ``<landing>``: its declared ``path``, unless
        the engine setting ``sources.<name>`` (``conf/<env>.yaml``) moves it."""
        return self.sources.get(source.name) or source.path or source.name

    def file_sources(self) -> dict[str, SourceSpec]:
        """Every declared source of landing files, of every pipeline, by name."""
        return {s.name: s for p in self.pipelines for s in p.sources if s.format.value != "kafka"}

    @property
    def views(self) -> tuple[ViewSpec, ...]:
        """The views the catalog is given: each pipeline's own (``views:``), then those of
        ``catalog.views``, which may read them."""
        return (*(view for pipeline in self.pipelines for view in pipeline.views),
                *self.catalog.views)

    def catalog_dir(self) -> str:
        """``<lakehouse>/_catalog``: warehouse of the catalog's databases, embedded metastore."""
        return f"{self.paths.lakehouse}/_catalog"


def load_settings(
    env: str | None = None,
    conf_dir: str | Path | None = None,
    landing: str | None = None,
    lakehouse: str | None = None,
    trigger: str | None = None,
    read_from: str | None = None,
    kafka_bootstrap: str | None = None,
) -> Settings:
    """Load and check the settings of environment ``env`` (default ``$MEDALLION_ENV`` or local)
    and every declared pipeline, the settings that name declared tables against them."""
    engine, reader = read_settings(env, conf_dir, landing, lakehouse, trigger, read_from,
                                   kafka_bootstrap)
    pipelines = load_declared_pipelines(engine.conf_dir, engine.env)
    file_sources = sorted({s.name for p in pipelines for s in p.sources if s.format.value != "kafka"})
    sources_section = reader.section("sources", {*file_sources, "read_from"})
    # sources.<name>: where this environment's landing zone keeps a declared file source's files,
    # when not at the folder its declaration names.
    sources = {
        name: source_folder_setting(f"sources.{name}", reader.string(sources_section, f"sources.{name}"),
                                    reader.source.of(f"sources.{name}"))
        for name in file_sources if name in sources_section
    }
    tables = declared_tables(pipelines)
    return Settings(
        env=engine.env, paths=engine.paths, spark=engine.spark, streaming=engine.streaming,
        sources=sources, conf_dir=str(engine.conf_dir.resolve()),
        catalog=replace(engine.catalog, views=_catalog_views(reader, tables, pipelines)),
        thrift=engine.thrift, quality=engine.quality, read_from=engine.read_from,
        kafka=replace(engine.kafka, publish=_kafka_publish(reader, tables)), s3=engine.s3,
        state_store=engine.state_store,
        maintenance=replace(engine.maintenance, zorder={
            key: decl.doc.zorder for key, decl in tables.items() if decl.doc.zorder}, cluster_by={
            key: decl.doc.cluster_by for key, decl in tables.items() if decl.doc.cluster_by}),
        lineage=engine.lineage, pipelines=pipelines)


def declared_tables(pipelines: tuple[PipelineSpec, ...]) -> dict[str, TableDecl]:
    """Every table the pipelines declare (quarantines included), by ``layer/name``."""
    return {decl.key: decl for pipeline in pipelines for decl in pipeline.tables()}

def load_declared_pipelines(conf_dir: Path, env: str) -> tuple[PipelineSpec, ...]:
    """Every pipeline of ``<conf_dir>/pipelines`` with ``env``'s overlays, loaded and validated,
    each on its own and against the others (:func:`~medallion.pipeline.validate.check_pipelines`;
    a :class:`~medallion.pipeline.errors.PipelineError` is a :class:`ConfigError`)."""
    return tuple(checked.spec for checked in check_pipelines(conf_dir, env))


def _catalog_views(reader: SettingsReader, tables: Mapping[str, TableDecl],
                   pipelines: tuple[PipelineSpec, ...]) -> tuple[ViewSpec, ...]:
    """``catalog.views``: views over several pipelines' tables, each reading declared ones."""
    section = reader.tree.get("catalog") or {}
    known = [decl.qualified_name for decl in tables.values()]
    declared_views = {view.name: pipeline for pipeline in pipelines for view in pipeline.views}
    views_section = reader.section_of(section, "catalog.views")
    readable = [*known, *declared_views, *map(str, views_section)]
    views = []
    for name in views_section:
        key = f"catalog.views.{name}"
        problem = name_problem(str(name), known)
        if problem:
            raise ConfigError(key, reader.source.of(key), problem)
        if name in declared_views:
            raise ConfigError(key, reader.source.of(key), f"pipeline {declared_views[name].name} "
                              "declares a view of this name: a catalog name has one declaration "
                              f"(remove this one, or rename it; {declared_views[name].file})")
        view_section = reader.section_of(views_section, key, {"sql", "comment"}, name)
        sql = reader.string(view_section, f"{key}.sql")
        problem = query_problem(sql, readable, "no pipeline declares")
        if problem:
            raise ConfigError(f"{key}.sql", reader.source.of(f"{key}.sql"), problem)
        views.append(ViewSpec(name=name, sql=sql.strip().rstrip(";"),
                              comment=optional_string(reader, view_section, f"{key}.comment")))
    return tuple(views)


def _kafka_publish(reader: SettingsReader, tables: Mapping[str, TableDecl]) -> tuple[KafkaPublish, ...]:
    """``kafka.publish``: which declared silver and gold tables go to which topics."""
    source = reader.source
    kafka = reader.tree.get("kafka") or {}
    entries = kafka.get("publish", []) or []
    if not isinstance(entries, list):
        raise ConfigError("kafka.publish", source.of("kafka.publish"),
                          "must be a list of {table, topic[, key]}")
    published: list[KafkaPublish] = []
    for i, entry in enumerate(entries):
        key = f"kafka.publish[{i}]"
        origin = source.of("kafka.publish")
        if not isinstance(entry, Mapping) or set(entry) - {"table", "topic", "key"}:
            raise ConfigError(key, origin, f"must map table, topic and key, got {entry!r}")
        table, topic, columns = entry.get("table"), entry.get("topic"), entry.get("key", []) or []
        spec = tables.get(str(table).replace(".", "/", 1))
        if spec is None:
            raise ConfigError(f"{key}.table", origin,
                              f"no pipeline declares a table {table!r} (declared: {', '.join(tables)})")
        if spec.layer.value not in ("silver", "gold"):
            raise ConfigError(f"{key}.table", origin, "only silver and gold tables are published")
        if not isinstance(topic, str) or not TOPIC.match(topic):
            raise ConfigError(f"{key}.topic", origin, f"{topic!r} is not a topic name")
        if isinstance(columns, str):
            columns = [columns]
        unknown = [c for c in columns if c not in spec.column_names]
        if not isinstance(columns, list) or unknown:
            raise ConfigError(f"{key}.key", origin,
                              f"must list columns of {spec.key}; unknown: {unknown or columns!r}")
        published.append(KafkaPublish(spec.key, topic, tuple(columns)))
    return tuple(published)
