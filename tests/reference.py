"""An independent model of the ``events`` contract in plain Python, for tests to compare against.

It shares no code with the pipeline: it reads the landing files with ``json`` and computes what
every table must hold by the rules of shared/contracts/events.md, batch by batch, including what
the event-time watermark drops between runs.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path

EVENT_TYPES = {"view", "click", "add_to_cart", "purchase"}
ZONE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)$")
WATERMARK = timedelta(minutes=10)
GAP = timedelta(minutes=5)
FIVE = timedelta(minutes=5)
HOUR = timedelta(hours=1)
WITHIN = timedelta(minutes=30)  # gold/purchase_attribution: how long before a purchase
ATTRIBUTED = {"click", "add_to_cart"}
EPOCH = datetime(1970, 1, 1)
MAX_AMOUNT = Decimal("99999999999999.9999")  # DECIMAL(18,4)


@dataclass(frozen=True)
class Event:
    event_id: str
    user_id: str
    event_type: str
    timestamp: datetime  # naive UTC, as Spark returns it
    amount: Decimal | None


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str) or not ZONE.match(value):
        return None
    text = value.replace(" ", "T").replace("Z", "+00:00")
    if re.search(r"[+-]\d{2}$", text):
        text += ":00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(timezone.utc).replace(tzinfo=None)


def parse(line: str) -> Event | None:
    """The event a landing line holds, or None if the contract says it is invalid."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    event_id, user_id, kind = doc.get("event_id"), doc.get("user_id"), doc.get("event_type")
    if not (isinstance(event_id, str) and event_id.strip()):
        return None
    if not (isinstance(user_id, str) and user_id.strip()):
        return None
    event_id, user_id = event_id.strip(), user_id.strip()  # ids compare after trimming
    if kind not in EVENT_TYPES:
        return None
    instant = _timestamp(doc.get("timestamp"))
    if instant is None:
        return None
    amount = doc.get("amount")
    if amount is not None:
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            return None
        try:
            exact = Decimal(str(amount))
            amount = exact.quantize(Decimal("0.0001"))
        except InvalidOperation:
            return None
        if amount != exact:  # a fifth decimal place does not fit DECIMAL(18,4)
            return None
        if amount < 0 or amount > MAX_AMOUNT:
            return None
    return Event(event_id, user_id, kind, instant, amount)


def read_lines(files: Iterable[Path]) -> list[str]:
    """Every line of the files, in file-name order."""
    lines: list[str] = []
    for path in sorted(files):
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def read_segments(files: Iterable[Path]) -> dict[str, str]:
    """customer_id -> segment from the customers CSV files (later files win)."""
    segments: dict[str, str] = {}
    for path in sorted(files):
        with path.open(newline="", encoding="utf-8") as handle:
            for row in csv.reader(handle):
                if row == ["customer_id", "customer_name", "segment"] or len(row) != 3:
                    continue
                segments[row[0].strip()] = row[2] or "unknown"
    return segments


