"""What the command line refuses before Spark starts, and where it writes sample data (no JVM)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from medallion.cli.main import main
from tests.conf_support import copy_base_conf
from tests.conftest import REPO


def test_backfill_checks_expectation_arguments_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text("", encoding="utf-8")
    overlay = conf / "pipelines" / "events.local.yaml"
    overlay.write_text(
        "gold:\n  user_sessions:\n    expectations:\n      event_count_positive:\n"
        "        kwargs: {column: event_count, min_value: lots}\n", encoding="utf-8")
    status = main(["backfill", "gold", "--full-refresh", "--yes", "--conf-dir", str(conf),
                   "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")])
    assert status == 2
    err = capsys.readouterr().err
    assert "gold.user_sessions.expectations.event_count_positive.kwargs" in err
    assert str(overlay) in err
    assert not (tmp_path / "lake").exists()  # refused before anything started


def test_run_refuses_an_undeclared_pipeline_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "all", "--pipeline", "invoices", "--conf-dir", str(REPO / "conf"),
                   "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")])
    assert status == 2
    err = capsys.readouterr().err
    assert "--pipeline" in err and "'invoices'" in err and "declared: accounts, events, orders" in err
    assert not (tmp_path / "lake").exists()


def test_narrowing_to_a_pipeline_keeps_its_tables_and_publish_entries_only(tmp_path: Path) -> None:
    from medallion.io.tables import lakehouse_tables
    from medallion.project import load_settings

    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(
        "kafka:\n  publish:\n    - {table: silver/events, topic: a}\n"
        "    - {table: gold/store_sessions, topic: b}\n", encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, lakehouse=str(tmp_path / "lake"))
    orders = settings.only(["orders"])
    assert [p.name for p in orders.pipelines] == ["orders"]
    assert [(e.table, e.topic) for e in orders.kafka.publish] == [("gold/store_sessions", "b")]
    layers = {spec.key.split("/")[0] for spec in lakehouse_tables(orders)}
    names = {spec.key for spec in lakehouse_tables(orders)}
    assert "silver/order_lines" in names and "silver/events" not in names
    assert {"bronze", "silver", "gold", "monitoring", "quality"} == layers


def test_generate_writes_to_the_configured_source_folders(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(
        "sources:\n  events: clicks/incoming\n  customers: crm\n", encoding="utf-8")
    landing = tmp_path / "landing"
    assert main(["generate", "--events", "20", "--files", "2", "--burst", "g", "--conf-dir",
                 str(conf), "--landing", str(landing), "--lakehouse", str(tmp_path / "lake")]) == 0
    assert sorted(p.name for p in (landing / "clicks" / "incoming").iterdir()) == [
        "g-0000.json", "g-0001.json"]
    assert [p.name for p in (landing / "crm").iterdir()] == ["customers-g.csv"]
    assert not (landing / "events").exists() and not (landing / "customers").exists()


@pytest.mark.parametrize(("command", "args", "problem"), [
    ("generate", ["--files", "0"], "argument --files: 0 is not at least 1"),
    ("generate", ["--events", "-3"], "argument --events: -3 is not at least 1"),
    ("generate", ["--users", "many"], "argument --users: 'many' is not a whole number"),
    ("generate", ["--start", "2025-02-30T00:00:00"],
     "argument --start: '2025-02-30T00:00:00' is not a date like 2025-01-27 or an ISO 8601 date "
     "and time like 2025-01-27T10:00:00Z"),
    ("produce", ["--start", "yesterday"], "argument --start: 'yesterday' is not a date like"),
    ("backfill", ["gold", "--from", "2025-13-01", "--to", "2025-02-01"],
     "argument --from: '2025-13-01' is not a date like 2025-01-27"),
    ("backfill", ["gold", "--from", "2025-01-01", "--to", "next week"],
     "argument --to: 'next week' is not a date like 2025-01-27"),
    ("produce", ["--users", "0"], "argument --users: 0 is not at least 1"),
    ("show", ["--limit", "-1"], "argument --limit: -1 is not at least 1"),
    ("sql", ["--limit", "-1", "SELECT 1"], "argument --limit: -1 is not at least 0"),
    ("quality", ["--batches", "0"], "argument --batches: 0 is not at least 1"),
    ("run", ["silver", "--wait", "-5"], "argument --wait: -5 is not 0 or more seconds"),
    ("run", ["silver", "--wait", "soon"], "argument --wait: 'soon' is not a number of seconds"),
])
def test_options_out_of_range_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, args: list[str],
        problem: str) -> None:
    """Counts and limits out of range (--files 0, --users 0, a negative count, a day out of
    range, show --limit -1, a negative --wait) are refused in one line, exit 2, not met with a
    traceback or silently ignored."""
    landing = tmp_path / "landing"
    with pytest.raises(SystemExit) as exited:
        main([command, *args, "--conf-dir", str(REPO / "conf"), "--landing", str(landing),
              "--lakehouse", str(tmp_path / "lake")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err
    assert not landing.exists()


def test_a_start_without_a_zone_is_utc_whatever_the_machines_zone(tmp_path: Path) -> None:
    """``--start`` without a zone is UTC, not the machine's local time (in New York, 10:00 would
    become 15:00 UTC)."""
    landing = tmp_path / "landing"
    for start in ("2025-03-01T10:00:00", "2025-03-01T11:00:00+01:00", "2025-03-01T10:00:00Z"):
        done = subprocess.run(
            [sys.executable, "-m", "medallion.cli.main", "generate", "--events", "1", "--files", "1",
             "--no-customers", "--burst", "tz", "--start", start, "--conf-dir", str(REPO / "conf"),
             "--landing", str(landing), "--lakehouse", str(tmp_path / "lake")],
            env={**os.environ, "TZ": "America/New_York"}, capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, done.stderr
        (line,) = (landing / "events" / "tz-0000.json").read_text().splitlines()
        assert json.loads(line)["timestamp"] == "2025-03-01T10:00:00.000Z", start


def test_a_range_backfill_needs_both_ends_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["backfill", "gold", "--from", "2025-01-27", "--conf-dir", str(REPO / "conf"),
                   "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")])
    assert status == 2
    assert "a range backfill needs --from and --to (or --full-refresh)" in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()


def test_quality_refuses_a_table_no_pipeline_declares(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt --table is refused with the declared tables, not answered with "no quality
    results yet" as for a new lakehouse."""
    status = main(["quality", "--table", "gold/event_count_5m", "--conf-dir", str(REPO / "conf"),
                   "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")])
    assert status == 2
    err = capsys.readouterr().err
    assert "--table 'gold/event_count_5m': no pipeline declares this table" in err
    assert "gold/event_counts_5m" in err  # the declared tables are listed


