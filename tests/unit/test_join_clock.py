"""A join's clock (:class:`medallion.engine.gold.joinbatch.JoinClock`): each side's newest event time, and
the watermark, the lesser of the two less the delay, never moving back; and the table version a
Delta source's end offset has read up to."""

from __future__ import annotations

import pytest

from medallion.engine.gold.joinbatch import JoinClock

MINUTE = 60_000
DELAY = 10 * MINUTE


def test_no_watermark_until_both_sides_have_rows() -> None:
    clock = JoinClock().advanced(100 * MINUTE, None, DELAY)
    assert clock == JoinClock(left=100 * MINUTE, right=None, watermark=None)
    assert clock.advanced(None, 90 * MINUTE, DELAY) == JoinClock(100 * MINUTE, 90 * MINUTE,
                                                                 80 * MINUTE)


def test_the_watermark_follows_the_side_behind_and_never_moves_back() -> None:
    clock = JoinClock(100 * MINUTE, 100 * MINUTE, 90 * MINUTE)
    ahead = clock.advanced(200 * MINUTE, 105 * MINUTE, DELAY)  # clicks lag behind purchases
    assert ahead == JoinClock(200 * MINUTE, 105 * MINUTE, 95 * MINUTE)
    # older rows on both sides, or none, change neither the newest times nor the watermark
    assert ahead.advanced(50 * MINUTE, 60 * MINUTE, DELAY) == ahead
    assert ahead.advanced(None, None, DELAY) == ahead
    # a clock read from an earlier engine's offsets knows the watermark only
    assert JoinClock(watermark=95 * MINUTE).advanced(100 * MINUTE, 101 * MINUTE, DELAY) == \
        JoinClock(100 * MINUTE, 101 * MINUTE, 95 * MINUTE)


def test_the_clock_is_written_and_read_back() -> None:
    for clock in (JoinClock(), JoinClock(1, None, None), JoinClock(1_800_000, 1_700_000, 1_100_000)):
        assert JoinClock.from_json(clock.to_json()) == clock


@pytest.mark.parametrize("text", ['{"left": "10:00", "right": 1, "watermark": 1}',
                                  '{"left": 1.5, "right": 1, "watermark": 1}',
                                  '{"left": true, "right": 1, "watermark": 1}', "{", "[1, 2]"])
def test_a_damaged_clock_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        JoinClock.from_json(text)
