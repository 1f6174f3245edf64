"""The shipped change-flow example (``conf/pipelines/accounts.yaml`` over the change rows
``make run`` lands from ``samples/landing/account_changes/``) gives the SCD type 1 and 2 tables
the independent model (``tests/reference_cdc.py``) gives over the same lines, read here in plain
Python, and quarantines the faulty lines with the reasons they have; ``docs/changes.md`` shows
that history as it is."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from tests.conftest import REPO, make_settings
from tests.reference_cdc import Change, Version, scd1, scd2

SAMPLES = REPO / "samples" / "landing" / "account_changes"
DOCS = REPO / "docs" / "changes.md"
VALUES = ("country", "email", "op", "plan")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def read_samples() -> tuple[list[Change], list[str]]:
    """The sample lines as the model's changes, and the reason each faulty line has (by what
    the declaration says: a key and a commit time required, an operation one of c, u, d, r)."""
    changes, reasons = [], []
    for sample in sorted(SAMPLES.glob("*.jsonl")):
        for line in sample.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                reasons.append("invalid_json")
                continue
            if row.get("account_id") is None:
                reasons.append("missing_account_id")
            elif row.get("changed_at") is None:
                reasons.append("missing_changed_at")
            elif row.get("op") not in ("c", "u", "d", "r"):
                reasons.append("unknown_operation")
            else:
                delete = row["op"] == "d"
                values = () if delete else tuple((c, row.get(c)) for c in VALUES)
                changes.append(Change((row["account_id"],), (_time(row["changed_at"]),), delete, values))
    return changes, reasons


def _rows(spark: SparkSession, lakehouse: str, name: str) -> list[Any]:
    return spark.read.format("delta").load(f"{lakehouse}/silver/{name}").collect()


def test_the_shipped_account_changes_give_the_model_tables(spark: SparkSession, tmp_path: Path) -> None:
    changes, reasons = read_samples()
    # What the sample is there to show: a late change, a re-delivery, a delete, faulty lines.
    assert len({(c.key, c.sequence) for c in changes}) < len(changes)
    assert any(c.delete for c in changes) and reasons
    landed = tmp_path / "landing" / "account_changes"
    landed.mkdir(parents=True)
    for sample in SAMPLES.glob("*.jsonl"):
        shutil.copy(sample, landed / sample.name)
    settings = make_settings(tmp_path).only(["accounts"])
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    lakehouse = settings.paths.lakehouse

    latest = {(r["account_id"],): {c: r[c] for c in VALUES} for r in _rows(spark, lakehouse, "accounts")}
    assert latest == scd1(changes)
    history = _rows(spark, lakehouse, "account_history")
    versions = {Version((r["account_id"],), tuple((c, r[c]) for c in VALUES), (r["valid_from"],),
                        None if r["valid_to"] is None else (r["valid_to"],)) for r in history}
    expected = scd2(changes, tracked=["plan", "country"])
    assert versions == expected and len(history) == len(expected)
    # The late change of a1 splits the version it falls in: a1 has a version it starts.
    late = next(c for c in changes if c.key == ("a1",) and c.row().get("plan") == "team")
    assert any(v.key == ("a1",) and v.valid_from == late.sequence for v in expected)

    for name in ("accounts", "account_history"):
        refused = sorted(reason for r in _rows(spark, lakehouse, f"{name}_quarantine")
                         for reason in r["reasons"])
        assert refused == sorted(reasons), name

    # The history docs/changes.md shows, as make run prints it.
    section = DOCS.read_text().split("## The shipped example: `accounts`")[1].split("\n## ")[0]
    shown = [tuple(cell.strip() for cell in line.strip("|").split("|"))
             for line in section.splitlines() if re.match(r"\|a\d", line)]
    assert shown == sorted(((r["account_id"], r["plan"], r["country"], str(r["valid_from"]),
                            str(r["valid_to"] or "NULL"), str(r["is_current"]).lower())
                           for r in history), key=lambda row: (row[0], row[3]))
