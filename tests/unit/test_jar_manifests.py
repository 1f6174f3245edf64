"""Which recorded JVM package resolution a session start reuses instead of running Ivy again.

Set-up resolves one set (Delta, S3A, the Kafka connector, any ``spark.packages``); the runs ask
for that set in another order (Kafka) or for part of it (a pipeline without Kafka). Either must
find the recorded jars, or the first real run of each goes through Ivy on a fresh machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.spark.packages import IVY_HOME_ENV, ivy_home, record_jars, resolved_jars

DELTA = "io.delta:delta-spark_2.13:4.0.0"
S3 = "org.apache.hadoop:hadoop-aws:3.4.1"
KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
THRIFT = "org.apache.spark:spark-hive-thriftserver_2.13:4.0.0"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(IVY_HOME_ENV, str(tmp_path / "ivy"))
    return ivy_home()


def _jars(home: Path, *names: str) -> list[str]:
    folder = home / "jars"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"PK")
    return [str(folder / name) for name in names]


def test_nothing_recorded_means_resolving(home: Path) -> None:
    assert resolved_jars([DELTA, S3]) is None


def test_the_same_set_in_another_order_reuses_the_recorded_jars(home: Path) -> None:
    jars = _jars(home, "delta.jar", "aws.jar", "kafka.jar")
    record_jars([DELTA, KAFKA, S3], jars)  # set-up's order
    assert resolved_jars([DELTA, S3, KAFKA]) == jars  # a Kafka run's order


def test_a_run_without_kafka_uses_the_jars_resolved_with_it(home: Path) -> None:
    jars = _jars(home, "delta.jar", "aws.jar", "kafka.jar")
    record_jars([DELTA, KAFKA, S3], jars)
    assert resolved_jars([DELTA, S3]) == jars


def test_the_smallest_recorded_superset_serves(home: Path) -> None:
    with_thrift = _jars(home, "delta.jar", "aws.jar", "kafka.jar", "thrift.jar")
    record_jars([DELTA, S3, KAFKA, THRIFT], with_thrift)
    set_up = _jars(home, "delta.jar", "aws.jar", "kafka.jar")
    record_jars([DELTA, KAFKA, S3], set_up)
    assert resolved_jars([DELTA, S3]) == set_up


def test_a_set_recorded_with_other_packages_does_not_serve(home: Path) -> None:
    record_jars([DELTA, KAFKA], _jars(home, "delta.jar", "kafka.jar"))
    assert resolved_jars([DELTA, S3]) is None


def test_a_recorded_set_whose_jar_is_gone_does_not_serve(home: Path) -> None:
    jars = _jars(home, "delta.jar", "aws.jar", "kafka.jar")
    record_jars([DELTA, KAFKA, S3], jars)
    Path(jars[2]).unlink()
    assert resolved_jars([DELTA, S3]) is None
    assert resolved_jars([DELTA, S3, KAFKA]) is None


def test_a_manifest_without_its_package_list_does_not_serve(home: Path) -> None:
    # written by an earlier version (jars only): resolving again rewrites it with its list
    jars = _jars(home, "delta.jar", "aws.jar")
    record_jars([DELTA, S3], jars)
    manifest = next((home / "medallion").glob("jars-*.txt"))
    manifest.write_text("\n".join(jars) + "\n", encoding="utf-8")
    assert resolved_jars([DELTA, S3]) is None
