"""The one Spark session factory.

Every job, the CLI and the tests build their session here, so Delta, the state store, the time
zone and the JVM packages are the same everywhere. Library code receives ``spark`` as an argument.
"""

from __future__ import annotations

import logging
import os

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from medallion.catalog import register_tables as register_existing_tables
from medallion.config import Settings

log = logging.getLogger(__name__)

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# Defaults that make a lakehouse on a small cluster behave; configuration may override any of them.
BASE_CONF = {
    # All timestamps are instants in UTC, whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
    # RocksDB keeps streaming state off the JVM heap; changelog checkpointing makes commits cheap.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # A streaming query refuses to start on a checkpoint that does not match its plan.
    "spark.sql.streaming.stateStore.stateSchemaCheck": "true",
    # Delta log replay of small tables does not need 50 tasks.
    "spark.databricks.delta.snapshotPartitions": "4",
    # Keep table statistics so analysts' filters skip files.
    "spark.databricks.delta.properties.defaults.checkpointInterval": "10",
}


def state_store_conf(settings: Settings) -> dict[str, str]:
    """RocksDB memory bounds from ``state_store`` in configuration (per executor, all instances)."""
    prefix = "spark.sql.streaming.stateStore.rocksdb"
    return {
        f"{prefix}.boundedMemoryUsage": "true",
        f"{prefix}.maxMemoryUsageMB": str(settings.state_store.max_memory_mb),
        f"{prefix}.writeBufferCacheRatio": str(settings.state_store.write_buffer_ratio),
    }


def delta_packages(extra: tuple[str, ...] = ()) -> list[str]:
    """Maven coordinates of the Delta jar matching the installed delta-spark, plus ``extra``."""
    from importlib.metadata import version

    return [f"io.delta:delta-spark_2.13:{version('delta-spark')}", *extra]


def submitted_conf() -> SparkConf:
    """What spark-submit passed (master, packages, ...) if it launched this Python; else empty.

    Under spark-submit the JVM is already running (its gateway port is in the environment), but
    ``SparkConf()`` reads the JVM's settings only once Python has connected to it: connect first,
    or a configured ``spark.master`` would override the ``--master`` given to spark-submit.
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
    return SparkConf()


def build_session(settings: Settings, register_tables: bool = True) -> SparkSession:
    """Build (or return the running) Spark session configured for the lakehouse.

    The lakehouse's existing tables are registered as ``<layer>.<table>`` so SQL can name them.
    """
    builder = SparkSession.builder
    submitted = submitted_conf()
    if not submitted.contains("spark.app.name"):
        builder = builder.appName(settings.spark.app_name)
    if settings.spark.master and not submitted.contains("spark.master"):
        builder = builder.master(settings.spark.master)
    if not submitted.contains("spark.jars.packages"):
        builder = builder.config("spark.jars.packages", ",".join(delta_packages(settings.spark.packages)))
    conf = {
        **BASE_CONF,
        **state_store_conf(settings),
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        # Databases of the session catalog live beside the tables, not in the working directory.
        "spark.sql.warehouse.dir": f"{settings.paths.lakehouse}/_catalog",
        **settings.spark.conf,
        **DELTA_CONF,
    }
    for key, value in conf.items():
        if not submitted.contains(key):  # a --conf given to spark-submit wins
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.spark.log_level)
    log.info("spark %s session ready (master %s)", spark.version, spark.sparkContext.master)
    if register_tables:
        register_existing_tables(spark, settings)
    return spark
