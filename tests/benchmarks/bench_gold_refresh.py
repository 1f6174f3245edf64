"""Benchmark: gold kept by Spark's stateful aggregation, by recompute, and by a batch job.

``python -m tests.benchmarks.bench_gold_refresh --events 1000000`` generates the events and runs
bronze and silver once. Then, alternating for ``--rounds`` rounds, each of three processes of its
own (as a scheduler starts them) brings the events pipeline's five gold tables up to date on a
copy of that silver lakehouse, wall time from start to exit:

  stateful:  ``medallion run gold`` with the four window aggregates declared
             ``refresh: stateful`` (in state stores; sessions appended once closed);
  recompute: ``medallion run gold`` with the four recomputed (as shipped, and sessions in mode
             update, recomputed too);
  batch:     the hand-written batch job's gold (``bench_pipeline.baseline_gold``: the four
             aggregations as ``groupBy`` and the attribution join, written to Delta).

Then an increment of ``--increment`` new events (the next day's) through every layer, ``medallion
run all`` in a process of its own, for ``--increment-rounds`` rounds, alternating: on a fresh copy
of each medallion variant's lakehouse, and on an empty lakehouse with recompute (medians and
their ratios printed). Every medallion process uses Spark's in-memory catalog, as
the batch job does. Figures go to ``bench-results/gold_refresh.json``, with the
load average at each process's start. Nothing here asserts on time: it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml
from deltalake import DeltaTable

from medallion.config.model import Metastore, Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import load_settings
from medallion.samples.generate import generate_landing
from medallion.spark.session import build_session
from tests.benchmarks.bench_pipeline import INCREMENT_START, baseline_gold, events_spec
from tests.conf_support import REPO_CONF

RECOMPUTED = ("event_counts_5m", "user_activity_sliding", "user_sessions", "segment_revenue_1h")


def bench_conf(conf: Path) -> Path:
    """The repo's configuration with Spark's in-memory catalog, as the batch job has it: a copy
    of a lakehouse holds catalog entries of the original's paths, which an embedded catalog would
    spend its first seconds registering again."""
    shutil.copytree(REPO_CONF, conf, dirs_exist_ok=True)
    (conf / "local.yaml").write_text("spark:\n  master: local[2]\ncatalog:\n  metastore: in-memory\n")
    return conf


def recompute_conf(conf: Path, refresh: str = "recompute") -> Path:
    """The benchmark's configuration with the events pipeline's window aggregates kept by
    recompute (sessions in mode update), or by stateful queries (sessions in mode append)."""
    bench_conf(conf)
    events = conf / "pipelines" / "events.yaml"
    tree = yaml.safe_load(events.read_text(encoding="utf-8"))
    for table in RECOMPUTED:
        tree["gold"][table].update(refresh=refresh)
        if refresh == "recompute":
            tree["gold"][table].update(mode="update")
    events.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return conf


def batch_gold(root: str) -> None:
    """The batch job's gold over the silver lakehouse under ``root``, in this process."""
    settings = load_settings(landing=f"{root}/landing", lakehouse=f"{root}/lakehouse")
    settings = replace(settings, catalog=replace(settings.catalog, metastore=Metastore.IN_MEMORY))
    spark = build_session(settings, register_tables=False)
    baseline_gold(spark, settings, f"{root}/batch-gold")
    spark.stop()


def silver_only(root: str) -> None:
    """Bronze and silver of the landed events, in this process."""
    settings = load_settings(landing=f"{root}/landing", lakehouse=f"{root}/lakehouse")
    spark = build_session(settings)
    run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    run_pipeline(spark, settings, RunTarget.SILVER, Trigger())
    spark.stop()


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds of ``command`` in a process of its own, and the 1-minute load average at its
    start."""
    load = os.getloadavg()[0]
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - began, load


def layer_seconds(lakehouse: str) -> dict[str, float]:
    """Of the newest run recorded in ``lakehouse`` (``monitoring.runs``, read with delta-rs): per
    layer, from its first table's start to its last table's end, and the whole run's span."""
    runs = DeltaTable(f"{lakehouse}/_monitoring/runs").to_pyarrow_table().to_pylist()
    newest = max(runs, key=lambda r: r["started_at"])["pipeline_run"]
    spans: dict[str, list] = {}
    for row in (r for r in runs if r["pipeline_run"] == newest):
        for name in (row["table"].split("/")[0], "run"):
            low, high = spans.get(name, [row["started_at"], row["finished_at"]])
            spans[name] = [min(low, row["started_at"]), max(high, row["finished_at"])]
    return {name: round((high - low).total_seconds(), 1) for name, (low, high) in spans.items()}


