"""Kafka ingestion under faults, against a real broker: a job killed mid-batch, the broker
stopped mid-run, offsets aged out of the topic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import JobError
from medallion.samples.produce import send_lines
from tests.conf_support import copy_base_conf
from tests.conftest import make_settings
from tests.kafka_broker import Broker, with_kafka_topics

pytestmark = pytest.mark.slow


def _lines(prefix: str, count: int) -> list[str]:
    return [f'{{"event_id":"{prefix}-{i:04d}","user_id":"u{i % 7}","event_type":"view",'
            f'"timestamp":"2025-01-27T10:{i // 60 % 60:02d}:{i % 60:02d}Z"}}' for i in range(count)]


def _conf_dir(root: Path, broker: Broker, topic: str, **kafka: object) -> Path:
    """A conf dir: the repo's base.yaml plus a local overlay pointing at the test's topic."""
    conf = root / "conf"
    copy_base_conf(conf)
    # Spark's in-memory catalog: these runs do not need Derby's, which takes seconds to boot.
    lines = ["spark:", "  master: local[1]", "catalog:", "  metastore: in-memory", "sources:",
             "  read_from: kafka", "kafka:",
             f"  bootstrap_servers: {broker.bootstrap}"]
    lines += [f"  {key}: {value}" for key, value in kafka.items() if key != "client_options"]
    if "client_options" in kafka:
        lines.append("  client_options:")
        lines += [f"    {k}: {v}" for k, v in kafka["client_options"].items()]  # type: ignore[attr-defined]
    (conf / "local.yaml").write_text("\n".join(lines) + "\n")
    (conf / "pipelines" / "events.local.yaml").write_text(
        f"sources:\n  events_kafka:\n    topics: [{topic}]\n")
    return conf


def _medallion(conf: Path, root: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MEDALLION_CONF_DIR": str(conf),
           "MEDALLION_LANDING": str(root / "landing"),
           "MEDALLION_LAKEHOUSE": str(root / "lakehouse")}
    env.pop("MEDALLION_KAFKA_BOOTSTRAP", None)
    command = str(Path(sys.executable).with_name("medallion"))
    return subprocess.Popen([command, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _committed_batches(root: Path) -> set[int]:
    commits = root / "lakehouse" / "_checkpoints" / "bronze" / "events_kafka" / "commits"
    return {int(p.name) for p in commits.glob("[0-9]*")} if commits.is_dir() else set()


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _bronze_raw(spark: SparkSession, root: Path) -> list[str]:
    path = str(root / "lakehouse" / "bronze" / "events_kafka")
    return [r["raw"] for r in spark.read.format("delta").load(path).select("raw").collect()]


def test_killed_mid_batch_then_restarted_ends_exactly_once(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = "rel.kill"
    kafka_broker.create_topic(topic, 2)
    lines = _lines("k", 300)
    send_lines(make_settings(tmp_path, kafka_bootstrap=kafka_broker.bootstrap).kafka, topic, lines)
    conf = _conf_dir(tmp_path, kafka_broker, topic, max_offsets_per_trigger=20)

    job = _medallion(conf, tmp_path, "run", "bronze")
    try:
        # SIGKILL once a batch is planned (its offsets written) but not yet committed
        offsets = tmp_path / "lakehouse" / "_checkpoints" / "bronze" / "events_kafka" / "offsets"
        _wait_for(lambda: len(_committed_batches(tmp_path)) >= 2 and any(
            int(p.name) not in _committed_batches(tmp_path) for p in offsets.glob("[0-9]*")),
            180, "a planned, uncommitted batch")
        os.killpg(job.pid, signal.SIGKILL)
    finally:
        job.wait(30)
    assert job.returncode == -signal.SIGKILL
    partial = _bronze_raw(spark, tmp_path)
    assert 0 < len(partial) < len(lines)

    # The rerun without the small batches: the killed batch's offsets, recorded when it was
    # planned, are read again as they were; the rest in one batch.
    rerun = _medallion(_conf_dir(tmp_path / "rerun", kafka_broker, topic), tmp_path, "run",
                       "bronze")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err[-3000:]
    assert sorted(_bronze_raw(spark, tmp_path)) == sorted(lines)  # each record exactly once


def test_broker_stopped_mid_run_then_rerun_loses_and_doubles_nothing(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = "rel.outage"
    kafka_broker.create_topic(topic, 2)
    lines = _lines("o", 300)
    send_lines(make_settings(tmp_path, kafka_bootstrap=kafka_broker.bootstrap).kafka, topic, lines)
    conf = _conf_dir(tmp_path, kafka_broker, topic, max_offsets_per_trigger=20,
                     poll_timeout_ms=3000, client_options={"request.timeout.ms": 3000,
                                                            "default.api.timeout.ms": 5000})
    job = _medallion(conf, tmp_path, "run", "bronze")
    try:
        _wait_for(lambda: len(_committed_batches(tmp_path)) >= 1, 180, "a first committed batch")
        kafka_broker.stop()
        try:
            out, err = job.communicate(timeout=240)
        finally:
            kafka_broker.start()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    # The run either failed clearly, naming the table, or waited for the broker and finished.
    print(f"broker outage: run exited {job.returncode}; {err.strip().splitlines()[-1:]}")
    if job.returncode != 0:
        assert job.returncode == 1, err[-3000:]
        assert "medallion: failed: bronze/events_kafka: Kafka did not answer in time" in err, err
    assert len(_bronze_raw(spark, tmp_path)) < len(lines) or job.returncode == 0

    rerun = _medallion(_conf_dir(tmp_path / "rerun", kafka_broker, topic), tmp_path, "run",
                       "bronze")  # without the small batches: the rest in one
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err[-3000:]
    assert sorted(_bronze_raw(spark, tmp_path)) == sorted(lines)


def test_offsets_aged_out_fail_or_are_counted(spark: SparkSession, kafka_broker: Broker,
                                              tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    topic = "rel.aged"
    kafka_broker.create_topic(topic, 1)
    settings = make_settings(tmp_path, read_from="kafka", kafka_bootstrap=kafka_broker.bootstrap)
    settings = with_kafka_topics(settings, topic)
    first, second = _lines("a", 5), _lines("b", 5)
    send_lines(settings.kafka, topic, first)
    run_pipeline(spark, settings, RunTarget.BRONZE, settings.streaming.trigger)
    assert sorted(_bronze_raw(spark, tmp_path)) == sorted(first)

    # offsets 5..9 arrive, then 5, 6 and 7 age out before bronze reads them
    send_lines(settings.kafka, topic, second)
    kafka_broker.delete_records_before(topic, 0, 8)

    with pytest.raises(JobError) as failure:
        run_pipeline(spark, settings, RunTarget.BRONZE, settings.streaming.trigger)
    message = str(failure.value)
    assert message.startswith("bronze/events_kafka: ")
    assert f"offsets [5, 10) of {topic}-0" in message, message
    assert f"(topic {topic}, partition 0)" in message, message
    assert sorted(_bronze_raw(spark, tmp_path)) == sorted(first)  # nothing written

    lenient = replace(settings, kafka=replace(settings.kafka, fail_on_data_loss=False))
    with caplog.at_level("WARNING", logger="medallion.engine.bronze.job"):
        runs = run_pipeline(spark, lenient, RunTarget.BRONZE, lenient.streaming.trigger)
    kafka_run = next(run for run in runs if run.table == "bronze/events_kafka")
    assert kafka_run.offsets_missing == 3
    assert kafka_run.rows_in == 2
    assert sorted(_bronze_raw(spark, tmp_path)) == sorted(first + second[3:])
    assert any(f"topic {topic} partition 0 in [5, 10)" in r.getMessage() for r in caplog.records)
