"""Instants as the command line takes them: UTC, and a one-line refusal for anything else."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from medallion.config.durations import parse_instant


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-01-27", datetime(2025, 1, 27, tzinfo=timezone.utc)),
    ("2025-01-27T10:00:00Z", datetime(2025, 1, 27, 10, tzinfo=timezone.utc)),
    ("2025-01-27T10:00:00+01:00", datetime(2025, 1, 27, 9, tzinfo=timezone.utc)),
    ("0001-01-01T00:00+00:00", datetime(1, 1, 1, tzinfo=timezone.utc)),
])
def test_an_instant_is_utc(text: str, expected: datetime) -> None:
    assert parse_instant(text) == expected


@pytest.mark.parametrize("text", [
    "0001-01-01T00:00+01:00",  # an hour before year 1 in UTC
    "9999-12-31T23:30-01:00",  # after 9999 in UTC
])
def test_an_instant_out_of_range_in_utc_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_instant(text)


DATES = ["0001-01-01", "0001-01-02", "9999-12-31", "9999-12-30", "2025-01-27", "2025-02-30",
         "0000-01-01", "10000-01-01", "2025-13-01"]
TIMES = ["", "T00:00", "T23:59:59.999999", "T24:00", " 12:00", "T12"]
ZONES = ["", "Z", "+00:00", "+23:59", "-23:59", "+14", "-01:00", "+1:00", "x", "+24:00"]


def test_no_text_ends_in_anything_but_an_instant_or_a_value_error() -> None:
    """Every date at the calendar's edges with every time and zone, whole and cut short at each
    character: an instant in UTC, or a one-line ValueError, never another exception."""
    texts = {f"{date}{time}{zone}" for date in DATES for time in TIMES for zone in ZONES}
    texts |= {text[:cut] for text in list(texts) for cut in range(len(text))}
    for text in sorted(texts):
        try:
            value = parse_instant(text)
        except ValueError as exc:
            assert "\n" not in str(exc), text
        else:
            assert value.tzinfo is timezone.utc, text
