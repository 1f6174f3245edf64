"""Spark-style durations (``10 minutes``) as settings and declarations write them."""

from __future__ import annotations

import re

from medallion.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day)s?\s*$")
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def parse_duration_seconds(text: str, key: str, source: str) -> int:
    """Seconds in a Spark-style duration such as ``10 minutes``."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(key, source, f"{text!r} is not a duration like '10 minutes'")
    return int(match.group(1)) * _SECONDS[match.group(2)]
