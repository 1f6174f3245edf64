"""Every JVM package the project asks for, derived from the installed pyspark and delta-spark.

One place for every Maven coordinate: Delta's jar for the installed Spark line, the DynamoDB log
store at the Delta version, Spark's Kafka connector (and the Thrift server's jars, should a pyspark
build leave them out) at the Spark version, hadoop-aws at the Hadoop version pyspark ships. Nothing
here imports PySpark: the versions are read from the installed distributions and pyspark's jars
folder, so the configuration loader refuses a pinned package that does not fit before any JVM
starts. It lives beside the loader because the configuration layer imports nothing above it;
``medallion.spark.packages`` builds a session's package list from these.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

DELTA_GROUP = "io.delta"
SPARK_GROUP = "org.apache.spark"
HADOOP_GROUP = "org.apache.hadoop"
KAFKA_CONNECTOR = "spark-sql-kafka-0-10"
DYNAMODB_LOG_STORE = "delta-storage-s3-dynamodb"
THRIFT_SERVER_JARS = ("spark-hive", "spark-hive-thriftserver")
OPENLINEAGE_GROUP = "io.openlineage"
# The OpenLineage Spark listener: one jar per Scala version, no dependencies of its own (42 MB),
# for Spark 3.x and 4.x alike; its releases are independent of Spark's.
OPENLINEAGE_RELEASE = "1.53.0"


def spark_version() -> str:
    """The installed pyspark's version (its JVM is the one every session runs)."""
    return version("pyspark")


def delta_version() -> str:
    """The installed delta-spark's version (its jar is resolved at the same version)."""
    return version("delta-spark")


def spark_line(release: str | None = None) -> str:
    """``4.2.0`` -> ``4.2``: the Spark line, which Delta's artifact names for Spark 4.1+ carry."""
    return ".".join((release or spark_version()).split(".")[:2])


def _jars_folder() -> Path | None:
    # Found, not imported: commands that never start Spark (status, show, ...) skip PySpark.
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:  # pragma: no cover - pyspark is a dependency
        return None
    return Path(spec.origin).resolve().parent / "jars"


def _bundled(prefix: str) -> str | None:
    """The version part of the jar ``<prefix><version>.jar`` in pyspark's jars folder."""
    folder = _jars_folder()
    if folder is None:  # pragma: no cover
        return None
    for jar in sorted(folder.glob(f"{prefix}*.jar")):
        return jar.name.removeprefix(prefix).removesuffix(".jar")
    return None


@cache
def scala_version() -> str:
    """The Scala binary version pyspark's jars are built for (``spark-core_2.13-4.2.0.jar``)."""
    folder = _jars_folder()
    for jar in sorted(folder.glob("spark-core_*.jar")) if folder else []:
        match = re.match(r"spark-core_(\d+\.\d+)-", jar.name)
        if match:
            return match.group(1)
    return "2.13"  # pragma: no cover - every Spark 4 build is Scala 2.13


def bundled_hadoop_version() -> str | None:
    """The Hadoop version the installed pyspark ships (hadoop-aws must match it exactly)."""
    return _bundled("hadoop-client-api-")


def _delta_has_spark_line() -> bool:
    """Delta names its jar after the Spark line from 4.1 on (``delta-spark_4.2_2.13``)."""
    major, minor = (int(part) for part in delta_version().split(".")[:2])
    return (major, minor) >= (4, 1)


def delta_artifact() -> str:
    """Delta's artifact for the installed Spark line and Scala version."""
    if _delta_has_spark_line():
        return f"delta-spark_{spark_line()}_{scala_version()}"
    return f"delta-spark_{scala_version()}"


def delta_coordinate() -> str:
    """``io.delta:delta-spark_4.2_2.13:4.4.0`` for pyspark 4.2.0 with delta-spark 4.4.0."""
    return f"{DELTA_GROUP}:{delta_artifact()}:{delta_version()}"


def dynamodb_log_store() -> str:
    """Delta's DynamoDB log store (a Java jar, no Scala or Spark suffix) at the Delta version."""
    return f"{DELTA_GROUP}:{DYNAMODB_LOG_STORE}:{delta_version()}"


def kafka_connector(release: str | None = None) -> str:
    """Spark's Kafka connector at ``release`` (a release of the installed Spark line), else at the
    installed pyspark's version."""
    return f"{SPARK_GROUP}:{KAFKA_CONNECTOR}_{scala_version()}:{release or spark_version()}"


def hadoop_aws() -> str | None:
    """hadoop-aws at the Hadoop version pyspark ships; None if pyspark ships no Hadoop."""
    hadoop = bundled_hadoop_version()
    return f"{HADOOP_GROUP}:hadoop-aws:{hadoop}" if hadoop else None


def thriftserver_packages() -> tuple[str, ...]:
    """The Thrift server's jars at the installed Spark version, if pyspark's build lacks them."""
    folder = _jars_folder()
    names = [f"{name}_{scala_version()}" for name in THRIFT_SERVER_JARS]
    missing = [name for name in names if folder is None or not any(folder.glob(f"{name}-*.jar"))]
    return tuple(f"{SPARK_GROUP}:{name}:{spark_version()}" for name in missing)


def openlineage_listener() -> str:
    """The OpenLineage Spark listener's jar for the installed Scala version."""
    return f"{OPENLINEAGE_GROUP}:openlineage-spark_{scala_version()}:{OPENLINEAGE_RELEASE}"


def connector_release_problem(release: str) -> str | None:
    """Why ``release`` of the Kafka connector cannot run on the installed Spark, if it cannot.

    The connector is built against Spark's internals and is binary-compatible within a line only.
    """
    if not re.fullmatch(r"\d+\.\d+\.\d+", release):
        return f"must be a Spark release like {spark_version()}, or null, got {release!r}"
    if spark_line(release) != spark_line():
        return (f"{release} is not of the installed Spark's line {spark_line()} "
                f"(pyspark {spark_version()}); use null for {spark_version()}")
    return None


def package_problem(coordinate: str) -> str | None:
    """Why a configured ``group:artifact:version`` does not fit the installed pyspark and
    delta-spark, if it is one of the packages derived here; None for any other package."""
    group, artifact, release = coordinate.split(":")
    scala = scala_version()
    wanted: str | None = None
    if group == DELTA_GROUP and artifact.startswith("delta-spark_"):
        wanted = delta_coordinate()
    elif group == DELTA_GROUP and artifact.startswith("delta-storage"):  # Java jars, Delta's version
        wanted = f"{DELTA_GROUP}:{artifact}:{delta_version()}"
    elif group == HADOOP_GROUP and artifact == "hadoop-aws":
        wanted = hadoop_aws()
    elif group == SPARK_GROUP and re.fullmatch(r"spark-[a-z0-9-]+_\d+\.\d+", artifact):
        name, _, artifact_scala = artifact.rpartition("_")
        wanted = f"{SPARK_GROUP}:{name}_{scala}:{spark_version()}"
        if name == KAFKA_CONNECTOR and artifact_scala == scala \
                and connector_release_problem(release) is None:
            return None  # another release of the same line: kafka.connector_version's rule
    if wanted is None or coordinate == wanted:
        return None
    return (f"{coordinate} does not fit pyspark {spark_version()} with delta-spark "
            f"{delta_version()}; use {wanted}")

