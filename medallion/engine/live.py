"""The live progress of a run on a terminal: one line per table, rewritten as its batches commit.

Only when the command's standard error is a terminal (:func:`live_display`); a scheduler's log gets
the one summary table at the end and nothing else. The board (:class:`ProgressBoard`) is pure: it
folds micro-batch progress rows into per-table totals and renders them; the display writes the
rendering to the terminal, moving the cursor back over the previous one.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

BatchCallback = Callable[[Mapping[str, Any]], None]  # one micro-batch's progress row


@dataclass
class TableProgress:
    batches: int = 0
    rows: int = 0


@dataclass
class ProgressBoard:
    """Per table (query name): the batches committed and the rows they read, in start order."""

    tables: dict[str, TableProgress] = field(default_factory=dict)

    def update(self, row: Mapping[str, Any]) -> None:
        """Fold one micro-batch's progress row (``query_name``, ``num_input_rows``) in; a batch
        that read nothing (an idle trigger's) is not counted."""
        table = self.tables.setdefault(str(row["query_name"]), TableProgress())
        rows = int(row.get("num_input_rows") or 0)
        if rows:
            table.batches += 1
            table.rows += rows

    def render(self) -> list[str]:
        """One line per table: ``name  N batches  M rows``, names padded to one width."""
        width = max((len(name) for name in self.tables), default=0)
        return [f"{name.ljust(width)}  {p.batches:>5} batches  {p.rows:>12,} rows"
                for name, p in self.tables.items()]


class TerminalDisplay:
    """Writes the board to a terminal after every update, over its previous rendering."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._board = ProgressBoard()
        self._shown = 0
        self._lock = threading.Lock()  # Spark's listener thread calls in

    def __call__(self, row: Mapping[str, Any]) -> None:
        with self._lock:
            self._board.update(row)
            lines = self._board.render()
            up = f"\x1b[{self._shown}F" if self._shown else ""
            self._stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self._stream.flush()
            self._shown = len(lines)


def live_display(stream: TextIO | None = None) -> BatchCallback | None:
    """A display on ``stream`` (standard error by default) when it is a terminal, else None."""
    stream = stream if stream is not None else sys.stderr
    return TerminalDisplay(stream) if stream.isatty() else None
