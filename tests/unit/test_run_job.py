"""infra/scheduling/run-job.sh, the scheduler's entry point: its locks (its log line's redaction:
test_secrets.py). The real ``medallion submit-cmd`` says which lakehouse and layers a job writes;
the spark-submit it runs is a program that marks its start and lasts a few seconds (what is
checked is which jobs overlap; jobs on a real cluster: tests/operations/test_spark_submit_cluster.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

from tests.conf_support import REPO_CONF

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "scheduling" / "run-job.sh"


def _spark_submit(folder: Path) -> Path:
    """A spark-submit that touches the file named by its ``--name`` (the job) under ``MARKS``,
    then, given ``HOLD``, lasts until that file exists (a minute at most)."""
    program = folder / "spark-submit"
    program.write_text('#!/bin/sh\nwhile [ "$1" != --name ]; do shift; done\n'
                       'touch "$MARKS/$2-$TEAM"\n'
                       'if [ -n "$HOLD" ]; then i=0; while [ ! -e "$HOLD" ] && [ $i -lt 600 ]; do '
                       'sleep 0.1; i=$((i+1)); done; fi\n')
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def test_jobs_writing_one_lakehouse_never_overlap_and_others_run(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    spark_submit = _spark_submit(tmp_path)

    def start(team: str, job: str, *options: str, hold: str = "") -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(SCRIPT), job, "--conf-dir", str(REPO_CONF), "--lakehouse",
             str(tmp_path / f"lakehouse-{team}"), "--spark-submit", str(spark_submit), *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MEDALLION_HOME": str(REPO), "MEDALLION_LOCK_DIR": str(tmp_path),
                 "MARKS": str(marks), "TEAM": team, "HOLD": hold})

    release = tmp_path / "release"
    first = start("a", "all", "--maintain", hold=str(release))
    deadline = time.monotonic() + 60
    while not (marks / "medallion-all-a").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    others = {
        "maintain-a": start("a", "maintain"),  # the same lakehouse: skipped
        "gold-a": start("a", "gold"),  # one layer of it: skipped
        "all-a": start("a", "all"),  # its own schedule's next run: skipped
        "all-b": start("b", "all"),  # another lakehouse: runs
    }
    errors = {name: process.communicate(timeout=120)[1] for name, process in others.items()}
    assert first.poll() is None  # the first job ran all along
    release.touch()
    first_errors = first.communicate(timeout=120)
    assert first.returncode == 0 and all(p.returncode == 0 for p in others.values()), errors
    assert sorted(p.name for p in marks.iterdir()) == ["medallion-all-a", "medallion-all-b"]
    for name in ("maintain-a", "gold-a", "all-a"):
        assert "of this lakehouse" in errors[name] and "skipped" in errors[name], errors[name]
    assert "skipped" not in errors["all-b"]
    # each ran what submit-cmd gives: its lakehouse, and the maintenance after the layers in the
    # job that asked for it
    first_err = first_errors[1]
    logged = {name: next(line for line in text.splitlines() if line.startswith("medallion all:"))
              for name, text in (("all-a", first_err), ("all-b", errors["all-b"]))}
    assert logged["all-a"].endswith(f"--lakehouse {tmp_path / 'lakehouse-a'} --maintain")
    assert logged["all-b"].endswith(f"--lakehouse {tmp_path / 'lakehouse-b'}")
    assert "/jobs/all.py " in logged["all-b"]


def test_jobs_of_different_layers_run_side_by_side(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    spark_submit = _spark_submit(tmp_path)
    release = tmp_path / "release"

    def start(job: str, hold: str = "") -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(SCRIPT), job, "--conf-dir", str(REPO_CONF), "--lakehouse",
             str(tmp_path / "lakehouse"), "--spark-submit", str(spark_submit)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MEDALLION_HOME": str(REPO), "MEDALLION_LOCK_DIR": str(tmp_path),
                 "MARKS": str(marks), "TEAM": "a", "HOLD": hold})

    bronze = start("bronze", hold=str(release))
    deadline = time.monotonic() + 60
    while not (marks / "medallion-bronze-a").exists():
        assert bronze.poll() is None and time.monotonic() < deadline, bronze.communicate()
        time.sleep(0.05)
    silver = start("silver")
    silver_err = silver.communicate(timeout=120)[1]
    assert silver.returncode == 0 and bronze.poll() is None, silver_err  # beside bronze
    release.touch()
    assert bronze.communicate(timeout=120) and bronze.returncode == 0
    assert sorted(p.name for p in marks.iterdir()) == ["medallion-bronze-a", "medallion-silver-a"]