def medallion(conf: Path, root: str, lakehouse: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "medallion.cli.main", "--conf-dir", str(conf), "--landing",
            f"{root}/landing", "--lakehouse", lakehouse, *args]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--increment", type=int, default=20_000)
    parser.add_argument("--increment-rounds", type=int, default=3)
    parser.add_argument("--batch-gold-of", help=argparse.SUPPRESS)
    parser.add_argument("--silver-of", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help="a folder of an earlier run whose silver to reuse")
    args = parser.parse_args()
    if args.batch_gold_of:
        batch_gold(args.batch_gold_of)
        return 0
    if args.silver_of:
        silver_only(args.silver_of)
        return 0

    tmp = args.workdir or tempfile.mkdtemp(prefix="bench-gold-refresh-")
    for earlier in Path(tmp).glob("*-[0-9]*"):  # an earlier run's copies
        shutil.rmtree(earlier)
    stateful_conf = recompute_conf(Path(tmp) / "conf-stateful", refresh="stateful")
    recompute = recompute_conf(Path(tmp) / "conf-recompute")
    if not Path(tmp, "lakehouse").exists():
        generate_landing(f"{tmp}/landing", events_spec(args.events, 20, "bench"))
        subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_gold_refresh", "--silver-of",
                        tmp], check=True)
    print(f"silver of {args.events} events ready in {tmp}", flush=True)
    runs: dict[str, list[tuple[float, float]]] = {"stateful": [], "recompute": [], "batch": []}
    for round_ in range(args.rounds):
        for name in runs:
            root = f"{tmp}/{name}-{round_}"
            shutil.copytree(f"{tmp}/lakehouse", f"{root}/lakehouse")
            os.symlink(f"{tmp}/landing", f"{root}/landing")
            command = ([sys.executable, "-m", "tests.benchmarks.bench_gold_refresh",
                        "--batch-gold-of", root] if name == "batch" else
                       medallion(stateful_conf if name == "stateful" else recompute, root,
                                 f"{root}/lakehouse", "run", "gold"))
            runs[name].append(timed(command))
            print(f"round {round_ + 1}, {name}: {runs[name][-1][0]:.1f} s "
                  f"(load {runs[name][-1][1]:.1f})", flush=True)
    # The increment: the next day's events through every layer. Each round runs it on a fresh
    # copy of the last round's stateful and recomputed lakehouses, and on an empty one, alternating.
    generate_landing(f"{tmp}/landing", events_spec(args.increment, 4, "increment", INCREMENT_START),
                     with_customers=False)
    alone = f"{tmp}/increment-alone"
    shutil.rmtree(alone, ignore_errors=True)
    Path(alone, "landing", "events").mkdir(parents=True)
    for file in Path(tmp, "landing", "events").glob("increment-*"):
        shutil.copy(file, Path(alone, "landing", "events", file.name))
    shutil.copytree(Path(tmp, "landing", "customers"), Path(alone, "landing", "customers"))
    last = args.rounds - 1
    increments: dict[str, list[tuple[float, float]]] = {
        "stateful": [], "recompute": [], "recompute on an empty lakehouse": []}
    layers: dict[str, list[dict[str, float]]] = {name: [] for name in increments}
    for round_ in range(args.increment_rounds):
        for name in increments:
            lakehouse = f"{tmp}/increment-{round_}-{len(increments[name])}-{name.split()[0]}"
            if name == "recompute on an empty lakehouse":
                increments[name].append(timed(medallion(recompute, alone, lakehouse, "run", "all")))
            else:
                shutil.copytree(f"{tmp}/{name}-{last}/lakehouse", lakehouse)
                increments[name].append(timed(medallion(
                    stateful_conf if name == "stateful" else recompute, tmp, lakehouse, "run",
                    "all")))
            layers[name].append(layer_seconds(lakehouse))
            shutil.rmtree(lakehouse)
            seconds, load = increments[name][-1]
            print(f"increment of {args.increment}, round {round_ + 1}, {name}: {seconds:.1f} s "
                  f"(load {load:.1f}); layers {layers[name][-1]}", flush=True)
    empty = statistics.median(s for s, _ in increments["recompute on an empty lakehouse"])
    means = {name: statistics.fmean(s for s, _ in measured) for name, measured in runs.items()}
    figures = {
        "events": args.events, "rounds": args.rounds, "increment": args.increment,
        "gold_seconds": {name: [s for s, _ in measured] for name, measured in runs.items()},
        "load_at_start": {name: [load for _, load in measured] for name, measured in runs.items()},
        "gold_ratio_to_batch": {name: means[name] / means["batch"] for name in ("stateful",
                                                                                "recompute")},
        "increment_seconds": {name: [s for s, _ in measured] for name, measured in increments.items()},
        "increment_load_at_start": {name: [load for _, load in measured]
                                    for name, measured in increments.items()},
        "increment_layer_seconds": layers,
        "increment_median_ratio_to_empty": {
            name: statistics.median(s for s, _ in increments[name]) / empty
            for name in ("stateful", "recompute")},
    }
    print(json.dumps(figures, indent=1))
    Path("bench-results").mkdir(exist_ok=True)
    Path("bench-results/gold_refresh.json").write_text(json.dumps(figures, indent=1) + "\n")
    if not args.workdir:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
