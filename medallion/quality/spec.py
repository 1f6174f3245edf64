"""Expectations declared in configuration: one Great Expectations expectation per entry, per table.

``conf/base.yaml`` (or an environment overlay) holds, under ``quality.tables.<layer>/<table>``, a
mapping of expectation names to their definition::

    quality:
      tables:
        silver/events:
          event_type_in_set:
            expectation: expect_column_values_to_be_in_set   # a GX 1.x expectation type
            kwargs: {column: event_type, value_set: [view, click, add_to_cart, purchase]}
            severity: fail                                    # warn | drop | fail

Entries are keyed by name, so an overlay can change one expectation (say its severity) without
repeating the others. Everything is checked here, before Spark starts: the table, the type (one the
gate can compute in a single pass) and the severity when the settings load, and the arguments, by
Great Expectations' own expectation classes, in :func:`check_expectations`, which every command that
runs a job calls before Spark starts. An error names the key and the file it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from medallion.config import ConfigError
from medallion.tables import (
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
    SILVER_EVENTS,
)

GATED_TABLES: tuple[str, ...] = tuple(spec.key for spec in (
    SILVER_EVENTS, GOLD_EVENT_COUNTS_5M, GOLD_USER_ACTIVITY_SLIDING, GOLD_USER_SESSIONS,
    GOLD_SEGMENT_REVENUE_1H))

# Expectation types the gate computes in one aggregation over the batch. Row-level ones (a yes/no
# per row) can also ``drop``; batch-level ones describe the batch as a whole.
ROW_LEVEL_TYPES: frozenset[str] = frozenset({
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_null",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_be_between",
    "expect_column_values_to_match_regex",
    "expect_column_values_to_not_match_regex",
    "expect_column_value_lengths_to_be_between",
    "expect_column_pair_values_a_to_be_greater_than_b",
})
BATCH_LEVEL_TYPES: frozenset[str] = frozenset({
    "expect_table_row_count_to_be_between",
    "expect_column_values_to_be_unique",
    "expect_column_max_to_be_between",
    "expect_column_min_to_be_between",
    "expect_column_mean_to_be_between",
    "expect_column_sum_to_be_between",
})
SUPPORTED_TYPES: frozenset[str] = ROW_LEVEL_TYPES | BATCH_LEVEL_TYPES

_ENTRY_KEYS = {"expectation", "kwargs", "severity", "enabled", "description"}


class Severity(str, Enum):
    """What a failed expectation does to the batch."""

    WARN = "warn"  # recorded only
    DROP = "drop"  # the failing rows go to the table's quarantine; the rest move on
    FAIL = "fail"  # nothing is committed downstream; the job exits non-zero


@dataclass(frozen=True)
class ExpectationSpec:
    """One configured expectation of one table."""

    table: str
    name: str
    expectation_type: str
    kwargs: Mapping[str, Any]
    severity: Severity
    source: str = "defaults"  # the file that declared the expectation type
    description: str = ""
    kwargs_source: str = "defaults"  # the file the arguments came from

    @property
    def row_level(self) -> bool:
        """Whether the expectation judges each row (and so can drop the rows it rejects)."""
        return self.expectation_type in ROW_LEVEL_TYPES


@dataclass(frozen=True)
class QualitySettings:
    """The data-quality gates: on or off, and the expectations of each table."""

    enabled: bool = True
    expectations: tuple[ExpectationSpec, ...] = field(default=())

    def for_table(self, table: str) -> tuple[ExpectationSpec, ...]:
        """The expectations of ``table`` (``layer/name``); none when gates are off."""
        if not self.enabled:
            return ()
        return tuple(spec for spec in self.expectations if spec.table == table)


def build_expectation(spec: ExpectationSpec) -> Any:
    """The Great Expectations expectation object of ``spec`` (its class validates the arguments)."""
    from great_expectations.expectations.registry import get_expectation_impl

    impl = get_expectation_impl(spec.expectation_type)
    meta = {"medallion": {"name": spec.name, "severity": spec.severity.value, "table": spec.table}}
    return impl(**dict(spec.kwargs), meta=meta,
                description=spec.description or None)


def _check_with_gx(spec: ExpectationSpec, key: str) -> None:
    if "row_condition" in spec.kwargs or "condition_parser" in spec.kwargs:
        raise ConfigError(f"{key}.kwargs.row_condition", spec.kwargs_source,
                          "row conditions are not supported by the gate; use a narrower column")
    try:
        build_expectation(spec)
    except Exception as exc:  # pydantic's errors: each line names an argument and the problem
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{key}.kwargs", spec.kwargs_source,
                          f"not valid for {spec.expectation_type}: {problem}") from None


def parse_quality(tree: Mapping[str, Any], origin: Any) -> QualitySettings:
    """Read the ``quality`` section of the merged configuration tree.

    ``origin(dotted_key)`` names the file a key came from.
    """
    section = tree.get("quality", {}) or {}
    if not isinstance(section, Mapping):
        raise ConfigError("quality", origin("quality"), "must be a mapping")
    for key in section:
        if key not in {"enabled", "tables"}:
            raise ConfigError(f"quality.{key}", origin(f"quality.{key}"),
                              "unknown key (known keys: enabled, tables)")
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError("quality.enabled", origin("quality.enabled"),
                          f"must be true or false, got {enabled!r}")
    tables = section.get("tables", {}) or {}
    if not isinstance(tables, Mapping):
        raise ConfigError("quality.tables", origin("quality.tables"),
                          "must map tables (layer/name) to their expectations")
    specs: list[ExpectationSpec] = []
    for table, entries in tables.items():
        table_key = f"quality.tables.{table}"
        if table not in GATED_TABLES:
            raise ConfigError(table_key, origin(table_key),
                              f"no gate for this table (gated: {', '.join(GATED_TABLES)})")
        if not isinstance(entries, Mapping):
            raise ConfigError(table_key, origin(table_key),
                              "must map expectation names to their definition")
        for name, entry in entries.items():
            spec = _parse_entry(str(table), str(name), entry, f"{table_key}.{name}", origin)
            if spec is not None:
                specs.append(spec)
    return QualitySettings(enabled=enabled, expectations=tuple(specs))


def check_expectations(quality: QualitySettings) -> None:
    """Check every expectation's arguments with Great Expectations' own classes.

    Kept apart from :func:`parse_quality` because importing Great Expectations takes seconds:
    commands that run a job call this before they start Spark; the others never pay for it.
    """
    if not quality.enabled:
        return
    for spec in quality.expectations:
        _check_with_gx(spec, f"quality.tables.{spec.table}.{spec.name}")


def _parse_entry(table: str, name: str, entry: Any, key: str,
                 origin: Any) -> ExpectationSpec | None:
    if not isinstance(entry, Mapping):
        raise ConfigError(key, origin(key), "must be a mapping with expectation, kwargs, severity")
    for field_name in entry:
        if field_name not in _ENTRY_KEYS:
            raise ConfigError(f"{key}.{field_name}", origin(f"{key}.{field_name}"),
                              f"unknown key (known keys: {', '.join(sorted(_ENTRY_KEYS))})")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{key}.enabled", origin(f"{key}.enabled"),
                          f"must be true or false, got {enabled!r}")
    if not enabled:
        return None
    kind = entry.get("expectation")
    if not isinstance(kind, str) or kind not in SUPPORTED_TYPES:
        supported = ", ".join(sorted(SUPPORTED_TYPES))
        raise ConfigError(f"{key}.expectation", origin(f"{key}.expectation"),
                          f"{kind!r} is not an expectation the gate supports ({supported})")
    severity_text = entry.get("severity")
    try:
        severity = Severity(severity_text)
    except ValueError:
        raise ConfigError(f"{key}.severity", origin(f"{key}.severity"),
                          f"{severity_text!r} is not one of warn, drop, fail") from None
    if severity is Severity.DROP and kind not in ROW_LEVEL_TYPES:
        raise ConfigError(f"{key}.severity", origin(f"{key}.severity"),
                          f"drop needs a row-level expectation; {kind} judges the whole batch "
                          "(use warn or fail)")
    kwargs = entry.get("kwargs", {}) or {}
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"{key}.kwargs", origin(f"{key}.kwargs"), "must be a mapping")
    # An overlay may change one argument: the file to name is the one that changed it last.
    kwargs_origin = origin(f"{key}.kwargs")
    changed = [origin(f"{key}.kwargs.{arg}") for arg in kwargs]
    kwargs_source = next((o for o in reversed(changed) if o != kwargs_origin), kwargs_origin)
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{key}.description", origin(f"{key}.description"), "must be text")
    return ExpectationSpec(table=table, name=name, expectation_type=kind, kwargs=dict(kwargs),
                           severity=severity, source=origin(f"{key}.expectation"),
                           description=description, kwargs_source=kwargs_source)
