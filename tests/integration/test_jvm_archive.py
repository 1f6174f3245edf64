"""The driver JVM's class archive, with real JVMs: the first command's JVM writes it as it exits,
the next one loads its classes from it, and neither says a word about it on the command's output.
On each JDK release Spark supports that is installed here (17 and 25 on the project's machines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from medallion.spark.jvm_archive import ARCHIVE_ENV
from tests.conf_support import copy_base_conf
from tests.conftest import REPO
from tests.jdks import SUPPORTED, installed

# each supported release installed here, once (the newest build of it)
JDKS = {release: home for release, home in reversed(installed()) if release in SUPPORTED}


def sql(conf: Path, root: Path, archives: Path, class_logs: Path,
        java_home: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, ARCHIVE_ENV: str(archives), "SPARK_LOCAL_IP": "127.0.0.1",
                   "JAVA_HOME": str(java_home)}
    (conf / "local.yaml").write_text(yaml.safe_dump({"spark": {"conf": {
        # where each class came from: a jar, or an archive's "shared objects file"; a log per JVM
        # (%p: its process id), the same option for every run, and so the same archive name
        "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={class_logs}/%p.log"}}}))
    return subprocess.run(
        [sys.executable, "-m", "medallion.cli.main", "--conf-dir", str(conf), "--landing",
         str(root / "landing"), "--lakehouse", str(root / "lakehouse"), "sql", "--engine", "spark",
         "--format", "json",
         "SELECT count(*) AS n FROM range(1000)"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)


def spark_classes(class_log: Path) -> tuple[int, int]:
    """How many of Spark's classes one JVM loaded, and how many of them from an archive."""
    lines = [line for line in class_log.read_text().splitlines() if " org.apache.spark." in line]
    return len(lines), sum("source: shared objects file" in line for line in lines)


@pytest.mark.parametrize("release", sorted(JDKS))
def test_the_first_jvm_writes_the_archive_the_next_maps_it(tmp_path: Path, release: int) -> None:
    java_home = JDKS[release]
    conf = copy_base_conf(tmp_path / "conf")
    archives = tmp_path / "archives"
    class_logs = tmp_path / "classes"
    class_logs.mkdir()

    first = sql(conf, tmp_path, archives, class_logs, java_home)
    assert first.returncode == 0, first.stderr[-3000:]
    assert [json.loads(line) for line in first.stdout.splitlines()] == [{"n": 1000}]
    written = sorted(archives.glob("*.jsa"))
    assert len(written) == 1, sorted(archives.iterdir())  # in place when the command returned
    assert list(archives.glob("*.tmp")) == []
    # the command's JVM loaded Spark from its jars (on Java 25 another JVM then assembled the
    # cache, with a log of its own)
    first_logs = set(class_logs.iterdir())
    assert any(loaded > 3000 and mapped == 0 for loaded, mapped in map(spark_classes, first_logs))

    second = sql(conf, tmp_path, archives, class_logs, java_home)
    assert second.returncode == 0, second.stderr[-3000:]
    assert [json.loads(line) for line in second.stdout.splitlines()] == [{"n": 1000}]
    assert sorted(archives.glob("*.jsa")) == written
    [second_log] = set(class_logs.iterdir()) - first_logs
    loaded, mapped = spark_classes(second_log)
    assert mapped > 3000, (loaded, mapped)  # Spark's classes, not a handful
    for output in (first.stdout, first.stderr, second.stdout, second.stderr):
        assert "cds" not in output.lower() and "shared archive" not in output.lower()
        assert "warning" not in output.lower()  # Java 25's on Spark's module options too