def test_maintain_refuses_an_unknown_table_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown --table is refused in one line, exit 2, before a session starts."""
    status = main(["maintain", "--table", "gold/event_counts_5m", "--table", "gold.nope",
                   "--conf-dir", str(REPO / "conf"), "--landing", str(tmp_path / "landing"),
                   "--lakehouse", str(tmp_path / "lake")])
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("medallion: maintain: no table gold/nope in this lakehouse (tables: ")
    assert "gold/event_counts_5m" in err and "Traceback" not in err
    assert not (tmp_path / "lake").exists()  # no lock taken, no session


def test_a_lakehouse_or_landing_zone_where_a_file_is_is_refused_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lakehouse given as a file's path is refused in one line naming the key, exit 2."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n", encoding="utf-8")
    assert main(["run", "all", "--conf-dir", str(REPO / "conf"), "--landing", str(tmp_path),
                 "--lakehouse", str(afile)]) == 2
    err = capsys.readouterr().err
    assert f"paths.lakehouse (from --lakehouse): {str(afile)!r} is not a folder: " \
           f"{str(afile)!r} is a file" in err
    assert "Traceback" not in err
    monkeypatch.setenv("MEDALLION_LANDING", str(afile / "landing"))
    assert main(["status", "--conf-dir", str(REPO / "conf"),
                 "--lakehouse", str(tmp_path / "lake")]) == 2
    assert f"paths.landing (from $MEDALLION_LANDING): {str(afile / 'landing')!r} is not a " \
           f"folder: {str(afile)!r} is a file" in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()


def test_medallion_pipelines_checks_and_prints_the_graph_without_spark(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipelines", "--conf-dir", str(REPO / "conf")]) == 0
    out = capsys.readouterr().out
    assert "gold/user_sessions  <- aggregate:user_sessions: aggregate silver/events" in out
    assert "3 pipeline(s) valid" in out


def test_medallion_pipelines_takes_the_common_options_before_the_command_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``medallion --conf-dir mine pipelines``, as every other command takes them: before, a
    KeyError's traceback."""
    conf = tmp_path / "mine"
    (conf / "pipelines").mkdir(parents=True)
    shutil.copy(REPO / "conf" / "pipelines" / "orders.yaml", conf / "pipelines" / "orders.yaml")
    (conf / "pipelines" / "orders.dev.yaml").write_text("watermark: soon\n", encoding="utf-8")
    assert main(["-v", "--conf-dir", str(conf), "pipelines", "orders"]) == 0
    out = capsys.readouterr().out
    assert "gold/store_sessions" in out and "gold/user_sessions" not in out
    assert f"1 pipeline(s) valid (env local, {conf / 'pipelines'})" in out
    # the environment given before the command chooses the overlay (refused: not a duration)
    assert main(["--conf-dir", str(conf), "--env", "dev", "pipelines"]) == 2
    assert f"watermark (from {conf / 'pipelines' / 'orders.dev.yaml'})" in capsys.readouterr().err


