"""Expectations declared with their tables: the gates they make, pipeline overlays by name, and
errors naming key and file. No JVM."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from medallion.errors import ConfigError
from medallion.project import load_settings
from medallion.quality.spec import (
    CHECKED_ENV,
    Severity,
    check_expectations,
    checked_folder,
    declared_expectations,
)
from tests.conf_support import copy_base_conf

ORDERS = Path(__file__).resolve().parent / "pipeline_fixtures" / "pipelines" / "orders.yaml"


def _conf(tmp_path: Path, overlay: str = "", pipeline_overlay: str | None = None) -> Path:
    """The repo's configuration with ``test.yaml`` and, if given, ``pipelines/events.test.yaml``."""
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "test.yaml").write_text(overlay, encoding="utf-8")
    if pipeline_overlay is not None:
        (conf / "pipelines" / "events.test.yaml").write_text(pipeline_overlay, encoding="utf-8")
    return conf


def _load(conf: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    return load_settings(env="test", conf_dir=conf, landing=str(tmp_path / "l"),
                         lakehouse=str(tmp_path / "h"))


def test_events_gates_are_its_declared_expectations(tmp_path: Path) -> None:
    settings = _load(_conf(tmp_path), tmp_path)
    silver = {(e.name, e.expectation_type, e.severity)
              for e in settings.expectations_of("silver/events")}
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
    in_set = next(e for e in settings.expectations_of("silver.events")
                  if e.name == "event_type_in_set")
    assert in_set.kwargs == {"column": "event_type",
                             "value_set": ["view", "click", "add_to_cart", "purchase"]}
    assert in_set.table == "silver/events"
    assert in_set.declared_at == "silver.events.expectations.event_type_in_set"
    assert in_set.source == str(tmp_path / "conf" / "pipelines" / "events.yaml")
    gated = {e.table for e in declared_expectations(settings)}
    assert gated == {"silver/events", "gold/event_counts_5m", "gold/user_activity_sliding",
                     "gold/user_sessions", "gold/segment_revenue_1h",
                     "gold/purchase_attribution", "silver/order_lines"}
    # Tables that declare none, and the engine's own tables, have no gate.
    assert settings.expectations_of("bronze/events") == ()
    assert settings.expectations_of("quality/results") == ()
    check_expectations(settings)  # every declared one is valid for Great Expectations


def test_a_second_pipeline_gates_its_own_tables(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    shutil.copy(ORDERS, conf / "pipelines" / "orders.yaml")
    settings = _load(conf, tmp_path)
    (visits,) = settings.expectations_of("gold/store_visits")
    assert (visits.table, visits.name, visits.expectation_type, dict(visits.kwargs),
            visits.severity, visits.row_level) == (
        "gold/store_visits", "orders_positive", "expect_column_values_to_be_between",
        {"column": "orders", "min_value": 1}, Severity.DROP, True)
    assert settings.expectations_of("gold/category_revenue_sliding") == ()


def test_a_pipeline_overlay_changes_one_expectation_by_name_and_adds_another(
        tmp_path: Path) -> None:
    conf = _conf(tmp_path, pipeline_overlay="""
silver:
  events:
    expectations:
      fresh_events: {severity: fail}
      user_id_format:
        expectation: expect_column_values_to_match_regex
        kwargs: {column: user_id, regex: '^u[0-9]{4}$'}
        severity: drop
      batch_size: {enabled: false}
""")
    specs = {e.name: e for e in _load(conf, tmp_path).expectations_of("silver/events")}
    assert specs["fresh_events"].severity is Severity.FAIL
    assert specs["fresh_events"].expectation_type == "expect_column_max_to_be_between"
    assert specs["user_id_format"].severity is Severity.DROP
    assert specs["user_id_format"].source == str(conf / "pipelines" / "events.test.yaml")
    assert "batch_size" not in specs
    assert len(specs) == 10  # 10 declared, one disabled, one added


def test_gates_can_be_switched_off(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "quality: {enabled: false}\n", pipeline_overlay=(
        "gold:\n  user_sessions:\n    expectations:\n      event_count_positive:\n"
        "        kwargs: {column: event_count, min_value: lots}\n"))
    settings = _load(conf, tmp_path)
    assert settings.expectations_of("silver/events") == ()
    assert settings.expectations_of("gold/user_sessions") == ()
    check_expectations(settings)  # no gate will evaluate the bad argument: not refused


EVENTS_EXPECTATIONS = "silver:\n  events:\n    expectations:\n      "


@pytest.mark.parametrize(("pipeline_overlay", "key", "problem"), [
    (EVENTS_EXPECTATIONS + "x: {expectation: expect_magic, severity: warn}\n",
     "silver.events.expectations.x.expectation", "'expect_magic' is not an expectation"),
    (EVENTS_EXPECTATIONS + "event_id_unique: {severity: loud}\n",
     "silver.events.expectations.event_id_unique.severity", "'loud' is not one of"),
    (EVENTS_EXPECTATIONS + "batch_size: {severity: drop}\n",
     "silver.events.expectations.batch_size.severity", "drop needs a row-level expectation"),
    (EVENTS_EXPECTATIONS + "batch_size: {mostly: 1}\n",
     "silver.events.expectations.batch_size.mostly", "unknown key"),
    (EVENTS_EXPECTATIONS + "x: {expectation: expect_column_values_to_not_be_null, "
                           "kwargs: {column: nope}, severity: warn}\n",
     "silver.events.expectations.x.kwargs.column", "nope"),
])
def test_bad_declared_expectations_name_the_key_and_the_pipeline_file(
        tmp_path: Path, pipeline_overlay: str, key: str, problem: str) -> None:
    conf = _conf(tmp_path, pipeline_overlay=pipeline_overlay)
    with pytest.raises(ConfigError) as error:
        _load(conf, tmp_path)
    assert error.value.key == key
    assert error.value.source == str(conf / "pipelines" / "events.test.yaml")
    assert problem in str(error.value)


@pytest.mark.parametrize(("overlay", "key", "problem"), [
    ("quality: {strict: true}\n", "quality.strict", "unknown key"),
    # Expectations are declared with their tables: a list here is an unknown key like any other.
    ("quality:\n  tables:\n    gold/user_sessions:\n      event_count_positive: {severity: warn}\n",
     "quality.tables", "unknown key (known keys: enabled; expectations are declared with their "
                       "table in conf/pipelines/<name>.yaml)"),
])
def test_bad_quality_settings_name_the_key_and_the_file(tmp_path: Path, overlay: str, key: str,
                                                        problem: str) -> None:
    conf = _conf(tmp_path, overlay)
    with pytest.raises(ConfigError) as error:
        _load(conf, tmp_path)
    assert error.value.key == key
    assert error.value.source == str(conf / "test.yaml")
    assert problem.replace("{conf}", str(conf)) in str(error.value)


@pytest.mark.parametrize(("kwargs", "problem"), [
    ("{column: event_count, min_value: lots}", "not valid for expect_column_values_to_be_between"),
    ("{column: event_count, min_value: {$PARAMETER: now() - timedeltaa(days=2)}}",
     "a $PARAMETER of expect_column_values_to_be_between cannot be evaluated"),
    ("{column: event_count, row_condition: 'event_count > 1'}", "row conditions are not supported"),
])
def test_arguments_are_checked_by_great_expectations_before_spark(
        tmp_path: Path, kwargs: str, problem: str) -> None:
    conf = _conf(tmp_path, pipeline_overlay=(
        "gold:\n  user_sessions:\n    expectations:\n      event_count_positive:\n"
        f"        kwargs: {kwargs}\n"))
    settings = _load(conf, tmp_path)  # the structure is fine; the argument is not
    with pytest.raises(ConfigError) as error:
        check_expectations(settings)
    assert error.value.key.startswith("gold.user_sessions.expectations.event_count_positive.kwargs")
    assert error.value.source == str(conf / "pipelines" / "events.test.yaml")
    assert problem in str(error.value)



def test_the_check_can_forget(tmp_path: Path) -> None:
    """``off`` keeps nothing; an unwritable folder is not an error."""
    assert checked_folder({CHECKED_ENV: "off"}) is None
    assert checked_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "medallion" / "expectations"
    blocked = tmp_path / "file"
    blocked.write_text("not a folder", encoding="utf-8")
    settings = _load(_conf(tmp_path), tmp_path)
    check_expectations(settings, {CHECKED_ENV: str(blocked / "checked")})
    assert blocked.read_text(encoding="utf-8") == "not a folder"
