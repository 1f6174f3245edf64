"""A team adds a field to a struct column of its declaration after the table was made.

JSON sources grow nested fields: a reading's ``device`` gains a ``model``, each of its ``probes``
(an array of structs) a ``unit``. The next run adds those fields to the silver table in place, at
their declared places (Delta's ``ADD COLUMNS device.model ... AFTER os``); the rows written before
hold null there, the new rows their values. A new nested field is not a retyped column: the
table is not refused (``column device is STRUCT<...> in the table and STRUCT<...> in the
declaration``), and no full refresh is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings, load_settings
from tests.conf_support import copy_base_conf

PIPELINE = """\
description: Sensor readings with nested device details.
watermark: 10 minutes
sources:
  readings:
    format: json_lines
    path: readings
    bronze: {table: readings}
silver:
  readings:
    input: bronze/readings
    parse: json
    columns:
      reading_id: {type: STRING, required: true}
      at: {type: TIMESTAMP, required: true, format: iso8601_with_zone}
      device: "STRUCT<os: STRING, version: STRING>"
      probes: "ARRAY<STRUCT<name: STRING, value: DOUBLE>>"
    dedup: {key: [reading_id]}
    event_time: at
"""
WIDER = (PIPELINE
         .replace("STRUCT<os: STRING, version: STRING>", "STRUCT<os: STRING, model: STRING, "
                  "version: STRING>")
         .replace("STRUCT<name: STRING, value: DOUBLE>", "STRUCT<name: STRING, value: DOUBLE, "
                  "unit: STRING>"))


def _reading(reading_id: str, model: str | None = None, unit: str | None = None) -> str:
    device = {"os": "linux", "version": "6.1", **({"model": model} if model else {})}
    probe = {"name": "t1", "value": 21.5, **({"unit": unit} if unit else {})}
    return json.dumps({"reading_id": reading_id, "at": "2025-03-01T10:00:00Z",
                       "device": device, "probes": [probe]})


def test_a_field_added_to_a_struct_column_is_added_to_the_table_and_old_rows_hold_null(
        spark: SparkSession, tmp_path: Path) -> None:
    conf, landing, lakehouse = tmp_path / "conf", tmp_path / "landing", tmp_path / "lakehouse"
    copy_base_conf(conf)
    for shipped in (conf / "pipelines").glob("*.yaml"):
        shipped.unlink()
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    pipeline = conf / "pipelines" / "readings.yaml"
    pipeline.write_text(PIPELINE, encoding="utf-8")
    (landing / "readings").mkdir(parents=True)
    (landing / "readings" / "1.json").write_text(_reading("r1") + "\n", encoding="utf-8")

    def settings() -> Settings:
        return load_settings(env="local", conf_dir=conf, landing=str(landing),
                             lakehouse=str(lakehouse))

    run_pipeline(spark, settings(), RunTarget.ALL, Trigger(), monitor=False)

    pipeline.write_text(WIDER, encoding="utf-8")
    (landing / "readings" / "2.json").write_text(
        _reading("r2", model="pi-5", unit="celsius") + "\n", encoding="utf-8")
    runs = run_pipeline(spark, settings(), RunTarget.ALL, Trigger(), monitor=False)
    assert {(r.table, r.rows_out, r.quarantined) for r in runs} >= {("silver/readings", 1, 0)}

    table = spark.read.format("delta").load(str(lakehouse / "silver" / "readings"))
    assert table.schema["device"].dataType.simpleString() == \
        "struct<os:string,model:string,version:string>"
    assert table.schema["probes"].dataType.simpleString() == \
        "array<struct<name:string,value:double,unit:string>>"
    rows = sorted((r["reading_id"], r["device"]["os"], r["device"]["model"],
                   r["device"]["version"], r["probes"][0]["unit"]) for r in table.collect())
    assert rows == [("r1", "linux", None, "6.1", None), ("r2", "linux", "pi-5", "6.1", "celsius")]
