"""Kafka configuration: typed, validated before Spark starts, secrets only from the environment."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from medallion.config.model import KafkaProtocol, ReadFrom
from medallion.errors import ConfigError
from medallion.io.sources.kafka import (
    describe_data_loss,
    describe_kafka_failure,
    kafka_client_options,
)
from medallion.project import load_settings
from medallion.spark.packages import kafka_packages
from tests.conf_support import copy_base_conf


def _conf(tmp_path: Path, overlay: str) -> Path:
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(overlay)
    return conf


def _load(tmp_path: Path, overlay: str, **kw: str):  # type: ignore[no-untyped-def]
    return load_settings(env="local", conf_dir=_conf(tmp_path, overlay),
                         landing=str(tmp_path / "l"), lakehouse=str(tmp_path / "h"), **kw)


def test_defaults_read_files_and_leave_the_kafka_connector_out(tmp_path: Path) -> None:
    settings = _load(tmp_path, "")
    assert settings.read_from is ReadFrom.FILES
    assert not settings.uses_kafka
    assert kafka_packages(settings) == ()


def test_kafka_source_adds_the_connector_and_its_options(tmp_path: Path) -> None:
    settings = _load(tmp_path, "kafka:\n  max_offsets_per_trigger: 50\n",
                     read_from="kafka", kafka_bootstrap="127.0.0.1:1234")
    assert settings.uses_kafka
    # at the installed Spark's own release
    assert kafka_packages(settings) == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version('pyspark')}",)
    assert [s.topics for s in settings.kafka_sources()] == [("medallion.events",)]
    assert settings.kafka.max_offsets_per_trigger == 50
    assert kafka_client_options(settings.kafka) == {
        "kafka.bootstrap.servers": "127.0.0.1:1234", "kafka.security.protocol": "PLAINTEXT"}


@pytest.mark.parametrize(("overlay", "key"), [
    ("kafka:\n  bootstrap_servers: no-port\n", "kafka.bootstrap_servers"),
    ("kafka:\n  topics: []\n", "kafka.topics"),
    ("kafka:\n  starting_offsets: yesterday\n", "kafka.starting_offsets"),
    ("kafka:\n  fail_on_data_loss: maybe\n", "kafka.fail_on_data_loss"),
    ("kafka:\n  max_offsets_per_trigger: 0\n", "kafka.max_offsets_per_trigger"),
    ("kafka:\n  client_options:\n    sasl.jaas.config: x\n",
     "kafka.client_options.sasl.jaas.config"),
    ("kafka:\n  security:\n    protocol: SASL_SSL\n    sasl_mechanism: PLAIN\n"
     "    username_env: MEDALLION_TEST_NO_SUCH_USER\n    password_env: MEDALLION_TEST_NO_SUCH_PW\n",
     "kafka.security.username_env"),
    ("kafka:\n  security:\n    password: hunter2\n", "kafka.security.password"),
    ("kafka:\n  publish:\n    - {table: bronze/events, topic: t}\n", "kafka.publish[0].table"),
    ("kafka:\n  publish:\n    - {table: silver/events, topic: t, key: [nope]}\n",
     "kafka.publish[0].key"),
    ("sources:\n  read_from: pigeons\n", "sources.read_from"),
    ("sources:\n  events_kind: kafka\n", "sources.events_kind"),
    ("kafka:\n  topics: [medallion.events]\n", "kafka.topics"),
])
def test_bad_kafka_configuration_names_key_and_file(tmp_path: Path, overlay: str, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, overlay)
    assert error.value.key == key
    assert error.value.source.endswith("local.yaml")


def test_read_from_kafka_chooses_the_kafka_alternative(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from_file = _load(tmp_path, "sources:\n  read_from: kafka\n")
    assert from_file.read_from is ReadFrom.KAFKA
    events = from_file.pipeline("events")
    assert [s.name for s in from_file.active_sources(events)][0] == "events_kafka"
    assert _load(tmp_path, "").read_from is ReadFrom.FILES
    monkeypatch.setenv("MEDALLION_READ_FROM", "kafka")
    assert _load(tmp_path, "").read_from is ReadFrom.KAFKA


def test_kafka_read_from_without_a_kafka_alternative_needs_no_connector(tmp_path: Path) -> None:
    """``read_from: kafka`` picks the Kafka alternative where a source has one. The orders
    pipeline has none, so run alone it reads its files, and the session needs no connector."""
    settings = _load(tmp_path, "", read_from="kafka")
    assert settings.uses_kafka
    orders = settings.only(["orders"])
    assert orders.read_from is ReadFrom.KAFKA
    assert [s.format.value for s in orders.active_sources(orders.pipelines[0])] == ["csv"] * len(
        orders.pipelines[0].sources)
    assert not orders.uses_kafka
    assert kafka_packages(orders) == ()


def test_a_pipeline_overlay_sets_the_topics_its_kafka_source_subscribes(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "")
    (conf / "pipelines" / "events.local.yaml").write_text(
        "sources:\n  events_kafka:\n    topics: [a, b]\n")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "l"),
                             lakehouse=str(tmp_path / "h"), read_from="kafka")
    assert [s.topics for s in settings.kafka_sources()] == [("a", "b")]
    assert settings.uses_kafka


def test_any_declared_silver_or_gold_table_is_published(tmp_path: Path) -> None:
    settings = _load(tmp_path, "kafka:\n  publish:\n"
                     "    - {table: gold.category_revenue_1h, topic: revenue, key: [category]}\n")
    assert [(p.table, p.topic, p.key) for p in settings.kafka.publish] == [
        ("gold/category_revenue_1h", "revenue", ("category",))]
    assert settings.uses_kafka


def test_sasl_secrets_come_from_the_environment(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_USER_FOR_TEST", "svc")
    monkeypatch.setenv("KAFKA_PW_FOR_TEST", 'p"w')
    settings = _load(tmp_path, "kafka:\n  security:\n    protocol: SASL_SSL\n"
                     "    sasl_mechanism: scram-sha-512\n    username_env: KAFKA_USER_FOR_TEST\n"
                     "    password_env: KAFKA_PW_FOR_TEST\n")
    assert settings.kafka.security.protocol is KafkaProtocol.SASL_SSL
    assert "p\"w" not in repr(settings)  # the secret is not held in the settings
    options = kafka_client_options(settings.kafka)
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="svc" password="p\\"w";')


def test_data_loss_description_names_topic_partition_offsets() -> None:
    text = ("Some data may have been lost because they are not available in Kafka any more;\n"
            "Reason: Could not read records in offset [5, 10) for topic partition my.topic-3\n")
    assert describe_data_loss(text) == (
        "Kafka data lost: offsets [5, 10) of my.topic-3 could not be read (topic my.topic, "
        "partition 3); they aged out or were deleted before bronze read them. Set "
        "kafka.fail_on_data_loss: false to skip and count such gaps.")
    assert describe_data_loss("Connection refused") is None


def test_a_broker_timeout_is_told_as_such() -> None:
    text = ("terminated with exception: org.apache.kafka.common.errors.TimeoutException: "
            "Timed out waiting for a node assignment. Call: listNodes")
    assert describe_kafka_failure(text) == (
        "Kafka did not answer in time (broker down or unreachable?); nothing of the unfinished "
        "batch was committed, rerun once the broker is back")
    assert describe_kafka_failure("java.io.FileNotFoundException: x") is None
