"""Mutual TLS against a real broker: an SSL listener that requires a client certificate.

The certificates are made here with the JDK's ``keytool``: a CA, the broker's certificate (for
127.0.0.1) and the pipeline's client certificate, both signed by the CA, in PKCS12 stores whose
passwords reach medallion through environment variables only. A client without a certificate is
turned away; ``medallion produce`` (librdkafka) and bronze's Kafka source (Spark's connector) get in
with the configured stores, and bronze lands every record.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.errors import ConfigError
from medallion.project import Settings, load_settings
from medallion.samples.produce import ProduceError, producer_config, send_lines
from tests.events_tables import BRONZE_EVENTS_KAFKA
from tests.kafka_broker import Broker
from tests.s3_support import write_overlay

TOPIC = "medallion.mtls"
PUBLISHED = "medallion.mtls.quarantine"
STORE_PASSWORD_ENV = "MEDALLION_TEST_STORE_PASSWORD"
LINES = [f'{{"event_id":"m{i}","user_id":"u{i % 3}","event_type":"view",'
         f'"timestamp":"2025-01-27T10:00:{i:02d}Z"}}' for i in range(25)] + ["not json"]


@dataclass(frozen=True)
class Pki:
    """The stores of one test run, all PKCS12 under one password."""

    folder: Path
    password: str

    @property
    def ca_pem(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def truststore(self) -> Path:
        return self.folder / "truststore.p12"

    @property
    def broker(self) -> Path:
        return self.folder / "broker.p12"

    @property
    def client(self) -> Path:
        return self.folder / "client.p12"


def _keytool(pki: Pki, *args: str) -> None:
    subprocess.run(["keytool", *args, "-storepass", pki.password, "-noprompt"], check=True,
                   capture_output=True, cwd=pki.folder, timeout=120)


def _signed_store(pki: Pki, store: Path, alias: str, name: str, *extensions: str) -> None:
    """A PKCS12 key store holding ``alias``'s key and its certificate signed by the CA."""
    _keytool(pki, "-genkeypair", "-alias", alias, "-keyalg", "RSA", "-keysize", "2048",
             "-dname", f"CN={name}", "-validity", "2", "-keystore", str(store),
             "-storetype", "PKCS12")
    request, signed = pki.folder / f"{alias}.csr", pki.folder / f"{alias}.pem"
    _keytool(pki, "-certreq", "-alias", alias, "-keystore", str(store), "-file", str(request))
    _keytool(pki, "-gencert", "-alias", "ca", "-keystore", str(pki.folder / "ca.p12"),
             "-infile", str(request), "-outfile", str(signed), "-rfc", "-validity", "2",
             *extensions)
    _keytool(pki, "-importcert", "-alias", "ca", "-file", str(pki.ca_pem), "-keystore", str(store))
    _keytool(pki, "-importcert", "-alias", alias, "-file", str(signed), "-keystore", str(store))


def make_pki(folder: Path) -> Pki:
    folder.mkdir()
    pki = Pki(folder, secrets.token_urlsafe(16))
    _keytool(pki, "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048",
             "-dname", "CN=medallion test CA", "-ext", "bc:c", "-validity", "2",
             "-keystore", str(folder / "ca.p12"), "-storetype", "PKCS12")
    _keytool(pki, "-exportcert", "-alias", "ca", "-keystore", str(folder / "ca.p12"), "-rfc",
             "-file", str(pki.ca_pem))
    _keytool(pki, "-importcert", "-alias", "ca", "-file", str(pki.ca_pem),
             "-keystore", str(pki.truststore), "-storetype", "PKCS12")
    _signed_store(pki, pki.broker, "broker", "127.0.0.1", "-ext", "SAN=ip:127.0.0.1")
    _signed_store(pki, pki.client, "client", "medallion pipeline")
    return pki


