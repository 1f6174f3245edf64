"""Benchmark: a change flow's increment on applied-change tables of two sizes.

``python -m tests.benchmarks.bench_changes`` (``make bench-changes``) generates a change feed of
customers: ``--changes`` changes over ``--keys`` keys (the large history) and a tenth of each (the
small one), in commit order with some late and some re-delivered, as a change-data capture tool
lands them. Each history goes through ``medallion run all`` into a lakehouse of its own, with a
pipeline of two change flows over the same bronze table (SCD type 1, and type 2 with tracked
columns), then ``medallion maintain``. Then an increment of ``--increment`` changes (updates of
the large history's keys, a tenth of them new keys, some deletes) lands, and ``medallion run all``
brings each lakehouse up to date, in a process of its own, on a fresh copy, alternating with
the same increment on an empty lakehouse, for ``--rounds`` rounds.

Printed: each process's wall time with the 1-minute load average at its start, the silver time
of each flow from the run's record, and the median ratios of the increment on the large and on
the small history to the increment on an empty lakehouse. Figures also go to
``bench-results/changes.json``. Nothing here asserts on time: it measures.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from tests.benchmarks.bench_gold_refresh import medallion, timed
from tests.conf_support import REPO_CONF

PIPELINE = """\
description: Customers from a change feed, latest and with history.
sources:
  customer_changes:
    format: json_lines
    path: customer_changes
    bronze:
      table: customer_changes
silver:
  customers:
    input: bronze/customer_changes
    parse: json
    columns: &columns
      id: STRING
      lsn: BIGINT
      op: STRING
      name: STRING
      segment: STRING
      city: STRING
    changes:
      keys: id
      sequence_by: lsn
      delete_when: op = 'd'
  customers_history:
    input: bronze/customer_changes
    parse: json
    columns: *columns
    changes:
      keys: id
      sequence_by: lsn
      delete_when: op = 'd'
      scd: 2
      track_history_columns: [segment, city]
"""
FLOWS = ("silver/customers", "silver/customers_history")
LINES_PER_FILE = 50_000
SEGMENTS = ("consumer", "smb", "enterprise")
CITIES = ("Lyon", "Lille", "Nantes", "Paris", "Rennes", "Nice", "Metz", "Dijon")


def bench_conf(conf: Path) -> Path:
    """The repo's base settings, the in-memory catalog, and the change pipeline alone."""
    (conf / "pipelines").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_CONF / "base.yaml", conf / "base.yaml")
    (conf / "local.yaml").write_text("spark:\n  master: local[2]\ncatalog:\n  metastore: in-memory\n")
    (conf / "pipelines" / "customers.yaml").write_text(PIPELINE, encoding="utf-8")
    return conf


