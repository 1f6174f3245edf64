"""The results of the gates: written to ``<lakehouse>/quality/results``, summarised, rendered.

One row per expectation per checked micro-batch: run, batch, table, expectation, severity,
success, unexpected count, observed value, the GX result as JSON, and when. Analysts query it as
``quality.results``; ``medallion quality`` prints a summary per table, and can render Great
Expectations' Data Docs pages from the stored GX results.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.sinks.delta import append_batch

if TYPE_CHECKING:
    from medallion.quality.evaluate import CheckResult

log = logging.getLogger(__name__)

_ROW_SCHEMA = (
    "run_id STRING, query_id STRING, batch_id BIGINT, table STRING, expectation STRING, "
    "expectation_type STRING, severity STRING, success BOOLEAN, unexpected_count BIGINT, "
    "element_count BIGINT, observed_value STRING, result_json STRING"
)


def record_results(spark: SparkSession, path: str, results: Sequence[CheckResult], *, table: str,
                   run_id: str, query_id: str, batch_id: int, app_id: str) -> None:
    """Append one row per result, once per (``app_id``, ``batch_id``)."""
    rows = [
        (run_id, query_id, batch_id, table, r.spec.name, r.spec.expectation_type,
         r.spec.severity.value, r.success, r.unexpected_count, r.element_count, r.observed,
         json.dumps(r.result_json, default=str, sort_keys=True))
        for r in results
    ]
    frame = spark.createDataFrame(rows, _ROW_SCHEMA).withColumn("validated_at",
                                                                F.current_timestamp())
    append_batch(frame, path, app_id, batch_id)


def read_results(spark: SparkSession, path: str) -> DataFrame:
    """The results table."""
    return spark.read.format("delta").load(path)


def summarise(spark: SparkSession, path: str, batches: int = 20, table: str | None = None
              ) -> list[dict[str, Any]]:
    """Per table and expectation, over each table's ``batches`` most recent checks.

    Each entry: table, expectation, severity, checks, failed, unexpected rows, and the latest
    check's outcome, observed value and time.
    """
    results = read_results(spark, path)
    if table:
        results = results.where(F.col("table") == table)
    checks = results.select("table", "run_id", "batch_id", "validated_at").distinct()
    recent = checks.withColumn("_rank", F.row_number().over(
        _window_by_table())).where(F.col("_rank") <= batches).drop("_rank")
    scoped = results.join(recent, ["table", "run_id", "batch_id", "validated_at"], "left_semi")
    latest = F.max_by(F.struct("success", "observed_value", "validated_at", "run_id", "batch_id"),
                      "validated_at")
    summary = (
        scoped.groupBy("table", "expectation", "severity")
        .agg(F.count(F.lit(1)).alias("checks"),
             F.count_if(~F.col("success")).alias("failed"),
             F.coalesce(F.sum("unexpected_count"), F.lit(0)).alias("unexpected"),
             latest.alias("latest"))
        .orderBy("table", "expectation")
    )
    return [
        {"table": r["table"], "expectation": r["expectation"], "severity": r["severity"],
         "checks": r["checks"], "failed": r["failed"], "unexpected": r["unexpected"],
         "last": "pass" if r["latest"]["success"] else "FAIL",
         "observed": r["latest"]["observed_value"], "when": r["latest"]["validated_at"],
         "batch": f"{r['latest']['run_id']}#{r['latest']['batch_id']}"}
        for r in summary.collect()
    ]


def _window_by_table():  # type: ignore[no-untyped-def]
    from pyspark.sql import Window

    return Window.partitionBy("table").orderBy(F.col("validated_at").desc(),
                                               F.col("batch_id").desc())


def format_summary(entries: Sequence[dict[str, Any]], width: int = 70) -> str:
    """A fixed-width table per gated table: one line per expectation."""
    if not entries:
        return "no quality results yet"
    columns = ("expectation", "severity", "checks", "failed", "unexpected", "last", "observed")
    lines: list[str] = []
    tables = sorted({e["table"] for e in entries})
    for table in tables:
        rows = [
            (e["expectation"], e["severity"], str(e["checks"]), str(e["failed"]),
             str(e["unexpected"]), e["last"], _clip(str(e["observed"]), width))
            for e in entries if e["table"] == table
        ]
        last_check = max(e["when"] for e in entries if e["table"] == table)
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
        lines.append(f"== {table} (last checked {last_check:%Y-%m-%d %H:%M:%S} UTC)")
        lines.append("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        for row in rows:
            lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        lines.append("")
    return "\n".join(lines).rstrip()


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def build_data_docs(spark: SparkSession, path: str, target: str | Path, batches: int = 20,
                    table: str | None = None) -> list[Path]:
    """Render GX Data Docs validation pages of the most recent checks, plus an index page.

    Each checked batch of each table becomes one GX ``ExpectationSuiteValidationResult``, rendered
    by Great Expectations' own page renderer and view. Returns the files written.
    """
    from great_expectations.core.expectation_validation_result import (
        ExpectationSuiteValidationResult,
        ExpectationValidationResult,
    )
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    results = read_results(spark, path)
    if table:
        results = results.where(F.col("table") == table)
    checks = (results.groupBy("table", "run_id", "batch_id")
              .agg(F.max("validated_at").alias("validated_at"),
                   F.collect_list(F.struct("expectation", "severity", "result_json"))
                   .alias("rows"))
              .withColumn("_rank", F.row_number().over(_window_by_table()))
              .where(F.col("_rank") <= batches)
              .orderBy("table", F.col("validated_at").desc())
              .collect())
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    renderer, view = ValidationResultsPageRenderer(), DefaultJinjaPageView()
    written: list[Path] = []
    links: list[str] = []
    for check in checks:
        evrs = [ExpectationValidationResult(**_evr_kwargs(json.loads(row["result_json"])))
                for row in sorted(check["rows"], key=lambda r: r["expectation"])]
        evaluated = len(evrs)
        passed = sum(1 for e in evrs if e.success)
        suite_result = ExpectationSuiteValidationResult(
            success=passed == evaluated,
            results=evrs,
            suite_name=check["table"],
            statistics={"evaluated_expectations": evaluated, "successful_expectations": passed,
                        "unsuccessful_expectations": evaluated - passed,
                        "success_percent": 100.0 * passed / evaluated if evaluated else None},
            meta={"active_batch_definition": {
                      "datasource_name": "medallion", "data_asset_name": check["table"],
                      "batch_definition_name": f"batch {check['batch_id']}"},
                  "run_id": {"run_name": check["run_id"],
                             "run_time": check["validated_at"].isoformat()},
                  "validation_time": check["validated_at"].isoformat()},
        )
        page = view.render(renderer.render(suite_result))
        name = f"{check['table'].replace('/', '_')}-{check['run_id']}-{check['batch_id']}.html"
        (target / name).write_text(page, encoding="utf-8")
        written.append(target / name)
        status = "passed" if suite_result.success else "FAILED"
        links.append(f'<li><a href="{html.escape(name)}">{html.escape(check["table"])} run '
                     f'{html.escape(check["run_id"])} batch {check["batch_id"]}</a>: {status} '
                     f'({passed}/{evaluated})</li>')
    index = target / "index.html"
    index.write_text("<!doctype html><html><head><meta charset='utf-8'><title>Data quality"
                     "</title></head><body><h1>Data quality: recent checks</h1><ul>"
                     + "".join(links) + "</ul></body></html>", encoding="utf-8")
    written.append(index)
    return written


def _evr_kwargs(stored: dict[str, Any]) -> dict[str, Any]:
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    config = stored["expectation_config"]
    return {
        "success": stored["success"],
        "expectation_config": ExpectationConfiguration(
            type=config["type"], kwargs=config["kwargs"], meta=config.get("meta")),
        "result": stored.get("result") or {},
        "meta": stored.get("meta") or {},
        "exception_info": stored.get("exception_info"),
    }
