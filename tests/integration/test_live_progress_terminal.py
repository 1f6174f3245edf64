"""`medallion run` with its standard error on a terminal shows each table's batches and rows as
they commit; its standard output, a pipe here, gets the summary table alone."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.reliability.test_crash_recovery import conf_with_small_batches

pytestmark = pytest.mark.slow


def _landing(root: Path) -> tuple[Path, int]:
    """The shipped orders samples, and how many order lines they hold (header lines excluded)."""
    landing = root / "landing"
    for entity in ("orders", "products", "stores"):
        shutil.copytree(REPO / "samples" / "landing" / entity, landing / entity)
    lines = sum(len(f.read_text().splitlines()) - 1 for f in (landing / "orders").glob("*.csv"))
    return landing, lines


def _run(conf: Path, landing: Path, lakehouse: Path, stderr: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "medallion", "run", "all", "--pipeline", "orders", "--conf-dir",
         str(conf), "--landing", str(landing), "--lakehouse", str(lakehouse)],
        stdout=subprocess.PIPE, stderr=stderr, text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})


def test_a_terminal_gets_live_lines_per_table_and_the_pipe_the_summary_alone(tmp_path: Path) -> None:
    conf = conf_with_small_batches(tmp_path)
    landing, order_lines = _landing(tmp_path)

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
    run = _run(conf, landing, tmp_path / "lake-tty", follower)
    os.close(follower)
    out, _ = run.communicate(timeout=600)
    reader.join(timeout=10)
    os.close(leader)
    assert run.returncode == 0, out
    terminal = b"".join(shown).decode(errors="replace")
    # The last rendering of each table's line: what the user sees when the run ends.
    last = {m.group(1): (int(m.group(2)), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"\x1b\[2K(\S+)\s+(\d+) batches\s+([\d,]+) rows", terminal)}
    assert last["bronze/orders"][1] == order_lines
    assert last["bronze/orders"][0] >= 1
    assert set(last) >= {"bronze/orders", "bronze/products", "bronze/stores",
                         "silver/order_lines", "gold/category_revenue_1h", "gold/store_sessions"}
    # stdout is a pipe: the summary table alone, no live lines (test_live_progress.py: a stream
    # that is not a terminal gets no display at all)
    assert out.splitlines()[0].startswith("table") and "\x1b[" not in out
