"""The live display of a run on a terminal: per-table totals folded from progress rows (pure),
written over the previous rendering, and only when the stream is a terminal."""

from __future__ import annotations

import io
import os
import pty

from medallion.engine.live import ProgressBoard, TerminalDisplay, live_display


def _row(table: str, rows: int) -> dict:
    return {"query_name": table, "num_input_rows": rows, "batch_id": 0}


def test_the_board_counts_batches_that_read_rows_per_table_in_start_order() -> None:
    board = ProgressBoard()
    for row in (_row("bronze/events", 100), _row("silver/events", 0), _row("bronze/events", 40),
                _row("silver/events", 140)):
        board.update(row)
    assert board.render() == [
        "bronze/events      2 batches           140 rows",
        "silver/events      1 batches           140 rows",
    ]


def test_the_display_rewrites_its_lines_in_place() -> None:
    out = io.StringIO()
    display = TerminalDisplay(out)
    display(_row("bronze/a", 1_500))
    display(_row("gold/b", 2))
    text = out.getvalue()
    first, second = text.split("\x1b[1F")  # the second rendering moves up over the first's line
    assert first == "\x1b[2Kbronze/a      1 batches         1,500 rows\n"
    assert second == ("\x1b[2Kbronze/a      1 batches         1,500 rows\n"
                      "\x1b[2Kgold/b        1 batches             2 rows\n")


def test_only_a_terminal_gets_a_display() -> None:
    assert live_display(io.StringIO()) is None
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            assert isinstance(live_display(terminal), TerminalDisplay)
    finally:
        os.close(leader)
        os.close(follower)
