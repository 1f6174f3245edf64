"""A run that creates tables leaves the embedded catalog prepared: the next run does not prepare
it again (each table's Delta snapshot, most of a run with nothing new), and the catalog holds
what a preparation would have made: every table, and the configured view that waited for them.
A table's entry or a view dropped outside a run is made again by the next session's preparation.

Real processes, as users run them (the embedded metastore is one process's at a time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from medallion.generate import GenerateSpec, generate_landing

UNCHANGED = "catalog unchanged since its last preparation"


def medallion(lakehouse: Path, landing: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "medallion", *args, "--landing", str(landing),
         "--lakehouse", str(lakehouse)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_run_that_created_tables_leaves_the_catalog_prepared(tmp_path: Path) -> None:
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    generate_landing(landing, GenerateSpec(events=60, files=1, users=5, burst="c", seed=3))

    first = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED not in first.stderr  # a new lakehouse: prepared at the start, then created

    second = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED in second.stderr

    shown = medallion(lakehouse, landing, "sql", "--format", "csv",
                      "SHOW TABLES IN gold").stdout
    gold = {line.split(",")[1] for line in shown.splitlines()[1:] if line.strip()}
    assert {"event_counts_5m", "user_activity_sliding", "user_sessions", "segment_revenue_1h",
            "purchase_attribution", "event_counts_daily"} <= gold, shown

    # An analyst drops an entry and a view (an external table: its data stays). The next session
    # prepares the catalog again, and the one after it finds it unchanged. Before, the
    # preparation was skipped for good and both names stayed missing.
    gone = medallion(lakehouse, landing, "sql", "--format", "csv", "DROP TABLE gold.user_sessions; "
                     "DROP VIEW gold.event_counts_daily; SHOW TABLES IN gold").stdout
    assert "user_sessions" not in gone and "event_counts_daily" not in gone, gone
    again = medallion(lakehouse, landing, "-vv", "sql", "--format", "csv",
                      "SELECT count(*) AS n FROM gold.user_sessions; SHOW TABLES IN gold")
    assert UNCHANGED not in again.stderr
    assert "event_counts_daily" in again.stdout
    assert int(again.stdout.splitlines()[1]) > 0, again.stdout  # the table's rows, still there
    third = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED in third.stderr
