"""Which windows a batch of a recomputed table touches, and the few ranges its read of the input
is bounded by: pure functions, checked against brute force."""

from __future__ import annotations

import random

import pytest

from medallion.engine.gold.recompute import (
    closed_window_starts,
    covering_ranges,
    window_start_range,
)


@pytest.mark.parametrize(("size", "slide"), [(300, 300), (600, 300), (600, 180), (3600, 900)])
def test_window_start_range_holds_every_window_of_a_time(size: int, slide: int) -> None:
    rng = random.Random(size * slide)
    for _ in range(500):
        t = rng.randrange(-10_000, 10_000_000)
        bucket = t - t % slide
        low, high = window_start_range(bucket, size, slide)
        # Every window start (a multiple of slide) whose window [s, s + size) holds t.
        first = bucket - (size // slide + 2) * slide
        holding = {s for s in range(first, bucket + slide, slide) if s <= t < s + size}
        assert holding and min(holding) >= low and max(holding) == high
        assert (low - bucket) % slide == 0 and low > t - size - slide


def test_covering_ranges_merges_overlaps_and_keeps_the_rest_apart() -> None:
    assert covering_ranges([(5, 9), (0, 3), (3, 4), (20, 30), (8, 12)]) == [(0, 4), (5, 12), (20, 30)]
    assert covering_ranges([]) == []


def test_covering_ranges_joins_the_closest_first_when_there_are_too_many() -> None:
    ranges = [(0, 1), (3, 4), (100, 101), (104, 105), (1000, 1001)]
    assert covering_ranges(ranges, limit=3) == [(0, 4), (100, 105), (1000, 1001)]
    assert covering_ranges(ranges, limit=1) == [(0, 1001)]


def test_covering_ranges_cover_every_point_within_the_limit() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ranges = [(low, low + rng.randrange(0, 50)) for low in
                  (rng.randrange(0, 5000) for _ in range(rng.randrange(1, 120)))]
        limit = rng.randrange(1, 40)
        covered = covering_ranges(ranges, limit)
        assert len(covered) <= limit
        assert all(a[1] < b[0] for a, b in zip(covered, covered[1:], strict=False))  # apart
        for low, high in ranges:
            assert any(c_low <= low and high <= c_high for c_low, c_high in covered)
        # Nothing covered that no range needs at the ends.
        assert covered[0][0] == min(r[0] for r in ranges)
        assert covered[-1][1] == max(r[1] for r in ranges)


@pytest.mark.parametrize(("size", "slide"), [(300, 300), (600, 300), (600, 180), (3600, 900)])
def test_closed_window_starts_are_the_windows_ending_between_two_watermarks(
        size: int, slide: int) -> None:
    rng = random.Random(size + slide)
    for _ in range(500):
        before = rng.randrange(-10_000, 100_000)
        now = before + rng.choice([0, 1, rng.randrange(0, 3 * size)])
        # Brute force: every window start (a multiple of slide) whose end is in (before, now].
        starts = [s for s in range(before - size - slide, now + slide)
                  if s % slide == 0 and before < s + size <= now]
        found = closed_window_starts(before, now, size, slide)
        assert found == ((starts[0], starts[-1]) if starts else None)
        # Successive watermarks close every window once: no gap, no overlap.
        upto = closed_window_starts(None, now, size, slide)
        assert upto is not None and upto[0] is None
        assert upto[1] == max(s for s in range(now - size - slide, now + 1)
                              if s % slide == 0 and s + size <= now)
    assert closed_window_starts(None, None, size, slide) is None
