"""Fixtures for tests against a real S3-compatible server (S3Proxy on loopback).

The server is started once per test session at a free port, with keys made up for the run, and
stopped at the end. Clients find the keys the standard way: boto3 in the environment, the Spark
JVM in the ``aws.accessKeyId`` / ``aws.secretAccessKey`` system properties, both links of the
AWS default provider chain. Each test gets buckets of its own.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from medallion.io.s3 import s3_client
from medallion.ops.infra.s3proxy import S3ProxyServer
from medallion.project import Settings, load_settings
from tests.conf_support import copy_base_conf

REPO = Path(__file__).resolve().parent.parent
_BUCKET_SEQUENCE = itertools.count(1)

# S3A retries a refused connection for minutes by default; a test wants the failure in seconds.
FAST_FAILURE = {
    "spark.hadoop.fs.s3a.retry.limit": "1",
    "spark.hadoop.fs.s3a.retry.interval": "100ms",
    "spark.hadoop.fs.s3a.attempts.maximum": "1",
    "spark.hadoop.fs.s3a.connection.establish.timeout": "2s",
    "spark.hadoop.fs.s3a.connection.timeout": "20s",
}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3ProxyServer]:
    """S3Proxy with its filesystem backend on 127.0.0.1, for the whole test session."""
    server = S3ProxyServer(tmp_path_factory.mktemp("s3proxy") / "data").start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                             "AWS_REGION", "AWS_PROFILE")}
    os.environ["AWS_ACCESS_KEY_ID"] = server.access_key
    os.environ["AWS_SECRET_ACCESS_KEY"] = server.secret_key
    os.environ["AWS_REGION"] = "us-east-1"
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield server
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def s3_spark(spark: SparkSession, s3_server: S3ProxyServer) -> SparkSession:
    """The shared session, with the server's keys where the AWS SDK's provider chain looks."""
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    system.setProperty("aws.accessKeyId", s3_server.access_key)
    system.setProperty("aws.secretAccessKey", s3_server.secret_key)
    return spark


def write_overlay(conf_dir: Path, env: str, overlay: dict[str, Any]) -> Path:
    """A conf folder holding the repo's base.yaml and one overlay ``<env>.yaml``.

    The catalog is in-memory unless the overlay says otherwise: Derby's embedded metastore needs
    a local lakehouse, and these lakehouses are on S3.
    """
    overlay = {"catalog": {"metastore": "in-memory"}, **overlay}
    copy_base_conf(conf_dir)
    (conf_dir / f"{env}.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    return conf_dir


S3SettingsFactory = Callable[..., Settings]


@pytest.fixture
def clean_medallion_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clear the variables that override configured paths (``make`` exports local ones)."""
    for variable in ("MEDALLION_LANDING", "MEDALLION_LAKEHOUSE", "MEDALLION_S3_ENDPOINT",
                     "MEDALLION_ENV"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def s3_settings_factory(s3_server: S3ProxyServer, tmp_path: Path,
                        clean_medallion_env: None) -> S3SettingsFactory:
    """Settings of an ``s3test`` overlay: landing and lakehouse in new buckets on the server.

    The overlay's paths and endpoint win, also through the CLI (see ``clean_medallion_env``).
    """

    def make(name: str = "", create_buckets: bool = True, **s3: Any) -> Settings:
        prefix = f"t{os.getpid()}-{next(_BUCKET_SEQUENCE)}{name}"
        overlay = {
            "paths": {"landing": f"s3a://{prefix}-landing/landing",
                      "lakehouse": f"s3a://{prefix}-lakehouse/lakehouse"},
            "spark": {"conf": dict(FAST_FAILURE)},
            "s3": {"endpoint": s3_server.endpoint, "path_style_access": True,
                   "region": "us-east-1", **s3},
        }
        conf_dir = write_overlay(tmp_path / f"conf-{prefix}", "s3test", overlay)
        settings = load_settings(env="s3test", conf_dir=conf_dir)
        if create_buckets:
            client = s3_client(settings.s3)
            for bucket in (f"{prefix}-landing", f"{prefix}-lakehouse"):
                client.create_bucket(Bucket=bucket)
        return settings

    return make


# ---- the events pipeline on tiny data, and tables compared across file systems -------------

SAMPLE = {"events": 300, "files": 2, "users": 20, "burst": "s3", "seed": 11}


def write_sample(folder: Path) -> list[Path]:
    """The tiny sample landing zone used by the S3 pipeline tests (events and customers)."""
    from medallion.samples.generate import GenerateSpec, generate_landing

    return generate_landing(folder, GenerateSpec(**SAMPLE))  # type: ignore[arg-type]


def table_rows(spark: SparkSession, settings: Settings) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, sorted, without what differs between two equal runs.

    Dropped: ingestion, recording and validation times, the streaming query and run ids, and the
    quality results' raw JSON. ``source_file`` is cut to the file's name, since the local and the
    S3 landing zones differ in the rest. Tables the run did not create (Kafka's) are left out, and
    so are the run records (batch timings and run outcomes differ between any two runs).
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from medallion.io.tables import RUN_RECORDS
    from tests.events_tables import ALL_TABLES

    varying = ("ingested_at", "recorded_at", "query_id", "run_id", "validated_at", "result_json")
    tables = {}
    for spec in ALL_TABLES:
        if spec in RUN_RECORDS or not DeltaTable.isDeltaTable(spark, spec.path(settings)):
            continue
        df = spark.read.format("delta").load(spec.path(settings))
        df = df.drop(*[c for c in varying if c in df.columns])
        if "source_file" in df.columns:
            df = df.withColumn("source_file", F.regexp_extract("source_file", r"([^/]+)$", 1))
        tables[spec.key] = sorted((tuple(row) for row in df.collect()), key=repr)
    return tables


@pytest.fixture(scope="session")
def local_reference(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
                    ) -> tuple[list[Path], dict[str, list[tuple[Any, ...]]]]:
    """The sample's files, and the tables one clean run on the local file system produces."""
    from medallion.config.model import Trigger
    from medallion.engine.runner import RunTarget, run_pipeline

    root = tmp_path_factory.mktemp("local-reference")
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing=str(root / "landing"),
                             lakehouse=str(root / "lakehouse"))
    files = write_sample(root / "sample")
    for path in files:
        target = Path(settings.paths.landing) / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    return files, table_rows(spark, settings)
