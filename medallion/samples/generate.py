"""Realistic sample data for the landing zone: events with late, duplicated and broken records.

Pure Python, no Spark: ``medallion generate`` and the benchmark write files a real producer could
have written. Files appear atomically (written under a hidden name, then renamed), because the
streaming file source picks up any file that matches as soon as it sees it.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

EVENT_TYPES = ("view", "view", "view", "view", "click", "click", "add_to_cart", "purchase")
SEGMENTS = ("consumer", "smb", "enterprise")
BROKEN_LINES = (
    '{{"event_id": "broken-{n}", "user_id": "u1", "event_type": "view", "timest',  # truncated
    "[{{\"event_id\": \"arr-{n}\"}}]",  # an array, not an object
    "not json at all {n}",
    '{{"event_id": "bad-ts-{n}", "user_id": "u0001", "event_type": "view", '
    '"timestamp": "yesterday", "amount": null}}',
    '{{"event_id": "neg-{n}", "user_id": "u0001", "event_type": "purchase", '
    '"timestamp": "2025-01-27T10:00:00Z", "amount": -5}}',
    '{{"event_id": "", "user_id": "u0001", "event_type": "click", '
    '"timestamp": "2025-01-27T10:00:00Z"}}',
    '{{"event_id": "type-{n}", "user_id": "u0001", "event_type": "refund", '
    '"timestamp": "2025-01-27T10:00:00Z"}}',
    '{{"event_id": "amt-{n}", "user_id": "u0001", "event_type": "purchase", '
    '"timestamp": "2025-01-27T10:00:00Z", "amount": "12.50"}}',
)


@dataclass(frozen=True)
class GenerateSpec:
    """How much to generate and how dirty it is."""

    events: int = 5000
    files: int = 4
    users: int = 200
    start: datetime = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
    seconds_between_events: float = 0.5
    duplicate_rate: float = 0.02
    broken_rate: float = 0.01
    late_rate: float = 0.03
    drift_rate: float = 0.05
    seed: int = 7
    burst: str = "burst"


def _iso(instant: datetime) -> str:
    return instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def generate_event_lines(spec: GenerateSpec) -> Iterator[str]:
    """Event lines in delivery order: mostly in time order, some late, duplicated or broken."""
    rng = random.Random(f"{spec.seed}-{spec.burst}")
    recent: list[str] = []
    for i in range(spec.events):
        roll = rng.random()
        if roll < spec.broken_rate:
            yield rng.choice(BROKEN_LINES).format(n=i)
            continue
        if roll < spec.broken_rate + spec.duplicate_rate and recent:
            yield rng.choice(recent)  # re-delivery: the same content again
            continue
        event_time = spec.start + timedelta(seconds=i * spec.seconds_between_events)
        if rng.random() < spec.late_rate:
            event_time -= timedelta(seconds=rng.uniform(60, 20 * 60))
        event_type = rng.choice(EVENT_TYPES)
        record: dict[str, object] = {
            "event_id": f"{spec.burst}-{spec.seed}-{i:09d}",
            "user_id": f"u{rng.randrange(spec.users):04d}",
            "event_type": event_type,
            "timestamp": _iso(event_time),
            "amount": round(rng.uniform(1, 500), 2) if event_type == "purchase" else None,
        }
        if rng.random() < spec.drift_rate:
            record["device"] = rng.choice(("ios", "android", "web"))  # schema drift
        line = json.dumps(record, separators=(",", ":"))
        recent.append(line)
        if len(recent) > 50:
            recent.pop(0)
        yield line


def generate_customer_rows(spec: GenerateSpec) -> Iterator[str]:
    """CSV rows for about 80% of the users, plus one malformed line."""
    rng = random.Random(f"{spec.seed}-customers")
    yield "customer_id,customer_name,segment"
    for user in range(spec.users):
        if rng.random() < 0.8:
            yield f"u{user:04d},Customer {user:04d},{rng.choice(SEGMENTS)}"
    yield "this line,has,too,many,fields"


def write_atomically(path: Path, lines: Iterator[str] | list[str]) -> None:
    """Write ``lines`` to ``path`` so that a reader never sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.with_name(f".{path.name}.tmp")
    with hidden.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(line)
            out.write("\n")
    os.replace(hidden, path)


def generate_landing(landing: str | Path, spec: GenerateSpec, with_customers: bool = True,
                     folders: Mapping[str, str] | None = None) -> list[Path]:
    """Write ``spec.events`` events over ``spec.files`` files (and the customers CSV) to ``landing``.

    ``folders`` are the configured ``sources`` (``events`` and ``customers`` folder names under
    the landing zone); without them, the default ``events/`` and ``customers/``.
    """
    landing = Path(landing)
    events_folder = (folders or {}).get("events", "events")
    customers_folder = (folders or {}).get("customers", "customers")
    written: list[Path] = []
    lines = generate_event_lines(spec)
    per_file = max(1, -(-spec.events // spec.files))
    for part in range(spec.files):
        chunk = [line for _, line in zip(range(per_file), lines, strict=False)]
        if not chunk:
            break
        path = landing / events_folder / f"{spec.burst}-{part:04d}.json"
        write_atomically(path, chunk)
        written.append(path)
    if with_customers:
        path = landing / customers_folder / f"customers-{spec.burst}.csv"
        write_atomically(path, list(generate_customer_rows(spec)))
        written.append(path)
    return written
