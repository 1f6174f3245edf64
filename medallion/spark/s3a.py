"""Hadoop S3A settings derived from the typed ``s3`` configuration.

Every session carries hadoop-aws (at the version of the Hadoop that pyspark ships) and the AWS
SDK bundle it depends on, so any path may be an ``s3a://`` URI. What the ``s3`` section says
(endpoint, path-style access, region, server-side encryption, Delta log store) becomes
``spark.hadoop.fs.s3a.*`` and ``spark.delta.logStore.*`` settings here, in one place.

Credentials are never set here: S3A asks the AWS SDK's default provider chain (Java system
properties, environment, web identity, shared profile, container or instance role).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql import SparkSession

from medallion.config.jvm import dynamodb_log_store, hadoop_aws
from medallion.config.model import DeltaLogStore, S3Settings, SseAlgorithm
from medallion.project import Settings

log = logging.getLogger(__name__)

DEFAULT_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
SINGLE_DRIVER_LOG_STORE = "io.delta.storage.S3SingleDriverLogStore"
DYNAMODB_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"
_HADOOP_PREFIX = "spark.hadoop."


# S3A's names of the algorithms (Hadoop's ``S3AEncryptionMethods``), which are not AWS's: SSE-S3 is
# "AES256" there, and "SSE-S3" fails every S3A call with "Unknown encryption algorithm".
S3A_ENCRYPTION = {SseAlgorithm.SSE_S3: "AES256", SseAlgorithm.SSE_KMS: "SSE-KMS"}

def s3_packages(settings: Settings) -> list[str]:
    """Maven coordinates S3 support needs beside the Delta jar.

    hadoop-aws must match pyspark's Hadoop exactly; it brings the AWS SDK bundle it was built
    against. A configured hadoop-aws coordinate (checked by the config loader) wins.
    """
    packages: list[str] = []
    configured = {tuple(p.split(":")[:2]) for p in settings.spark.packages}
    derived = hadoop_aws()
    if derived and ("org.apache.hadoop", "hadoop-aws") not in configured:
        packages.append(derived)
    if settings.s3.delta_log_store is DeltaLogStore.DYNAMODB:
        packages.append(dynamodb_log_store())
    return packages


def s3a_conf(s3: S3Settings) -> dict[str, str]:
    """Spark settings for S3A and for Delta's log store on S3, from the ``s3`` section."""
    conf = {
        # s3:// paths (as AWS consoles print them) go through S3A too.
        "spark.hadoop.fs.s3.impl": S3A_FILESYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "spark.hadoop.fs.s3a.aws.credentials.provider": DEFAULT_CREDENTIALS_PROVIDER,
        "spark.hadoop.fs.s3a.path.style.access": str(s3.path_style_access).lower(),
    }
    if s3.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            s3.endpoint.startswith("https://")).lower()
    if s3.region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = s3.region
    elif s3.endpoint:
        # An S3-compatible store has no AWS region, but the SDK signs requests for one.
        conf["spark.hadoop.fs.s3a.endpoint.region"] = "us-east-1"
    if s3.sse is not SseAlgorithm.NONE:
        conf["spark.hadoop.fs.s3a.encryption.algorithm"] = S3A_ENCRYPTION[s3.sse]
        if s3.kms_key_id:
            conf["spark.hadoop.fs.s3a.encryption.key"] = s3.kms_key_id
    if s3.delta_log_store is DeltaLogStore.DYNAMODB:
        for scheme in ("s3a", "s3"):
            conf[f"spark.delta.logStore.{scheme}.impl"] = DYNAMODB_LOG_STORE
        prefix = "spark.io.delta.storage.S3DynamoDBLogStore"
        conf[f"{prefix}.ddb.tableName"] = s3.dynamodb_table
        region = s3.dynamodb_region or s3.region
        if region:
            conf[f"{prefix}.ddb.region"] = region
    else:
        for scheme in ("s3a", "s3"):
            conf[f"spark.delta.logStore.{scheme}.impl"] = SINGLE_DRIVER_LOG_STORE
    return conf


def hadoop_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.hadoop.*`` entries of ``conf``, as Hadoop keys (prefix removed)."""
    return {k.removeprefix(_HADOOP_PREFIX): v
            for k, v in conf.items() if k.startswith(_HADOOP_PREFIX)}


def apply_hadoop_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """Set the ``spark.hadoop.*`` entries of ``conf`` on a running session's Hadoop configuration.

    ``spark.hadoop.*`` given to a builder only reaches Hadoop when the session is first created;
    a session that already runs (one test session, several lakehouses) gets them here. File
    systems opened later (a new bucket) see them; Hadoop caches one S3A instance per bucket.
    """
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_settings(conf).items():
        hadoop_conf.set(key, value)
