"""``medallion produce``: generated sample events published to a Kafka topic.

The same lines ``medallion generate`` writes to files (late, duplicated and broken ones included)
go to the topic, one record each, so the Kafka path can be tried with a broker and two commands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from medallion.config.model import KafkaProtocol, KafkaSecurity, KafkaSettings
from medallion.samples.generate import GenerateSpec, generate_event_lines

log = logging.getLogger(__name__)


class ProduceError(RuntimeError):
    """The events could not all be delivered."""


def _secret(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise ProduceError(f"environment variable {variable} (named by kafka.security) is not set")
    return value


def _pkcs12_certificates_pem(location: str, password: str | None) -> str:
    """The certificates of a PKCS12 trust store, as PEM (librdkafka reads no PKCS12 trust store)."""
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    with open(location, "rb") as handle:
        store = pkcs12.load_pkcs12(handle.read(), password.encode() if password else None)
    certificates = ([store.cert] if store.cert else []) + list(store.additional_certs)
    if not certificates:
        raise ProduceError(f"{location}: the trust store holds no certificate")
    return "".join(c.certificate.public_bytes(Encoding.PEM).decode("ascii") for c in certificates)


def tls_config(security: KafkaSecurity) -> dict[str, str]:
    """librdkafka's TLS settings from the same trust store and key store the Spark jobs use.

    librdkafka reads PEM files and PKCS12 key stores, not Java's JKS: a JKS store is refused
    with a message rather than silently replaced by the system's CA bundle.
    """
    config: dict[str, str] = {}
    if security.truststore_location:
        location = security.truststore_location
        password = (_secret(security.truststore_password_env)
                    if security.truststore_password_env else None)
        kind = security.truststore_type or "JKS"
        if kind == "PEM":
            config["ssl.ca.location"] = location
        elif kind == "PKCS12":
            config["ssl.ca.pem"] = _pkcs12_certificates_pem(location, password)
        else:
            raise ProduceError(f"{location}: medallion produce (librdkafka) cannot read a JKS trust "
                               "store; give a PKCS12 or PEM one (kafka.security.truststore_type)")
    if security.keystore_location:
        location = security.keystore_location
        kind = security.keystore_type or "JKS"
        if kind == "PKCS12":
            config["ssl.keystore.location"] = location
            if security.keystore_password_env:
                config["ssl.keystore.password"] = _secret(security.keystore_password_env)
        elif kind == "PEM":  # one file with the certificate chain and the private key
            config["ssl.certificate.location"] = location
            config["ssl.key.location"] = location
            if security.key_password_env:
                config["ssl.key.password"] = _secret(security.key_password_env)
        else:
            raise ProduceError(f"{location}: medallion produce (librdkafka) cannot read a JKS key "
                               "store; give a PKCS12 or PEM one (kafka.security.keystore_type)")
    return config


def producer_config(kafka: KafkaSettings) -> dict[str, str]:
    """librdkafka settings equivalent to the Spark source's: servers, security, secrets from env."""
    config = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "security.protocol": kafka.security.protocol.value,
        "enable.idempotence": "true",  # no duplicate from the producer's own retries
        "acks": "all",
    }
    if kafka.security.protocol in (KafkaProtocol.SASL_PLAINTEXT, KafkaProtocol.SASL_SSL):
        assert kafka.security.username_env and kafka.security.password_env
        config["sasl.mechanism"] = kafka.security.sasl_mechanism or "PLAIN"
        config["sasl.username"] = _secret(kafka.security.username_env)
        config["sasl.password"] = _secret(kafka.security.password_env)
    if kafka.security.protocol in (KafkaProtocol.SSL, KafkaProtocol.SASL_SSL):
        config.update(tls_config(kafka.security))
    return config


def send_lines(kafka: KafkaSettings, topic: str, lines: Iterable[str | bytes],
               timeout: float = 60.0) -> int:
    """Publish each line as one record (no key); return how many the broker acknowledged."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({**producer_config(kafka), "message.timeout.ms": str(int(timeout * 1000))})
    try:
        producer.list_topics(timeout=min(timeout, 15.0))
    except KafkaException as exc:
        raise ProduceError(f"no Kafka broker answers at {kafka.bootstrap_servers}: {exc}") from None
    failures: list[str] = []
    delivered = 0

    def on_delivery(error: object, _message: object) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1
        else:
            failures.append(str(error))

    for line in lines:
        while True:
            try:
                producer.produce(topic, value=line, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.5)  # local queue full: let deliveries drain
        producer.poll(0)
    left = producer.flush(timeout)
    if failures or left:
        raise ProduceError(f"{len(failures) + left} records to {topic} were not delivered"
                           f"{': ' + failures[0] if failures else ''}")
    return delivered


def produce_events(kafka: KafkaSettings, topic: str, spec: GenerateSpec) -> int:
    """Publish ``spec.events`` generated event lines to ``topic``; return how many were sent."""
    sent = send_lines(kafka, topic, generate_event_lines(spec))
    log.info("published %d events to %s", sent, topic)
    return sent
