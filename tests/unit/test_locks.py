"""Lakehouse locks: a second writer of a layer waits or stops with one line; no JVM needed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from medallion.cli.main import main
from medallion.io.locks import LakehouseBusyError, hold_writers
from tests.conftest import REPO

HOLDER = """
import sys, time
from medallion.io.locks import hold_writers
hold_writers(sys.argv[1], tuple(sys.argv[3].split(",")), 0)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_in_another_process(lakehouse: Path, seconds: float, layers: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lakehouse), str(seconds), layers],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_writer_of_a_layer_stops_at_once_naming_the_holder(tmp_path: Path) -> None:
    holder = _hold_in_another_process(tmp_path, 30, "silver")
    try:
        with pytest.raises(LakehouseBusyError, match=rf"silver layer .* pid {holder.pid}"):
            hold_writers(str(tmp_path), ("silver",), wait_seconds=0)
    finally:
        holder.kill()
        holder.wait()


def test_a_second_writer_waits_for_the_first_to_end(tmp_path: Path) -> None:
    holder = _hold_in_another_process(tmp_path, 2, "gold")
    try:
        started = time.monotonic()
        hold_writers(str(tmp_path), ("gold",), wait_seconds=60)
        assert time.monotonic() - started >= 1.0  # it did wait for the holder to finish
    finally:
        holder.wait()


def test_different_layers_run_side_by_side(tmp_path: Path) -> None:
    holder = _hold_in_another_process(tmp_path, 30, "bronze")
    try:
        hold_writers(str(tmp_path / "."), ("gold",), wait_seconds=0)  # no wait, no error
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = _hold_in_another_process(tmp_path, 30, "bronze,silver,gold,publish")
    holder.kill()  # SIGKILL: the kernel releases flock locks with the process
    holder.wait()
    hold_writers(str(tmp_path / "x" / ".."), wait_seconds=0)


def test_run_exits_3_with_one_line_before_starting_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lakehouse = tmp_path / "lakehouse"
    holder = _hold_in_another_process(lakehouse, 30, "bronze")
    try:
        status = main(["run", "all", "--wait", "0", "--conf-dir", str(REPO / "conf"),
                       "--landing", str(tmp_path / "landing"), "--lakehouse", str(lakehouse)])
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 3
    assert len(err) == 1 and err[0].startswith("medallion: busy: the bronze layer of "), err
    assert f"pid {holder.pid}" in err[0]
    assert not (lakehouse / "bronze").exists()  # nothing was started, nothing written
