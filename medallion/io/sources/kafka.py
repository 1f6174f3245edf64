"""Streaming reader of Kafka topics (Spark's Kafka connector), and the client options it shares
with the Kafka sink.

Security settings come from configuration; the secrets themselves only from the environment
variables that configuration names, read here when a query starts, so they never sit in a file,
in ``Settings`` or in a log line (Spark's Kafka connector redacts ``sasl.jaas.config``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from medallion.config.model import KafkaProtocol, KafkaSettings

log = logging.getLogger(__name__)

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _secret(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise RuntimeError(f"environment variable {variable} (named by kafka.security) is not set")
    return value


def kafka_client_options(kafka: KafkaSettings) -> dict[str, str]:
    """The ``kafka.*`` options of a Kafka source or sink: servers, security, client properties."""
    options = {f"kafka.{name}": value for name, value in kafka.client_options.items()}
    options["kafka.bootstrap.servers"] = kafka.bootstrap_servers
    security = kafka.security
    options["kafka.security.protocol"] = security.protocol.value
    if security.protocol in (KafkaProtocol.SASL_PLAINTEXT, KafkaProtocol.SASL_SSL):
        assert security.sasl_mechanism and security.username_env and security.password_env
        options["kafka.sasl.mechanism"] = security.sasl_mechanism
        options["kafka.sasl.jaas.config"] = (
            f"{_LOGIN_MODULES[security.sasl_mechanism]} required "
            f"username={_jaas_quote(_secret(security.username_env))} "
            f"password={_jaas_quote(_secret(security.password_env))};"
        )
    for store in ("truststore", "keystore"):
        location = getattr(security, f"{store}_location")
        if not location:
            continue
        options[f"kafka.ssl.{store}.location"] = location
        options[f"kafka.ssl.{store}.type"] = getattr(security, f"{store}_type") or "JKS"
        password_env = getattr(security, f"{store}_password_env")
        if password_env:
            options[f"kafka.ssl.{store}.password"] = _secret(password_env)
    if security.key_password_env:
        options["kafka.ssl.key.password"] = _secret(security.key_password_env)
    return options


def read_kafka_stream(spark: SparkSession, kafka: KafkaSettings,
                      topics: Sequence[str]) -> DataFrame:
    """Records of ``topics`` (a source's declared ones) since the reading query's checkpoint.

    Columns are the connector's: ``key, value`` (binary), ``topic, partition, offset,
    timestamp, timestampType``. ``startingOffsets`` applies to a query's first run only; after
    that the checkpoint says where to go on.
    """
    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_client_options(kafka))
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", kafka.starting_offsets)
        .option("failOnDataLoss", str(kafka.fail_on_data_loss).lower())
    )
    if kafka.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", kafka.max_offsets_per_trigger)
    if kafka.poll_timeout_ms is not None:
        reader = reader.option("kafkaConsumer.pollTimeoutMs", kafka.poll_timeout_ms)
    log.info("reading topics %s from %s", ",".join(topics), kafka.bootstrap_servers)
    return reader.load()


_LOSS_REASONS = (
    re.compile(r"Could not read records in offset \[(\d+), (\d+)\) for topic partition (\S+)"),
    re.compile(r"(\S+)'s offset was changed from (\d+) to (\d+)"),
    re.compile(r"Cannot fetch offset (\d+) \(GroupId: [^,]*, TopicPartition: ([^)]+)\)"),
)


_UNREACHABLE = (
    "org.apache.kafka.common.errors.TimeoutException",  # admin/consumer calls with no broker
    "Cannot fetch record for offset",  # an executor's poll ran out of kafka.poll_timeout_ms
)


def describe_kafka_failure(failure_text: str) -> str | None:
    """What a Kafka-related query failure means, in one line; None when it is not one."""
    loss = describe_data_loss(failure_text)
    if loss:
        return loss
    if any(sign in failure_text for sign in _UNREACHABLE):
        return ("Kafka did not answer in time (broker down or unreachable?); nothing of the "
                "unfinished batch was committed, rerun once the broker is back")
    return None


def describe_data_loss(failure_text: str) -> str | None:
    """A one-line account of Kafka data loss found in a query failure (its JVM stack trace):
    topic, partition and the offsets that are gone; None when the failure is something else."""
    if "Some data may have been lost" not in failure_text and "data may have been missed" \
            not in failure_text:
        return None
    found = _LOSS_REASONS[0].search(failure_text)
    if found:
        start, end, partition = found.groups()
        what = f"offsets [{start}, {end}) of {partition} could not be read"
    elif (found := _LOSS_REASONS[1].search(failure_text)):
        partition, start, end = found.groups()
        what = f"offsets [{start}, {end}) of {partition} are no longer in the topic"
    elif (found := _LOSS_REASONS[2].search(failure_text)):
        start, partition = found.groups()
        what = f"offset {start} of {partition} is no longer in the topic"
    else:
        what = "some offsets are no longer in the topic"
    topic, _, number = partition.rpartition("-") if found else ("?", "", "?")
    where = f" (topic {topic}, partition {number})" if found else ""
    return (f"Kafka data lost: {what}{where}; they aged out or were deleted before bronze read "
            "them. Set kafka.fail_on_data_loss: false to skip and count such gaps.")
