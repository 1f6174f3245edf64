"""``medallion init NAME FILE...``: a pipeline declaration from sample files, checked, no Spark.

The samples (CSV with a header, JSON Lines, or Parquet; one format) are read here, at most
:data:`ROWS` records each; :mod:`medallion.pipeline.scaffold` writes the declaration from them.
The file is written only when the whole configuration folder still checks with it, and never
over an existing one.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medallion.config.load import default_conf_dir
from medallion.config.model import DEFAULT_ENV
from medallion.io.sources.files import arrow_columns
from medallion.pipeline.errors import PipelineError
from medallion.pipeline.evolution import ddl_type
from medallion.pipeline.scaffold import Samples, ScaffoldError, render
from medallion.pipeline.types import from_schema_json
from medallion.pipeline.validate import check_pipelines

ROWS = 1000
SUFFIXES = {".csv": "csv", ".json": "json_lines", ".jsonl": "json_lines",
            ".ndjson": "json_lines", ".parquet": "parquet"}


def format_of(paths: Sequence[Path]) -> str:
    formats = {SUFFIXES.get(p.suffix.lower()) for p in paths}
    if None in formats:
        unknown = [p.name for p in paths if p.suffix.lower() not in SUFFIXES]
        raise ScaffoldError(f"{', '.join(unknown)}: a sample is a .csv, .json/.jsonl/.ndjson or "
                            ".parquet file")
    if len(formats) != 1:
        raise ScaffoldError("the samples of one source share one format")
    return str(formats.pop())


def _flatten(record: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    flat, arrays = {}, []
    for key, value in record.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            inner, inner_arrays = _flatten(value, f"{path}.")
            flat.update(inner)
            arrays += inner_arrays
        elif isinstance(value, list):
            arrays.append(path)
        else:
            flat[path] = value
    return flat, arrays


def read_samples(paths: Sequence[Path]) -> Samples:
    """The samples' fields and values (at most :data:`ROWS` records of each file)."""
    fmt = format_of(paths)
    fields: dict[str, None] = {}
    values: dict[str, list[Any]] = {}
    arrays: dict[str, None] = {}
    types: dict[str, str] = {}
    for path in paths:
        try:
            if fmt == "csv":
                with path.open(encoding="utf-8", newline="") as handle:
                    reader = csv.reader(handle)
                    header = next(reader, None)
                    if not header:
                        raise ScaffoldError(f"{path}: no header line")
                    if fields and list(fields) != header:
                        raise ScaffoldError(f"{path}: another header than the first sample's")
                    fields.update(dict.fromkeys(header))
                    for number, row in enumerate(reader):
                        if number >= ROWS:
                            break
                        for name, value in zip(header, row, strict=False):
                            values.setdefault(name, []).append(value)
            elif fmt == "json_lines":
                with path.open(encoding="utf-8") as handle:
                    for number, line in enumerate(handle):
                        if number >= ROWS:
                            break
                        if not line.strip():
                            continue
                        try:
                            record = json.loads(line)
                        except json.JSONDecodeError:
                            continue  # a broken line: bronze keeps it, silver sets it aside
                        if not isinstance(record, dict):
                            continue
                        flat, found = _flatten(record)
                        fields.update(dict.fromkeys(flat))
                        arrays.update(dict.fromkeys(found))
                        for name in fields:
                            values.setdefault(name, []).append(flat.get(name))
            else:
                import pyarrow.parquet as pq

                table = pq.read_table(path).slice(0, ROWS)
                for name, kind in parquet_types(table.schema).items():
                    types.setdefault(name, kind)
                for column in table.schema:
                    fields.setdefault(column.name)
                    values.setdefault(column.name, []).extend(table.column(column.name).to_pylist())
        except (OSError, UnicodeDecodeError) as exc:
            raise ScaffoldError(f"{path}: cannot be read ({exc})") from None
    return Samples(fmt, tuple(fields), values, types, tuple(a for a in arrays if a not in fields))


def parquet_types(schema: Any) -> dict[str, str]:
    """A Parquet sample's columns as Spark SQL types, converted as the run converts them."""
    columns, unknown = arrow_columns(schema)
    if unknown:
        raise ScaffoldError(f"Parquet column(s) {', '.join(sorted(unknown))} have no Spark type")
    return {f.name: ddl_type(from_schema_json(f.dataType.jsonValue())) for f in columns.fields}


def main(args: argparse.Namespace) -> int:
    """Write ``<conf>/pipelines/<name>.yaml`` from the samples; 0, or 2 with the reason."""
    conf_dir = Path(args.conf_dir) if args.conf_dir else default_conf_dir()
    target = conf_dir / "pipelines" / f"{args.name}.yaml"
    paths = [Path(f) for f in args.files]
    try:
        if target.exists():
            raise ScaffoldError(f"{target} exists: init never writes over a declaration")
        samples = read_samples(paths)
        glob = "*" + paths[0].suffix.lower()
        text = render(args.name, samples, glob)
    except ScaffoldError as exc:
        print(f"medallion init: {exc}", file=sys.stderr)
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    try:
        check_pipelines(conf_dir, args.env or DEFAULT_ENV)
    except PipelineError as exc:  # a declaration the checks refuse is not left behind
        target.unlink()
        print(f"medallion init: the declaration written from the samples does not check: {exc}",
              file=sys.stderr)
        return 2
    print(f"wrote {target}: {len(samples.fields)} columns from {len(paths)} sample file(s); "
          f"land files in <landing>/{args.name}/, then `medallion run`. Check the lines marked "
          "DECIDE first.")
    return 0
