"""``medallion report``: one self-contained HTML page of charts from the ``_monitoring`` tables.

The charts are inline SVG drawn here (no script, no external link), so the page opens anywhere,
offline: throughput and batch duration per micro-batch, quarantine and duplicate rates per silver
batch, rows dropped behind the watermark, and, for every declared gold table with tumbling or
sliding windows, its first aggregate per window over time (a series per value of its first
grouping column). Collecting the data (:func:`collect_report_data`, through delta-rs: no Spark)
is separate from shaping it (:func:`report_data`, pure) and drawing it (:func:`render_report`,
pure).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from medallion.io.tables import QUERY_PROGRESS, SILVER_BATCH_METRICS, TableSpec
from medallion.pipeline.kinds import WindowKind
from medallion.pipeline.model import GoldSpec
from medallion.project import Settings

Series = Mapping[str, Sequence[tuple[float, float]]]  # name -> [(x, y)]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
MAX_SERIES = len(PALETTE)  # a gold chart shows the groups with the largest totals, this many


@dataclass(frozen=True)
class GoldChart:
    """What to chart of one windowed gold table: ``value`` per ``window_start``, a series per
    value of ``series`` (none: one series, the table)."""

    table: str
    title: str
    value: str
    series: str | None

    @property
    def columns(self) -> tuple[str, ...]:
        return ("window_start", self.value, *((self.series,) if self.series else ()))


def gold_chart(gold: GoldSpec) -> GoldChart | None:
    """The chart of a declared gold table: tumbling or sliding windows with an aggregate (a
    session, a join or a Python step has no window start to put on the axis: none)."""
    window = gold.window
    if window is None or window.kind is WindowKind.SESSION or not gold.aggregates:
        return None
    value = gold.aggregates[0].name
    every = f"{window.size} windows" + (f" every {window.slide}" if window.slide else "")
    return GoldChart(gold.key, f"{gold.key}: {value} per {every}", value,
                     gold.group_by[0] if gold.group_by else None)


@dataclass
class ReportData:
    """Everything the page shows, as plain values."""

    generated_at: datetime
    lakehouse: str
    # per query: [(batch number in order, value)]
    throughput: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    batch_seconds: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    dropped: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # per silver batch, percentages of its rows
    quarantine_rate: list[tuple[float, float]] = field(default_factory=list)
    duplicate_rate: list[tuple[float, float]] = field(default_factory=list)
    # per gold chart: its title, the aggregate it shows and, per series,
    # [(window start as epoch seconds, value)]
    gold: list[tuple[str, str, dict[str, list[tuple[float, float]]]]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)


Rows = list[dict[str, Any]]

PROGRESS_COLUMNS = ("query_name", "batch_timestamp", "processed_rows_per_second",
                    "batch_duration_ms", "rows_dropped_by_watermark", "num_input_rows")
BATCH_COLUMNS = ("recorded_at", "batch_id", "rows_in", "quarantined", "duplicates_removed")


def _sort_key(*values: Any) -> tuple:
    # Spark's ascending ORDER BY: nulls first.
    return tuple(part for v in values for part in (v is not None, v if v is not None else 0))


def report_data(lakehouse: str, generated_at: datetime, progress: Rows | None,
                batches: Rows | None,
                gold: Sequence[tuple[GoldChart, Rows]] = ()) -> ReportData:
    """Shape the monitoring rows (None: the table does not exist) and the rows of each gold table
    that exists into the charts' data."""
    data = ReportData(generated_at, lakehouse)
    if progress is not None:
        rows = sorted((r for r in progress
                       if (r["num_input_rows"] or 0) > 0 or (r["rows_dropped_by_watermark"] or 0) > 0),
                      key=lambda r: _sort_key(r["batch_timestamp"]))
        for row in rows:
            name = row["query_name"]
            n = float(len(data.throughput.get(name, [])) + 1)
            data.throughput.setdefault(name, []).append((n, float(row["processed_rows_per_second"])))
            data.batch_seconds.setdefault(name, []).append((n, row["batch_duration_ms"] / 1000.0))
            if name.startswith("gold/"):
                data.dropped.setdefault(name, []).append((n, float(row["rows_dropped_by_watermark"])))
        data.totals["batches with input"] = len(rows)
    if batches is not None:
        ordered = sorted(batches, key=lambda r: _sort_key(r["recorded_at"], r["batch_id"]))
        for i, row in enumerate(ordered, start=1):
            rows_in = max(int(row["rows_in"]), 1)
            data.quarantine_rate.append((float(i), 100.0 * row["quarantined"] / rows_in))
            data.duplicate_rate.append((float(i), 100.0 * row["duplicates_removed"] / rows_in))
    for chart, rows in gold:
        data.gold.append(_gold_series(chart, rows))
    return data


