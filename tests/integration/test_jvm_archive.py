"""The driver JVM's class archive, with real JVMs: the first command's JVM writes it as it exits,
the next one loads its classes from it, and neither says a word about it on the command's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from medallion.spark.jvm_archive import ARCHIVE_ENV
from tests.conf_support import copy_base_conf
from tests.conftest import REPO


def sql(conf: Path, root: Path, archives: Path, class_log: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, ARCHIVE_ENV: str(archives), "SPARK_LOCAL_IP": "127.0.0.1"}
    (conf / "local.yaml").write_text(yaml.safe_dump({"spark": {"conf": {
        # where each class came from: a jar, or the archive's "shared objects file (top)"
        "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={class_log}"}}}))
    return subprocess.run(
        [sys.executable, "-m", "medallion.cli.main", "--conf-dir", str(conf), "--landing",
         str(root / "landing"), "--lakehouse", str(root / "lakehouse"), "sql", "--engine", "spark",
         "--format", "json",
         "SELECT count(*) AS n FROM range(1000)"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)


def from_archive(class_log: Path) -> int:
    return sum("source: shared objects file (top)" in line
               for line in class_log.read_text().splitlines())


def test_the_first_jvm_writes_the_archive_the_next_maps_it(tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    archives = tmp_path / "archives"
    # One log for both runs keeps the JVM options, and so the archive's name, the same.
    class_log = tmp_path / "classes.log"

    first = sql(conf, tmp_path, archives, class_log)
    assert first.returncode == 0, first.stderr[-3000:]
    assert [json.loads(line) for line in first.stdout.splitlines()] == [{"n": 1000}]
    written = sorted(archives.glob("*.jsa"))
    assert len(written) == 1, sorted(archives.iterdir())  # in place when the command returned
    assert list(archives.glob("*.tmp")) == []
    assert from_archive(class_log) == 0

    second = sql(conf, tmp_path, archives, class_log)
    assert second.returncode == 0, second.stderr[-3000:]
    assert [json.loads(line) for line in second.stdout.splitlines()] == [{"n": 1000}]
    assert sorted(archives.glob("*.jsa")) == written
    assert from_archive(class_log) > 5000  # Spark's classes, not a handful
    for output in (first.stdout, first.stderr, second.stdout, second.stderr):
        assert "cds" not in output.lower() and "shared archive" not in output.lower()
