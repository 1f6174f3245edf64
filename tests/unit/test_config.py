"""Configuration: overlays, overrides, and errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.config.model import Trigger, TriggerKind
from medallion.errors import ConfigError
from medallion.project import load_settings
from tests.conf_support import copy_pipelines
from tests.conftest import REPO


def write_conf(tmp_path: Path, base: str, **overlays: str) -> Path:
    conf = tmp_path / "conf"
    copy_pipelines(conf)  # a conf folder without its pipelines is refused
    (conf / "base.yaml").write_text(base)
    for env, text in overlays.items():
        (conf / f"{env}.yaml").write_text(text)
    return conf


BASE = "paths:\n  landing: /l\n  lakehouse: /h\nstreaming:\n  max_files_per_trigger: 10\n"


def test_overlay_changes_only_what_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDALLION_LANDING", raising=False)
    monkeypatch.delenv("MEDALLION_LAKEHOUSE", raising=False)
    conf = write_conf(tmp_path, BASE, prod="paths:\n  lakehouse: s3a://bucket/lake/\n"
                                            "catalog:\n  metastore: in-memory\n")
    settings = load_settings(env="prod", conf_dir=conf)
    assert settings.paths.landing == "/l"
    assert settings.paths.lakehouse == "s3a://bucket/lake"
    assert settings.streaming.max_files_per_trigger == 10
    assert settings.table_path("gold", "x") == "s3a://bucket/lake/gold/x"
    assert settings.checkpoint_path("gold/x") == "s3a://bucket/lake/_checkpoints/gold/x"


def test_environment_variables_then_flags_override_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = write_conf(tmp_path, BASE, local="")
    monkeypatch.setenv("MEDALLION_LANDING", "/from-env/landing")
    monkeypatch.setenv("MEDALLION_LAKEHOUSE", "/from-env/lake")
    settings = load_settings(env="local", conf_dir=conf, lakehouse="/from-flag")
    assert settings.paths.landing == "/from-env/landing"
    assert settings.paths.lakehouse == "/from-flag"


def test_an_unknown_key_is_named_with_its_file(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="streaming:\n  max_file_per_trigger: 5\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert error.value.key == "streaming.max_file_per_trigger"
    assert error.value.source == str(conf / "local.yaml")
    assert "unknown key" in str(error.value)


def test_a_bad_value_is_named_with_the_file_it_came_from(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="streaming:\n  trigger: processing-time=soon\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert (error.value.key, error.value.source) == ("trigger", str(conf / "local.yaml"))

    conf2 = write_conf(tmp_path / "b", BASE.replace("10", "0"), local="")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf2)
    assert (error.value.key, error.value.source) == (
        "streaming.max_files_per_trigger", str(conf2 / "base.yaml"))


@pytest.mark.parametrize(("local", "key", "words"), [
    # Each is refused before the session starts: no JVM stack trace, no Python traceback.
    ("spark:\n  master: local[two]\n", "spark.master", "must be a Spark master URL"),
    ("spark:\n  master: local[0]\n", "spark.master", "must be a Spark master URL"),
    ("spark:\n  conf:\n    spark.sql.shuffle.partitions: [1]\n",
     "spark.conf.spark.sql.shuffle.partitions", "one text, number or boolean, not a list"),
    ("spark:\n  conf:\n    spark.executor.memory:\n", "spark.conf.spark.executor.memory",
     "one text, number or boolean, not null"),
])
def test_spark_settings_spark_would_refuse_at_its_start_are_refused_before_it(
        tmp_path: Path, local: str, key: str, words: str) -> None:
    conf = write_conf(tmp_path, BASE, local=local)
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert (error.value.key, error.value.source) == (key, str(conf / "local.yaml"))
    assert words in str(error.value)


def test_every_master_url_spark_takes_is_taken(tmp_path: Path) -> None:
    for master in ("local", "local[*]", "local[4, 2]", "local-cluster[2,1,1024]",
                   "spark://a:7077,b:7077", "yarn", "k8s://https://api:6443"):
        conf = write_conf(tmp_path / str(abs(hash(master))), BASE,
                          local=f"spark:\n  master: '{master}'\n")
        assert load_settings(env="local", conf_dir=conf).spark.master == master


def test_a_missing_environment_lists_the_available_ones(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="", prod="")
    with pytest.raises(ConfigError, match=r"no overlay for environment 'qa' \(available: local, prod\)"):
        load_settings(env="qa", conf_dir=conf)


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="spark: [unclosed\n")
    with pytest.raises(ConfigError, match="local.yaml"):
        load_settings(env="local", conf_dir=conf)


def test_triggers_parse() -> None:
    assert Trigger.parse("available-now") == Trigger(TriggerKind.AVAILABLE_NOW)
    assert Trigger.parse("once") == Trigger(TriggerKind.ONCE)
    assert Trigger.parse("processing-time=30 seconds") == Trigger(
        TriggerKind.PROCESSING_TIME, "30 seconds")
    with pytest.raises(ConfigError, match="trigger"):
        Trigger.parse("continuous")
    with pytest.raises(ConfigError, match="not a duration"):
        Trigger.parse("processing-time=soon")


def test_the_shipped_environments_load(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make` exports local paths in MEDALLION_*; they would override the overlays' s3a:// paths.
    monkeypatch.delenv("MEDALLION_LANDING", raising=False)
    monkeypatch.delenv("MEDALLION_LAKEHOUSE", raising=False)
    for env in ("local", "dev", "prod"):
        settings = load_settings(env=env, conf_dir=REPO / "conf")
        assert settings.env == env
    assert load_settings(env="prod", conf_dir=REPO / "conf").paths.lakehouse.startswith("s3a://")


def test_the_cli_rejects_bad_configuration_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from medallion.cli.main import main

    conf = write_conf(tmp_path, BASE, local="spark:\n  shuffle_partitions: many\n")
    assert main(["run", "all", "--conf-dir", str(conf)]) == 2
    err = capsys.readouterr().err
    assert "spark.shuffle_partitions" in err and str(conf / "local.yaml") in err


def test_settings_carry_the_declared_pipelines_with_the_environment_overlay(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="", prod="catalog:\n  metastore: in-memory\n")
    (conf / "pipelines" / "events.prod.yaml").write_text("watermark: 30 minutes\n")
    local, prod = (load_settings(env=env, conf_dir=conf) for env in ("local", "prod"))
    assert [p.name for p in local.pipelines] == ["accounts", "events", "orders"]
    assert (local.pipeline("events").watermark, prod.pipeline("events").watermark) == (
        "10 minutes", "30 minutes")
    pipeline, gold = prod.declared_table("gold.segment_revenue_1h")
    assert pipeline.name == "events"
    assert gold.key == "gold/segment_revenue_1h"
    assert [g.key for _, g in local.gold_specs()] == [
        "gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
        "gold/segment_revenue_1h", "gold/purchase_attribution", "gold/category_revenue_1h",
        "gold/store_sessions"]
    assert local.declared_table("silver/events")[1].column_names[:3] == (
        "event_id", "user_id", "event_type")
    with pytest.raises(KeyError, match="gold/nope"):
        local.declared_table("gold/nope")
    with pytest.raises(KeyError, match="quality/results"):
        local.declared_table("quality/results")  # an engine table, declared by no pipeline


def test_a_conf_folder_without_pipelines_is_refused_before_spark(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "base.yaml").write_text(BASE)
    (conf / "local.yaml").write_text("")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert (error.value.key, error.value.source) == ("<folder>", str(conf / "pipelines"))
    assert "no pipelines folder" in str(error.value)

    (conf / "pipelines").mkdir()
    (conf / "pipelines" / "events.local.yaml").write_text("watermark: 5 minutes\n")  # an overlay only
    with pytest.raises(ConfigError, match="declares no pipeline"):
        load_settings(env="local", conf_dir=conf)


def test_an_invalid_pipeline_fails_settings_naming_key_and_file(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="")
    events = conf / "pipelines" / "events.yaml"
    events.write_text(events.read_text().replace(
        "total_amount: {function: sum, column: amount, default: 0}",
        "total_amount: {function: sum, column: amout, default: 0}", 1))
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert (error.value.key, error.value.source) == (
        "gold.event_counts_5m.aggregates.total_amount.column", str(events))
    assert "unknown column 'amout'" in str(error.value)
    # An overlay's bad value names the overlay.
    events.write_text((REPO / "conf" / "pipelines" / "events.yaml").read_text())
    (conf / "pipelines" / "events.local.yaml").write_text(
        "gold:\n  user_sessions:\n    window: {kind: session, gap: 5 minutes, column: user_id}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert (error.value.key, error.value.source) == (
        "gold.user_sessions.window.column", str(conf / "pipelines" / "events.local.yaml"))


def test_two_pipelines_may_not_write_one_table(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, BASE, local="")
    (conf / "pipelines" / "clicks.yaml").write_text(
        (conf / "pipelines" / "events.yaml").read_text())
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf)
    assert "bronze/events is also written by pipeline clicks" in str(error.value)
    assert error.value.source == str(conf / "pipelines" / "events.yaml")


def test_a_watermark_in_the_settings_is_an_unknown_key(tmp_path: Path) -> None:
    """The event-time watermark is declared per pipeline, not among the engine's settings."""
    conf = write_conf(tmp_path, BASE, prod="streaming:\n  watermark: 30 minutes\n"
                                            "catalog:\n  metastore: in-memory\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="prod", conf_dir=conf)
    assert (error.value.key, error.value.source) == ("streaming.watermark", str(conf / "prod.yaml"))
    assert "unknown key (known keys: max_files_per_trigger, trigger)" in str(error.value)
