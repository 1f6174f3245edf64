"""A run that creates tables leaves the embedded catalog prepared: the next run does not prepare
it again (each table's Delta snapshot, most of a run with nothing new), and the catalog holds
what a preparation would have made: every table, and the configured view that waited for them.
A run does not boot the embedded metastore to ask which names it holds; a table's entry or a view
dropped outside a run is made again by the next session that asks (`medallion sql` here), even
when a run that created other tables came between.

Real processes, as users run them (the embedded metastore is one process's at a time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from medallion.samples.generate import GenerateSpec, generate_landing

REPO = Path(__file__).resolve().parents[2]

UNCHANGED = "catalog unchanged since its last preparation"


def medallion(lakehouse: Path, landing: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "medallion", *args, "--landing", str(landing),
         "--lakehouse", str(lakehouse)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _derby_booted(lakehouse: Path) -> str:
    """The embedded metastore's last boot, from the log Derby rewrites each time it boots."""
    return (lakehouse / "_catalog" / "derby.log").read_text()


def test_a_run_that_created_tables_leaves_the_catalog_prepared(tmp_path: Path) -> None:
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    generate_landing(landing, GenerateSpec(events=60, files=1, users=5, burst="c", seed=3))

    first = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED not in first.stderr  # a new lakehouse: prepared at the start, then created
    booted = _derby_booted(lakehouse)

    # A run with nothing new neither prepares the catalog nor boots the metastore to ask it
    # which names it holds (about 1.5 s of such a run).
    second = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED in second.stderr
    assert _derby_booted(lakehouse) == booted

    # An analyst drops an entry and a view (an external table: its data stays).
    gone = medallion(lakehouse, landing, "sql", "--engine", "spark", "--format", "csv",
                     "SHOW TABLES IN gold; "
                     "DROP TABLE gold.user_sessions; DROP VIEW gold.event_counts_daily; "
                     "SHOW TABLES IN gold").stdout
    before, _, after = gone.partition("namespace,tableName,isTemporary")[2].partition(
        "namespace,tableName,isTemporary")
    listed = {line.split(",")[1] for line in before.splitlines() if line.count(",") == 2}
    assert {"event_counts_5m", "user_activity_sliding", "user_sessions", "segment_revenue_1h",
            "purchase_attribution", "event_counts_daily"} <= listed, gone
    assert "user_sessions" not in after and "event_counts_daily" not in after, gone

    # A run that creates tables (the stores dimension lands) does not ask which names the
    # metastore holds at its start, and must not record the catalog as prepared with the
    # dropped entry missing: the next session that asks would then never make it again.
    shutil.copytree(REPO / "samples" / "landing" / "stores", landing / "stores")
    medallion(lakehouse, landing, "-vv", "run", "all")
    again = medallion(lakehouse, landing, "-vv", "sql", "--engine", "spark", "--format", "csv",
                      "SELECT count(*) AS n FROM gold.user_sessions; SHOW TABLES IN gold")
    assert UNCHANGED not in again.stderr
    assert "event_counts_daily" in again.stdout
    assert int(again.stdout.splitlines()[1]) > 0, again.stdout  # the table's rows, still there
    fourth = medallion(lakehouse, landing, "-vv", "run", "all")
    assert UNCHANGED in fourth.stderr
