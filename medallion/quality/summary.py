"""``medallion quality``: recent gate results per table, and Great Expectations' Data Docs pages.

Read from ``<lakehouse>/quality/results`` through delta-rs (:func:`read_results`, the only part
that touches storage), no Spark; summarising and grouping are pure functions over its rows.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from medallion.project import Settings

Row = dict[str, Any]

SUMMARY_COLUMNS = ("table", "run_id", "batch_id", "validated_at", "expectation", "severity",
                   "success", "unexpected_count", "observed_value")
DOCS_COLUMNS = ("table", "run_id", "batch_id", "validated_at", "expectation", "severity",
                "result_json")


def read_results(settings: Settings, columns: Sequence[str] = SUMMARY_COLUMNS,
                 table: str | None = None) -> list[Row] | None:
    """The results table's rows (only ``columns``; only ``table``'s if given); None if none yet."""
    from medallion.io.deltaread import DeltaReader, read_rows
    from medallion.io.tables import QUALITY_RESULTS

    opened = DeltaReader(settings).open(QUALITY_RESULTS.path(settings), QUALITY_RESULTS.key)
    if opened is None:
        return None
    rows = read_rows(opened, columns, QUALITY_RESULTS.key)
    return [r for r in rows if r["table"] == table] if table else rows


def _newest_first(key: tuple[Any, ...]) -> tuple[Any, ...]:
    # (validated_at, batch_id) descending, as the Spark window ordered them; None last.
    validated_at, batch_id = key
    return (validated_at is not None, validated_at or datetime.min,
            batch_id if batch_id is not None else -1)


def recent(rows: Iterable[Row], batches: int, key: Sequence[str]) -> dict[str, list[tuple]]:
    """Per table, the ``batches`` most recent checks (values of ``key`` after the table), newest
    first by check time, then batch id."""
    checks: dict[str, dict[tuple, tuple]] = {}
    for row in rows:
        check = tuple(row[k] for k in key)
        checks.setdefault(row["table"], {})[check] = (row["validated_at"], row["batch_id"])
    return {table: sorted(found, key=lambda c: _newest_first(found[c]), reverse=True)[:batches]
            for table, found in checks.items()}


def summarise(rows: Sequence[Row], batches: int = 20, table: str | None = None) -> list[Row]:
    """Per table and expectation, over each table's ``batches`` most recent checks.

    Each entry: table, expectation, severity, checks, failed, unexpected rows, and the latest
    check's outcome, observed value and time. Sorted by table and expectation.
    """
    key = ("run_id", "batch_id", "validated_at")
    scoped = rows if table is None else [r for r in rows if r["table"] == table]
    kept = {(t, *check) for t, checks in recent(scoped, batches, key).items() for check in checks}
    groups: dict[tuple, list[Row]] = {}
    for row in scoped:
        if (row["table"], *(row[k] for k in key)) in kept:
            groups.setdefault((row["table"], row["expectation"], row["severity"]), []).append(row)
    entries = []
    for (name, expectation, severity), group in sorted(
            groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] or "")):
        latest = max(group, key=lambda r: (r["validated_at"] is not None,
                                           r["validated_at"] or datetime.min))
        entries.append({
            "table": name, "expectation": expectation, "severity": severity,
            "checks": len(group), "failed": sum(1 for r in group if r["success"] is False),
            "unexpected": sum(r["unexpected_count"] or 0 for r in group),
            "last": "pass" if latest["success"] else "FAIL",
            "observed": latest["observed_value"], "when": latest["validated_at"],
            "batch": f"{latest['run_id']}#{latest['batch_id']}",
        })
    return entries


def format_summary(entries: Sequence[Row], width: int = 70) -> str:
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


def group_checks(rows: Sequence[Row], batches: int = 20, table: str | None = None) -> list[Row]:
    """The ``batches`` most recent checked batches per table, each with its result rows.

    A check is one (table, run, batch), checked at its newest ``validated_at``; sorted by table,
    newest first.
    """
    scoped = rows if table is None else [r for r in rows if r["table"] == table]
    checks: dict[tuple, Row] = {}
    for row in scoped:
        check = checks.setdefault((row["table"], row["run_id"], row["batch_id"]), {
            "table": row["table"], "run_id": row["run_id"], "batch_id": row["batch_id"],
            "validated_at": row["validated_at"], "rows": []})
        if row["validated_at"] is not None and (check["validated_at"] is None
                                                or row["validated_at"] > check["validated_at"]):
            check["validated_at"] = row["validated_at"]
        check["rows"].append({k: row[k] for k in ("expectation", "severity", "result_json")})
    per_table: dict[str, list[Row]] = {}
    for check in checks.values():
        per_table.setdefault(check["table"], []).append(check)
    kept = []
    for name in sorted(per_table):
        newest = sorted(per_table[name], reverse=True,
                        key=lambda c: _newest_first((c["validated_at"], c["batch_id"])))
        kept += newest[:batches]
    return kept


def build_data_docs(checks: Sequence[Row], target: str | Path) -> list[Path]:
    """Render GX Data Docs validation pages of ``checks`` (:func:`group_checks`), plus an index.

    Each checked batch of each table becomes one GX ``ExpectationSuiteValidationResult``, rendered
    by Great Expectations' own page renderer and view. Returns the files written, the index last.
    """
    from great_expectations.core.expectation_validation_result import (
        ExpectationSuiteValidationResult,
        ExpectationValidationResult,
    )
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

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
