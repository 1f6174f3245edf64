"""Shared fixtures: one Spark session for the whole test run, tables under ``tmp_path``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.project import Settings, load_settings
from medallion.spark.session import build_session
from tests.kafka_broker import Broker

REPO = Path(__file__).resolve().parent.parent
SUITE_DRIVER_MEMORY = "4g"  # the shared session's heap (see `spark`)
pytest_plugins = ["tests.s3_support"]  # the S3-compatible server and its settings
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
# Every JVM the suite starts (the shared session, each medallion process, spark-submit, the
# Thrift server) evaluates interpreted: the suite's batches are a few hundred rows, and generating
# and compiling Java for each new plan costs more than evaluating it. SparkConf reads spark.*
# system properties; SPARK_CONF_DIR would put a folder on the class path, where the JVM's class
# archive refuses a non-empty one. The end-to-end model check runs with codegen (`codegen`).
INTERPRETED = "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"),
                                                          INTERPRETED]))
os.environ.pop("PYSPARK_PYTHON", None)  # the session factory picks the workers' Python itself
# PySpark turns TIMESTAMP values into naive datetimes in the process's zone: make that UTC.
os.environ["TZ"] = "UTC"
time.tzset()


def make_settings(root: Path, **overrides: str) -> Settings:
    """Settings of the repo's ``local`` environment with landing and lakehouse under ``root``."""
    return load_settings(env="local", conf_dir=REPO / "conf", landing=str(root / "landing"),
                         lakehouse=str(root / "lakehouse"), **overrides)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The project's session (local[2], 2 shuffle partitions, UI off, a 4g heap), shared by
    every test of one pytest process.

    Built with Kafka configured, so the session has Spark's Kafka connector for the Kafka tests.
    """
    settings = make_settings(tmp_path_factory.mktemp("session"), read_from="kafka")
    # A job's JVM runs one pipeline run; this one runs a few hundred tests' (`_forget_delta_logs`).
    settings = replace(settings, spark=replace(settings.spark, conf={
        **settings.spark.conf, "spark.driver.memory": SUITE_DRIVER_MEMORY}))
    session = build_session(settings, register_tables=False)
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _forget_delta_logs() -> Iterator[None]:
    """After each test, Delta's cache of table logs is emptied: each one keeps a table's newest
    snapshot (its plans and cached state) for an hour, and a test's tables are gone after it."""
    yield
    active = SparkSession.getActiveSession()
    if active is not None:
        active.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]


@pytest.fixture
def codegen(spark: SparkSession) -> Iterator[SparkSession]:
    """The shared session with Spark's code generation on, as production runs it (the suite's
    JVMs evaluate interpreted: INTERPRETED), put back afterwards."""
    settings = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    suite = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in suite.items():
            spark.conf.set(key, value)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A real Kafka broker (KRaft, loopback, free ports) from infra/kafka, stopped at the end."""
    broker = Broker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings whose landing zone and lakehouse are this test's own folders."""
    return make_settings(tmp_path)
