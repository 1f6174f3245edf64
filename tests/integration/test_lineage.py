"""OpenLineage events of a real run: the ``orders`` pipeline with ``lineage.transport: file`` and
the real listener jar, in a process of its own (the listener is added when the Spark context
starts, so the shared test session cannot have it). The first run's standard error is a terminal:
it shows each table's live line as its batches commit, and its standard output, a pipe, gets the
summary table alone.

Each table's events must name its real inputs and outputs: bronze from its landing folder,
silver from bronze and the dimensions, gold from silver, as far as the listener sees them
(docs/operations.md, "Lineage", says where it does not: a Delta MERGE's source, a write with
nothing new read).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.conf_support import copy_base_conf
from tests.conftest import REPO

PRODUCTS = ["sku,product_name,category", "p1,Espresso beans,coffee", "p2,Green tea,tea"]
STORES = ["store_id,city", "s1,Lyon", "s2,Paris"]
HEADER = "order_id,line_no,store_id,sku,quantity,unit_price,order_date,order_time"
ORDERS_1 = [HEADER, "o1,1,s1,p1,2,10.00,2026-03-02,09:00:00", "o2,1,s2,p2,1,5.50,2026-03-02,09:10:00",
            "o3,1,s1,p2,3,5.50,2026-03-02,10:30:00"]
# Within the watermark of run 1 (its latest line minus 30 minutes), in windows gold already has
# (tea's of 10:00 and 10:30, from o3): category_revenue_1h MERGEs them.
ORDERS_2 = [HEADER, "o4,1,s1,p2,1,5.50,2026-03-02,10:40:00"]

NAMESPACE = "lakehouse-test"


def land(folder: Path, name: str, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_orders(conf: Path, landing: Path, lakehouse: Path, terminal: bool = False) -> tuple[str, str]:
    """``medallion run all --pipeline orders`` in a process of its own: its standard output (a
    pipe) and its standard error (a terminal with ``terminal``, else a pipe)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MEDALLION_JVM_ARCHIVE": "off"}
    command = [sys.executable, "-m", "medallion", "run", "all", "--pipeline", "orders",
               "--conf-dir", str(conf), "--landing", str(landing), "--lakehouse", str(lakehouse)]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr[-5000:]
        return done.stdout, done.stderr
    leader, follower = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, text=True, cwd=REPO,
                           env=env)
    os.close(follower)
    out, _ = run.communicate(timeout=900)
    reader.join(timeout=10)
    os.close(leader)
    said = b"".join(shown).decode(errors="replace")
    assert run.returncode == 0, out + said[-5000:]
    return out, said


def assert_live_lines(terminal: str, out: str, order_lines: int) -> None:
    """A terminal got each table's batches and rows as they committed; the pipe, the summary
    table alone."""
    # The last rendering of each table's line: what the user sees when the run ends.
    last = {m.group(1): (int(m.group(2)), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"\x1b\[2K(\S+)\s+(\d+) batches\s+([\d,]+) rows", terminal)}
    assert last["bronze/orders"][1] == order_lines, last
    assert last["bronze/orders"][0] >= 1
    assert set(last) >= {"bronze/orders", "bronze/products", "bronze/stores",
                         "silver/order_lines", "gold/category_revenue_1h", "gold/store_sessions"}, last
    # stdout is a pipe: the summary table alone, no live lines (test_live_progress.py: a stream
    # that is not a terminal gets no display at all)
    assert out.splitlines()[0].startswith("table") and "\x1b[" not in out


def read_events(file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line]


def names(datasets: Iterable[dict[str, Any]]) -> set[str]:
    """``namespace:name`` of each dataset (``file:/abs/path`` for a local table or folder)."""
    return {f"{d['namespace']}:{d['name']}" for d in datasets}


