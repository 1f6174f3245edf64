"""Kafka security: no clear-text passwords unless allowed, mTLS key stores, the producer's TLS."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from medallion.config.model import KafkaProtocol
from medallion.errors import ConfigError
from medallion.io.sources.kafka import kafka_client_options
from medallion.project import load_settings
from medallion.samples.produce import ProduceError, producer_config
from tests.s3_support import write_overlay

pytestmark = pytest.mark.usefixtures("clean_medallion_env")
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
SASL = {"sasl_mechanism": "PLAIN", "username_env": "T_KAFKA_USER", "password_env": "T_KAFKA_PW"}


@pytest.fixture(autouse=True)
def _secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("T_KAFKA_USER", "svc"), ("T_KAFKA_PW", "pw-from-env"),
                        ("T_STORE_PW", "store-pw-from-env"), ("T_KEY_PW", "key-pw-from-env")):
        monkeypatch.setenv(name, value)


def _load(tmp_path: Path, security: dict) -> object:
    conf = write_overlay(tmp_path / "conf", "k", {"kafka": {"security": security}})
    return load_settings(env="k", conf_dir=conf)


def test_sasl_plain_over_plaintext_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="clear text") as error:
        _load(tmp_path, {"protocol": "SASL_PLAINTEXT", **SASL})
    assert error.value.key == "kafka.security.protocol"
    assert error.value.source.endswith("k.yaml")
    assert "allow_cleartext_password" in str(error.value)
    allowed = _load(tmp_path / "a", {"protocol": "SASL_PLAINTEXT", "allow_cleartext_password": True,
                                     **SASL})
    assert allowed.kafka.security.protocol is KafkaProtocol.SASL_PLAINTEXT  # type: ignore[attr-defined]
    # SCRAM never sends the password itself, and SASL_SSL encrypts it: both need no flag.
    _load(tmp_path / "b", {"protocol": "SASL_PLAINTEXT", **SASL, "sasl_mechanism": "SCRAM-SHA-512"})
    _load(tmp_path / "c", {"protocol": "SASL_SSL", **SASL})


def test_mtls_key_store_reaches_spark_with_its_password_from_the_environment(tmp_path: Path) -> None:
    settings = _load(tmp_path, {
        "protocol": "SSL", "truststore_location": "/etc/kafka/ca.p12",
        "truststore_password_env": "T_STORE_PW", "keystore_location": "/etc/kafka/client.jks",
        "keystore_password_env": "T_STORE_PW", "key_password_env": "T_KEY_PW"})
    assert "store-pw-from-env" not in repr(settings)
    assert kafka_client_options(settings.kafka) == {  # type: ignore[attr-defined]
        "kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.p12",
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": "store-pw-from-env",
        "kafka.ssl.keystore.location": "/etc/kafka/client.jks",
        "kafka.ssl.keystore.type": "JKS",
        "kafka.ssl.keystore.password": "store-pw-from-env",
        "kafka.ssl.key.password": "key-pw-from-env",
    }


@pytest.mark.parametrize(("security", "key"), [
    ({"protocol": "PLAINTEXT", "keystore_location": "/k.p12", "keystore_password_env": "T_STORE_PW"},
     "kafka.security.keystore_location"),
    ({"protocol": "SSL", "keystore_location": "/k.jks"}, "kafka.security.keystore_password_env"),
    ({"protocol": "SSL", "keystore_location": "/k.p12", "keystore_password_env": "T_UNSET_PW"},
     "kafka.security.keystore_password_env"),
    ({"protocol": "SSL", "keystore_password_env": "T_STORE_PW"}, "kafka.security.keystore_password_env"),
    ({"protocol": "SSL", "keystore_location": "/k", "keystore_type": "BKS"},
     "kafka.security.keystore_type"),
    ({"protocol": "SSL", "keystore_password": "hunter2"}, "kafka.security.keystore_password"),
])
def test_bad_key_store_settings_name_the_key(tmp_path: Path, security: dict, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, security)
    assert error.value.key == key
    assert "hunter2" not in str(error.value)


def _certificate(folder: Path) -> tuple[Path, Path, Path, bytes]:
    """A self-signed certificate as PEM (certificate and key) and as PKCS12 stores."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "medallion-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    pem = folder / "client.pem"
    pem.write_bytes(cert_pem + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    encryption = serialization.BestAvailableEncryption(b"store-pw-from-env")
    truststore = folder / "ca.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [cert], encryption))
    keystore = folder / "client.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, None, encryption))
    return pem, truststore, keystore, cert_pem


def test_produce_uses_the_configured_pkcs12_trust_and_key_stores(tmp_path: Path) -> None:
    _pem, truststore, keystore, cert_pem = _certificate(tmp_path)
    settings = _load(tmp_path, {
        "protocol": "SASL_SSL", **SASL, "truststore_location": str(truststore),
        "truststore_password_env": "T_STORE_PW", "keystore_location": str(keystore),
        "keystore_password_env": "T_STORE_PW"})
    config = producer_config(settings.kafka)  # type: ignore[attr-defined]
    assert config["ssl.ca.pem"] == cert_pem.decode("ascii")
    assert config["ssl.keystore.location"] == str(keystore)
    assert config["ssl.keystore.password"] == "store-pw-from-env"
    assert (config["sasl.username"], config["sasl.password"]) == ("svc", "pw-from-env")


def test_produce_uses_pem_stores_as_files(tmp_path: Path) -> None:
    pem, _truststore, _keystore, _cert = _certificate(tmp_path)
    settings = _load(tmp_path, {"protocol": "SSL", "truststore_location": str(pem),
                                "keystore_location": str(pem), "key_password_env": "T_KEY_PW"})
    config = producer_config(settings.kafka)  # type: ignore[attr-defined]
    assert {k: v for k, v in config.items() if k.startswith("ssl.")} == {
        "ssl.ca.location": str(pem), "ssl.certificate.location": str(pem),
        "ssl.key.location": str(pem), "ssl.key.password": "key-pw-from-env"}


def test_produce_refuses_a_jks_store_instead_of_ignoring_it(tmp_path: Path) -> None:
    settings = _load(tmp_path, {"protocol": "SSL", "truststore_location": "/etc/kafka/ca.jks",
                                "truststore_password_env": "T_STORE_PW"})
    with pytest.raises(ProduceError, match="JKS"):
        producer_config(settings.kafka)  # type: ignore[attr-defined]


def test_a_secret_written_where_a_variable_name_belongs_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {
            "protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "username_env": "T_KAFKA_USER", "password_env": f"{SECRET}!"})
    assert error.value.key == "kafka.security.password_env"
    assert SECRET not in str(error.value)
