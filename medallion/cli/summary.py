"""A readable summary of what a run did, per table."""

from __future__ import annotations

from collections.abc import Sequence

from medallion.engine.streaming import TableRun

_COLUMNS = ("table", "batches", "rows in", "rows out", "quarantined", "duplicates", "late dropped",
            "seconds")


def format_summary(runs: Sequence[TableRun]) -> str:
    """A fixed-width table: one line per table, then any notes."""
    rows = [
        (run.table, str(run.batches), str(run.rows_in), str(run.rows_out), str(run.quarantined),
         str(run.duplicates_removed), str(run.late_rows_dropped), f"{run.seconds:.1f}")
        for run in runs
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(_COLUMNS, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(row, widths, strict=True))))
    lines += [f"note: {run.table}: {run.note}" for run in runs if run.note]
    return "\n".join(lines)
