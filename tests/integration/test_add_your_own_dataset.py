"""The README's "Add your own dataset", followed literally: its YAML copied into a fresh configuration
folder, its files dropped into the landing zone, its commands run as a user runs them; then the
tables are checked against values this test computes from the same CSV text by itself (Python's
csv, decimal and zoneinfo; no Spark, nothing of the engine).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from deltalake import DeltaTable

from tests.conf_support import REPO, REPO_CONF

SECTION = "## Add your own dataset"
PARIS = ZoneInfo("Europe/Paris")
CENT = Decimal("0.01")


def walkthrough() -> tuple[dict[str, str], list[str]]:
    """The section's files (``path -> text``) and its shell commands, as the README writes them."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    section = text[start:text.index("\n## ", start + len(SECTION))]
    files = {path: body for path, body in
             re.findall(r"^`([^`\s]+)`:\n\n```\w+\n(.*?)^```", section, re.S | re.M)}
    commands = [line.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)
                for line in block.splitlines() if line.strip()]
    return files, commands


# --- the reference: what the walkthrough promises, computed from the CSV text -----------------

def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def expected_order_lines(files: dict[str, str]) -> tuple[list[dict], dict[str, list[str]], int]:
    """Valid lines (typed, enriched), quarantined order ids with their reasons, duplicates removed."""
    products = {r["sku"].strip(): r for r in _rows(files["products/products.csv"])}
    stores = {r["store_id"].strip(): r for r in _rows(files["stores/stores.csv"])}
    valid, quarantined, seen, duplicates = [], {}, set(), 0
    for row in _rows(files["orders/2026-03-02.csv"]):
        reasons = []
        quantity = int(row["quantity"])
        price = Decimal(row["unit_price"])
        if quantity <= 0:
            reasons.append("non_positive_quantity")
        try:
            local = datetime.strptime(f"{row['order_date']} {row['order_time']}", "%Y-%m-%d %H:%M:%S")
            ordered_at = local.replace(tzinfo=PARIS).astimezone(timezone.utc)
        except ValueError:
            reasons.append("invalid_ordered_at")
        if reasons:
            quarantined[row["order_id"]] = reasons
            continue
        key = (row["order_id"], int(row["line_no"]))
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        total = (quantity * price).quantize(CENT)
        if total < 0:  # the drop expectation, after deduplication
            quarantined[row["order_id"]] = ["line_total_not_negative"]
            continue
        product = products.get(row["sku"].strip())
        store = stores.get(row["store_id"].strip())
        valid.append({"order_id": key[0], "line_no": key[1], "store_id": row["store_id"].strip(),
                      "quantity": quantity, "line_total": total, "ordered_at": ordered_at,
                      "category": product["category"] if product else "uncategorised",
                      "city": store["city"] if store else "unknown"})
    return valid, quarantined, duplicates


def expected_category_revenue(lines: list[dict]) -> set[tuple]:
    """One-hour windows sliding every 30 minutes: both windows holding each line."""
    windows: dict[tuple, list] = defaultdict(lambda: [0, 0, Decimal(0)])
    for line in lines:
        t = line["ordered_at"]
        floor = t.replace(minute=t.minute - t.minute % 30, second=0, microsecond=0)
        for start in (floor - timedelta(minutes=30), floor):
            window = windows[(start, start + timedelta(hours=1), line["category"])]
            window[0] += 1
            window[1] += line["quantity"]
            window[2] += line["line_total"]
    return {(*key, lines_, units, revenue) for key, (lines_, units, revenue) in windows.items()}


def expected_sessions(lines: list[dict], watermark: timedelta) -> set[tuple]:
    """Sessions (20-minute gap) per store and city that the watermark has closed."""
    closed_before = max(line["ordered_at"] for line in lines) - watermark
    by_store: dict[tuple, list[dict]] = defaultdict(list)
    for line in lines:
        by_store[(line["store_id"], line["city"])].append(line)
    sessions = set()
    gap = timedelta(minutes=20)
    for (store, city), rows in by_store.items():
        rows.sort(key=lambda r: r["ordered_at"])
        current: list[dict] = []
        for row in [*rows, None]:
            if current and (row is None or row["ordered_at"] >= current[-1]["ordered_at"] + gap):
                end = current[-1]["ordered_at"] + gap
                if end <= closed_before:
                    sessions.add((store, city, current[0]["ordered_at"], end, len(current),
                                  len({r["order_id"] for r in current}),
                                  sum((r["line_total"] for r in current), Decimal(0))))
                current = []
            if row is not None:
                current.append(row)
    return sessions


