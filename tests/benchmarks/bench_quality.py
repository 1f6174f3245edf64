"""Benchmark: the silver job with and without its data-quality gate, in the same run.

    python -m tests.benchmarks.bench_quality --events 1000000      (make bench-quality)
    python -m tests.benchmarks.bench_quality --events 100000       (a quick run)

Generates ``--events`` sample events, ingests them into bronze once, then runs silver on copies of
that bronze, alternating without the gate (``quality.enabled: false``) and with the gate that
silver/events declares in ``conf/pipelines/events.yaml``, ``--repeats`` times each. Prints the wall
time of each run and the ratio of the best gated run to the best plain run. It then times the
gate's evaluation alone on the silver batch, by the single-pass engine and by Great Expectations'
own Spark validation of the same expectations, counting the Spark jobs of each. Measured, not
asserted: results go to stdout and to
``bench-results/quality-<events>.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import SILVER_BATCH_METRICS
from medallion.project import Settings, load_settings
from medallion.quality.evaluate import evaluate_batch
from medallion.quality.spec import build_expectation, check_expectations
from medallion.samples.generate import GenerateSpec, generate_landing
from medallion.spark.session import build_session
from tests.events_tables import BRONZE_CUSTOMERS, BRONZE_EVENTS, SILVER_EVENTS, SILVER_QUARANTINE

log = logging.getLogger("bench_quality")
REPO = Path(__file__).resolve().parents[2]


def _settings(landing: Path, lakehouse: Path, gated: bool) -> Settings:
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing=str(landing),
                             lakehouse=str(lakehouse))
    return settings if gated else replace(settings, quality=replace(settings.quality,
                                                                    enabled=False))


def _jobs(spark: SparkSession, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _timed_jobs(spark: SparkSession, group: str, action: Any) -> tuple[float, int, Any]:
    spark.sparkContext.setJobGroup(group, group)
    started = time.monotonic()
    try:
        value = action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return time.monotonic() - started, _jobs(spark, group), value


def _gx_native(frame: DataFrame, settings: Settings) -> Any:
    """Great Expectations' own Spark validation of the same expectations (BASIC results)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_spark("bench").add_dataframe_asset("silver")
    batch_definition = asset.add_batch_definition_whole_dataframe("batch")
    specs = settings.expectations_of(SILVER_EVENTS.key)
    suite = gx.ExpectationSuite(name="silver/events",
                                expectations=[build_expectation(spec) for spec in specs])
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
    return batch.validate(suite, result_format="BASIC")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each variant")
    parser.add_argument("--workdir", help="where to put data (default: a temporary folder)")
    parser.add_argument("--skip-gx-native", action="store_true",
                        help="do not time Great Expectations' own Spark validation")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "great_expectations", "medallion"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-quality-"))
    landing, bronze_home = work / "landing", work / "bronze"
    base = _settings(landing, bronze_home, gated=True)
    check_expectations(base)
    started = time.monotonic()
    generate_landing(landing, GenerateSpec(events=args.events, files=args.files, burst="bench"))
    log.info("generated %d events in %.1fs", args.events, time.monotonic() - started)

    spark = build_session(base, register_tables=False)
    trigger = Trigger.parse("available-now")
    started = time.monotonic()
    run_pipeline(spark, base, RunTarget.BRONZE, trigger)
    log.info("bronze in %.1fs", time.monotonic() - started)

    timings: dict[str, list[float]] = {"plain": [], "gated": []}
    gate_seconds: list[float] = []
    last: dict[str, Settings] = {}
    for repeat in range(args.repeats):
        for variant in ("plain", "gated"):
            lakehouse = work / f"{variant}-{repeat}"
            for spec in (BRONZE_EVENTS, BRONZE_CUSTOMERS):
                shutil.copytree(spec.path(base), spec.path(_settings(landing, lakehouse, True)))
            settings = _settings(landing, lakehouse, gated=variant == "gated")
            started = time.monotonic()
            runs = run_pipeline(spark, settings, RunTarget.SILVER, trigger)
            seconds = time.monotonic() - started
            timings[variant].append(seconds)
            if variant == "gated":
                gate_seconds.append({run.table: run for run in runs}["silver/events"].gate_seconds)
            last[variant] = settings
            log.info("silver %s run %d: %.1fs", variant, repeat, seconds)

    gated = last["gated"]
    read = spark.read.format("delta").load
    bronze_rows = read(BRONZE_EVENTS.path(base)).count()
    silver_rows = {v: read(SILVER_EVENTS.path(s)).count() for v, s in last.items()}
    quarantine_rows = read(SILVER_QUARANTINE.path(gated)).count()
    duplicates = read(SILVER_BATCH_METRICS.path(gated)).agg(
        F.sum("duplicates_removed")).first()[0]  # type: ignore[index]

    silver = read(SILVER_EVENTS.path(gated)).persist()
    silver.count()
    specs = gated.expectations_of(SILVER_EVENTS.key)
    evaluate_batch(silver, specs)  # warm-up: GX import and expectation classes
    single_seconds, single_jobs, evaluation = _timed_jobs(
        spark, "gate-single-pass", lambda: evaluate_batch(silver, specs))
    figures: dict[str, Any] = {
        "events": args.events,
        "bronze_rows": bronze_rows,
        "silver_rows": silver_rows,
        "quarantine_rows_gated": quarantine_rows,
        "duplicates_removed_gated": int(duplicates or 0),
        "invariant_holds": bronze_rows == silver_rows["gated"] + quarantine_rows + int(
            duplicates or 0),
        "silver_seconds": timings,
        "ratio_best": min(timings["gated"]) / min(timings["plain"]),
        "ratio_mean": (sum(timings["gated"]) / len(timings["gated"]))
        / (sum(timings["plain"]) / len(timings["plain"])),
        # Within each gated run: its time over the same run without the gate's own time; it
        # does not depend on how busy the machine was in the other runs.
        "gate_seconds_in_gated_runs": gate_seconds,
        "ratio_within_run": [total / (total - gate) for total, gate in
                             zip(timings["gated"], gate_seconds, strict=True)],
        "expectations": len(specs),
        "gate_single_pass": {"seconds": single_seconds, "spark_jobs": single_jobs,
                             "failed": [r.spec.name for r in evaluation.results if not r.success]},
    }
    if not args.skip_gx_native:
        _gx_native(silver, gated)  # warm-up
        native_seconds, native_jobs, native = _timed_jobs(
            spark, "gate-gx-native", lambda: _gx_native(silver, gated))
        figures["gate_gx_native"] = {"seconds": native_seconds, "spark_jobs": native_jobs,
                                     "success": bool(native.success)}
    silver.unpersist()
    spark.stop()

    out = REPO / "bench-results" / f"quality-{args.events}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2, default=str), encoding="utf-8")
    print(json.dumps(figures, indent=2, default=str))
    print(f"silver with gate / without, best of {args.repeats}: {figures['ratio_best']:.3f}x "
          f"(mean {figures['ratio_mean']:.3f}x) on {args.events} events; within the gated runs: "
          + ", ".join(f"{r:.3f}x" for r in figures["ratio_within_run"]))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
