"""Expectations in configuration: the defaults, overlays by name, and errors naming key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.config import ConfigError, load_settings
from medallion.quality.spec import Severity, check_expectations
from tests.conf_support import copy_base_conf

REPO = Path(__file__).resolve().parents[2]


def _conf(tmp_path: Path, overlay: str) -> Path:
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "test.yaml").write_text(overlay, encoding="utf-8")
    return conf


def _load(conf: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    return load_settings(env="test", conf_dir=conf, landing=str(tmp_path / "l"),
                         lakehouse=str(tmp_path / "h"))


def test_events_defaults_follow_the_contract(tmp_path: Path) -> None:
    settings = _load(_conf(tmp_path, ""), tmp_path)
    silver = {(e.name, e.expectation_type, e.severity)
              for e in settings.quality.for_table("silver/events")}
    assert silver == {
        ("event_id_not_null", "expect_column_values_to_not_be_null", Severity.FAIL),
        ("event_id_unique", "expect_column_values_to_be_unique", Severity.FAIL),
        ("user_id_not_null", "expect_column_values_to_not_be_null", Severity.FAIL),
        ("user_id_not_blank", "expect_column_values_to_match_regex", Severity.DROP),
        ("event_type_in_set", "expect_column_values_to_be_in_set", Severity.FAIL),
        ("timestamp_not_null", "expect_column_values_to_not_be_null", Severity.FAIL),
        ("amount_not_negative", "expect_column_values_to_be_between", Severity.DROP),
        ("segment_not_null", "expect_column_values_to_not_be_null", Severity.FAIL),
        ("batch_size", "expect_table_row_count_to_be_between", Severity.WARN),
        ("fresh_events", "expect_column_max_to_be_between", Severity.WARN),
    }
    in_set = next(e for e in settings.quality.expectations
                  if e.table == "silver/events" and e.name == "event_type_in_set")
    assert in_set.kwargs == {"column": "event_type",
                             "value_set": ["view", "click", "add_to_cart", "purchase"]}
    gold_tables = {e.table for e in settings.quality.expectations if e.table.startswith("gold/")}
    assert gold_tables == {"gold/event_counts_5m", "gold/user_activity_sliding",
                           "gold/user_sessions", "gold/segment_revenue_1h"}
    check_expectations(settings.quality)  # every default is valid for Great Expectations


def test_an_overlay_changes_one_expectation_by_name_and_adds_another(tmp_path: Path) -> None:
    conf = _conf(tmp_path, """
quality:
  tables:
    silver/events:
      fresh_events: {severity: fail}
      user_id_format:
        expectation: expect_column_values_to_match_regex
        kwargs: {column: user_id, regex: '^u[0-9]{4}$'}
        severity: drop
      batch_size: {enabled: false}
""")
    specs = {e.name: e for e in _load(conf, tmp_path).quality.for_table("silver/events")}
    assert specs["fresh_events"].severity is Severity.FAIL
    assert specs["fresh_events"].expectation_type == "expect_column_max_to_be_between"
    assert specs["user_id_format"].severity is Severity.DROP
    assert specs["user_id_format"].source == str(conf / "test.yaml")
    assert "batch_size" not in specs
    assert len(specs) == 10  # 10 defaults, one disabled, one added


def test_gates_can_be_switched_off(tmp_path: Path) -> None:
    settings = _load(_conf(tmp_path, "quality: {enabled: false}\n"), tmp_path)
    assert settings.quality.for_table("silver/events") == ()


@pytest.mark.parametrize(("overlay", "key", "problem"), [
    ("quality: {tables: {silver/nope: {}}}\n", "quality.tables.silver/nope", "no gate"),
    ("quality: {tables: {silver/events: {x: {expectation: expect_magic, severity: warn}}}}\n",
     "quality.tables.silver/events.x.expectation", "'expect_magic' is not an expectation"),
    ("quality: {tables: {silver/events: {event_id_unique: {severity: loud}}}}\n",
     "quality.tables.silver/events.event_id_unique.severity", "'loud' is not one of"),
    ("quality: {tables: {silver/events: {batch_size: {severity: drop}}}}\n",
     "quality.tables.silver/events.batch_size.severity", "drop needs a row-level expectation"),
    ("quality: {tables: {silver/events: {batch_size: {mostly: 1}}}}\n",
     "quality.tables.silver/events.batch_size.mostly", "unknown key"),
    ("quality: {strict: true}\n", "quality.strict", "unknown key"),
])
def test_bad_entries_name_the_key_and_the_file(tmp_path: Path, overlay: str, key: str,
                                               problem: str) -> None:
    conf = _conf(tmp_path, overlay)
    with pytest.raises(ConfigError) as error:
        _load(conf, tmp_path)
    assert error.value.key == key
    assert error.value.source == str(conf / "test.yaml")
    assert problem in str(error.value)


def test_arguments_are_checked_by_great_expectations_before_spark(tmp_path: Path) -> None:
    conf = _conf(tmp_path, """
quality:
  tables:
    gold/user_sessions:
      event_count_positive:
        kwargs: {column: event_count, min_value: lots}
""")
    settings = _load(conf, tmp_path)  # the structure is fine; the argument is not
    with pytest.raises(ConfigError) as error:
        check_expectations(settings.quality)
    assert error.value.key == "quality.tables.gold/user_sessions.event_count_positive.kwargs"
    assert error.value.source == str(conf / "test.yaml")
    assert "min_value" in str(error.value)
    assert "expect_column_values_to_be_between" in str(error.value)
