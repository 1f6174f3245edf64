"""Every JVM coordinate follows from the installed pyspark and delta-spark, and a configuration
that pins a package of another line is refused before any JVM starts, naming its key and file.

No JVM: the versions are read from the installed distributions and pyspark's jars folder.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from medallion.config import jvm
from medallion.errors import ConfigError
from medallion.project import load_settings
from tests.s3_support import write_overlay

pytestmark = pytest.mark.usefixtures("clean_medallion_env")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Pretend pyspark ``spark`` with delta-spark ``delta``, and a jars folder shipping Hadoop
    ``hadoop`` built for Scala ``scala``."""
    def pretend(spark: str, delta: str, hadoop: str = "3.5.0", scala: str = "2.13") -> None:
        jars = tmp_path / f"jars-{spark}-{delta}"
        jars.mkdir()
        for name in (f"spark-core_{scala}-{spark}.jar", f"hadoop-client-api-{hadoop}.jar",
                     f"spark-hive_{scala}-{spark}.jar"):
            (jars / name).write_bytes(b"PK")
        monkeypatch.setattr(jvm, "spark_version", lambda: spark)
        monkeypatch.setattr(jvm, "delta_version", lambda: delta)
        monkeypatch.setattr(jvm, "_jars_folder", lambda: jars)
        jvm.scala_version.cache_clear()
    yield pretend
    jvm.scala_version.cache_clear()


@pytest.mark.parametrize(("spark", "delta", "coordinate"), [
    # Delta names its jar after the Spark line from 4.1 on
    ("4.2.0", "4.4.0", "io.delta:delta-spark_4.2_2.13:4.4.0"),
    ("4.1.1", "4.1.0", "io.delta:delta-spark_4.1_2.13:4.1.0"),
    ("4.0.5", "4.4.0", "io.delta:delta-spark_4.0_2.13:4.4.0"),
    ("4.0.5", "4.0.1", "io.delta:delta-spark_2.13:4.0.1"),
])
def test_deltas_jar_is_named_for_the_spark_line(installed, spark: str, delta: str,  # type: ignore[no-untyped-def]
                                                coordinate: str) -> None:
    installed(spark, delta)
    assert jvm.delta_coordinate() == coordinate


def test_the_other_packages_follow_spark_hadoop_and_delta(installed) -> None:  # type: ignore[no-untyped-def]
    installed("4.2.0", "4.4.0", hadoop="3.5.0")
    assert jvm.kafka_connector() == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    assert jvm.kafka_connector("4.2.1") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.1"
    assert jvm.hadoop_aws() == "org.apache.hadoop:hadoop-aws:3.5.0"
    assert jvm.dynamodb_log_store() == "io.delta:delta-storage-s3-dynamodb:4.4.0"
    # the folder ships spark-hive but not the Thrift server: that one is resolved at Spark's version
    assert jvm.thriftserver_packages() == ("org.apache.spark:spark-hive-thriftserver_2.13:4.2.0",)


def test_the_installed_pair_gives_deltas_own_coordinate() -> None:
    """Delta's pip helper derives its jar the same way (it starts no JVM)."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = configure_spark_with_delta_pip(SparkSession.builder)
    assert builder._options["spark.jars.packages"] == jvm.delta_coordinate()  # type: ignore[attr-defined]
    assert jvm.delta_coordinate().endswith(f":{version('delta-spark')}")
    assert jvm.kafka_connector().endswith(f"_2.13:{version('pyspark')}")


def _load(tmp_path: Path, overlay: dict) -> object:
    return load_settings(env="pinned", conf_dir=write_overlay(tmp_path / "conf", "pinned", overlay))


@pytest.mark.parametrize("package", [
    "io.delta:delta-spark_2.13:4.0.1",          # Delta of another line
    "io.delta:delta-spark_4.1_2.13:{delta}",    # Delta's jar for another Spark line
    "io.delta:delta-storage-s3-dynamodb:4.0.1",
    "org.apache.hadoop:hadoop-aws:3.4.1",       # not the Hadoop pyspark ships
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0",
    "org.apache.spark:spark-avro_2.12:{spark}",  # another Scala
])
def test_a_pinned_package_of_another_line_is_refused_in_one_line(tmp_path: Path, package: str) -> None:
    package = package.format(delta=version("delta-spark"), spark=version("pyspark"))
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {"spark": {"packages": [package]}})
    message = str(error.value)
    assert "\n" not in message
    assert "spark.packages" in message and "pinned.yaml" in message and package in message
    assert f"pyspark {version('pyspark')}" in message


def test_packages_of_the_installed_line_and_others_are_taken(tmp_path: Path) -> None:
    spark, delta = version("pyspark"), version("delta-spark")
    fitting = [f"io.delta:delta-storage-s3-dynamodb:{delta}",
               f"org.apache.spark:spark-avro_2.13:{spark}",
               f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark}",
               "org.example:extra:1.0"]
    settings = _load(tmp_path, {"spark": {"packages": fitting}})
    assert list(settings.spark.packages) == fitting  # type: ignore[attr-defined]


def test_the_kafka_connector_must_be_of_the_installed_spark_line(tmp_path: Path) -> None:
    spark = version("pyspark")
    line = ".".join(spark.split(".")[:2])
    settings = _load(tmp_path, {"kafka": {"connector_version": f"{line}.0"}})
    assert settings.kafka.connector_version == f"{line}.0"  # type: ignore[attr-defined]
    for wrong in ("4.0.0", "latest"):
        with pytest.raises(ConfigError) as error:
            _load(tmp_path, {"kafka": {"connector_version": wrong}})
        message = str(error.value)
        assert "kafka.connector_version" in message and "pinned.yaml" in message
        assert "\n" not in message
