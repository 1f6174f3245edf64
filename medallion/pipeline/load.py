"""Loading ``conf/pipelines/<name>.yaml`` into a :class:`~medallion.pipeline.spec.PipelineSpec`.

One file per pipeline; its name is the file's stem. The overlay rule: for environment ``<env>``,
``conf/pipelines/<name>.<env>.yaml``, when it exists, is merged over ``<name>.yaml``: mappings
merge key by key, any other value (a list, a string) replaces the one below. Overlays of other
environments are ignored, and an overlay without its pipeline is an error. Every key remembers
the file that set it last, so each error reads
``invalid pipeline definition: <key path> (from <file>): <problem>``.

This module checks the shape (known keys, value kinds, enums, type names, durations); the
meaning (columns, windows, the graph) is :mod:`medallion.pipeline.validate`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from medallion.config.durations import parse_duration_seconds
from medallion.config.load import PIPELINES_DIR, landing_folder_problem
from medallion.config.model import ViewSpec
from medallion.config.yamlfiles import Origins, read_yaml
from medallion.pipeline import schema
from medallion.pipeline.errors import PipelineError
from medallion.pipeline.kinds import (
    IDENTIFIER,
    INGESTED_AT,
    SOURCE_FILE,
    AggregateFunction,
    DedupScope,
    JoinKind,
    OutputMode,
    ParseMode,
    Refresh,
    SourceFormat,
    WindowKind,
)
from medallion.pipeline.model import (
    DELETE_UNKNOWN,
    AggregateSpec,
    BronzeSpec,
    ChangesSpec,
    ColumnSpec,
    DedupSpec,
    DimensionSpec,
    EnrichmentSpec,
    Field,
    GoldSpec,
    JoinSpec,
    RuleSpec,
    SelectSpec,
    SilverSpec,
    SourceSpec,
    WindowSpec,
)
from medallion.pipeline.reader import (
    DELTA_NAMES,
    NOT_IN_DELTA_NAMES,
    DeclarationReader,
)
from medallion.pipeline.spec import PipelineSpec

DEFAULT_WATERMARK = "10 minutes"


_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


_DEFAULT_GLOB = {SourceFormat.JSON_LINES: "*.json", SourceFormat.CSV: "*.csv",
                 SourceFormat.PARQUET: "*.parquet"}


# The keys each section takes: the format's one description (medallion/pipeline/schema.py), which
# the shipped JSON Schema is made from too. `join`, never `on`: YAML 1.1 reads `on` as true.
_TOP_KEYS = set(schema.TOP)
_SOURCE_KEYS = set(schema.SOURCE)
_BRONZE_KEYS = set(schema.BRONZE)
_DIMENSION_KEYS = set(schema.DIMENSION) | set(schema.DIMENSION_TABLE)
_SILVER_KEYS = set(schema.SILVER)
_COLUMN_KEYS = set(schema.COLUMN)
_DEDUP_KEYS = set(schema.DEDUP)
_CHANGES_KEYS = set(schema.CHANGES)
_ENRICH_KEYS = set(schema.ENRICH)
_GOLD_KEYS = set(schema.GOLD)
_JOIN_KEYS = set(schema.JOIN)
_SELECT_KEYS = set(schema.SELECT)
_WINDOW_KEYS = set(schema.WINDOW)
_AGGREGATE_KEYS = set(schema.AGGREGATE)
_VIEW_KEYS = set(schema.VIEW)


def pipeline_files(conf_dir: Path) -> list[Path]:
    """The pipeline definitions under ``<conf_dir>/pipelines``: ``<name>.yaml``, no overlays."""
    folder = conf_dir / PIPELINES_DIR
    return sorted(p for p in folder.glob("*.yaml") if "." not in p.stem)


def load_pipelines(conf_dir: Path, env: str | None = None) -> tuple[PipelineSpec, ...]:
    """Every pipeline of ``<conf_dir>/pipelines``, with the overlays of ``env``, parsed (not validated)."""
    folder = conf_dir / PIPELINES_DIR
    files = pipeline_files(conf_dir)
    names = {p.stem for p in files}
    for overlay in sorted(folder.glob("*.*.yaml")):
        name, _, overlay_env = overlay.stem.partition(".")
        if overlay_env == env and name not in names:
            raise PipelineError("<file>", str(overlay),
                                f"an overlay of pipeline {name!r}, but there is no {name}.yaml beside it")
    return tuple(load_pipeline(path, env) for path in files)


def load_pipeline(path: Path, env: str | None = None) -> PipelineSpec:
    """The pipeline defined in ``path``, with ``<stem>.<env>.yaml`` beside it merged over it."""
    name = path.stem
    if not IDENTIFIER.match(name):
        raise PipelineError("<file>", str(path), f"{name!r} is not a pipeline name (letters, digits, _)")
    origins = Origins()
    tree: dict[str, Any] = {}
    origins.merge(tree, read_yaml(path, PipelineError), str(path))
    overlay = path.with_name(f"{name}.{env}.yaml") if env else None
    if overlay is not None and overlay.is_file():
        origins.merge(tree, read_yaml(overlay, PipelineError), str(overlay))
    return parse_pipeline(name, tree, origins, str(path))


def parse_pipeline(name: str, tree: Mapping[str, Any], origins: Origins, file: str) -> PipelineSpec:
    """Build the typed spec from a merged tree; the shape is checked, the meaning is not."""
    reader = DeclarationReader(origins, file)
    reader.keys(tree, "", _TOP_KEYS)
    watermark = reader.duration(tree, "watermark", DEFAULT_WATERMARK)
    sources = tuple(_source(reader, n, v) for n, v in reader.entries(tree, "sources").items())
    dimensions = tuple(_dimension(reader, n, v) for n, v in reader.entries(tree, "dimensions").items())
    silver = tuple(_silver(reader, n, v) for n, v in reader.entries(tree, "silver").items())
    dimensions = tuple(_keyed_by_changes(d, silver) for d in dimensions)
    gold = tuple(_gold(reader, n, v, silver) for n, v in reader.entries(tree, "gold").items())
    views = tuple(_view(reader, str(n), v) for n, v in reader.mapping(tree, "views", "").items())
    return PipelineSpec(name=name, file=file, watermark=watermark, sources=sources,
                        dimensions=dimensions, silver=silver, gold=gold, views=views,
                        description=reader.text(tree, "description", ""),
                        origins=dict(origins.files))


def _source(reader: DeclarationReader, name: str, value: Any) -> SourceSpec:
    key = f"sources.{name}"
    section = reader.mapping({name: value}, name, "sources", _SOURCE_KEYS, required=True)
    kind = reader.choice(section, "format", SourceFormat, key)
    bronze = reader.mapping(section, "bronze", key, _BRONZE_KEYS, required=True)
    table = reader.text(bronze, "table", prefix=f"{key}.bronze")
    if not IDENTIFIER.match(table):
        raise reader.error(f"{key}.bronze.table", f"{table!r} is not a table name")
    files = kind is not SourceFormat.KAFKA
    for needed, present in (("path", files), ("topics", not files)):
        if present and section.get(needed) is None:
            raise reader.error(f"{key}.{needed}", f"required for format {kind.value}")
        if not present and section.get(needed) is not None:
            raise reader.error(f"{key}.{needed}", f"not used by format {kind.value}")
    if section.get("header") is not None and kind is not SourceFormat.CSV:
        raise reader.error(f"{key}.header", "only a CSV source has a header")
    if section.get("schema") is not None and kind is not SourceFormat.PARQUET:
        raise reader.error(f"{key}.schema", "only a Parquet source declares its schema")
    header = reader.names(section, "header", key) if kind is SourceFormat.CSV else ()
    for index, column in enumerate(header):
        if NOT_IN_DELTA_NAMES.search(column):  # bronze's columns: the header's names
            raise reader.error(f"{key}.header.{index}",
                               f"{column!r} {DELTA_NAMES}; a header is a list: [a, b, c]")
    schema: tuple[Field, ...] = ()
    if kind is SourceFormat.PARQUET:
        schema = tuple(Field(str(c), reader.sql_type(t, f"{key}.schema.{c}"))
                       for c, t in reader.mapping(section, "schema", key, required=True).items())
        for field in schema:
            if NOT_IN_DELTA_NAMES.search(field.name):
                raise reader.error(f"{key}.schema.{field.name}", f"{field.name!r} {DELTA_NAMES}")
    topics = reader.names(section, "topics", key) if not files else ()
    for index, topic in enumerate(topics):
        if not _TOPIC.match(topic):
            raise reader.error(f"{key}.topics.{index}", f"{topic!r} is not a Kafka topic name")
    options = reader.mapping(section, "options", key)
    for option, setting in options.items():
        if not isinstance(setting, (str, int, float, bool)):
            raise reader.error(f"{key}.options.{option}", "a reader option is a string, a number "
                               f"or a boolean, got {setting!r}")
    path = reader.text(section, "path", prefix=key) if files else None
    if path is not None and (problem := landing_folder_problem(path)):
        raise reader.error(f"{key}.path", problem)
    glob = reader.text(section, "glob", _DEFAULT_GLOB[kind], key) if files else None
    if glob is not None and "/" in glob:
        raise reader.error(f"{key}.glob", f"{glob!r}: a glob matches a file's own name, in the "
                           "folder or under it, and cannot hold '/' (move the folder with path)")
    return SourceSpec(
        name=name, format=kind,
        bronze=BronzeSpec(table=table, doc=reader.doc(bronze, f"{key}.bronze", f"bronze/{table}")),
        path=path.rstrip("/") if path is not None else None,
        glob=glob,
        header=header, schema=schema, topics=topics,
        options={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()},
        alternative_to=reader.optional_text(section, "alternative_to", key),
        active=reader.boolean(section, "active", True, key),
    )


def _view(reader: DeclarationReader, name: str, value: Any) -> ViewSpec:
    if "." not in name and isinstance(value, Mapping) and value and not _VIEW_KEYS & set(value):
        inner = next(iter(value))  # views: {gold: {daily: {sql: ...}}}, as the key path reads
        raise reader.error(f"views.{name}", f"a view is keyed by its catalog name, schema and name "
                                            f"in one key ({name}.{inner}: {{sql: ...}}), not "
                                            f"nested under its schema")
    section = reader.mapping({name: value}, name, "views", _VIEW_KEYS, required=True)
    sql = reader.text(section, "sql", prefix=f"views.{name}")
    return ViewSpec(name=name, sql=sql.rstrip(";").strip(),
                    comment=reader.optional_text(section, "comment", f"views.{name}"))


def _dimension(reader: DeclarationReader, name: str, value: Any) -> DimensionSpec:
    key = f"dimensions.{name}"
    section = reader.mapping({name: value}, name, "dimensions", _DIMENSION_KEYS, required=True)
    if "table" in section:
        mixed = sorted(set(section) & set(schema.DIMENSION))
        if mixed:
            raise reader.error(f"{key}.{mixed[0]}", "a dimension kept from a table takes its key "
                                                    "and columns from the table's change flow: "
                                                    "declare either table or source, not both")
        table = reader.text(section, "table", prefix=key).replace(".", "/", 1)
        return DimensionSpec(name=name, source=None, key=(), columns=(), table=table)
    return DimensionSpec(
        name=name,
        source=reader.text(section, "source", prefix=key),
        key=reader.names(section, "key", key),
        columns=reader.names(section, "columns", key),
        latest_by=reader.names(section, "latest_by", key, (INGESTED_AT, SOURCE_FILE)),
        where=reader.optional_text(section, "where", key),
        trim=reader.boolean(section, "trim", True, key),
    )


def _keyed_by_changes(dimension: DimensionSpec, silver: tuple[SilverSpec, ...]) -> DimensionSpec:
    """A dimension kept from a change flow's table, keyed by that flow's keys (validation refuses
    a table that is not one)."""
    flow = next((s for s in silver if s.key == dimension.table), None)
    if flow is None or flow.changes is None:
        return dimension
    return replace(dimension, key=flow.changes.keys)


def _rules(reader: DeclarationReader, section: Mapping[str, Any], prefix: str,
           column: str | None = None) -> tuple[RuleSpec, ...]:
    rules = reader.entries(section, "rules", prefix)
    return tuple(RuleSpec(name=n, predicate=reader.text(rules, n, prefix=f"{prefix}.rules"), column=column)
                 for n in rules)


def _column(reader: DeclarationReader, name: str, value: Any, prefix: str) -> ColumnSpec:
    key = f"{prefix}.{name}"
    if isinstance(value, str):
        value = {"type": value}  # `amount: DECIMAL(18,4)` is short for {type: DECIMAL(18,4)}
        reader.origins.mark(f"{key}.type", value["type"], reader.origins.of(key, reader.file))
    section = reader.mapping({name: value}, name, prefix, _COLUMN_KEYS, required=True)
    if section.get("source") is not None and section.get("expr") is not None:
        raise reader.error(f"{key}.expr", "a column is taken either by source or by expr, not both")
    if "type" not in section:
        raise reader.error(f"{key}.type", "required (a Spark SQL type such as STRING)")
    return ColumnSpec(
        name=name,
        type=reader.sql_type(section["type"], f"{key}.type"),
        source=reader.optional_text(section, "source", key),
        expr=reader.optional_text(section, "expr", key),
        required=reader.boolean(section, "required", False, key),
        trim=reader.boolean(section, "trim", False, key),
        format=reader.optional_text(section, "format", key),
        zone=reader.optional_text(section, "zone", key),
        rules=_rules(reader, section, key, column=name),
    )


def _silver(reader: DeclarationReader, name: str, value: Any) -> SilverSpec:
    key = f"silver.{name}"
    section = reader.mapping({name: value}, name, "silver", _SILVER_KEYS, required=True)
    columns_section = reader.entries(section, "columns", key)
    if not columns_section:
        raise reader.error(f"{key}.columns", "required: at least one typed column")
    columns = tuple(_column(reader, c, v, f"{key}.columns") for c, v in columns_section.items())
    changes = _changes(reader, section, key)
    rules = _rules(reader, section, key)
    if changes is None:
        dedup_section = reader.mapping(section, "dedup", key, _DEDUP_KEYS, required=True)
        dedup = DedupSpec(
            key=reader.names(dedup_section, "key", f"{key}.dedup"),
            order_by=reader.names(dedup_section, "order_by", f"{key}.dedup", ()),
            scope=reader.choice(dedup_section, "scope", DedupScope, f"{key}.dedup", DedupScope.TABLE),
        )
    else:
        if section.get("dedup") is not None:
            raise reader.error(f"{key}.dedup", "a change flow (changes:) keeps one change per key "
                                               "and sequence: it takes no dedup")
        # A change is identified by its key and sequence; a row missing one is quarantined.
        identity = (*changes.keys, *changes.sequence_by)
        dedup = DedupSpec(key=identity)
        columns = tuple(replace(c, required=True) if c.name in identity else c for c in columns)
        if changes.delete_when is not None:
            rules = (*rules, RuleSpec(DELETE_UNKNOWN, f"({changes.delete_when}) IS NOT NULL"))
    enrichments = []
    for dimension, entry in reader.entries(section, "enrich", key).items():
        entry_key = f"{key}.enrich.{dimension}"
        spec = reader.mapping({dimension: entry}, dimension, f"{key}.enrich", _ENRICH_KEYS, required=True)
        on = reader.mapping(spec, "join", entry_key, required=True)
        pairs = []
        for column, dimension_key in on.items():
            if not isinstance(dimension_key, str):
                raise reader.error(f"{entry_key}.join.{column}", "must name a key column of the dimension")
            pairs.append((str(column), dimension_key.strip()))
        defaults = reader.mapping(spec, "defaults", entry_key)
        for column, default in defaults.items():
            if not isinstance(default, (str, int, float, bool)):
                raise reader.error(f"{entry_key}.defaults.{column}", f"must be a value, got {default!r}")
        taken, renamed = _enrich_columns(reader, spec, entry_key)
        enrichments.append(EnrichmentSpec(dimension=dimension, join=tuple(pairs), columns=taken,
                                          defaults=dict(defaults), renamed=renamed,
                                          as_of=reader.optional_text(spec, "as_of", entry_key)))
    watermark = reader.duration(section, "watermark", prefix=key) if section.get("watermark") else None
    return SilverSpec(
        name=name,
        input=reader.text(section, "input", prefix=key),
        parse=reader.choice(section, "parse", ParseMode, key),
        columns=columns,
        dedup=dedup,
        event_time=reader.optional_text(section, "event_time", key),
        watermark=watermark,
        raw_column=reader.text(section, "raw_column", "raw", key),
        rules=rules,
        enrichments=tuple(enrichments),
        keep=reader.names(section, "keep", key, (SOURCE_FILE, INGESTED_AT)),
        python=reader.python_step(section, "python", key),
        doc=reader.doc(section, key, f"silver/{name}"),
        changes=changes,
    )


def _changes(reader: DeclarationReader, section: Mapping[str, Any], key: str) -> ChangesSpec | None:
    """``silver.<name>.changes``: the table is kept from change rows (SCD type 1 or 2)."""
    if section.get("changes") is None:
        return None
    prefix = f"{key}.changes"
    spec = reader.mapping(section, "changes", key, _CHANGES_KEYS, required=True)
    scd = spec.get("scd", 1)
    if scd not in (1, 2) or isinstance(scd, bool):
        raise reader.error(f"{prefix}.scd", f"must be 1 (the latest row per key) or 2 (each key's "
                                            f"history), got {scd!r}")
    tracked = (reader.names(spec, "track_history_columns", prefix)
               if spec.get("track_history_columns") is not None else None)
    untracked = reader.names(spec, "track_history_except_columns", prefix, ())
    for option in ("track_history_columns", "track_history_except_columns"):
        if spec.get(option) is not None and scd != 2:
            raise reader.error(f"{prefix}.{option}", "applies to scd: 2 only (type 1 keeps no history)")
    if tracked is not None and untracked:
        raise reader.error(f"{prefix}.track_history_except_columns",
                           "give track_history_columns or track_history_except_columns, not both")
    snapshot_by = reader.optional_text(spec, "snapshot_by", prefix)
    keep_deletes_for = None
    if spec.get("keep_deletes_for") is not None:
        keep_deletes_for = reader.duration(spec, "keep_deletes_for", prefix=prefix, positive=True)
        if scd != 1:
            raise reader.error(f"{prefix}.keep_deletes_for", "applies to scd: 1 only (type 2 keeps "
                                                             "every change: a delete ends a version)")
        if snapshot_by is not None:
            raise reader.error(f"{prefix}.keep_deletes_for", "a flow of full exports keeps its "
                                                             "applied changes whole")
    if snapshot_by is None:
        return ChangesSpec(keys=reader.names(spec, "keys", prefix),
                           sequence_by=reader.names(spec, "sequence_by", prefix),
                           delete_when=reader.optional_text(spec, "delete_when", prefix),
                           scd=scd, track_history=tracked, track_history_except=untracked,
                           keep_deletes_for=keep_deletes_for)
    # A snapshot's changes are what differs from the export before: its position orders them and
    # a key the export lacks is deleted.
    for option in ("sequence_by", "delete_when"):
        if spec.get(option) is not None:
            raise reader.error(f"{prefix}.{option}", "snapshot_by takes its place: rows are full "
                                                     "exports, and a key an export lacks is deleted")
    return ChangesSpec(keys=reader.names(spec, "keys", prefix), sequence_by=(snapshot_by,),
                       scd=scd, track_history=tracked, track_history_except=untracked, snapshot=True)


def _enrich_columns(reader: DeclarationReader, spec: Mapping[str, Any], entry_key: str
                    ) -> tuple[tuple[str, ...], dict[str, str]]:
    """``enrich.<dim>.columns``: a list of the dimension's columns, taken under their names, or
    a mapping ``{name_in_table: dimension_column}`` (two dimensions may both have a ``name``)."""
    value = spec.get("columns")
    if not isinstance(value, Mapping):
        return reader.names(spec, "columns", entry_key), {}
    if not value:
        raise reader.error(f"{entry_key}.columns", "names no column")
    renamed = {}
    for name, column in value.items():
        if not IDENTIFIER.match(str(name).strip()):
            raise reader.error(f"{entry_key}.columns.{name}",
                               "a column's name is an identifier (letters, digits, _)")
        if not isinstance(column, str) or not column.strip():
            raise reader.error(f"{entry_key}.columns.{name}",
                               f"must name a column of the dimension, got {column!r}")
        renamed[str(name).strip()] = column.strip()
    taken = list(renamed.values())
    if len(set(taken)) != len(taken):
        raise reader.error(f"{entry_key}.columns", f"takes a dimension's column twice: {taken}")
    return tuple(renamed), renamed


def _window(reader: DeclarationReader, section: Mapping[str, Any], key: str,
            default_column: str) -> WindowSpec:
    kind = reader.choice(section, "kind", WindowKind, key)
    needs = {WindowKind.TUMBLING: {"size"}, WindowKind.SLIDING: {"size", "slide"},
             WindowKind.SESSION: {"gap"}}[kind]
    for part in ("size", "slide", "gap"):
        if part in needs and section.get(part) is None:
            raise reader.error(f"{key}.{part}", f"required for a {kind.value} window")
        if part not in needs and section.get(part) is not None:
            raise reader.error(f"{key}.{part}", f"a {kind.value} window has no {part}")
    size, slide, gap = (reader.duration(section, p, prefix=key, positive=True) if p in needs
                        else None for p in ("size", "slide", "gap"))
    longer = size and slide and (parse_duration_seconds(slide, key, reader.file)
                                 > parse_duration_seconds(size, key, reader.file))
    if longer:
        raise reader.error(f"{key}.slide", f"{slide} is longer than the window's size {size}")
    column = reader.text(section, "column", default_column, key)
    return WindowSpec(kind=kind, column=column, size=size, slide=slide, gap=gap)


def _gold(reader: DeclarationReader, name: str, value: Any, silver: Sequence[SilverSpec]) -> GoldSpec:
    key = f"gold.{name}"
    section = reader.mapping({name: value}, name, "gold", _GOLD_KEYS, required=True)
    source = reader.text(section, "input", prefix=key)
    python = reader.python_step(section, "python", key)
    mode = reader.choice(section, "mode", OutputMode, key)
    if section.get("refresh") is not None and (section.get("join") is not None or python is not None):
        raise reader.error(f"{key}.refresh", "declared only for a window aggregate (a join keeps "
                           "no state; a Python step computes its table itself)")
    if section.get("join") is not None:
        return _join_gold(reader, name, section, source, mode)
    for only_joins in ("select", "latest_by"):
        if section.get(only_joins) is not None:
            raise reader.error(f"{key}.{only_joins}", "declared only with a join")
    if python is not None:
        for unused in ("window", "group_by", "aggregates"):
            if section.get(unused) is not None:
                raise reader.error(f"{key}.{unused}", "a Python step computes the table itself; "
                                   "declare its columns (and keys) instead")
        declared = reader.mapping(section, "columns", key, required=True)
        columns = tuple(Field(c, reader.sql_type(t, f"{key}.columns.{c}")) for c, t in declared.items())
        keys = reader.names(section, "keys", key, ())
        if mode is OutputMode.UPDATE and not keys:
            raise reader.error(f"{key}.keys", "mode update MERGEs on keys: name the columns that "
                               "identify a row of the step's output")
        return GoldSpec(name=name, input=source, mode=mode, python=python, columns=columns, keys=keys,
                        filter=reader.optional_text(section, "filter", key),
                        watermark=reader.duration(section, "watermark", prefix=key)
                        if section.get("watermark") else None,
                        doc=reader.doc(section, key, f"gold/{name}"))
    for derived in ("columns", "keys"):
        if section.get(derived) is not None:
            raise reader.error(f"{key}.{derived}", "derived from window, group_by and aggregates; "
                               "declared only with a Python step")
    # The window runs over the input's event time unless told otherwise.
    event_time = next((s.event_time for s in silver if s.key == source and s.event_time), "")
    window = _window(reader, reader.mapping(section, "window", key, _WINDOW_KEYS, required=True),
                     f"{key}.window", event_time)
    aggregates = []
    for aggregate, entry in reader.entries(section, "aggregates", key).items():
        entry_key = f"{key}.aggregates.{aggregate}"
        spec = reader.mapping({aggregate: entry}, aggregate, f"{key}.aggregates", _AGGREGATE_KEYS,
                              required=True)
        default = spec.get("default")
        if default is not None and (isinstance(default, bool) or not isinstance(default, (int, float))):
            raise reader.error(f"{entry_key}.default", f"must be a number, got {default!r}")
        aggregates.append(AggregateSpec(
            name=aggregate, function=reader.choice(spec, "function", AggregateFunction, entry_key),
            column=reader.optional_text(spec, "column", entry_key), default=default))
    if not aggregates:
        raise reader.error(f"{key}.aggregates", "required: at least one aggregate")
    # Recomputed in mode update; an append-mode table keeps the way its readers' rows were made.
    refresh = reader.choice(section, "refresh", Refresh, key,
                            Refresh.RECOMPUTE if mode is OutputMode.UPDATE else Refresh.STATEFUL)
    if refresh is Refresh.RECOMPUTE and mode is OutputMode.APPEND \
            and window.kind is WindowKind.SESSION:
        raise reader.error(f"{key}.refresh", "sessions in mode append are kept by a stateful "
                           "query (refresh: stateful): a recomputation from the input cannot tell "
                           "the late rows a closed session refused from its own rows; recompute "
                           "keeps sessions in mode update, late rows included")
    return GoldSpec(
        name=name, input=source, mode=mode, window=window,
        group_by=reader.names(section, "group_by", key, ()),
        aggregates=tuple(aggregates), refresh=refresh,
        filter=reader.optional_text(section, "filter", key),
        watermark=reader.duration(section, "watermark", prefix=key) if section.get("watermark") else None,
        doc=reader.doc(section, key, f"gold/{name}"),
    )


def _join_gold(reader: DeclarationReader, name: str, section: Mapping[str, Any], source: str,
               mode: OutputMode) -> GoldSpec:
    key = f"gold.{name}"
    for unused in ("window", "group_by", "aggregates", "python", "columns"):
        if section.get(unused) is not None:
            raise reader.error(f"{key}.{unused}", "a join's output is declared in select")
    join = reader.mapping(section, "join", key, _JOIN_KEYS, required=True)
    join_key = f"{key}.join"
    spec = JoinSpec(input=reader.text(join, "input", prefix=join_key),
                    equal=reader.names(join, "equal", join_key),
                    within=reader.duration(join, "within", prefix=join_key, positive=True),
                    kind=reader.choice(join, "kind", JoinKind, join_key, JoinKind.LEFT_OUTER),
                    filter=reader.optional_text(join, "filter", join_key))
    select = []
    for column, entry in reader.entries(section, "select", key).items():
        entry_key = f"{key}.select.{column}"
        if isinstance(entry, str):
            select.append(SelectSpec(column, entry.strip()))
            if select[-1].reference is None:
                raise reader.error(entry_key, f"{entry!r} is not left.<column> or right.<column>; "
                                   "an expression is declared as {expr: ..., type: ...}")
            continue
        declared = reader.mapping({column: entry}, column, f"{key}.select", _SELECT_KEYS,
                                  required=True)
        if declared.get("type") is None:
            raise reader.error(f"{entry_key}.type", "required for an expression")
        select.append(SelectSpec(column, reader.text(declared, "expr", prefix=entry_key),
                                 reader.sql_type(declared["type"], f"{entry_key}.type")))
    if not select:
        raise reader.error(f"{key}.select", "required: the join's output columns")
    keys = reader.names(section, "keys", key)
    if mode is not OutputMode.UPDATE:
        raise reader.error(f"{key}.mode", "a join's rows are kept by MERGE on keys: mode update")
    return GoldSpec(name=name, input=source, mode=mode, join=spec, select=tuple(select), keys=keys,
                    latest_by=reader.names(section, "latest_by", key, ()),
                    filter=reader.optional_text(section, "filter", key),
                    watermark=reader.duration(section, "watermark", prefix=key)
                    if section.get("watermark") else None,
                    doc=reader.doc(section, key, f"gold/{name}"))
