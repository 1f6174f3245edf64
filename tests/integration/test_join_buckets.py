"""A declared stream-stream join's transform, with and without its time buckets, against every
pair worked out in Python: each matching pair exactly once, and each unmatched left row once.

The transform runs on static frames here (the watermark does nothing on them), so no writer's
``latest_by`` hides a pair met twice. Times crowd the buckets' edges (2 hours wide, from the
epoch, for the 30-minute ``within`` of ``gold/purchase_attribution``).
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import SparkSession

from medallion.engine.gold.compile import compile_join
from medallion.project import Settings
from tests.events_tables import SILVER_EVENTS

START = datetime(2025, 1, 27, 8, 0, tzinfo=timezone.utc)  # a bucket starts at every even hour
WITHIN = timedelta(minutes=30)


def events(seed: int) -> list[tuple[str, str, str, datetime]]:
    """(event_id, user_id, event_type, time): times on or next to multiples of 15 minutes."""
    pick = random.Random(seed)
    rows = []
    for n in range(600):
        quarter = START + timedelta(minutes=15 * pick.randrange(24))
        jitter = timedelta(milliseconds=pick.choice([0, 0, 1, -1, 999, -999, 60_000, -60_000]))
        kind = pick.choice(["purchase", "click", "click", "add_to_cart", "view"])
        rows.append((f"e{n}", f"u{pick.randrange(4)}", kind, quarter + jitter))
    return rows


def expected_pairs(rows: list[tuple[str, str, str, datetime]]) -> Counter[tuple[str, str | None]]:
    """Every (purchase, click or add_to_cart) of one user with the second in the 30 minutes
    before the first, both ends included; (purchase, None) when a purchase has none."""
    pairs: Counter[tuple[str, str | None]] = Counter()
    for event_id, user, kind, time in rows:
        if kind != "purchase":
            continue
        found = [other for other, other_user, other_kind, other_time in rows
                 if other_user == user and other_kind in ("click", "add_to_cart")
                 and time - WITHIN <= other_time <= time]
        pairs.update([(event_id, other) for other in found] or [(event_id, None)])
    return pairs


@pytest.mark.parametrize("time_buckets", [True, False])
def test_each_pair_is_met_once(spark: SparkSession, settings: Settings, time_buckets: bool) -> None:
    (pipeline, gold), = [(p, g) for p, g in settings.gold_specs() if g.join is not None]
    rows = events(seed=7)
    frame = spark.createDataFrame(
        [(event_id, user, kind, time, None, None, "unknown", "hand", time)
         for event_id, user, kind, time in rows], SILVER_EVENTS.schema)
    joined = compile_join(pipeline, gold, time_buckets=time_buckets)(frame, frame)
    got = Counter((row["event_id"], row["attributed_event_id"])
                  for row in joined.select("event_id", "attributed_event_id").collect())
    want = expected_pairs(rows)
    assert sum(1 for _, other in want if other is not None) > 100  # plenty of matches to check
    assert got == want
