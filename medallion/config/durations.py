"""Spark-style durations (``10 minutes``) as settings and declarations write them, and instants as
the command line takes them (``2025-01-27``, ``2025-01-27T10:00:00Z``)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from medallion.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day)s?\s*$")
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def parse_duration_seconds(text: str, key: str, source: str) -> int:
    """Seconds in a Spark-style duration such as ``10 minutes``."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(key, source, f"{text!r} is not a duration like '10 minutes'")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def parse_instant(text: str) -> datetime:
    """An instant in UTC from a date (``2025-01-27``: its midnight, UTC) or an ISO 8601 date and
    time (``2025-01-27T10:00:00Z``, ``...+01:00``); one without a zone is UTC, whatever the
    machine's zone. A ``ValueError`` says what was given and what is expected."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a date like 2025-01-27 or an ISO 8601 date and time "
                         f"like 2025-01-27T10:00:00Z ({exc})") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:  # the offset moves it before year 1 or after year 9999
        raise ValueError(f"{text!r} is out of range: in UTC it falls before 0001-01-01 or after "
                         "9999-12-31") from None
