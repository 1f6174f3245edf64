"""``medallion init``: a declaration from sample files (CSV, JSON Lines, Parquet) that the
checks accept as written, the types the samples show, and what it refuses (no JVM)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from medallion.cli.main import main
from medallion.pipeline.scaffold import json_type, text_type
from medallion.pipeline.schema import pipeline_schema
from medallion.pipeline.validate import check_pipelines
from tests.conf_support import copy_base_conf


@pytest.mark.parametrize(("values", "expected"), [
    (["1", " 22 ", ""], ("INT", None, False)),
    (["1", "3000000000"], ("BIGINT", None, False)),
    (["1", "99999999999999999999"], ("STRING", None, False)),
    (["10.25", "7", "-3.5"], ("DECIMAL(10,2)", None, False)),
    (["1e3", "2.5"], ("DOUBLE", None, False)),
    (["true", "False"], ("BOOLEAN", None, False)),
    (["2025-01-27", "2025-02-01"], ("DATE", None, False)),
    (["2025-01-27T10:00:00Z", "2025-01-27 11:00:00+01:00"], ("TIMESTAMP", "iso8601_with_zone", False)),
    (["2025-01-27 10:00:00", "2025-01-27T11:00"], ("TIMESTAMP", None, True)),
    (["2025-01-27 10:00:00", "2025-01-27T11:00Z"], ("STRING", None, False)),  # mixed: decide
    (["517.0", "830"], ("DECIMAL(10,1)", None, False)),
    (["a", "1"], ("STRING", None, False)),
    ([], ("STRING", None, False)),
])
def test_text_takes_the_narrowest_type_every_value_converts_to_exactly(
        values: list[str], expected: tuple[str, str | None, bool]) -> None:
    assert text_type(values) == expected


def test_json_values_keep_their_json_kind() -> None:
    assert json_type([1, 2, None]) == ("INT", None, False)
    assert json_type([1, 2.5]) == ("DOUBLE", None, False)
    assert json_type([True, None]) == ("BOOLEAN", None, False)
    assert json_type(["2025-01-27T10:00:00Z"]) == ("TIMESTAMP", "iso8601_with_zone", False)
    assert json_type(["12"]) == ("STRING", None, False)  # a JSON string is text, not a number
    assert json_type([1, "a"]) == ("STRING", None, False)


def _init(conf: Path, *argv: str) -> int:
    return main(["--conf-dir", str(conf), "init", *argv])


def _silver(conf: Path, name: str) -> dict:
    declared = yaml.safe_load((conf / "pipelines" / f"{name}.yaml").read_text(encoding="utf-8"))
    return declared["silver"][name]


def test_a_csv_sample_gives_a_declaration_the_checks_accept(tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    sample = tmp_path / "flights.csv"
    sample.write_text("flight_id,origin,dep_time,amount,departed\n"
                      "f1,LYS,830,10.25,2025-01-27 10:00:00\n"
                      "f2,,517,7.5,2025-01-27 11:00:00\n", encoding="utf-8")
    assert _init(conf, "flights", str(sample)) == 0
    checked = {c.spec.name: c for c in check_pipelines(conf, "local")}
    assert "flights" in checked
    silver = _silver(conf, "flights")
    assert {name: column["type"] for name, column in silver["columns"].items()} == {
        "flight_id": "STRING", "origin": "STRING", "dep_time": "INT", "amount": "DECIMAL(10,2)",
        "departed": "TIMESTAMP"}
    assert "required" not in silver["columns"]["origin"]  # a sample had none
    assert silver["columns"]["departed"]["zone"] == "UTC"
    assert silver["dedup"]["key"] == ["flight_id"] and silver["event_time"] == "departed"
    text = (conf / "pipelines" / "flights.yaml").read_text(encoding="utf-8")
    assert text.count("DECIDE") >= 4
    assert list(jsonschema.Draft202012Validator(pipeline_schema()).iter_errors(
        yaml.safe_load(text))) == []


def test_json_lines_are_flattened_and_broken_lines_skipped(tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    sample = tmp_path / "clicks.jsonl"
    sample.write_text("\n".join([
        json.dumps({"id": "c1", "at": "2025-01-27T10:00:00Z", "user": {"id": "u1", "age": 30},
                    "tags": ["a"], "price": 1.5}),
        "{not json",
        json.dumps({"id": "c2", "at": "2025-01-27T10:01:00Z", "user": {"id": "u2"},
                    "price": 2}),
    ]) + "\n", encoding="utf-8")
    assert _init(conf, "clicks", str(sample)) == 0
    check_pipelines(conf, "local")
    columns = _silver(conf, "clicks")["columns"]
    assert columns["user_id"] == {"type": "STRING", "source": "user.id", "required": True}
    assert columns["user_age"]["type"] == "INT" and "required" not in columns["user_age"]
    assert columns["price"]["type"] == "DOUBLE"
    assert columns["at"] == {"type": "TIMESTAMP", "required": True, "format": "iso8601_with_zone"}
    assert "tags" not in columns
    assert "arrays: tags" in (conf / "pipelines" / "clicks.yaml").read_text(encoding="utf-8")


def test_a_parquet_sample_declares_its_schema(tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    sample = tmp_path / "readings.parquet"
    pq.write_table(pa.table({
        "sensor": ["s1", "s2"], "value": pa.array([Decimal("1.50"), None], pa.decimal128(9, 2)),
        "taken_at": pa.array([datetime(2025, 1, 27, tzinfo=timezone.utc)] * 2,
                             pa.timestamp("us", tz="UTC")),
        "counts": pa.array([[1], []], pa.list_(pa.int32()))}), sample)
    assert _init(conf, "readings", str(sample)) == 0
    check_pipelines(conf, "local")
    declared = yaml.safe_load((conf / "pipelines" / "readings.yaml").read_text(encoding="utf-8"))
    assert declared["sources"]["readings"]["schema"] == {
        "sensor": "STRING", "value": "DECIMAL(9,2)", "taken_at": "TIMESTAMP", "counts": "ARRAY<INT>"}
    assert declared["silver"]["readings"]["event_time"] == "taken_at"


def test_init_refuses_what_it_cannot_declare_and_never_writes_over_a_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    spaced = tmp_path / "a.csv"
    spaced.write_text("dep time,x\n1,2\n", encoding="utf-8")
    other = tmp_path / "b.txt"
    other.write_text("x\n", encoding="utf-8")
    for argv, said in ((["orders", str(spaced)], "exists: init never writes over"),
                       (["spaced", str(spaced)], "'dep time'"),
                       (["texts", str(other)], "b.txt: a sample is a .csv"),
                       (["mixed", str(spaced), str(tmp_path / "c.jsonl")], "one format"),
                       (["9lives", str(spaced)], "not a pipeline name")):
        assert _init(conf, *argv) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, (argv, err)
    assert not (conf / "pipelines" / "spaced.yaml").exists()
