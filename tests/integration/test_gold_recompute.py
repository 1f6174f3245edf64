"""Gold kept by recompute (``refresh: recompute``, the default in mode update): the events
pipeline's tumbling, sliding and session tables recomputed from silver, against the independent
model over every silver event, late ones included; a changed declaration and a lost checkpoint
recompute the table."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.ops.plan import Verdict, collect_plan
from medallion.project import Settings, load_settings
from medallion.samples.generate import (
    GenerateSpec,
    generate_customer_rows,
    generate_event_lines,
    generate_landing,
    write_atomically,
)
from tests.conf_support import REPO_CONF
from tests.events_tables import (
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
)
from tests.lakehouse_views import _set, rows
from tests.reference import WATERMARK, Lakehouse, read_lines, read_segments

START = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
RECOMPUTED = ("event_counts_5m", "user_activity_sliding", "user_sessions")
CLOSED_COUNTS = dataclasses.replace(GOLD_EVENT_COUNTS_5M, name="event_counts_5m_closed")


def recompute_conf(conf: Path, counts_filter: str | None = None, closed_counts: bool = False
                   ) -> Path:
    """The repo's configuration with the events pipeline's sessions in mode update (recomputed,
    open sessions too, like the tumbling and sliding tables), and its hourly revenue kept by a
    stateful query beside them. ``closed_counts``: with ``gold.event_counts_5m_closed`` too, the
    tumbling counts in mode append, recomputed."""
    shutil.copytree(REPO_CONF, conf, dirs_exist_ok=True)
    events = conf / "pipelines" / "events.yaml"
    text = events.read_text(encoding="utf-8")
    text = text.replace("\n  segment_revenue_1h:\n",
                        "\n  segment_revenue_1h:\n    refresh: stateful\n", 1)
    text = text.replace("    mode: append                    # closed sessions only",
                        "    mode: update                    # every session", 1)
    if counts_filter is not None:
        text = text.replace("  event_counts_5m:\n",
                            f"  event_counts_5m:\n    filter: \"{counts_filter}\"\n", 1)
    if closed_counts:
        tree = yaml.safe_load(text)
        closed = copy.deepcopy(tree["gold"]["event_counts_5m"])
        closed.update(mode="append", refresh="recompute",
                      comment="Closed 5-minute windows, appended once.")
        tree["gold"]["event_counts_5m_closed"] = closed
        text = yaml.safe_dump(tree, sort_keys=False)
    events.write_text(text, encoding="utf-8")
    return conf


def recompute_settings(root: Path, conf: Path) -> Settings:
    """The events pipeline alone, each silver and gold batch one file of its input."""
    loaded = load_settings(env="local", conf_dir=conf, landing=str(root / "landing"),
                           lakehouse=str(root / "lakehouse"))
    return dataclasses.replace(
        loaded, pipelines=(loaded.pipeline("events"),),
        streaming=dataclasses.replace(loaded.streaming, max_files_per_trigger=1))


def assert_exact(spark: SparkSession, settings: Settings, model: Lakehouse) -> None:
    """Every recomputed table holds what the model computes over every silver event."""
    assert _set(rows(spark, settings, GOLD_EVENT_COUNTS_5M)) == model.exact_event_counts_5m()
    assert _set(rows(spark, settings, GOLD_USER_ACTIVITY_SLIDING)) == \
        model.exact_user_activity_sliding()
    assert _set(rows(spark, settings, GOLD_USER_SESSIONS)) == model.exact_user_sessions()


def stragglers(burst: str, start: datetime, count: int) -> list[str]:
    """Purchases of one user a minute apart from ``start``: late ones when it is long past."""
    return [json.dumps({"event_id": f"{burst}-{i}", "user_id": "u0003", "event_type": "purchase",
                        "timestamp": (start + timedelta(minutes=i)).isoformat(), "amount": 2.5})
            for i in range(count)]


def test_recomputed_windows_and_sessions_equal_the_model_late_data_included(
        spark: SparkSession, tmp_path: Path) -> None:
    """Beside them, ``event_counts_5m_closed`` (mode append, recomputed): each window appended
    once the watermark, kept by silver's versions, passes its end, and rows of windows closed
    before they came refused and counted: what the stateful append query gives, which the model
    gives too."""
    conf = recompute_conf(tmp_path / "conf", closed_counts=True)
    settings = recompute_settings(tmp_path, conf)
    landing = Path(settings.paths.landing)
    model = Lakehouse()

    def closed() -> set[tuple[object, ...]]:
        """The model's 5-minute windows (of the rows the watermark in force when they came
        kept) that its watermark has closed."""
        assert model.max_event_time is not None
        return {w for w in model.event_counts_5m() if w[1] <= model.max_event_time - WATERMARK}

    # Half an hour of events: the watermark closes the windows of its first 20 minutes.
    first = GenerateSpec(events=600, files=2, users=20, burst="b1", start=START,
                         seconds_between_events=3, seed=21)
    written = generate_landing(landing, first)
    runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger())}
    model.run(read_lines(p for p in written if p.suffix == ".json"),
              read_segments(p for p in written if p.suffix == ".csv"))
    assert_exact(spark, settings, model)
    assert closed() and _set(rows(spark, settings, CLOSED_COUNTS)) == closed()
    # The run's summary counts what each table read, though the first batch reads silver whole.
    assert [runs[f"gold/{t}"].rows_in for t in (*RECOMPUTED, CLOSED_COUNTS.name)] == \
        [len(model.silver)] * 4
    # No state store: the checkpoints hold the streams' offsets only.
    checkpoints = Path(settings.paths.lakehouse) / "_checkpoints" / "gold"
    assert [table for table in (*RECOMPUTED, CLOSED_COUNTS.name)
            if (checkpoints / table / "state").exists()] == []
    assert (checkpoints / "segment_revenue_1h" / "state").exists()  # stateful, as declared

    # Burst 2: the next 15 minutes; events from 10:10, long after, that join and bridge the
    # first burst's sessions (the first five in windows already appended, refused by the closed
    # table; the others in windows still open); and a burst two days older than everything, far
    # behind any watermark.
    second = GenerateSpec(events=300, files=2, users=20, burst="b2",
                          start=START + timedelta(minutes=30), seconds_between_events=3, seed=22)
    written2 = generate_landing(landing, second, with_customers=False)
    late = landing / "events" / "b2-late.json"
    write_atomically(late, stragglers("late", START + timedelta(minutes=10), 12))
    old = landing / "events" / "b2-two-days-old.json"
    write_atomically(old, stragglers("old", START - timedelta(days=2), 8))
    silver_before, refused_before = len(model.silver), model.late_dropped
    runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger())}
    model.run(read_lines([*(p for p in written2 if p.suffix == ".json"), late, old]), {})
    assert model.late_dropped - refused_before == 5 + 8  # in 5-minute windows, as the table's
    assert_exact(spark, settings, model)
    assert runs[f"gold/{CLOSED_COUNTS.name}"].late_rows_dropped == 5 + 8
    appended = rows(spark, settings, CLOSED_COUNTS)
    assert len(appended) == len(_set(appended)) and _set(appended) == closed()
    # Appended only, once per batch: no row of it ever replaced or deleted.
    history = DeltaTable.forPath(spark, CLOSED_COUNTS.path(settings)).history().collect()
    assert {(h["operation"], h["operationParameters"]["mode"])
            for h in history if h["version"] > 0} == {("WRITE", "Append")}
    # Each new silver row counted once, however many times the batch reads what it located.
    assert ([runs[f"gold/{t}"].rows_in for t in RECOMPUTED]
            == [len(model.silver) - silver_before] * 3)
    # The stateful table beside them keeps today's semantics (late rows behind the watermark
    # dropped), which the model gives too.
    assert _set(rows(spark, settings, GOLD_SEGMENT_REVENUE_1H)) == model.segment_revenue_1h()

    # A run without new input changes nothing.
    versions = {t: DeltaTable.forPath(spark, f"{settings.paths.lakehouse}/gold/{t}")
                .history(1).first()["version"] for t in RECOMPUTED}
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert {t: DeltaTable.forPath(spark, f"{settings.paths.lakehouse}/gold/{t}")
            .history(1).first()["version"] for t in RECOMPUTED} == versions

    # A changed watermark would move which windows are final: the closed table is refused until
    # a full refresh, where the tables recomputed in place would be recomputed.
    events = conf / "pipelines" / "events.yaml"
    events.write_text(events.read_text(encoding="utf-8").replace(
        "watermark: 10 minutes", "watermark: 20 minutes", 1), encoding="utf-8")
    plan = {p.table: p for p in collect_plan(recompute_settings(tmp_path, conf))}
    assert plan[CLOSED_COUNTS.key].verdict is Verdict.NEEDS_REFRESH
    assert any("watermark" in change for change in plan[CLOSED_COUNTS.key].changes)


def test_random_batch_boundaries_give_the_tables_the_model_gives(
        spark: SparkSession, tmp_path: Path) -> None:
    """One history of events, some of them hours late, cut at random: into landing files of
    random sizes, the files into runs, each run's batches a random number of files. Whatever the
    cuts, the recomputed tables equal the model over every silver event after each run."""
    rng = random.Random(41)
    settings = recompute_settings(tmp_path, recompute_conf(tmp_path / "conf"))
    landing = Path(settings.paths.landing)
    spec = GenerateSpec(events=360, users=12, start=START, seconds_between_events=5, seed=41,
                        burst="r")
    lines = list(generate_event_lines(spec))
    for late in stragglers("hours", START - timedelta(hours=3), 6) + stragglers(
            "day", START - timedelta(days=1), 4):
        lines.insert(rng.randrange(len(lines) // 3, len(lines)), late)
    customers = landing / "customers" / "customers.csv"
    write_atomically(customers, list(generate_customer_rows(spec)))
    cuts = sorted(rng.sample(range(1, len(lines)), 9))
    files = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    runs = sorted(rng.sample(range(1, len(files)), 2))
    model = Lakehouse()
    for number, (a, b) in enumerate(zip([0, *runs], [*runs, len(files)], strict=True)):
        for index in range(a, b):
            write_atomically(landing / "events" / f"part-{index:03d}.json", files[index])
        per_batch = rng.randint(1, 3)
        run_pipeline(spark, dataclasses.replace(settings, streaming=dataclasses.replace(
            settings.streaming, max_files_per_trigger=per_batch)), RunTarget.ALL, Trigger())
        model.run([line for chunk in files[a:b] for line in chunk],
                  read_segments([customers]) if number == 0 else {})
        assert_exact(spark, settings, model)
    assert model.late_dropped > 0  # the late events a stateful table would have dropped


def test_changed_filter_and_lost_checkpoint_recompute_the_table(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = recompute_conf(tmp_path / "conf")
    settings = recompute_settings(tmp_path, conf)
    landing = Path(settings.paths.landing)
    written = generate_landing(landing, GenerateSpec(events=200, files=2, users=15, burst="b1",
                                                     start=START, seconds_between_events=3,
                                                     seed=31))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    model = Lakehouse()
    model.run(read_lines(p for p in written if p.suffix == ".json"),
              read_segments(p for p in written if p.suffix == ".csv"))
    assert_exact(spark, settings, model)

    # The filter changes, and no new data comes: plan says the table is recomputed, the run does.
    changed = recompute_settings(tmp_path, recompute_conf(tmp_path / "conf2",
                                                          counts_filter="event_type <> 'view'"))
    plans = {p.table: p for p in collect_plan(changed)}
    assert plans["gold/event_counts_5m"].verdict is Verdict.RECOMPUTED
    assert any("filter" in change for change in plans["gold/event_counts_5m"].changes)
    assert plans["gold/user_sessions"].verdict is Verdict.UNCHANGED
    run_pipeline(spark, changed, RunTarget.ALL, Trigger())
    assert _set(rows(spark, changed, GOLD_EVENT_COUNTS_5M)) == \
        model.exact_event_counts_5m(lambda e: e.event_type != "view")
    assert {p.table: p.verdict for p in collect_plan(changed)}["gold/event_counts_5m"] is \
        Verdict.UNCHANGED

    # Its checkpoint is lost: the next run recomputes it rather than refusing it.
    shutil.rmtree(Path(changed.paths.lakehouse) / "_checkpoints" / "gold" / "user_sessions")
    assert {p.table: p.verdict for p in collect_plan(changed)}["gold/user_sessions"] is \
        Verdict.RECOMPUTED
    run_pipeline(spark, changed, RunTarget.ALL, Trigger())
    assert _set(rows(spark, changed, GOLD_USER_SESSIONS)) == model.exact_user_sessions()
    assert _set(rows(spark, changed, GOLD_USER_ACTIVITY_SLIDING)) == \
        model.exact_user_activity_sliding()

