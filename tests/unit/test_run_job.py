"""infra/scheduling/run-job.sh, the scheduler's entry point: its lock (its log line's redaction:
test_secrets.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_run_job_skips_an_overlapping_run_of_its_own_schedule_only(tmp_path: Path) -> None:
    """The lock was one per job name: a second team's `all` on the same host (its own
    configuration folder and lakehouse) was skipped while the first team's ran, every time."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "medallion"  # its job marks that it started, then runs for a while
    fake.write_text("#!/bin/sh\nprintf '%s\\n' 'touch \"$MARK\"; sleep 4'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    script = REPO / "infra" / "scheduling" / "run-job.sh"

    def start(mark: str, conf_dir: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(script), "all", "--conf-dir", conf_dir], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MEDALLION_HOME": str(tmp_path), "MEDALLION_LOCK_DIR": str(tmp_path),
                 "MARK": str(tmp_path / mark)})

    first = start("team-a-first", "/teams/a/conf")
    deadline = time.monotonic() + 30
    while not (tmp_path / "team-a-first").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    other_team = start("team-b", "/teams/b/conf")
    again = start("team-a-again", "/teams/a/conf")
    _, other_err = other_team.communicate(timeout=60)
    _, again_err = again.communicate(timeout=60)
    first.communicate(timeout=60)
    assert (first.returncode, other_team.returncode, again.returncode) == (0, 0, 0)
    assert (tmp_path / "team-b").exists() and "skipped" not in other_err
    assert not (tmp_path / "team-a-again").exists()
    assert "medallion all: the previous run with these options is still going" in again_err
