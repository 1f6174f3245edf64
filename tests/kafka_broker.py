"""A real single-node Kafka broker for tests, started by the project's own infra/kafka/broker.sh
on loopback ports chosen free at run time, and a few client helpers (confluent-kafka)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from medallion.pipeline.kinds import SourceFormat
from medallion.project import Settings

REPO = Path(__file__).resolve().parent.parent
BROKER_SH = REPO / "infra" / "kafka" / "broker.sh"


def with_kafka_topics(settings: Settings, *topics: str) -> Settings:
    """``settings`` with every declared Kafka source subscribed to ``topics`` instead."""
    def retopic(pipeline):  # type: ignore[no-untyped-def]
        sources = tuple(replace(s, topics=topics) if s.format is SourceFormat.KAFKA else s
                        for s in pipeline.sources)
        return replace(pipeline, sources=sources)
    return replace(settings, pipelines=tuple(retopic(p) for p in settings.pipelines))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Broker:
    """A broker whose data lives in ``data``; ``stop()``/``start()`` keep its data and ports."""

    data: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    extra_properties: Path | None = None  # appended to server.properties (e.g. an SSL listener)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ)
        if self.extra_properties is not None:
            env["KAFKA_EXTRA_PROPERTIES"] = str(self.extra_properties)
        subprocess.run([str(BROKER_SH), "start", str(self.data), str(self.port),
                        str(self.controller_port)], check=True, capture_output=True, timeout=180,
                       env=env)

    def stop(self) -> None:
        subprocess.run([str(BROKER_SH), "stop", str(self.data)], check=True,
                       capture_output=True, timeout=60)

    def running(self) -> bool:
        return subprocess.run([str(BROKER_SH), "status", str(self.data)]).returncode == 0

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` and wait until the broker serves it."""
        admin = self.admin()  # kept referenced until its futures are done
        futures = admin.create_topics([NewTopic(topic, partitions, 1)])
        futures[topic].result(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = admin.list_topics(topic, timeout=10)
            if topic in meta.topics and len(meta.topics[topic].partitions) == partitions \
                    and meta.topics[topic].error is None:
                return
            time.sleep(0.2)
        raise TimeoutError(f"topic {topic} not ready")

    def delete_records_before(self, topic: str, partition: int, offset: int) -> None:
        """Advance the partition's log start offset to ``offset``, as retention would."""
        admin = self.admin()
        futures = admin.delete_records([TopicPartition(topic, partition, offset)])
        for future in futures.values():
            future.result(timeout=30)

    def consume_all(self, topic: str, expected: int,
                    timeout: float = 60.0) -> list[tuple[str | None, dict]]:
        """Read ``topic`` from the beginning until ``expected`` records came (or the timeout);
        return ``(key, value as JSON)`` in partition order."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap,
                             "group.id": f"test-{time.time_ns()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
        records: list[tuple[str | None, dict]] = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout
            quiet_until = None
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    # past the expected count: done once every partition is read to its end (an
                    # extra record would be there already: the writer has returned), else after
                    # a quiet while
                    if len(records) >= expected:
                        quiet_until = quiet_until or time.monotonic() + 3
                        if _read_to_end(consumer) or time.monotonic() > quiet_until:
                            break
                    continue
                if message.error():
                    continue
                key = message.key().decode() if message.key() is not None else None
                records.append((key, json.loads(message.value())))
        finally:
            consumer.close()
        return records


def _read_to_end(consumer: Consumer) -> bool:
    """Whether the consumer's position in each assigned partition is at its high watermark."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    for position in consumer.position(assigned):
        low, high = consumer.get_watermark_offsets(position, timeout=5)
        if (position.offset if position.offset >= 0 else low) < high:
            return False
    return True
