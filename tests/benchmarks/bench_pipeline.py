"""Benchmark: each layer of the pipeline against plain Spark doing the minimal equivalent work.

``make bench`` (or ``python -m tests.benchmarks.bench_pipeline --events 1000000``) generates the
events, runs bronze, silver and gold with the available-now trigger, then the baselines on the
same data in the same session, and prints rows per second and the ratio of each layer's time to
its baseline's, plus the wall time of a run with no new data and of ``medallion status`` (read
through delta-rs, no Spark). Figures go to ``bench-results/pipeline.json`` as well. Nothing here
asserts on time: it measures.

Baselines (batch, no streaming, no checkpoints, no quarantine or accounting):
  bronze: read the JSON files as text, copy them to a Delta table;
  silver: parse bronze with ``from_json``, drop rows without an id, ``dropDuplicates(event_id)``,
          left-join the customers, write Delta;
  gold:   the four aggregations over silver as batch ``groupBy``s and the purchase attribution
          as a batch join (below), each written to Delta.

The stream-stream join (``gold/purchase_attribution``) is also timed alone, after the layers: its
table and checkpoint are removed and its query runs over all of silver, against a batch join
(purchases left-joined with the same user's clicks and add_to_carts of the 30 minutes before,
the latest kept by a window function, written to Delta).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from medallion.catalog import record_run_creations
from medallion.config import Settings, Trigger, load_settings
from medallion.generate import GenerateSpec, generate_landing
from medallion.gold.job import gold_flows, start_flow
from medallion.hadoopfs import delete_path
from medallion.runner import Layer, run_pipeline
from medallion.spark import build_session
from medallion.streaming import await_all
from tests.events_tables import BRONZE_EVENTS, SILVER_EVENTS

EVENT_SCHEMA = "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, amount DOUBLE"


def baseline_bronze(spark: SparkSession, settings: Settings, out: str) -> None:
    (spark.read.text(f"{settings.paths.landing}/events")
     .withColumn("ingested_at", F.current_timestamp())
     .write.format("delta").mode("overwrite").save(out))


def baseline_silver(spark: SparkSession, settings: Settings, out: str) -> None:
    customers = (spark.read.option("header", "true").csv(f"{settings.paths.landing}/customers")
                 .dropDuplicates(["customer_id"]))
    (spark.read.format("delta").load(BRONZE_EVENTS.path(settings))
     .select(F.from_json("raw", EVENT_SCHEMA).alias("e")).select("e.*")
     .where(F.col("event_id").isNotNull())
     .dropDuplicates(["event_id"])
     .join(customers, F.col("user_id") == F.col("customer_id"), "left")
     .write.format("delta").mode("overwrite").save(out))


def baseline_join(spark: SparkSession, settings: Settings, out: str) -> None:
    silver = spark.read.format("delta").load(SILVER_EVENTS.path(settings))
    purchases = silver.where("event_type = 'purchase'").alias("p")
    clicks = silver.where("event_type IN ('click', 'add_to_cart')").alias("c")
    joined = purchases.join(clicks, F.expr(
        "p.user_id = c.user_id AND c.timestamp >= p.timestamp - INTERVAL 30 minutes "
        "AND c.timestamp <= p.timestamp"), "left")
    latest = Window.partitionBy("p.event_id").orderBy(F.col("c.timestamp").desc_nulls_last(),
                                                      F.col("c.event_id").desc_nulls_last())
    (joined.select(F.col("p.event_id").alias("event_id"), F.col("p.timestamp").alias("at"),
                   F.col("c.event_id").alias("attributed"), F.col("c.timestamp").alias("clicked"),
                   F.row_number().over(latest).alias("rank"))
     .where("rank = 1").drop("rank")
     .write.format("delta").mode("overwrite").save(out))


def time_join(spark: SparkSession, settings: Settings, out: str) -> dict[str, float]:
    """The stream-stream join's query alone over all of silver, and its batch baseline."""
    (flow,) = [flow for flow in gold_flows(settings) if flow.gold.join is not None]
    delete_path(spark, flow.spec.path(settings))
    delete_path(spark, flow.spec.checkpoint(settings))
    began = time.perf_counter()
    (run,) = await_all([start_flow(spark, settings, Trigger(), flow)])
    seconds = time.perf_counter() - began
    began = time.perf_counter()
    baseline_join(spark, settings, out)
    base = time.perf_counter() - began
    return {"rows": run.rows_in, "seconds": seconds, "rows_per_second": run.rows_in / seconds,
            "baseline_seconds": base, "ratio_to_baseline": seconds / base}


def baseline_gold(spark: SparkSession, settings: Settings, out: str) -> None:
    silver = spark.read.format("delta").load(SILVER_EVENTS.path(settings)).cache()
    aggregates = {
        "counts": silver.groupBy(F.window("timestamp", "5 minutes"), "event_type")
        .agg(F.count("*").alias("n"), F.sum("amount").alias("total")),
        "sliding": silver.groupBy(F.window("timestamp", "10 minutes", "5 minutes"), "user_id")
        .agg(F.count("*").alias("n")),
        "sessions": silver.groupBy(F.session_window("timestamp", "5 minutes"), "user_id")
        .agg(F.count("*").alias("n"), F.sum("amount").alias("total")),
        "revenue": silver.where("event_type = 'purchase'")
        .groupBy(F.window("timestamp", "1 hour"), "segment")
        .agg(F.count("*").alias("n"), F.sum("amount").alias("total")),
    }
    for name, frame in aggregates.items():
        frame.write.format("delta").mode("overwrite").save(f"{out}/{name}")
    silver.unpersist()
    baseline_join(spark, settings, f"{out}/attribution")


