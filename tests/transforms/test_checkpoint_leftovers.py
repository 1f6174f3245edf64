"""A query killed while Spark wrote its first batch's plan starts again.

Spark writes ``offsets/0`` as a temporary file and renames it; a kill between the two leaves the
temporary file, and Spark then refuses every later start of a query that has planned no batch
while its checkpoint's folders hold anything. The engine's check before each start removes it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from medallion.io.sinks.delta import guard_checkpoint


def _killed_while_planning_its_first_batch(checkpoint: Path) -> Path:
    """A checkpoint as a kill leaves it after the query started and before ``offsets/0`` was
    renamed into place: its id, and the unfinished plan with its checksum."""
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    unfinished = checkpoint / "offsets" / f".0.{uuid.uuid4()}.tmp"
    unfinished.write_text("v1\n")
    (checkpoint / "offsets" / f".{unfinished.name}.crc").write_bytes(b"crc")
    return unfinished


def _ingest(spark: SparkSession, landing: Path, table: Path, checkpoint: Path) -> None:
    query = (spark.readStream.schema("id BIGINT").json(str(landing)).writeStream.format("delta")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .start(str(table)))
    query.awaitTermination()


def test_a_first_batch_whose_plan_was_cut_short_is_planned_again(spark: SparkSession,
                                                                   tmp_path: Path) -> None:
    landing, table = tmp_path / "landing", tmp_path / "bronze"
    landing.mkdir()
    (landing / "a.json").write_text('{"id": 1}\n{"id": 2}\n')

    as_spark_meets_it = tmp_path / "untouched"
    _killed_while_planning_its_first_batch(as_spark_meets_it)
    with pytest.raises(StreamingQueryException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        _ingest(spark, landing, tmp_path / "elsewhere", as_spark_meets_it)

    checkpoint = tmp_path / "checkpoint"
    unfinished = _killed_while_planning_its_first_batch(checkpoint)
    state = guard_checkpoint(spark, str(table), str(checkpoint), "bronze/test")
    assert state is not None and (state.last_planned, state.last_committed) == (-1, -1)
    assert sorted(p.name for p in (checkpoint / "offsets").iterdir()) == []
    _ingest(spark, landing, table, checkpoint)
    assert sorted(r.id for r in spark.read.format("delta").load(str(table)).collect()) == [1, 2]
    assert not unfinished.exists()