def test_the_shipped_orders_pipeline_is_the_walkthrough() -> None:
    """``conf/pipelines/orders.yaml`` and ``samples/landing/`` (what ``make run`` lands) are the
    walkthrough's files, so the tested walkthrough is the second pipeline ``make run`` runs."""
    files, _ = walkthrough()
    for path, body in files.items():
        shipped = REPO / path if path.startswith("conf/") else REPO / "samples" / "landing" / path
        assert shipped.read_text() == body, path


# --- the run --------------------------------------------------------------------------------

def _table(lakehouse: Path, key: str) -> list[dict]:
    return DeltaTable(str(lakehouse / key)).to_pyarrow_table().to_pylist()


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    files, commands = walkthrough()
    conf, landing, lakehouse = tmp_path / "conf", tmp_path / "landing", tmp_path / "lakehouse"
    (conf / "pipelines").mkdir(parents=True)
    for settings in REPO_CONF.glob("*.yaml"):  # the settings; pipelines/ holds only the new one
        shutil.copy(settings, conf / settings.name)
    assert set(files) == {"conf/pipelines/orders.yaml", "orders/2026-03-02.csv",
                          "products/products.csv", "stores/stores.csv"}, files.keys()
    for path, body in files.items():
        target = conf / path.removeprefix("conf/") if path.startswith("conf/") else landing / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    assert commands == [
        ".venv/bin/medallion run all",
        '.venv/bin/medallion sql "SELECT * FROM gold.category_revenue_1h ORDER BY window_start, category"',
    ]
    env = {**os.environ, "MEDALLION_CONF_DIR": str(conf), "MEDALLION_LANDING": str(landing),
           "MEDALLION_LAKEHOUSE": str(lakehouse), "SPARK_LOCAL_IP": "127.0.0.1"}
    outputs = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/medallion"
        done = subprocess.run([sys.executable, "-m", "medallion", *argv[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]
        outputs.append(done.stdout)

    lines, quarantined, duplicates = expected_order_lines(files)
    silver = _table(lakehouse, "silver/order_lines")
    assert sorted((r["order_id"], r["line_no"], r["category"], r["city"], r["line_total"],
                   r["ordered_at"]) for r in silver) == sorted(
        (r["order_id"], r["line_no"], r["category"], r["city"], r["line_total"], r["ordered_at"])
        for r in lines)
    quarantine = _table(lakehouse, "silver/order_lines_quarantine")
    assert {r["order_id"]: list(r["reasons"]) for r in quarantine} == quarantined
    raw = {r["order_id"]: r for r in _rows(files["orders/2026-03-02.csv"])}
    for row in quarantine:  # the line as it arrived, every field as text
        assert row["order_time"] == raw[row["order_id"]]["order_time"]
        assert row["quantity"] == raw[row["order_id"]]["quantity"]
    bronze = _table(lakehouse, "bronze/orders")
    assert len(bronze) == len(silver) + len(quarantine) + duplicates
    metrics = _table(lakehouse, "_monitoring/silver_batches")
    assert sum(r["duplicates_removed"] for r in metrics
               if r["table"] == "silver/order_lines") == duplicates == 1

    revenue = {(r["window_start"], r["window_end"], r["category"], r["lines"], r["units"],
                r["revenue"]) for r in _table(lakehouse, "gold/category_revenue_1h")}
    assert revenue == expected_category_revenue(lines)
    sessions = {(r["store_id"], r["city"], r["session_start"], r["session_end"], r["lines"],
                 r["orders"], r["revenue"]) for r in _table(lakehouse, "gold/store_sessions")}
    assert sessions == expected_sessions(lines, timedelta(minutes=30))
    assert len(sessions) == 4  # s1 twice, s2 twice; s3's session is still open

    shown = outputs[1]  # the SQL answer the walkthrough shows
    for category in {line["category"] for line in lines}:
        assert category in shown, shown
