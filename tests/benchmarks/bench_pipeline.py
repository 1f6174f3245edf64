"""Benchmark: each layer of the pipeline against plain Spark doing the minimal equivalent work.

``make bench`` (or ``python -m tests.benchmarks.bench_pipeline --events 1000000``) generates the
events, runs bronze, silver and gold with the available-now trigger and the baselines on the
same data in the same session (after an untimed run of the bronze baseline, so that neither side
pays the JVM's first jobs), and prints rows per second and the ratio of each layer's time to
its baseline's, plus the wall time of a run with no new data and of ``medallion status`` (read
through delta-rs, no Spark). Figures go to ``bench-results/pipeline.json`` as well. Nothing here
asserts on time: it measures.

Whichever side of a layer runs second in a session finds the JIT's code of the first warm (the
silver and gold baselines took 10-30% longer before their layer than after it), so the
layers are measured twice, each in a process of its own on a new lakehouse: the layer before its
baseline in one, after it in the other. A layer's figure is the mean of the two, and its ratio
the ratio of the means.

Baselines (batch, no streaming, no checkpoints, no quarantine or accounting):
  bronze: read the JSON files as text, copy them to a Delta table;
  silver: parse bronze with ``from_json``, drop rows without an id, ``dropDuplicates(event_id)``,
          left-join the customers, write Delta;
  gold:   the four aggregations over silver as batch ``groupBy``s and the purchase attribution
          as a batch join (below), each written to Delta.

Increment scaling: the same increment of new events (the next day's, as a scheduler's run brings
them) is timed on lakehouses holding histories of different sizes, each in a process of its own
that first processes a warm-up increment (the day before's) so that every timed run finds the JVM
equally warm. Each history size times ``--repeats`` increments in a row (one day each, the same
sequence at every size): the median of each size against the smallest history's median, the
spread of the single runs around it, and a projection to 100M events from the least-squares line
through the single runs, with its slope's standard error (how much of the projection is the runs'
noise).

End to end: ``medallion run all`` over all the events on a new lakehouse, and the hand-written
batch job (the three baselines in one session, each reading what the one before wrote), each a
process of its own as a scheduler starts it, wall time from start to exit, alternating.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from medallion.config.model import Metastore, Trigger
from medallion.engine.gold.job import gold_flows, start_flow
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import TableRun, await_all
from medallion.io.catalog import record_run_creations
from medallion.io.hadoopfs import delete_path
from medallion.project import Settings, load_settings
from medallion.quality.evaluate import load_great_expectations
from medallion.quality.spec import check_expectations
from medallion.samples.generate import GenerateSpec, generate_landing
from medallion.spark.session import build_session
from tests.events_tables import BRONZE_EVENTS, SILVER_EVENTS

T = TypeVar("T")

EVENT_SCHEMA = "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, amount DOUBLE"


def baseline_bronze(spark: SparkSession, settings: Settings, out: str) -> None:
    (spark.read.text(f"{settings.paths.landing}/events")
     .select(F.col("value").alias("raw"), F.current_timestamp().alias("ingested_at"))
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


def _timed(work: Callable[[], T]) -> tuple[float, T]:
    began = time.perf_counter()
    done = work()
    return time.perf_counter() - began, done


def _both(ours: Callable[[], list[TableRun]], baseline: Callable[[], None],
          baseline_first: bool) -> tuple[float, float, list[TableRun]]:
    """Seconds of ``ours`` and of ``baseline``, run in the order asked, and what ``ours`` ran."""
    if baseline_first:
        base, _ = _timed(baseline)
        seconds, runs = _timed(ours)
    else:
        seconds, runs = _timed(ours)
        base, _ = _timed(baseline)
    return seconds, base, runs


def _figures(rows: int, seconds: float, base: float) -> dict[str, float]:
    return {"rows": rows, "seconds": seconds, "rows_per_second": rows / seconds,
            "baseline_seconds": base, "ratio_to_baseline": seconds / base}


def time_join(spark: SparkSession, settings: Settings, out: str,
              baseline_first: bool) -> dict[str, float]:
    """The stream-stream join's query alone over all of silver, and its batch baseline."""
    (flow,) = [flow for flow in gold_flows(settings) if flow.gold.join is not None]
    delete_path(spark, flow.spec.path(settings))
    delete_path(spark, flow.spec.checkpoint(settings))
    seconds, base, (run,) = _both(
        lambda: await_all([start_flow(spark, settings, Trigger(), flow)]),
        partial(baseline_join, spark, settings, out), baseline_first)
    return _figures(run.rows_in, seconds, base)


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
    subprocess.run([sys.executable, "-m", "medallion.cli.main", "status", "--landing",
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
    done = subprocess.run([sys.executable, "-m", "medallion.cli.main", "-v", "run", "all", "--landing",
                           settings.paths.landing, "--lakehouse", settings.paths.lakehouse],
                          check=True, capture_output=True, text=True)
    ended = time.time()
    lines = [line for line in done.stderr.splitlines() if line[:2] == "20" and " INFO " in line]
    ready = next(_stamp(line) for line in lines if "session ready" in line)
    layers = next(_stamp(line) for line in lines if "running bronze with" in line)
    last = max(_stamp(line) for line in lines)
    return {"wall": ended - began, "session": ready - began, "catalog": layers - ready,
            "layers": last - layers, "rest": ended - last}


def measure_layers(settings: Settings, tmp: str,
                   baseline_first: bool) -> tuple[dict[str, dict[str, float]], float]:
    """Each layer and its baseline in one session (the baseline first or second, as asked),
    then a run with nothing new in that session."""
    # As `medallion run` does before its session; then Great Expectations loaded, which a
    # process whose expectations were checked before loads while its first layer runs: no timed
    # layer pays the import.
    check_expectations(settings)
    load_great_expectations()
    spark = build_session(settings)
    trigger = Trigger()
    out = f"{tmp}/base-{'first' if baseline_first else 'second'}"
    # Warm-up, untimed: the JVM's first Spark and Delta jobs (class loading, code generation, the
    # JIT) would otherwise be paid by whichever layer is timed first, and not by its baseline.
    baseline_bronze(spark, settings, f"{out}/warm-up")
    figures: dict[str, dict[str, float]] = {}
    for layer, baseline in ((RunTarget.BRONZE, baseline_bronze), (RunTarget.SILVER, baseline_silver),
                            (RunTarget.GOLD, baseline_gold)):
        seconds, base, runs = _both(partial(run_pipeline, spark, settings, layer, trigger),
                                    partial(baseline, spark, settings, f"{out}/{layer.value}"),
                                    baseline_first)
        figures[layer.value] = _figures(max(run.rows_in for run in runs), seconds, base)
        print(f"{layer.value}: {figures[layer.value]}", flush=True)
    figures["join"] = time_join(spark, settings, f"{out}/join", baseline_first)
    print(f"join: {figures['join']}", flush=True)
    idle, _ = _timed(partial(run_pipeline, spark, settings, RunTarget.ALL, trigger))
    record_run_creations(spark, settings)  # as `medallion run` does after the runs that created them
    spark.stop()
    return figures, idle


def balanced(second: dict[str, dict[str, float]],
             first: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Each layer's mean over the process that ran its baseline second and the one that ran it
    first, and the ratio of the means; both orders' own figures kept beside them."""
    figures: dict[str, dict[str, Any]] = {}
    for layer, ours in second.items():
        theirs = first[layer]
        seconds = (ours["seconds"] + theirs["seconds"]) / 2
        base = (ours["baseline_seconds"] + theirs["baseline_seconds"]) / 2
        figures[layer] = {**_figures(int(ours["rows"]), seconds, base),
                          "baseline_second": ours, "baseline_first": theirs}
    return figures


def handwritten_job(root: str) -> None:
    """The hand-written batch job, end to end in this process: the three baselines, each reading
    what the one before wrote, in a lakehouse of its own under ``root`` (no catalog)."""
    settings = load_settings(landing=f"{root}/landing", lakehouse=f"{root}/handwritten")
    settings = replace(settings, catalog=replace(settings.catalog, metastore=Metastore.IN_MEMORY))
    spark = build_session(settings, register_tables=False)
    baseline_bronze(spark, settings, BRONZE_EVENTS.path(settings))
    baseline_silver(spark, settings, SILVER_EVENTS.path(settings))
    baseline_gold(spark, settings, f"{settings.paths.lakehouse}/gold")
    spark.stop()


def time_end_to_end(tmp: str, rounds: int) -> list[dict[str, float]]:
    """Wall seconds of ``medallion run all`` over the landed events on a new lakehouse, and of the
    hand-written job over the same files, each a process of its own as a scheduler starts it,
    alternating (``rounds`` of each)."""
    measured = []
    for round_ in range(rounds):
        figures = {}
        for name, command in (
                ("handwritten", [sys.executable, "-m", "tests.benchmarks.bench_pipeline",
                                 "--handwritten-of", tmp]),
                ("medallion", [sys.executable, "-m", "medallion.cli.main", "--landing",
                               f"{tmp}/landing", "--lakehouse", f"{tmp}/end-to-end-{round_}",
                               "run", "all"])):
            began = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            figures[name] = time.perf_counter() - began
        shutil.rmtree(f"{tmp}/handwritten")
        shutil.rmtree(f"{tmp}/end-to-end-{round_}")
        print(f"end to end, round {round_ + 1}: {figures}", flush=True)
        measured.append(figures)
    return measured


HISTORY_START = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
WARM_UP_START = datetime(2025, 2, 3, 10, 0, tzinfo=timezone.utc)  # after any history's last day
INCREMENT_START = datetime(2025, 2, 4, 10, 0, tzinfo=timezone.utc)
PROJECTED_HISTORY = 100_000_000


def events_spec(events: int, files: int, burst: str, start: datetime = HISTORY_START) -> GenerateSpec:
    """The benchmark's events: 5000 users, one every 50 ms (1M events span about 14 hours)."""
    return GenerateSpec(events=events, files=files, users=5000, burst=burst, start=start,
                        seconds_between_events=0.05)


def measure_increment(root: str, history: int, increment: int, repeats: int = 1) -> list[float]:
    """Seconds of ``run all`` over each of ``repeats`` increments (one day apart) on the lakehouse
    under ``root``, after its ``history`` events (generated here unless the lakehouse has them)
    and a warm-up increment."""
    settings = load_settings(landing=f"{root}/landing", lakehouse=f"{root}/lakehouse")
    fresh = not Path(settings.paths.lakehouse).exists()
    if fresh and history:
        generate_landing(settings.paths.landing, events_spec(history, 20, "bench"))
    generate_landing(settings.paths.landing, events_spec(increment // 2, 2, "warm-up", WARM_UP_START),
                     with_customers=fresh and not history)
    spark = build_session(settings)
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())  # the history (if new) and the warm-up
    # Each compilation of generated code (Janino) costs the driver 5-50 ms; a warm session should
    # find most of an increment's code in Spark's cache (spark.sql.codegen.cache.maxEntries).
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    compiled = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    seconds = []
    for day in range(repeats):
        generate_landing(settings.paths.landing,
                         events_spec(increment, 4, f"increment-{day}",
                                     INCREMENT_START + timedelta(days=day)), with_customers=False)
        began, classes = time.perf_counter(), compiled.getCount()
        runs = run_pipeline(spark, settings, RunTarget.ALL, Trigger())
        seconds.append(time.perf_counter() - began)
        print(f"history {history}, increment {day + 1}: {seconds[-1]:.1f}s, "
              f"{compiled.getCount() - classes} classes compiled: "
              + ", ".join(f"{run.table} {run.seconds:.1f}s ({run.batches} batches)"
                          for run in runs if run.batches), flush=True)
    spark.stop()
    return seconds


def time_increments(tmp: str, histories: list[int], increment: int,
                    repeats: int) -> dict[int, list[float]]:
    """The increments' seconds at each history size; the largest is the layers' lakehouse."""
    seconds = {}
    for history in histories:
        root = tmp if history == max(histories) else f"{tmp}/history-{history}"
        subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_pipeline", "--increment-of",
                        root, "--history", str(history), "--increment", str(increment),
                        "--repeats", str(repeats)], check=True)
        seconds[history] = json.loads(Path(root, "increment.json").read_text())
        print(f"increments of {increment} events after {history} events of history: "
              + ", ".join(f"{s:.1f}s" for s in seconds[history]), flush=True)
    return seconds


@dataclass(frozen=True)
class Growth:
    """The least-squares line through every single increment's seconds against its history."""

    at_no_history: float  # seconds
    per_event: float  # seconds per event of history (the slope)
    standard_error: float  # of the slope

    def at(self, history: int, slope: float | None = None) -> float:
        return self.at_no_history + (self.per_event if slope is None else slope) * history


def growth(increments: dict[int, list[float]]) -> Growth:
    """The line through the single runs (not their medians), with its slope's standard error:
    how much of a projection is the runs' noise."""
    xs = [float(history) for history, runs in increments.items() for _ in runs]
    ys = [seconds for runs in increments.values() for seconds in runs]
    slope, intercept = statistics.linear_regression(xs, ys)
    mean_x = statistics.fmean(xs)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    spread = sum((x - mean_x) ** 2 for x in xs)
    error = (residual / (len(xs) - 2) / spread) ** 0.5 if len(xs) > 2 and spread else float("inf")
    return Growth(intercept, slope, error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--increment", type=int, default=20_000,
                        help="new events of the increment timed at each history size")
    parser.add_argument("--histories", default="0,250000",
                        help="history sizes besides --events the increment is timed after")
    parser.add_argument("--repeats", type=int, default=3,
                        help="increments timed in a row at each history size (the median counts)")
    parser.add_argument("--layers-of", help=argparse.SUPPRESS)  # the child processes' parts
    parser.add_argument("--baseline-first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--increment-of", help=argparse.SUPPRESS)
    parser.add_argument("--history", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--handwritten-of", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=2,
                        help="end-to-end runs of each side, alternating")
    args = parser.parse_args()

    if args.handwritten_of:
        handwritten_job(args.handwritten_of)
        return 0

    if args.increment_of:
        seconds = measure_increment(args.increment_of, args.history, args.increment, args.repeats)
        Path(args.increment_of, "increment.json").write_text(json.dumps(seconds))
        return 0

    if args.layers_of:
        lakehouse = "lakehouse-baseline-first" if args.baseline_first else "lakehouse"
        settings = load_settings(landing=f"{args.layers_of}/landing",
                                 lakehouse=f"{args.layers_of}/{lakehouse}")
        measured, idle = measure_layers(settings, args.layers_of, args.baseline_first)
        Path(args.layers_of, f"{lakehouse}.json").write_text(json.dumps({"figures": measured,
                                                                        "idle": idle}))
        return 0

    with tempfile.TemporaryDirectory(prefix="medallion-bench-") as tmp:
        settings = load_settings(landing=f"{tmp}/landing", lakehouse=f"{tmp}/lakehouse")
        began = time.perf_counter()
        generate_landing(settings.paths.landing, events_spec(args.events, args.files, "bench"))
        print(f"generated {args.events} events in {time.perf_counter() - began:.1f}s")
        # The layers in processes of their own: the embedded catalog is one process's until that
        # process ends, and the commands timed next open it as a user's would. The lakehouse of
        # the baselines-first process goes; the other stays for the commands and increments.
        for order in (["--baseline-first"], []):
            subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_pipeline",
                            "--layers-of", tmp, *order], check=True)
        shutil.rmtree(f"{tmp}/lakehouse-baseline-first")
        first, second = (json.loads(Path(tmp, f"{name}.json").read_text())
                         for name in ("lakehouse-baseline-first", "lakehouse"))
        figures, idle = balanced(second["figures"], first["figures"]), second["idle"]
        status = time_status(settings)
        # The first run after the tables' creation registers them in the catalog (creation
        # changed what the catalog's preparation depends on); every later one finds it ready.
        first_cold = time_idle_run(settings)
        cold = time_idle_run(settings)
        end_to_end = time_end_to_end(tmp, args.rounds)
        histories = sorted({*(int(h) for h in args.histories.split(",")), args.events})
        increments = time_increments(tmp, histories, args.increment, args.repeats)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nmachine: {machine}; {args.events} events")
    print("each layer and its baseline: the mean of two processes, the baseline second in one "
          "and first in the other (each order's seconds after the ratio)")
    print(f"{'layer':<8}{'rows':>10}{'seconds':>10}{'rows/s':>11}{'baseline s':>12}{'ratio':>8}"
          f"   {'baseline second':>22}   {'baseline first':>22}")
    for layer, f in figures.items():
        orders = "   ".join(f"{o['seconds']:>6.1f}s / {o['baseline_seconds']:>5.1f}s = "
                           f"{o['ratio_to_baseline']:.2f}x"
                           for o in (f["baseline_second"], f["baseline_first"]))
        print(f"{layer:<8}{int(f['rows']):>10}{f['seconds']:>10.1f}{f['rows_per_second']:>11.0f}"
              f"{f['baseline_seconds']:>12.1f}{f['ratio_to_baseline']:>7.2f}x   {orders}")
    ours, theirs = (sum(run[side] for run in end_to_end) for side in ("medallion", "handwritten"))
    print(f"{args.events} events end to end, each a process of its own, {len(end_to_end)} rounds "
          f"alternating: medallion run all "
          + ", ".join(f"{run['medallion']:.1f}s" for run in end_to_end)
          + "; the hand-written batch job "
          + ", ".join(f"{run['handwritten']:.1f}s" for run in end_to_end)
          + f"; {ours / theirs:.2f}x (sums)")
    print(f"run all with no new data: {idle:.1f}s wall (session already up)")
    for label, run in (("the first after the layers' runs", first_cold), ("the next", cold)):
        print(f"medallion run all with no new data, a process of its own, {label}: "
              f"{run['wall']:.1f}s wall = session start {run['session']:.1f}s + catalog "
              f"{run['catalog']:.1f}s + layers {run['layers']:.1f}s + record and exit "
              f"{run['rest']:.1f}s")
    print(f"medallion status (delta-rs, no Spark), a process of its own: {status:.2f}s wall")
    medians = {history: statistics.median(runs) for history, runs in increments.items()}
    smallest = medians[min(medians)]
    for history, runs in increments.items():
        print(f"increment of {args.increment} new events after {history} events of history: "
              f"median {medians[history]:.1f}s of {len(runs)} ({min(runs):.1f}-{max(runs):.1f}s), "
              f"{medians[history] / smallest:.2f}x the smallest history's median "
              f"(single runs {min(runs) / smallest:.2f}-{max(runs) / smallest:.2f}x)")
    line = growth(increments)
    per_million, error = line.per_event * 1e6, line.standard_error * 1e6
    at_projection = line.at(PROJECTED_HISTORY)
    low, high = (line.at(PROJECTED_HISTORY, line.per_event + sign * 2 * line.standard_error)
                 for sign in (-1, 1))
    print(f"growth with history (least-squares line through the {sum(map(len, increments.values()))} "
          f"single increments): {per_million:+.2f}s per 1M events of history, standard error "
          f"{error:.2f}s; projected after {PROJECTED_HISTORY} events: {at_projection:.1f}s "
          f"({at_projection / smallest:.2f}x the smallest history's median), {low:.1f}s to "
          f"{high:.1f}s within two standard errors"
          + ("; the slope is within two standard errors of zero: no growth the runs can tell "
             "from their noise" if abs(per_million) <= 2 * error else ""))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    Path(args.out).mkdir(exist_ok=True)
    Path(args.out, "pipeline.json").write_text(json.dumps(
        {"machine": machine, "events": args.events, "layers": figures, "idle_run_seconds": idle,
         "end_to_end": end_to_end, "idle_process_first": first_cold, "idle_process": cold,
         "status_seconds": status,
         "increment_events": args.increment, "increment_seconds_by_history": increments,
         "increment_median_seconds_by_history": medians,
         "increment_seconds_projected_100m": at_projection,
         "increment_growth_seconds_per_1m_history": per_million,
         "increment_growth_standard_error_per_1m_history": error,
         "load_average": os.getloadavg()},
        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