def writers(events: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The events whose outputs name ``table`` and that name what they read: the writes of its
    rows (its creation names no input)."""
    return [e for e in events if table in names(e.get("outputs", [])) and e.get("inputs")]


def inputs_of(events: list[dict[str, Any]], table: str) -> set[str]:
    return {name for event in writers(events, table) for name in names(event["inputs"])}


@pytest.mark.slow
def test_each_tables_events_name_what_it_read_and_wrote(tmp_path: Path) -> None:
    landing, lakehouse = (tmp_path / "landing").resolve(), (tmp_path / "lakehouse").resolve()
    events_file = tmp_path / "lineage" / "events.jsonl"
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "local.yaml").write_text(
        f"lineage:\n  transport: file\n  path: {events_file}\n  namespace: {NAMESPACE}\n",
        encoding="utf-8")
    land(landing / "products", "products.csv", PRODUCTS)
    land(landing / "stores", "stores.csv", STORES)
    land(landing / "orders", "2026-03-02-a.csv", ORDERS_1)

    # the first run's standard error on a terminal: its live lines too
    out, terminal = run_orders(conf, landing, lakehouse, terminal=True)
    assert_live_lines(terminal, out, len(ORDERS_1) - 1)
    events = read_events(events_file)

    def table(key: str) -> str:
        return f"file:{lakehouse}/{key}"

    # Every job is in the configured namespace; the application's job is named after the
    # pipeline the session ran, and each of its writes' jobs hang under it.
    assert {e["job"]["namespace"] for e in events} == {NAMESPACE}
    applications = {e["job"]["name"] for e in events if "parent" not in e["run"]["facets"]}
    assert applications == {"medallion_orders"}
    assert all(e["job"]["name"].startswith("medallion_orders.") for e in events
               if "parent" in e["run"]["facets"])

    # Bronze: read from its landing folder (a file, or the folder when a batch read several).
    for source in ("orders", "products", "stores"):
        read = inputs_of(events, table(f"bronze/{source}"))
        folder = f"file:{landing}/{source}"
        assert read, f"no event names what bronze/{source} read"
        assert all(name == folder or name.startswith(folder + "/") for name in read), read

    # Silver: from its bronze input and both dimensions (and itself: a batch's duplicates are
    # looked for among the rows already in the table). The quarantine's rows come from the same.
    silver = table("silver/order_lines")
    sources = {table("bronze/orders"), table("bronze/products"), table("bronze/stores")}
    assert sources <= inputs_of(events, silver) <= {*sources, silver}
    assert inputs_of(events, table("silver/order_lines_quarantine")) <= {*sources, silver}
    assert any(e["job"]["name"] == "medallion_orders.execute_save_into_data_source_command."
               "silver_order_lines" for e in writers(events, silver))

    # Gold, appended (each table's first rows): from silver.
    revenue = table("gold/category_revenue_1h")
    assert inputs_of(events, revenue) == {silver}
    assert any(e["job"]["name"].endswith(".gold_category_revenue_1h")
               for e in writers(events, revenue))
    # Sessions are written once the watermark closes them, by a batch that read nothing new:
    # its events name the table written, and no input.
    sessions = table("gold/store_sessions")
    assert any(sessions in names(e.get("outputs", [])) for e in events)
    assert inputs_of(events, sessions) <= {silver}

    # A second run: new order lines for windows gold already holds, so gold MERGEs them.
    events_file.write_text("", encoding="utf-8")
    land(landing / "orders", "2026-03-02-b.csv", ORDERS_2)
    run_orders(conf, landing, lakehouse)
    events = read_events(events_file)
    assert inputs_of(events, table("bronze/orders")) == {
        f"file:{landing}/orders/2026-03-02-b.csv"}  # the new file alone
    assert sources <= inputs_of(events, silver) <= {*sources, silver}
    # A Delta MERGE's events name the table merged into (as output, and as the input the MERGE
    # reads), never its source: the batch's rows from silver are not in them.
    merges = [e for e in events if "merge_into_command" in e["job"]["name"]]
    assert merges, "no MERGE event"
    assert {frozenset(names(e["outputs"])) for e in merges} == {frozenset({revenue})}
    assert inputs_of(merges, revenue) == {revenue}
