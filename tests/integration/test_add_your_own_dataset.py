"""The README's five-minute tour and its "Add your own dataset", followed literally in one working
folder: the tour's commands run as a user types them (``make clean`` included), then the
dataset's YAML written into the configuration folder, its files dropped into the landing zone,
and its commands run. The tables are checked against values this test computes by itself: the
events with the independent model in ``tests/reference.py``, the orders from the same CSV text
with Python's csv, decimal and zoneinfo (no Spark, nothing of the engine).
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
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from deltalake import DeltaTable

from tests.conf_support import REPO, REPO_CONF
from tests.reference import Lakehouse, read_lines, read_segments

TOUR = "## A five-minute tour"
SECTION = "## Add your own dataset"
PARIS = ZoneInfo("Europe/Paris")
CENT = Decimal("0.01")


def _section(heading: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(heading)
    return text[start:text.index("\n## ", start + len(heading))]


def _commands(section: str) -> list[str]:
    """The lines of the section's ``sh`` blocks, as written (comments included)."""
    return [line.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)
            for line in block.splitlines() if line.strip()]


def walkthrough() -> tuple[dict[str, str], list[str]]:
    """The section's files (``path -> text``) and its shell commands, as the README writes them."""
    section = _section(SECTION)
    files = {path: body for path, body in
             re.findall(r"^`([^`\s]+)`:\n\n```\w+\n(.*?)^```", section, re.S | re.M)}
    return files, _commands(section)


def tour() -> list[str]:
    """The five-minute tour's shell commands, as the README writes them."""
    return _commands(_section(TOUR))


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


# --- the run: the tour, then the dataset, in one working folder ----------------------------

def _table(lakehouse: Path, key: str) -> list[dict]:
    return DeltaTable(str(lakehouse / key)).to_pyarrow_table().to_pylist()


def _versions(lakehouse: Path) -> dict[str, int]:
    """Every Delta table under the lakehouse and its version."""
    return {str(log.parent.relative_to(lakehouse)): DeltaTable(str(log.parent)).version()
            for log in lakehouse.rglob("_delta_log") if "_checkpoints" not in log.parts}


class Walk:
    """What running the README's commands left: each command's output, and the table versions
    after each ``run``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "conf"
        self.landing = root / "data" / "landing"  # the configuration's default, from root
        self.lakehouse = root / "data" / "lakehouse"
        self.outputs: dict[str, str] = {}
        self.versions_after_run: list[dict[str, int]] = []
        self.env = {k: v for k, v in os.environ.items()
                    if k not in {"MEDALLION_LANDING", "MEDALLION_LAKEHOUSE", "MEDALLION_ENV",
                                 "MEDALLION_READ_FROM", "MEDALLION_CONF_DIR"}}
        self.env.update({"MEDALLION_CONF_DIR": str(self.conf), "SPARK_LOCAL_IP": "127.0.0.1"})

    def run(self, command: str) -> str:
        argv = shlex.split(command, comments=True)
        if argv == ["make", "clean"]:  # the repo's own target, in this working folder
            argv = ["make", "-s", "-f", str(REPO / "Makefile"), "clean", "DATA=data"]
        else:
            assert argv[0] == ".venv/bin/medallion", command
            argv = [sys.executable, "-m", "medallion", *argv[1:]]
        done = subprocess.run(argv, cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, (command, done.stderr[-4000:])
        self.outputs[command] = done.stdout
        if argv[3:5] == ["run", "all"]:
            self.versions_after_run.append(_versions(self.lakehouse))
        return done.stdout


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    """The tour, then the dataset, as the README writes them, in one fresh working folder whose
    configuration is the repo's settings with ``events`` declared; the dataset adds ``orders``."""
    walk = Walk(tmp_path_factory.mktemp("readme"))
    (walk.conf / "pipelines").mkdir(parents=True)
    for settings in REPO_CONF.glob("*.yaml"):
        shutil.copy(settings, walk.conf / settings.name)
    for declared in (REPO_CONF / "pipelines").glob("events*.yaml"):
        shutil.copy(declared, walk.conf / "pipelines" / declared.name)
    (walk.root / "data" / "stale").mkdir(parents=True)  # what make clean must remove

    for command in tour():
        walk.run(command)
        if shlex.split(command, comments=True) == ["make", "clean"]:
            assert not (walk.root / "data").exists()

    files, commands = walkthrough()
    for path, body in files.items():
        target = walk.conf / path.removeprefix("conf/") if path.startswith("conf/") else walk.landing / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    for command in commands:
        walk.run(command)
    yield walk


def test_the_tour_runs_as_written(walk: Walk) -> None:
    commands = tour()
    assert shlex.split(commands[0], comments=True) == ["make", "clean"]
    verbs = [shlex.split(c, comments=True)[1:3] for c in commands[1:]]
    assert verbs[0][0] == "generate" and verbs.count(["run", "all"]) == 2 and verbs[-1][0] == "sql"

    model = Lakehouse()  # one run over everything generate wrote: one batch per layer
    model.run(read_lines((walk.landing / "events").rglob("*.json")),
              read_segments((walk.landing / "customers").rglob("*.csv")))
    assert model.quarantined > 0 and model.duplicates > 0  # the sample exercises both
    assert len(_table(walk.lakehouse, "bronze/events")) == len(model.bronze_lines)
    assert {r["event_id"] for r in _table(walk.lakehouse, "silver/events")} == set(model.silver)
    assert len(_table(walk.lakehouse, "silver/events_quarantine")) == model.quarantined

    first, second = walk.versions_after_run[:2]
    assert first == second  # the second run found nothing new and committed nothing

    shown = walk.outputs[commands[3]]
    for table in ("event_counts_5m", "user_activity_sliding", "user_sessions",
                  "segment_revenue_1h", "purchase_attribution"):
        assert f"gold.{table}" in shown, shown
    assert "bronze/events" in walk.outputs[commands[4]]

    answer = walk.outputs[commands[-1]]  # events per type, as gold counts them
    for kind, count in Counter(e.event_type for e in model.silver.values()).items():
        assert re.search(rf"\b{kind}\b[^\d\n]*\b{count}\b", answer), (kind, count, answer)


def test_the_readme_walkthrough_runs_as_written(walk: Walk) -> None:
    files, commands = walkthrough()
    assert set(files) == {"conf/pipelines/orders.yaml", "orders/2026-03-02.csv",
                          "products/products.csv", "stores/stores.csv"}, files.keys()
    assert commands == [
        ".venv/bin/medallion run all",
        '.venv/bin/medallion sql "SELECT * FROM gold.category_revenue_1h ORDER BY window_start, category"',
    ]
    lakehouse = walk.lakehouse

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

    shown = walk.outputs[commands[1]]  # the SQL answer the walkthrough shows
    for category in {line["category"] for line in lines}:
        assert category in shown, shown
