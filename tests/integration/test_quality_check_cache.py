"""Expectations checked before Spark, across processes: what passed is remembered until it
changes (each scheduled run is a new process). Processes of their own, so not a unit test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from medallion.quality.spec import CHECKED_ENV, declared_expectations
from tests.unit.test_quality_spec import _conf, _load

_CHECK_IN_A_NEW_PROCESS = """
import json, sys
from medallion.project import load_settings
from medallion.quality.spec import check_expectations
settings = load_settings(env="test", conf_dir=sys.argv[1], landing=sys.argv[2], lakehouse=sys.argv[3])
try:
    check_expectations(settings)
    outcome = "accepted"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
print(json.dumps([outcome, "great_expectations" in sys.modules]))
"""


def test_expectations_checked_once_are_not_checked_again_until_they_change(
        tmp_path: Path) -> None:
    """A new process, as each scheduled run is: the first check imports Great Expectations and
    remembers what passed; the next one imports nothing. A changed argument is checked again,
    and one that Great Expectations refuses is refused every time (nothing wrong is remembered)."""
    conf = _conf(tmp_path, pipeline_overlay="")
    cache = tmp_path / "checked"

    # A file, not `python -c`: PySpark 4.2 exits a `-c` program that imports Great Expectations
    # (through pyspark.sql.connect) when grpc is not installed.
    script = tmp_path / "check.py"
    script.write_text(_CHECK_IN_A_NEW_PROCESS, encoding="utf-8")

    def check() -> tuple[str, bool]:
        done = subprocess.run(
            [sys.executable, str(script), str(conf), str(tmp_path / "l"),
             str(tmp_path / "h")], capture_output=True, text=True, timeout=300,
            env={**os.environ, CHECKED_ENV: str(cache)})
        assert done.returncode == 0, done.stderr[-3000:]
        outcome, imported = json.loads(done.stdout.splitlines()[-1])
        return outcome, imported

    assert check() == ("accepted", True)
    remembered = sorted(path.name for path in cache.iterdir())
    # one per distinct expectation (several tables declare the same window check)
    assert 10 < len(remembered) <= len(declared_expectations(_load(conf, tmp_path)))
    assert check() == ("accepted", False)

    changed = ("gold:\n  user_sessions:\n    expectations:\n      event_count_positive:\n"
               "        kwargs: {column: event_count, min_value: %s}\n")
    (conf / "pipelines" / "events.test.yaml").write_text(changed % "2", encoding="utf-8")
    assert check() == ("accepted", True)  # the changed one only is checked, and remembered
    assert len(list(cache.iterdir())) == len(remembered) + 1
    assert check() == ("accepted", False)

    (conf / "pipelines" / "events.test.yaml").write_text(changed % "lots", encoding="utf-8")
    for _ in range(2):
        outcome, imported = check()
        assert outcome.startswith("ConfigError") and "not valid for" in outcome, outcome
        assert imported
    assert len(list(cache.iterdir())) == len(remembered) + 1