def test_medallion_pipelines_refuses_what_medallion_run_refuses_across_pipelines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two pipelines writing one table, a view named like another pipeline's table, a folder
    declaring no pipeline: ``medallion run`` refused each before Spark started, while ``medallion
    pipelines`` (the check a team runs on a change to its declarations) said they were valid."""
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    pipelines = conf / "pipelines"
    (pipelines / "clicks.yaml").write_text((pipelines / "events.yaml").read_text(), encoding="utf-8")
    assert main(["pipelines", "--conf-dir", str(conf)]) == 2
    captured = capsys.readouterr()
    assert "bronze/events is also written by pipeline clicks: a table has one writer" in captured.err
    assert f"(from {pipelines / 'events.yaml'})" in captured.err
    assert "valid" not in captured.out
    assert main(["run", "bronze", "--conf-dir", str(conf), "--landing", str(tmp_path / "landing"),
                 "--lakehouse", str(tmp_path / "lake")]) == 2
    assert "bronze/events is also written by pipeline clicks" in capsys.readouterr().err

    (pipelines / "clicks.yaml").write_text(
        "views:\n  gold.store_sessions:\n    sql: SELECT 1 AS one\n", encoding="utf-8")
    assert main(["pipelines", "--conf-dir", str(conf)]) == 2
    err = capsys.readouterr().err
    assert f"views.gold.store_sessions (from {pipelines / 'clicks.yaml'}): pipeline orders " \
           "declares a table of this name" in err

    for declaration in pipelines.glob("*.yaml"):
        declaration.unlink()
    assert main(["pipelines", "--conf-dir", str(conf)]) == 2
    assert f"<folder> (from {pipelines}): declares no pipeline" in capsys.readouterr().err


def test_medallion_pipelines_refuses_an_environment_nothing_names(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--env prdo`` checked the pipelines with no overlay and said they were valid, for an
    environment ``medallion run`` refuses."""
    monkeypatch.delenv("MEDALLION_ENV", raising=False)
    assert main(["--conf-dir", str(REPO / "conf"), "pipelines", "--env", "prdo"]) == 2
    err = capsys.readouterr().err
    assert f"env (from {REPO / 'conf' / 'prdo.yaml'}): no overlay for environment 'prdo'" in err
    assert "(available: dev, local, prod, s3local)" in err
    monkeypatch.setenv("MEDALLION_ENV", "prdo")
    assert main(["--conf-dir", str(REPO / "conf"), "pipelines"]) == 2
    monkeypatch.setenv("MEDALLION_ENV", "prod")
    assert main(["--conf-dir", str(REPO / "conf"), "pipelines"]) == 0
    assert "pipeline(s) valid (env prod," in capsys.readouterr().out


def test_ctrl_c_without_a_jvm_unwinds_and_says_so_in_one_line(tmp_path: Path) -> None:
    """A command with no JVM unwinds (what it cleans up on the way out is cleaned: land aborts its
    upload; generate's files appear whole or not at all) and ends in one line, status 130. A run's
    interruption, with its JVM: tests/reliability/test_interrupt.py."""
    events = tmp_path / "landing" / "events"
    command = subprocess.Popen(
        [sys.executable, "-m", "medallion", "generate", "--events", "50000000", "--files", "1000",
         "--conf-dir", str(REPO / "conf"), "--landing", str(tmp_path / "landing"),
         "--lakehouse", str(tmp_path / "lake")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (events.exists() and list(events.glob("*.json"))):  # its first file written
        assert command.poll() is None and time.monotonic() < deadline, command.communicate()
        time.sleep(0.05)
    command.send_signal(signal.SIGINT)
    out, err = command.communicate(timeout=60)
    assert (command.returncode, err) == (130, "medallion: interrupted\n")
    written = sorted(events.glob("*.json"))
    assert 1 <= len(written) < 1000
    assert all(len(path.read_text().splitlines()) == 50_000 for path in written)