def _floor(instant: datetime, size: timedelta) -> datetime:
    return EPOCH + ((instant - EPOCH) // size) * size


def _kept(window_end: datetime, watermark: datetime | None) -> bool:
    """Spark drops an input row for a window the watermark has passed: end <= watermark."""
    return watermark is None or window_end > watermark


def _sessions(by_user: dict[str, list[Event]]) -> set[tuple[object, ...]]:
    """Each user's sessions: events closer than the gap to the one before (exactly the gap
    continues it), ending the gap after the last; with their count and total amount."""
    sessions = set()
    for user, events in by_user.items():
        events.sort(key=lambda e: e.timestamp)
        current: list[Event] = []
        for event in [*events, None]:
            if current and (event is None or event.timestamp > current[-1].timestamp + GAP):
                total = sum((e.amount or 0 for e in current), Decimal(0))
                sessions.add((user, current[0].timestamp, current[-1].timestamp + GAP,
                              len(current), total))
                current = []
            if event is not None:
                current.append(event)
    return sessions


@dataclass
class Lakehouse:
    """What the tables must hold after the bursts fed so far, one pipeline run per burst."""

    segments: dict[str, str] = field(default_factory=dict)
    bronze_lines: list[str] = field(default_factory=list)
    silver: dict[str, Event] = field(default_factory=dict)
    quarantined: int = 0
    duplicates: int = 0
    late_dropped: int = 0
    # What gold saw, each event with the watermark in force when it arrived (None: no watermark).
    gold_events: list[tuple[Event, datetime | None]] = field(default_factory=list)
    max_event_time: datetime | None = None

    def run(self, lines: Sequence[str], segments: dict[str, str]) -> None:
        """One pipeline run (each layer one batch) over a burst's lines."""
        self.segments.update(segments)
        self.bronze_lines += lines
        new: list[Event] = []
        for line in lines:
            event = parse(line)
            if event is None:
                self.quarantined += 1
            elif event.event_id in self.silver:
                self.duplicates += 1
            else:
                self.silver[event.event_id] = event
                new.append(event)
        watermark = self.max_event_time - WATERMARK if self.max_event_time else None
        for event in new:
            self.gold_events.append((event, watermark))
            if not _kept(_floor(event.timestamp, FIVE) + FIVE, watermark):
                self.late_dropped += 1
        if new:
            latest = max(event.timestamp for event in new)
            self.max_event_time = max(latest, self.max_event_time or latest)

    def segment(self, user_id: str) -> str:
        return self.segments.get(user_id, "unknown")

    def event_counts_5m(self) -> set[tuple[object, ...]]:
        groups: dict[tuple[datetime, str], list[Event]] = defaultdict(list)
        for event, watermark in self.gold_events:
            start = _floor(event.timestamp, FIVE)
            if _kept(start + FIVE, watermark):
                groups[(start, event.event_type)].append(event)
        return {(start, start + FIVE, kind, len(es), sum((e.amount or 0 for e in es), Decimal(0)))
                for (start, kind), es in groups.items()}

    def user_activity_sliding(self) -> set[tuple[object, ...]]:
        counts: dict[tuple[datetime, str], int] = defaultdict(int)
        for event, watermark in self.gold_events:
            latest_start = _floor(event.timestamp, FIVE)
            for start in (latest_start, latest_start - FIVE):
                if _kept(start + 2 * FIVE, watermark):
                    counts[(start, event.user_id)] += 1
        return {(start, start + 2 * FIVE, user, n) for (start, user), n in counts.items()}

    def segment_revenue_1h(self) -> set[tuple[object, ...]]:
        groups: dict[tuple[datetime, str], list[Event]] = defaultdict(list)
        for event, watermark in self.gold_events:
            start = _floor(event.timestamp, HOUR)
            if event.event_type == "purchase" and _kept(start + HOUR, watermark):
                groups[(start, self.segment(event.user_id))].append(event)
        return {(start, start + HOUR, seg, len(es), sum((e.amount or 0 for e in es), Decimal(0)))
                for (start, seg), es in groups.items()}

    def user_sessions(self) -> set[tuple[object, ...]]:
        """Sessions the watermark has closed: their end is at or before it."""
        if self.max_event_time is None:
            return set()
        watermark = self.max_event_time - WATERMARK
        by_user: dict[str, list[Event]] = defaultdict(list)
        for event, arrival_watermark in self.gold_events:
            # An event opens the session window [t, t + gap) before merging.
            if _kept(event.timestamp + GAP, arrival_watermark):
                by_user[event.user_id].append(event)
        return {session for session in _sessions(by_user) if session[2] <= watermark}

    # Recomputed tables (``refresh: recompute``): every silver event counts, however late it came.

    def exact_event_counts_5m(self, kept: Callable[[Event], bool] = lambda e: True
                              ) -> set[tuple[object, ...]]:
        groups: dict[tuple[datetime, str], list[Event]] = defaultdict(list)
        for event in self.silver.values():
            if kept(event):
                groups[(_floor(event.timestamp, FIVE), event.event_type)].append(event)
        return {(start, start + FIVE, kind, len(es), sum((e.amount or 0 for e in es), Decimal(0)))
                for (start, kind), es in groups.items()}

    def exact_user_activity_sliding(self) -> set[tuple[object, ...]]:
        counts: dict[tuple[datetime, str], int] = defaultdict(int)
        for event in self.silver.values():
            latest_start = _floor(event.timestamp, FIVE)
            for start in (latest_start, latest_start - FIVE):
                counts[(start, event.user_id)] += 1
        return {(start, start + 2 * FIVE, user, n) for (start, user), n in counts.items()}

    def exact_segment_revenue_1h(self) -> set[tuple[object, ...]]:
        groups: dict[tuple[datetime, str], list[Event]] = defaultdict(list)
        for event in self.silver.values():
            if event.event_type == "purchase":
                groups[(_floor(event.timestamp, HOUR), self.segment(event.user_id))].append(event)
        return {(start, start + HOUR, seg, len(es), sum((e.amount or 0 for e in es), Decimal(0)))
                for (start, seg), es in groups.items()}

    def exact_user_sessions(self) -> set[tuple[object, ...]]:
        """Every session, open ones included: events of a user closer than the gap."""
        by_user: dict[str, list[Event]] = defaultdict(list)
        for event in self.silver.values():
            by_user[event.user_id].append(event)
        return _sessions(by_user)

    def purchase_attribution(self) -> set[tuple[object, ...]]:
        """Each purchase with the user's latest click or add_to_cart at most 30 minutes before
        it (the latest time, then the greatest event_id); none: nulls, once the watermark has
        passed the purchase. A purchase at or behind the watermark in force when it arrives is
        dropped; a click or add_to_cart counts for the purchases the watermark in force when it
        arrives has not passed, however late the click itself is."""
        if self.max_event_time is None:
            return set()
        watermark = self.max_event_time - WATERMARK
        candidates: dict[str, list[tuple[Event, datetime | None]]] = defaultdict(list)
        for event, arrival in self.gold_events:
            if event.event_type in ATTRIBUTED:
                candidates[event.user_id].append((event, arrival))
        rows = set()
        for purchase in (e for e, arrival in self.gold_events if e.event_type == "purchase"
                         and (arrival is None or e.timestamp > arrival)):
            found = [c for c, arrival in candidates[purchase.user_id]
                     if purchase.timestamp - WITHIN <= c.timestamp <= purchase.timestamp
                     and (arrival is None or purchase.timestamp > arrival)]
            head = (purchase.event_id, purchase.user_id, purchase.timestamp, purchase.amount)
            if found:
                best = max(found, key=lambda c: (c.timestamp, c.event_id))
                delay = Decimal((purchase.timestamp - best.timestamp) // timedelta(microseconds=1))
                rows.add((*head, best.event_id, best.event_type, best.timestamp,
                          delay / Decimal(1_000_000)))
            elif purchase.timestamp <= watermark:
                rows.add((*head, None, None, None, None))
        return rows
