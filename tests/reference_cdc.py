"""An independent model of change-data flows (SCD type 1 and 2) in plain Python, for tests to
compare the engine's tables with.

It shares no code with the engine. A change is a key, a sequence (what orders the changes of one
key, comparable), whether it deletes the key, and the row's values. The model takes every change
delivered so far, in any order and with re-deliveries, and says what the table must hold: the
same whatever the batches the changes came in, since a change flow's table depends only on the
set of changes it has applied.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One change record: ``key`` and ``sequence`` as tuples, ``values`` the row's columns by
    name (of an upsert; a delete's may be empty)."""

    key: tuple[Any, ...]
    sequence: tuple[Any, ...]
    delete: bool
    values: tuple[tuple[str, Any], ...] = ()

    def row(self) -> dict[str, Any]:
        return dict(self.values)


def _rank(change: Change) -> tuple[Any, ...]:
    return (change.delete, tuple((value is not None, value) if value is not None else (False,)
                                 for _, value in sorted(change.values)))


def counted(deliveries: Iterable[tuple[Change, str]]) -> dict[tuple[Any, ...], tuple[Change, str]]:
    """Of deliveries of changes, each with the file it came in, the one that counts per key and
    sequence: the change ranked last, then of equal changes the one from the least file name."""
    best: dict[tuple[Any, ...], tuple[Change, str]] = {}
    for change, source in deliveries:
        identity = change.key + change.sequence
        held = best.get(identity)
        if (held is None or _rank(change) > _rank(held[0])
                or (_rank(change) == _rank(held[0]) and source < held[1])):
            best[identity] = (change, source)
    return best


def _by_key(changes: Iterable[Change]) -> dict[tuple[Any, ...], list[Change]]:
    """Each key's changes, one per sequence, in sequence order. Of changes with one key and one
    sequence (re-deliveries) the one ordered last counts, so the result does not depend on the
    order they arrived in: a delete after an upsert, then by the values of the columns in the
    order of their names, a missing value (None) before any other."""
    latest: dict[tuple[tuple[Any, ...], tuple[Any, ...]], Change] = {}
    for change in changes:
        slot = (change.key, change.sequence)
        held = latest.get(slot)
        if held is None or _rank(change) > _rank(held):
            latest[slot] = change
    grouped: dict[tuple[Any, ...], list[Change]] = defaultdict(list)
    for (key, _), change in latest.items():
        grouped[key].append(change)
    for ordered in grouped.values():
        ordered.sort(key=lambda c: c.sequence)
    return grouped


def scd1(changes: Iterable[Change]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """SCD type 1: one row per key, the values of its change with the highest sequence; a key
    whose highest change is a delete has no row."""
    table = {}
    for key, ordered in _by_key(changes).items():
        last = ordered[-1]
        if not last.delete:
            table[key] = last.row()
    return table


@dataclass(frozen=True)
class Version:
    """One row of an SCD type 2 table: a key's values valid from ``valid_from`` (the sequence of
    the change that made it) to ``valid_to`` (the next change's, None while it is current)."""

    key: tuple[Any, ...]
    values: tuple[tuple[str, Any], ...]
    valid_from: tuple[Any, ...]
    valid_to: tuple[Any, ...] | None

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


def scd2(changes: Iterable[Change], tracked: Sequence[str] | None = None) -> set[Version]:
    """SCD type 2: each key's history as versions.

    In sequence order, an upsert starts a new version and closes the one before it at its own
    sequence; a delete closes the current version and starts none (an upsert after it starts a
    new one). With ``tracked`` columns, an upsert that changes none of them starts no version: it
    updates the other columns of the version it falls in, in place."""
    versions: set[Version] = set()
    for key, ordered in _by_key(changes).items():
        values: dict[str, Any] | None = None  # the current version's, None: no current version
        since: tuple[Any, ...] = ()
        for change in [*ordered, None]:
            row = None if change is None or change.delete else change.row()
            if values is not None and row is not None and tracked is not None and all(
                    row.get(column) == values.get(column) for column in tracked):
                values = row  # untracked columns change in place
                continue
            if values is not None:  # closed by this change, or current at the end
                versions.add(Version(key, tuple(sorted(values.items())), since,
                                     None if change is None else change.sequence))
            values = row
            if change is not None:
                since = change.sequence
    return versions


@dataclass(frozen=True)
class Export:
    """A full export at ``position``: its rows by key, and the keys of rows it had that were
    refused (their values unknown: the key stays as it was)."""

    position: Any
    rows: dict[tuple[Any, ...], dict[str, Any]]
    refused: frozenset[tuple[Any, ...]] = frozenset()


def snapshot_changes(exports: Iterable[Export]) -> list[Change]:
    """The changes a series of full exports makes, taken in order of position: what each export
    holds that the one before it did not hold with the same values (upserts), and the keys it
    lacks that the one before it held (deletes, with the values they had)."""
    held: dict[tuple[Any, ...], dict[str, Any]] = {}
    made = []
    for export in sorted(exports, key=lambda e: e.position):
        now = {key: row for key, row in export.rows.items()}
        for key in export.refused:
            if key not in now and key in held:
                now[key] = held[key]
        for key, row in now.items():
            if held.get(key) != row:
                made.append(Change(key, (export.position,), False, tuple(sorted(row.items()))))
        for key, row in held.items():
            if key not in now:
                made.append(Change(key, (export.position,), True, tuple(sorted(row.items()))))
        held = now
    return made
