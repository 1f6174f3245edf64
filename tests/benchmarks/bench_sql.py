"""Benchmark: analysts' queries as whole ``medallion sql`` processes, the fast path against Spark.

``make bench-sql`` (or ``python -m tests.benchmarks.bench_sql --events 1000000``) generates the
events, runs the pipeline once (``medallion run all``), then times five typical analyst queries,
each as a user runs it: a whole process, from start to exit, with ``--format csv --limit 0``, on
the fast path (DuckDB over delta-rs) and with ``--engine spark`` (a JVM, a session, the embedded
catalog), alternating, ``--rounds`` times each. It prints the median wall time of each query on
each engine, their ratio, whether both printed the same rows, and the load average before and
after; the figures go to ``bench-results/sql.json``. Nothing here asserts on time: it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medallion.project import load_settings
from medallion.samples.generate import generate_landing
from tests.benchmarks.bench_pipeline import events_spec

QUERIES = {
    "window scan, filtered":
        "SELECT window_start, event_type, event_count, total_amount FROM gold.event_counts_5m "
        "WHERE event_type = 'purchase' AND window_start >= '2025-01-27 16:00:00' "
        "ORDER BY window_start",
    "group-by over silver":
        "SELECT event_type, count(*) AS events, count(DISTINCT user_id) AS users, "
        "sum(amount) AS amount FROM silver.events GROUP BY event_type ORDER BY event_type",
    "gold joined with a dimension":
        "SELECT c.segment, count(*) AS sessions, sum(s.event_count) AS events, "
        "sum(s.total_amount) AS amount FROM gold.user_sessions s JOIN bronze.customers c "
        "ON s.user_id = c.customer_id GROUP BY c.segment ORDER BY c.segment",
    "declared view":
        "SELECT * FROM gold.event_counts_daily ORDER BY day, event_type",
    "time travel":
        "SELECT event_type, sum(event_count) AS events FROM gold.event_counts_5m "
        "VERSION AS OF 1 GROUP BY event_type ORDER BY event_type",
}


def medallion(root: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "medallion.cli.main", "--landing", f"{root}/landing",
         "--lakehouse", f"{root}/lakehouse", *args], capture_output=True, text=True, check=True)


def timed_query(root: str, engine: str, query: str) -> tuple[float, list[str]]:
    """Wall seconds of one whole ``medallion sql`` process, and its CSV lines (sorted)."""
    began = time.perf_counter()
    done = medallion(root, "sql", "--engine", engine, "--format", "csv", "--limit", "0", query)
    return time.perf_counter() - began, sorted(done.stdout.splitlines())


def load() -> str:
    return " ".join(f"{figure:.2f}" for figure in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="processes per query and engine")
    parser.add_argument("--root", help="a folder with landing/ and lakehouse/ from an earlier "
                                       "run of this benchmark (kept, not rebuilt)")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="medallion-bench-sql-") as tmp:
        root = args.root or tmp
        if not Path(root, "lakehouse").exists():
            settings = load_settings(landing=f"{root}/landing", lakehouse=f"{root}/lakehouse")
            generate_landing(settings.paths.landing, events_spec(args.events, args.files, "bench"))
            began = time.perf_counter()
            medallion(root, "run", "all")
            print(f"{args.events} events through the pipeline in "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
        load_before = load()
        figures: dict[str, dict[str, object]] = {}
        for name, query in QUERIES.items():
            seconds: dict[str, list[float]] = {"duckdb": [], "spark": []}
            rows: dict[str, list[str]] = {}
            for _ in range(args.rounds):
                for engine in ("duckdb", "spark"):
                    took, rows[engine] = timed_query(root, engine, query)
                    seconds[engine].append(took)
            fast, spark = (statistics.median(seconds[e]) for e in ("duckdb", "spark"))
            figures[name] = {"query": query, "duckdb_s": seconds["duckdb"],
                             "spark_s": seconds["spark"], "duckdb_median_s": fast,
                             "spark_median_s": spark, "same_rows": rows["duckdb"] == rows["spark"],
                             "rows": len(rows["duckdb"]) - 1}
            print(f"{name}: fast path {fast:.2f} s, Spark {spark:.1f} s", flush=True)
        load_after = load()

    print(f"\nmedallion sql, a whole process per query, median of {args.rounds} "
          f"({args.events:,} events; {platform.machine()}, {os.cpu_count()} cores)")
    print(f"load average (1, 5, 15 min) before: {load_before}; after: {load_after}\n")
    print("| query | rows | fast path (DuckDB) | Spark | Spark / fast | same rows |")
    print("|---|---:|---:|---:|---:|---|")
    for name, figure in figures.items():
        fast, spark = float(figure["duckdb_median_s"]), float(figure["spark_median_s"])
        print(f"| {name} | {figure['rows']} | {fast:.2f} s | {spark:.1f} s | {spark / fast:.0f}x "
              f"| {'yes' if figure['same_rows'] else 'NO'} |")
    Path(args.out).mkdir(exist_ok=True)
    Path(args.out, "sql.json").write_text(json.dumps(
        {"events": args.events, "rounds": args.rounds, "load_before": load_before,
         "load_after": load_after, "queries": figures}, indent=2))
    return 0 if all(f["same_rows"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
