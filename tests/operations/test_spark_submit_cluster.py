"""The pipeline through ``spark-submit`` on a Spark standalone cluster equals a local run.

The master and one worker are started with pyspark's own launcher (``bin/spark-class``) on
loopback, on ports chosen free at run time, and stopped by the fixture.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

import pyspark
import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Paths, Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conf_support import REPO_CONF, copy_base_conf
from tests.conftest import REPO
from tests.lakehouse_views import snapshot

SPARK_CLASS = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cluster_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
        return json.load(response)


def _wait(what: str, ready: object, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():  # type: ignore[operator]
                return
        except (OSError, ValueError):  # not listening yet; or, starting, its page where JSON will be
            pass
        time.sleep(1)
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s")


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A master and a 2-core worker on 127.0.0.1; yields (master URL, master web UI port)."""
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_NO_DAEMONIZE": "1"}
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    processes: list[subprocess.Popen] = []
    with ExitStack() as files:
        master_log = files.enter_context(open(logs / "master.log", "wb"))
        worker_log = files.enter_context(open(logs / "worker.log", "wb"))
        yield from _run_cluster(env, port, ui_port, worker_ui, tmp_path, master_log, worker_log,
                                processes)


def _run_cluster(env: dict[str, str], port: int, ui_port: int, worker_ui: int, tmp_path: Path,
                 master_log: IO[bytes], worker_log: IO[bytes],
                 processes: list[subprocess.Popen]) -> Iterator[tuple[str, int]]:
    try:
        processes.append(subprocess.Popen(
            [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui_port)],
            env=env, stdout=master_log, stderr=subprocess.STDOUT,
            start_new_session=True))
        _wait("master", lambda: _cluster_state(ui_port)["status"] == "ALIVE")
        master = f"spark://127.0.0.1:{port}"
        processes.append(subprocess.Popen(
            [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "1g", "--webui-port", str(worker_ui),
             "--work-dir", str(tmp_path / "work"), master],
            env=env, stdout=worker_log, stderr=subprocess.STDOUT,
            start_new_session=True))
        _wait("worker", lambda: any(w["state"] == "ALIVE"
                                    for w in _cluster_state(ui_port)["workers"]))
        yield master, ui_port
    finally:
        for process in reversed(processes):  # each in its own session: its group is only its own
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # four JVMs on a small machine: minutes, not seconds
def test_pipeline_through_spark_submit_on_a_standalone_cluster_matches_local(
        spark: SparkSession, settings: Settings, tmp_path: Path,
        standalone_cluster: tuple[str, int]) -> None:
    master, ui_port = standalone_cluster
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=150, files=2, users=10, burst="c1", seed=5,
                                  start=datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc),
                                  seconds_between_events=6))
    on_cluster = dataclasses.replace(
        settings, paths=Paths(settings.paths.landing, str(tmp_path / "cluster-lakehouse")))

    # As cron does: infra/scheduling/run-job.sh asks `medallion submit-cmd` for
    # the command line and runs it. The team's configuration folder holds the events pipeline
    # alone: the job must load it, not the project's conf/ (which declares orders too).
    conf_dir = copy_base_conf(tmp_path / "team-conf")
    (conf_dir / "pipelines" / "orders.yaml").unlink()
    (conf_dir / "local.yaml").write_bytes((REPO_CONF / "local.yaml").read_bytes())
    settings_args = ["--conf-dir", str(conf_dir), "--landing", on_cluster.paths.landing,
                     "--lakehouse", on_cluster.paths.lakehouse]
    conf = {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.driver.memory": "768m",
            "spark.driver.host": "127.0.0.1",
            # One state store instance per stateful query: tiny data, slow shared machine.
            "spark.sql.shuffle.partitions": "1"}
    argv = [str(REPO / "infra" / "scheduling" / "run-job.sh"), "all", "--master", master,
            *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")),
            *settings_args]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MEDALLION_HOME": str(REPO),
           "MEDALLION_LOCK_DIR": str(tmp_path)}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "silver/events" in done.stdout  # the run summary
    assert "order_lines" not in done.stdout, done.stdout
    # The script logs the command it ran: spark-submit with the master and the Delta package.
    command = next(line for line in done.stderr.splitlines() if line.startswith("medallion all: "))
    assert f"--master {master}" in command and "io.delta:delta-spark" in command

    # It ran on the cluster: the master lists it as a finished application.
    apps = _cluster_state(ui_port)["completedapps"]
    assert [app["name"] for app in apps] == ["medallion-all"]

    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert snapshot(on_cluster) == snapshot(settings)
