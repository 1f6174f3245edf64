"""Every typed argument of every command, given hostile text: refused in one line (exit 2) or
taken as a sane value, never a traceback. The commands themselves are replaced by a recorder, so
what is exercised is the parsing and the settings' checks that run before any command (no JVM)."""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from medallion.cli.main import main

HOSTILE = [
    "", " ", "nan", "NaN", "inf", "-inf", "-1", "-0", "0", "1", "1e309", "9" * 40, "0x10", "1_000",
    "٣", "\U0001f642", "\x00", "-", "a b", "1.5",
    "0001-01-01T00:00+01:00", "0001-01-01", "9999-12-31T23:59:59-01:00", "9999-12-31",
    "2025-13-01", "2025-02-30", "2025-01-01T25:00", "2025-01-27T10:00:00+25:00", "24:00",
    "P1D", "1 hour ago", "processing-time=", "processing-time=-5 seconds",
    "processing-time=1e400 seconds", "processing-time=nan seconds", "processing-time=0 seconds",
    "once=1", "available-now ", "../../etc/passwd", "/dev/null", "s3a://", "s3a://b/../x",
    "s3://bucket", "file:", "~", "%s%n", "${HOME}",
]

# command, the arguments it needs besides the fuzzed one, the fuzzed option
TYPED: list[tuple[str, list[str], str]] = [
    ("backfill", ["gold/event_counts_5m", "--to", "2025-01-28"], "--from"),
    ("backfill", ["gold/event_counts_5m", "--from", "2025-01-27"], "--to"),
    ("backfill", ["gold", "--full-refresh", "--yes"], "--wait"),
    ("run", ["all"], "--trigger"),
    ("run", ["all"], "--wait"),
    ("run", ["all"], "--bootstrap-servers"),
    ("generate", [], "--start"),
    ("generate", [], "--events"),
    ("generate", [], "--files"),
    ("generate", [], "--users"),
    ("generate", [], "--seed"),
    ("produce", [], "--start"),
    ("sql", ["SELECT 1"], "--limit"),
    ("sql", ["SELECT 1"], "--as-of"),
    ("thrift", ["status"], "--port"),
    ("show", [], "--limit"),
    ("quality", [], "--batches"),
    ("maintain", [], "--retain-hours"),
    ("land", ["x.csv"], "--part-size-mib"),
    ("status", [], "--landing"),
    ("status", [], "--lakehouse"),
    ("status", [], "--env"),
    ("status", [], "--conf-dir"),
]

INSTANTS = {"--from": "start", "--to": "end", "--start": "start"}


def _random_texts(count: int) -> list[str]:
    rng = random.Random(20261129)
    alphabet = "0123456789-:T+Z. eE_xnaips=/\\\x00\u00e9\U0001f642"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(count)]


@pytest.mark.parametrize(("command", "needs", "option"), TYPED,
                         ids=[f"{c} {o}" for c, _, o in TYPED])
def test_a_hostile_argument_is_refused_in_one_line_or_taken_sanely(
        command: str, needs: list[str], option: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    reached: list[argparse.Namespace] = []

    def recorder(args: argparse.Namespace, settings: object) -> int:
        reached.append(args)
        return 0

    monkeypatch.setattr("medallion.cli.main.COMMANDS", {command: recorder})
    monkeypatch.setattr("medallion.spark.session.start_jvm_ahead", lambda settings: None)
    monkeypatch.setattr("medallion.quality.spec.check_expectations", lambda settings: None)
    places = ["--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")]
    for value in [*HOSTILE, *_random_texts(40)]:
        argv = [command, *needs, *[p for p in places if option not in places], f"{option}={value}"]
        if option in ("--landing", "--lakehouse"):
            other = "--lakehouse" if option == "--landing" else "--landing"
            argv = [command, other, str(tmp_path / "other"), f"{option}={value}"]
        reached.clear()
        try:
            status = main(argv)
        except SystemExit as exit_:  # argparse's refusal: usage, then one line naming it
            assert exit_.code == 2, (argv, exit_.code)
            err = capsys.readouterr().err.strip().splitlines()
            assert err[-1].startswith(f"medallion {command}: error: ") or \
                err[-1].startswith("medallion: error: "), (argv, err)
            continue
        err = capsys.readouterr().err
        if status == 2:
            assert err.startswith("medallion: ") and err.count("\n") == 1, (argv, err)
            assert not reached
            continue
        assert status == 0 and len(reached) == 1, (argv, status, err)
        taken = getattr(reached[0], INSTANTS.get(option, ""), None)
        if isinstance(taken, datetime):  # an instant taken is a real one, in UTC
            assert taken.tzinfo is timezone.utc, (argv, taken)