@dataclass(frozen=True)
class SecuredBroker:
    broker: Broker
    pki: Pki


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """A broker whose only client listener is SSL with ``ssl.client.auth=required``."""
    root = tmp_path_factory.mktemp("kafka_mtls")
    pki = make_pki(root / "pki")
    broker = Broker(root / "broker")
    stores = (f"ssl.keystore.location={pki.broker}\nssl.keystore.type=PKCS12\n"
              f"ssl.keystore.password={pki.password}\n"
              f"ssl.truststore.location={pki.truststore}\nssl.truststore.type=PKCS12\n"
              f"ssl.truststore.password={pki.password}\n")
    extra = root / "ssl.properties"
    extra.write_text(
        f"listeners=SSL://127.0.0.1:{broker.port},CONTROLLER://127.0.0.1:{broker.controller_port}\n"
        f"advertised.listeners=SSL://127.0.0.1:{broker.port}\n"
        "inter.broker.listener.name=SSL\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SSL:SSL\n"
        "ssl.client.auth=required\n" + stores)
    broker = Broker(broker.data, broker.port, broker.controller_port, extra_properties=extra)
    broker.start()
    try:
        yield SecuredBroker(broker, pki)
    finally:
        broker.stop()


def _settings(root: Path, secured: SecuredBroker, **security: str) -> Settings:
    overlay = {
        "sources": {"read_from": "kafka"},
        "kafka": {"bootstrap_servers": secured.broker.bootstrap,
                  "publish": [{"table": "silver/events_quarantine", "topic": PUBLISHED}],
                  "security": {"protocol": "SSL",
                               "truststore_location": str(secured.pki.truststore),
                               "truststore_type": "PKCS12",
                               "truststore_password_env": STORE_PASSWORD_ENV, **security}},
    }
    conf = write_overlay(root / "conf", "mtls", overlay)
    (conf / "pipelines" / "events.mtls.yaml").write_text(
        f"sources:\n  events_kafka:\n    topics: [{TOPIC}]\n", encoding="utf-8")
    return load_settings(env="mtls", conf_dir=conf, landing=str(root / "landing"),
                         lakehouse=str(root / "lakehouse"))


def test_a_client_without_a_certificate_is_turned_away(secured: SecuredBroker) -> None:
    # Trusting the broker is not enough: the listener wants the client's certificate.
    admin = AdminClient({"bootstrap.servers": secured.broker.bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(secured.pki.ca_pem)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)


def test_produce_and_bronze_get_in_with_the_client_certificate(
        spark: SparkSession, secured: SecuredBroker, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_PASSWORD_ENV, secured.pki.password)
    settings = _settings(tmp_path, secured, keystore_location=str(secured.pki.client),
                         keystore_type="PKCS12", keystore_password_env=STORE_PASSWORD_ENV)
    # No secret in the configuration the run carries: only the variable's name.
    assert secured.pki.password not in repr(settings)

    assert send_lines(settings.kafka, TOPIC, LINES, timeout=60) == len(LINES)
    runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.BRONZE, Trigger(),
                                                   monitor=False)}

    assert runs[BRONZE_EVENTS_KAFKA.key].rows_out == len(LINES)
    landed = spark.read.format("delta").load(BRONZE_EVENTS_KAFKA.path(settings))
    assert sorted(row.raw for row in landed.select("raw").collect()) == sorted(LINES)
    assert {row.topic for row in landed.select("topic").distinct().collect()} == {TOPIC}

    # publishing makes the topic, through the same certificate (Kafka's admin client)
    run_pipeline(spark, settings, RunTarget.SILVER, Trigger(), monitor=False)
    (published,) = run_pipeline(spark, settings, RunTarget.PUBLISH, Trigger(), monitor=False)
    assert published.rows_out == 1  # the line that is not JSON
    admin = AdminClient({**producer_config(settings.kafka)})
    assert PUBLISHED in admin.list_topics(timeout=10).topics


def test_produce_without_the_client_certificate_fails_with_one_clear_error(
        secured: SecuredBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_PASSWORD_ENV, secured.pki.password)
    settings = _settings(tmp_path, secured)
    with pytest.raises(ProduceError, match=f"no Kafka broker answers at {secured.broker.bootstrap}"):
        send_lines(settings.kafka, TOPIC, LINES[:1], timeout=10)


def test_a_key_store_needs_its_password_variable(secured: SecuredBroker, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        _settings(tmp_path, secured, keystore_location=str(secured.pki.client),
                  keystore_type="PKCS12")
    assert error.value.key == "kafka.security.keystore_password_env"
