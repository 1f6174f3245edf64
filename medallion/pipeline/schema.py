"""The pipeline format's keys, once: what the loader accepts and the JSON Schema editors read.

Each section of a declaration is a mapping of its keys to the JSON Schema of their values. The
loader (:mod:`medallion.pipeline.load`) takes its allowed keys from these sections, so a key
added here is accepted there and described to editors at once; :func:`pipeline_schema` assembles
the whole schema, which ships as ``pipeline.schema.json`` beside this module (a test keeps the
file equal to it). The schema catches the shape: unknown keys, a value of the wrong kind, a
choice not among the choices. What needs more (a column that exists, a cycle, SQL), the checks
before Spark do (``medallion pipelines``).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

from medallion.pipeline.kinds import (
    AggregateFunction,
    DedupScope,
    JoinKind,
    OutputMode,
    ParseMode,
    Refresh,
    Severity,
    SourceFormat,
    WindowKind,
)

SCHEMA_FILE = Path(__file__).with_name("pipeline.schema.json")
Schema = dict[str, Any]

TEXT: Schema = {"type": "string"}
FLAG: Schema = {"type": "boolean"}
SCALAR: Schema = {"type": ["string", "number", "boolean"]}
NAMES: Schema = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
DURATION: Schema = {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[A-Za-z]+\s*$",
                    "description": "e.g. 5 minutes, 1 hour"}


def choice(kind: type[Enum]) -> Schema:
    return {"enum": [member.value for member in kind]}


def mapping_of(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


def section(keys: dict[str, Schema], required: tuple[str, ...] = (),
            description: str = "") -> Schema:
    schema: Schema = {"type": "object", "properties": keys, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    return schema


EXPECTATION: dict[str, Schema] = {
    "expectation": {**TEXT, "description": "a Great Expectations expectation type"},
    "kwargs": {"type": "object"}, "severity": choice(Severity), "enabled": FLAG,
    "description": TEXT,
}
DOC: dict[str, Schema] = {
    "comment": TEXT, "column_comments": mapping_of(TEXT),
    "expectations": mapping_of(section(EXPECTATION)), "zorder": NAMES,
    "cluster_by": NAMES,
}
BRONZE: dict[str, Schema] = {"table": TEXT, **DOC}
SOURCE: dict[str, Schema] = {
    "format": choice(SourceFormat), "path": TEXT, "glob": TEXT,
    "header": {"type": "array", "items": TEXT}, "schema": mapping_of(TEXT),
    "topics": {"type": "array", "items": TEXT}, "options": mapping_of(SCALAR),
    "alternative_to": TEXT, "active": FLAG, "bronze": section(BRONZE, ("table",)),
}
DIMENSION: dict[str, Schema] = {
    "source": TEXT, "key": NAMES, "columns": NAMES, "latest_by": NAMES, "where": TEXT,
    "trim": FLAG,
}
DIMENSION_TABLE: dict[str, Schema] = {
    "table": {**TEXT, "description": "silver/<name>: a table kept by a change flow"},
}
COLUMN: dict[str, Schema] = {
    "type": {**TEXT, "description": "a Spark SQL type"}, "source": TEXT, "expr": TEXT,
    "required": FLAG, "trim": FLAG, "format": TEXT, "zone": TEXT, "rules": mapping_of(TEXT),
}
DEDUP: dict[str, Schema] = {"key": NAMES, "order_by": NAMES, "scope": choice(DedupScope)}
CHANGES: dict[str, Schema] = {
    "keys": NAMES, "sequence_by": NAMES,
    "snapshot_by": {**TEXT, "description": "a column: rows are full exports, this their position"},
    "delete_when": {**TEXT, "description": "a SQL predicate: the change deletes its key"},
    "scd": {"enum": [1, 2]}, "track_history_columns": NAMES, "track_history_except_columns": NAMES,
    "keep_deletes_for": {**DURATION, "description": "scd: 1: how long `medallion maintain` keeps "
                                                    "a deleted key's delete after it was ingested"},
}
ENRICH: dict[str, Schema] = {
    "join": mapping_of(TEXT),
    "columns": {"anyOf": [NAMES, mapping_of(TEXT)],
                "description": "the dimension's columns, or {name_in_table: dimension_column}"},
    "defaults": mapping_of(SCALAR),
    "as_of": {**TEXT, "description": "a TIMESTAMP column: the version of an SCD type 2 "
                                     "dimension valid at its time"},
}
SILVER: dict[str, Schema] = {
    "input": TEXT, "parse": choice(ParseMode), "raw_column": TEXT,
    "columns": mapping_of({"anyOf": [TEXT, section(COLUMN)]}), "rules": mapping_of(TEXT),
    "dedup": section(DEDUP, ("key",)), "changes": section(CHANGES, ("keys",)),
    "event_time": TEXT, "watermark": DURATION,
    "enrich": mapping_of(section(ENRICH, ("join", "columns"))), "keep": NAMES, "python": TEXT,
    **DOC,
}
WINDOW: dict[str, Schema] = {
    "kind": choice(WindowKind), "column": TEXT, "size": DURATION, "slide": DURATION,
    "gap": DURATION,
}
AGGREGATE: dict[str, Schema] = {
    "function": choice(AggregateFunction), "column": TEXT, "default": {"type": "number"},
}
JOIN: dict[str, Schema] = {
    "input": TEXT, "filter": TEXT, "equal": NAMES, "within": DURATION, "kind": choice(JoinKind),
}
SELECT: dict[str, Schema] = {"expr": TEXT, "type": TEXT}
GOLD: dict[str, Schema] = {
    "input": TEXT, "filter": TEXT, "group_by": NAMES, "window": section(WINDOW, ("kind",)),
    "aggregates": mapping_of(section(AGGREGATE, ("function",))), "mode": choice(OutputMode),
    "watermark": DURATION, "python": TEXT, "columns": mapping_of(TEXT), "keys": NAMES,
    "join": section(JOIN, ("input",)),
    "select": mapping_of({"anyOf": [TEXT, section(SELECT, ("expr", "type"))]}),
    "latest_by": NAMES, "refresh": choice(Refresh), **DOC,
}
VIEW: dict[str, Schema] = {"sql": TEXT, "comment": TEXT}
TOP: dict[str, Schema] = {
    "description": TEXT, "watermark": DURATION,
    "sources": mapping_of(section(SOURCE, ("format", "bronze"))),
    "dimensions": mapping_of({"anyOf": [section(DIMENSION, ("source", "key", "columns")),
                                          section(DIMENSION_TABLE, ("table",))]}),
    "silver": mapping_of(section(SILVER, ("input", "parse", "columns"))),
    "gold": mapping_of(section(GOLD, ("input", "mode"))),
    "views": mapping_of({"anyOf": [section(VIEW, ("sql",)),
                                   mapping_of(section(VIEW, ("sql",)))]}),
}


def pipeline_schema() -> Schema:
    """The JSON Schema of a pipeline file (``conf/pipelines/<name>.yaml``)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://medallion.invalid/pipeline.schema.json",
        "title": "medallion pipeline declaration",
        "description": "conf/pipelines/<name>.yaml; every key is described in docs/pipelines.md",
        **section(TOP),
    }


def schema_text() -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(pipeline_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m medallion.pipeline.schema: write the shipped file
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
