"""`run` and `backfill` start the driver's JVM while they check the gates' expectations (Great
Expectations' import), with real JVMs: the session takes that JVM, and a command refused before its
session is built leaves no JVM behind and no lakehouse.

Each command runs in a process of its own (a test process may already hold a JVM, and then none
is started ahead), through a script that records every JVM launch: on which thread it ran, and
whether its process is still alive when the command returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conf_support import copy_base_conf
from tests.conftest import REPO

SCRIPT = """
import json, os, sys, threading
from pyspark import SparkContext
import medallion.spark.session as spark_module

launches = []
launch = spark_module._launch_jvm

def recorded(*args, **kwargs):
    launch(*args, **kwargs)
    launches.append({"thread": threading.current_thread().name,
                     "pid": SparkContext._gateway.proc.pid})

spark_module._launch_jvm = recorded
from medallion.cli.main import main

status = main(sys.argv[1:])
print(json.dumps({
    "status": status,
    "launches": [{**one, "alive": os.path.exists(f"/proc/{one['pid']}")} for one in launches],
    "gateway": SparkContext._gateway is not None,
    "session": SparkContext._active_spark_context is not None,
}))
"""


def command(tmp_path: Path, *argv: str) -> tuple[dict[str, object], str]:
    conf = tmp_path / "conf"
    if not conf.exists():
        copy_base_conf(conf)
        (conf / "local.yaml").write_text("", encoding="utf-8")
    script = tmp_path / "recorded.py"  # a file: PySpark exits a `-c` program that imports
    script.write_text(SCRIPT, encoding="utf-8")  # Great Expectations without grpc installed
    done = subprocess.run(
        [sys.executable, str(script), *argv, "--conf-dir", str(conf),
         "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")],
        cwd=REPO, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_a_refused_expectation_stops_the_jvm_started_ahead(tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "local.yaml").write_text("", encoding="utf-8")
    overlay = conf / "pipelines" / "events.local.yaml"
    overlay.write_text(
        "gold:\n  user_sessions:\n    expectations:\n      event_count_positive:\n"
        "        kwargs: {column: event_count, min_value: lots}\n", encoding="utf-8")
    result, err = command(tmp_path, "run", "all")
    assert result["status"] == 2
    assert "gold.user_sessions.expectations.event_count_positive.kwargs" in err
    assert str(overlay) in err
    # The JVM did start, beside the check, and is gone when the command returns.
    assert result["launches"] == [{"thread": "medallion-jvm-start", "pid": result["launches"][0]["pid"],
                                   "alive": False}]
    assert result["gateway"] is False and result["session"] is False
    assert not (tmp_path / "lake").exists()


def test_a_backfill_refused_after_the_check_stops_it_too(tmp_path: Path) -> None:
    result, err = command(tmp_path, "backfill", "gold")  # a range backfill without its range
    assert result["status"] == 2
    assert "--from and --to" in err
    assert [one["alive"] for one in result["launches"]] == [False]
    assert result["launches"][0]["thread"] == "medallion-jvm-start"
    assert result["gateway"] is False
    assert not (tmp_path / "lake").exists()


def test_the_session_takes_the_jvm_started_ahead(tmp_path: Path) -> None:
    result, err = command(tmp_path, "run", "bronze")
    assert result["status"] == 0, err[-3000:]
    # One JVM in all, launched on the background thread: the session did not start another.
    assert [one["thread"] for one in result["launches"]] == ["medallion-jvm-start"]
    assert result["session"] is True
    assert (tmp_path / "lake" / "_catalog").exists()