def time_status(settings: Settings) -> float:
    """Wall seconds of ``medallion status`` on the benchmark's lakehouse, as a user runs it."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "medallion.cli", "status", "--landing",
                    settings.paths.landing, "--lakehouse", settings.paths.lakehouse],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def _stamp(line: str) -> float:
    """The epoch seconds of a medallion log line (``2026-11-23 03:58:29,189 INFO ...``)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def time_idle_run(settings: Settings) -> dict[str, float]:
    """A ``medallion run all`` with nothing new, in a process of its own as a scheduler starts
    it, split by its log: session start (JVM and session), catalog, layers, and the rest
    (monitoring's record and the JVM's exit)."""
    began = time.time()
    done = subprocess.run([sys.executable, "-m", "medallion.cli", "-v", "run", "all", "--landing",
                           settings.paths.landing, "--lakehouse", settings.paths.lakehouse],
                          check=True, capture_output=True, text=True)
    ended = time.time()
    lines = [line for line in done.stderr.splitlines() if line[:2] == "20" and " INFO " in line]
    ready = next(_stamp(line) for line in lines if "session ready" in line)
    layers = next(_stamp(line) for line in lines if "running bronze with" in line)
    last = max(_stamp(line) for line in lines)
    return {"wall": ended - began, "session": ready - began, "catalog": layers - ready,
            "layers": last - layers, "rest": ended - last}


def measure_layers(settings: Settings, tmp: str) -> tuple[dict[str, dict[str, float]], float]:
    """Each layer and its baseline in one session, then a run with nothing new in that session."""
    spark = build_session(settings)
    trigger = Trigger()
    figures: dict[str, dict[str, float]] = {}
    for layer, baseline in ((Layer.BRONZE, baseline_bronze), (Layer.SILVER, baseline_silver),
                            (Layer.GOLD, baseline_gold)):
        began = time.perf_counter()
        runs = run_pipeline(spark, settings, layer, trigger)
        seconds = time.perf_counter() - began
        rows = max(run.rows_in for run in runs)
        began = time.perf_counter()
        baseline(spark, settings, f"{tmp}/base/{layer.value}")
        base = time.perf_counter() - began
        figures[layer.value] = {"rows": rows, "seconds": seconds, "rows_per_second": rows / seconds,
                                "baseline_seconds": base, "ratio_to_baseline": seconds / base}
        print(f"{layer.value}: {figures[layer.value]}", flush=True)
    figures["join"] = time_join(spark, settings, f"{tmp}/base/join")
    print(f"join: {figures['join']}", flush=True)
    began = time.perf_counter()
    run_pipeline(spark, settings, Layer.ALL, trigger)
    idle = time.perf_counter() - began
    record_run_creations(spark, settings)  # as `medallion run` does after the runs that created them
    spark.stop()
    return figures, idle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--layers-of", help=argparse.SUPPRESS)  # the child process's part
    args = parser.parse_args()

    if args.layers_of:
        settings = load_settings(landing=f"{args.layers_of}/landing",
                                 lakehouse=f"{args.layers_of}/lakehouse")
        figures, idle = measure_layers(settings, args.layers_of)
        Path(args.layers_of, "layers.json").write_text(json.dumps({"figures": figures,
                                                                   "idle": idle}))
        return 0

    with tempfile.TemporaryDirectory(prefix="medallion-bench-") as tmp:
        settings = load_settings(landing=f"{tmp}/landing", lakehouse=f"{tmp}/lakehouse")
        began = time.perf_counter()
        generate_landing(settings.paths.landing, GenerateSpec(
            events=args.events, files=args.files, users=5000, burst="bench",
            seconds_between_events=0.05))
        print(f"generated {args.events} events in {time.perf_counter() - began:.1f}s")
        # The layers in a process of their own: the embedded catalog is one process's until that
        # process ends, and the commands timed next open it as a user's would.
        subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_pipeline",
                        "--layers-of", tmp], check=True)
        measured = json.loads(Path(tmp, "layers.json").read_text())
        figures, idle = measured["figures"], measured["idle"]
        status = time_status(settings)
        # The first run after the tables' creation registers them in the catalog (creation
        # changed what the catalog's preparation depends on); every later one finds it ready.
        first_cold = time_idle_run(settings)
        cold = time_idle_run(settings)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nmachine: {machine}; {args.events} events")
    print(f"{'layer':<8}{'rows':>10}{'seconds':>10}{'rows/s':>11}{'baseline s':>12}{'ratio':>8}")
    for layer, f in figures.items():
        print(f"{layer:<8}{int(f['rows']):>10}{f['seconds']:>10.1f}{f['rows_per_second']:>11.0f}"
              f"{f['baseline_seconds']:>12.1f}{f['ratio_to_baseline']:>7.2f}x")
    print(f"run all with no new data: {idle:.1f}s wall (session already up)")
    for label, run in (("the first after the layers' runs", first_cold), ("the next", cold)):
        print(f"medallion run all with no new data, a process of its own, {label}: "
              f"{run['wall']:.1f}s wall = session start {run['session']:.1f}s + catalog "
              f"{run['catalog']:.1f}s + layers {run['layers']:.1f}s + record and exit "
              f"{run['rest']:.1f}s")
    print(f"medallion status (delta-rs, no Spark), a process of its own: {status:.2f}s wall "
          f"(load average {os.getloadavg()[0]:.1f})")
    Path(args.out).mkdir(exist_ok=True)
    Path(args.out, "pipeline.json").write_text(json.dumps(
        {"machine": machine, "events": args.events, "layers": figures, "idle_run_seconds": idle,
         "idle_process_first": first_cold, "idle_process": cold, "status_seconds": status},
        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
