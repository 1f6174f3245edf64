"""``medallion produce``: generated sample events published to a Kafka topic.

The same lines ``medallion generate`` writes to files (late, duplicated and broken ones included)
go to the topic, one record each, so the Kafka path can be tried with a broker and two commands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from medallion.config import KafkaProtocol, KafkaSettings
from medallion.generate import GenerateSpec, generate_event_lines

log = logging.getLogger(__name__)


class ProduceError(RuntimeError):
    """The events could not all be delivered."""


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
        config["sasl.username"] = os.environ[kafka.security.username_env]
        config["sasl.password"] = os.environ[kafka.security.password_env]
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
