"""The ``lineage`` setting: checked before Spark starts, and the listener's Spark settings and jar
it adds to every session and to submit-cmd's command (none of them when it is off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.errors import ConfigError
from medallion.ops.submit import submit_argv
from medallion.project import load_settings
from medallion.spark.packages import jvm_packages
from medallion.spark.session import session_conf
from tests.conf_support import copy_base_conf
from tests.conftest import REPO

JAR = "io.openlineage:openlineage-spark_2.13:1.53.0"
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"


def conf_dir(tmp_path: Path, overlay: str) -> Path:
    folder = tmp_path / "conf"
    copy_base_conf(folder)
    (folder / "local.yaml").write_text(overlay)
    return folder


def submitted_conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


def lineage_keys(conf: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in conf.items()
            if key.startswith("spark.openlineage.") or key == "spark.extraListeners"}


def test_off_by_default_adds_nothing_to_a_session_or_the_submit_command() -> None:
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing="/l", lakehouse="/h")
    assert not settings.lineage.enabled
    assert lineage_keys(session_conf(settings)) == {}
    assert not any("openlineage" in package for package in jvm_packages(settings))
    argv = submit_argv(settings, "all", spark_submit="spark-submit")
    assert not any("openlineage" in arg.lower() for arg in argv)


def test_a_file_transport_adds_the_listener_its_jar_and_its_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path is the working directory's, made absolute
    folder = conf_dir(tmp_path, "lineage:\n  transport: file\n  path: lineage/events.jsonl\n")
    settings = load_settings(env="local", conf_dir=folder, landing="/l", lakehouse="/h")
    events = str(tmp_path.resolve() / "lineage" / "events.jsonl")
    expected = {
        "spark.extraListeners": LISTENER,
        "spark.openlineage.namespace": "medallion",
        "spark.openlineage.appName": "medallion_accounts_events_orders",  # every declared pipeline runs
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": events,
    }
    assert lineage_keys(session_conf(settings)) == expected
    assert JAR in jvm_packages(settings)
    # A session narrowed to one pipeline (run --pipeline orders) names its application after it.
    assert lineage_keys(session_conf(settings.only(["orders"])))[
        "spark.openlineage.appName"] == "medallion_orders"

    argv = submit_argv(settings, "silver", spark_submit="spark-submit", pipelines=["orders"])
    assert JAR in argv[argv.index("--packages") + 1].split(",")
    assert lineage_keys(submitted_conf(argv)) == {
        **expected, "spark.openlineage.appName": "medallion_orders"}


def test_an_http_transport_posts_to_the_url_and_keeps_a_configured_listener(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "lineage:\n  transport: http\n  url: http://127.0.0.1:5000\n"
                                "  namespace: lakehouse/prod\nspark:\n  app_name: nightly\n"
                                "  conf:\n    spark.extraListeners: com.example.Audit\n")
    settings = load_settings(env="local", conf_dir=folder, landing="/l", lakehouse="/h")
    expected = {
        "spark.extraListeners": f"com.example.Audit,{LISTENER}",
        "spark.openlineage.namespace": "lakehouse/prod",
        "spark.openlineage.appName": "nightly_accounts_events_orders",
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": "http://127.0.0.1:5000",
    }
    assert lineage_keys(session_conf(settings)) == expected
    assert lineage_keys(submitted_conf(submit_argv(settings, "all", spark_submit="s"))) == expected


def test_an_overlay_turns_it_off_again(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "lineage:\n  transport: none\n  url: null\n")
    base = folder / "base.yaml"
    base.write_text(base.read_text().replace("transport: none", "transport: http").replace(
        "url: null", "url: https://lineage.example.com/api/v1/lineage"))
    settings = load_settings(env="local", conf_dir=folder, landing="/l", lakehouse="/h")
    assert not settings.lineage.enabled
    assert lineage_keys(session_conf(settings)) == {}


@pytest.mark.parametrize(("overlay", "key", "words"), [
    ("lineage:\n  transport: kafka\n", "lineage.transport", "'kafka' is not one of none, file, http"),
    ("lineage:\n  transport: file\n", "lineage.path", "required with lineage.transport: file"),
    ("lineage:\n  transport: http\n", "lineage.url", "required with lineage.transport: http"),
    ("lineage:\n  transport: http\n  url: 127.0.0.1:5000\n", "lineage.url",
     "is not an http:// or https:// URL"),
    ("lineage:\n  transport: file\n  path: s3a://bucket/events.jsonl\n", "lineage.path",
     "is not a local file"),
    ("lineage:\n  transport: file\n  path: /tmp/e.jsonl\n  url: http://x\n", "lineage.url",
     "set only with lineage.transport: http"),
    ("lineage:\n  path: /tmp/e.jsonl\n", "lineage.path", "set only with lineage.transport: file"),
    ("lineage:\n  transport: http\n  url: http://user:secret@host:5000\n", "lineage.url",
     "holds credentials"),
    ("lineage:\n  transport: file\n  path: /tmp/e.jsonl\n  namespace: my lakehouse\n",
     "lineage.namespace", "is not a namespace"),
    ("lineage:\n  transport: file\n  file: /tmp/e.jsonl\n", "lineage.file", "unknown key"),
    ("lineage: true\n", "lineage", "must be a mapping"),
])
def test_a_bad_value_names_the_key_and_the_file(tmp_path: Path, overlay: str, key: str,
                                                words: str) -> None:
    folder = conf_dir(tmp_path, overlay)
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=folder, landing="/l", lakehouse="/h")
    assert (error.value.key, error.value.source) == (key, str(folder / "local.yaml"))
    assert words in str(error.value)
    assert "secret" not in str(error.value)


def test_a_path_that_is_a_folder_or_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    for path, words in ((tmp_path, "is a folder, not a file"),
                        (tmp_path / "a-file" / "events.jsonl", "is a file")):
        folder = conf_dir(tmp_path / path.name, f"lineage:\n  transport: file\n  path: {path}\n")
        with pytest.raises(ConfigError, match=words) as error:
            load_settings(env="local", conf_dir=folder, landing="/l", lakehouse="/h")
        assert error.value.key == "lineage.path"