def _gold_series(chart: GoldChart,
                 rows: Rows) -> tuple[str, str, dict[str, list[tuple[float, float]]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    for row in sorted(rows, key=lambda r: _sort_key(r["window_start"])):
        if row["window_start"] is None or row[chart.value] is None:
            continue
        name = str(row[chart.series]) if chart.series else chart.table
        series.setdefault(name, []).append(
            (float(int(row["window_start"].timestamp())), float(row[chart.value])))
    title = chart.title
    if len(series) > MAX_SERIES:
        largest = sorted(series, key=lambda n: -sum(y for _, y in series[n]))[:MAX_SERIES]
        title += f" (the {MAX_SERIES} {chart.series} of {len(series)} with the largest totals)"
        series = {name: series[name] for name in sorted(largest)}
    return title, chart.value, series


def collect_report_data(settings: Settings) -> ReportData:
    """Read the monitoring and gold tables into a :class:`ReportData` (absent tables: empty)."""
    from medallion.io.deltaread import DeltaReader, read_rows

    house = DeltaReader(settings)

    def read(spec: TableSpec, columns: tuple[str, ...]) -> Rows | None:
        table = house.open(spec.path(settings), spec.key)
        return None if table is None else read_rows(table, columns, spec.key)

    gold = []
    for pipeline, declared in settings.gold_specs():
        chart = gold_chart(declared)
        rows = None if chart is None else read(
            TableSpec.from_decl(pipeline.table(declared.key)), chart.columns)
        if chart is not None and rows is not None:
            gold.append((chart, rows))
    return report_data(settings.paths.lakehouse, datetime.now(timezone.utc),
                       read(QUERY_PROGRESS, PROGRESS_COLUMNS),
                       read(SILVER_BATCH_METRICS, BATCH_COLUMNS), gold)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _label(value: float, as_time: bool) -> str:
    if as_time:
        return datetime.fromtimestamp(value, timezone.utc).strftime("%m-%d %H:%M")
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def line_chart(title: str, series: Series, x_label: str, y_label: str, *, time_axis: bool = False,
               width: int = 540, height: int = 260) -> str:
    """An SVG line chart with markers, axes, ticks and a legend; a note when there is no data."""
    left, right, top, bottom = 60, 180, 30, 45
    points = [p for values in series.values() for p in values]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="{left}" y="18" class="title">{html.escape(title)}</text>']
    if not points:
        parts.append(f'<text x="{left}" y="{height // 2}" class="empty">no data yet</text></svg>')
        return "".join(parts)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0.0, max(ys) * 1.1 or 1.0
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot"/>')
    for y in _ticks(y0, y1):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                     'class="grid"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" class="tick" text-anchor="end">'
                     f'{_label(y, False)}</text>')
    x_ticks = _ticks(x0, x1, 4) if time_axis else sorted({round(t) for t in _ticks(x0, x1, 5)})
    for x in x_ticks:
        parts.append(f'<text x="{sx(x):.1f}" y="{top + plot_h + 16}" class="tick" '
                     f'text-anchor="middle">{_label(x, time_axis)}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" class="axis" '
                 f'text-anchor="middle">{html.escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2:.0f}" class="axis" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + plot_h / 2:.0f})">{html.escape(y_label)}</text>')
    for i, (name, values) in enumerate(sorted(series.items())):
        colour = PALETTE[i % len(PALETTE)]
        ordered = sorted(values)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in ordered)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.6" fill="{colour}">'
                  f'<title>{html.escape(name)}: {_label(y, False)}</title></circle>' for x, y in ordered]
        ly = top + 12 + 16 * i
        parts.append(f'<rect x="{left + plot_w + 12}" y="{ly - 9}" width="10" height="10" '
                     f'fill="{colour}"/><text x="{left + plot_w + 26}" y="{ly}" class="legend">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin-bottom: 4px; } p.meta { color: #666; margin-top: 0; }
section { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #ddd; padding: 8px; border-radius: 4px; }
svg .title { font-size: 14px; font-weight: bold; } svg .tick { font-size: 10px; fill: #555; }
svg .axis { font-size: 11px; fill: #333; } svg .legend { font-size: 11px; }
svg .plot { fill: #fafafa; stroke: #ccc; } svg .grid { stroke: #e5e5e5; }
svg .empty { font-size: 13px; fill: #999; }
"""


def render_report(data: ReportData) -> str:
    """The whole page, self-contained: inline style and inline SVG charts, no script, no links."""
    charts = [
        line_chart("Throughput per micro-batch", data.throughput, "micro-batch (in order)",
                   "rows / second processed"),
        line_chart("Batch duration", data.batch_seconds, "micro-batch (in order)", "seconds"),
        line_chart("Silver: quarantine and duplicate rates",
                   {"quarantined %": data.quarantine_rate, "duplicates %": data.duplicate_rate},
                   "silver micro-batch", "% of rows in"),
        line_chart("Rows dropped behind the watermark", data.dropped, "micro-batch (in order)",
                   "rows"),
        *(line_chart(title, series, "window start (UTC)", value, time_axis=True, width=1098)
          for title, value, series in data.gold),
    ]
    totals = ", ".join(f"{k}: {v}" for k, v in data.totals.items())
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>medallion report</title>", f"<style>{_STYLE}</style></head><body>",
        "<h1>medallion: pipeline report</h1>",
        f'<p class="meta">lakehouse {html.escape(data.lakehouse)}; generated '
        f"{data.generated_at:%Y-%m-%d %H:%M:%S} UTC{'; ' + html.escape(totals) if totals else ''}</p>",
        "<section>", *(f"<figure>{chart}</figure>" for chart in charts), "</section>",
        "</body></html>",
    ])


def write_report(settings: Settings, output: str | Path) -> Path:
    """Collect, render and write the page to ``output``; return its path."""
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(collect_report_data(settings)), encoding="utf-8")
    return path