def change_lines(rng: random.Random, count: int, keys: range, first_lsn: int,
                 new_keys: range | None = None) -> list[str]:
    """``count`` changes as JSON lines: each to a key of ``keys`` (or, one in ten, of
    ``new_keys``), numbered from ``first_lsn`` in commit order; one in twenty deletes, one in
    twenty landing late (moved up to 5,000 lines later), one in fifty re-delivered."""
    changes = []
    for lsn in range(first_lsn, first_lsn + count):
        pool = new_keys if new_keys is not None and rng.random() < 0.1 else keys
        op = "d" if rng.random() < 0.05 else "u"
        row = {"id": f"cust-{rng.choice(pool):07d}", "lsn": lsn, "op": op}
        if op != "d":
            row.update(name=f"name-{rng.randrange(1_000_000)}", segment=rng.choice(SEGMENTS),
                       city=rng.choice(CITIES))
        changes.append(json.dumps(row))
    for index in rng.sample(range(count), count // 20):
        target = min(count - 1, index + rng.randrange(1, 5_000))
        changes[index], changes[target] = changes[target], changes[index]
    again = sorted((index + rng.randrange(1, 2_000), changes[index])
                   for index in rng.sample(range(count), count // 50))
    landed, pending = [], iter(again)
    following = next(pending, None)
    for position, line in enumerate(changes):
        landed.append(line)
        while following is not None and following[0] <= position:
            landed.append(following[1])
            following = next(pending, None)
    if following is not None:
        landed += [following[1], *(line for _, line in pending)]
    return landed


def land(folder: Path, prefix: str, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for part, start in enumerate(range(0, len(lines), LINES_PER_FILE)):
        text = "\n".join(lines[start:start + LINES_PER_FILE]) + "\n"
        (folder / f"{prefix}-{part:04d}.json").write_text(text, encoding="utf-8")


def silver_seconds(lakehouse: str) -> dict[str, float]:
    """Each change flow's seconds in the newest run recorded in ``lakehouse``."""
    from deltalake import DeltaTable

    runs = DeltaTable(f"{lakehouse}/_monitoring/runs").to_pyarrow_table().to_pylist()
    newest = max(runs, key=lambda r: r["started_at"])["pipeline_run"]
    return {row["table"]: round((row["finished_at"] - row["started_at"]).total_seconds(), 1)
            for row in runs if row["pipeline_run"] == newest and row["table"] in FLOWS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--increment", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", help="a folder of an earlier run whose histories to reuse")
    args = parser.parse_args()

    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="bench-changes-"))
    conf = bench_conf(tmp / "conf")
    sizes = {"large": (args.changes, args.keys),
             "small": (args.changes // 10, args.keys // 10)}
    history: dict[str, tuple[float, float]] = {}
    for name, (count, keys) in sizes.items():
        root = tmp / name
        if (root / "lakehouse").exists():
            continue
        land(root / "landing" / "customer_changes", "history",
             change_lines(random.Random(name), count, range(keys), first_lsn=1))
        history[name] = timed(medallion(conf, str(root), f"{root}/lakehouse", "run", "all"))
        timed(medallion(conf, str(root), f"{root}/lakehouse", "maintain"))
        print(f"{name} history, {count} changes over {keys} keys: {history[name][0]:.1f} s "
              f"(load {history[name][1]:.1f}); {silver_seconds(f'{root}/lakehouse')}", flush=True)
    # The increment: the same lines for every lakehouse, from beyond the large history's numbers.
    increment = change_lines(random.Random("increment"), args.increment, range(args.keys // 10),
                             first_lsn=args.changes + 1,
                             new_keys=range(args.keys, args.keys + args.increment))
    for name in (*sizes, "empty"):
        land(tmp / name / "landing" / "customer_changes", "increment", increment)
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in (*sizes, "empty")}
    flows: dict[str, list[dict[str, float]]] = {name: [] for name in seconds}
    for round_ in range(args.rounds):
        for name in seconds:
            root = tmp / name
            lakehouse = f"{tmp}/increment-{name}-{round_}"
            if name != "empty":
                shutil.copytree(root / "lakehouse", lakehouse)
            seconds[name].append(timed(medallion(conf, str(root), lakehouse, "run", "all")))
            flows[name].append(silver_seconds(lakehouse))
            shutil.rmtree(lakehouse)
            wall, load = seconds[name][-1]
            print(f"increment of {args.increment}, round {round_ + 1}, {name}: {wall:.1f} s "
                  f"(load {load:.1f}); {flows[name][-1]}", flush=True)
    empty = statistics.median(s for s, _ in seconds["empty"])
    per_flow = {name: {flow: statistics.median(r[flow] for r in flows[name]) for flow in FLOWS}
                for name in seconds}
    figures = {
        "changes": args.changes, "keys": args.keys, "increment": args.increment,
        "history_seconds": {name: s for name, (s, _) in history.items()},
        "history_load_at_start": {name: load for name, (_, load) in history.items()},
        "increment_seconds": {name: [s for s, _ in runs] for name, runs in seconds.items()},
        "increment_load_at_start": {name: [load for _, load in runs] for name, runs in seconds.items()},
        "increment_flow_seconds_median": per_flow,
        "increment_median_ratio_to_empty": {
            name: round(statistics.median(s for s, _ in seconds[name]) / empty, 2) for name in sizes},
        "increment_flow_ratio_large_to_small": {
            flow: round(per_flow["large"][flow] / per_flow["small"][flow], 2) for flow in FLOWS},
    }
    print(json.dumps(figures, indent=1))
    Path("bench-results").mkdir(exist_ok=True)
    Path("bench-results/changes.json").write_text(json.dumps(figures, indent=1) + "\n")
    if not args.workdir:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
