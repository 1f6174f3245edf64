"""The catalog and thrift sections of the configuration: parsed, and refused before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.config.model import Metastore, ThriftAuth
from medallion.errors import ConfigError
from medallion.project import load_settings
from tests.conf_support import copy_base_conf
from tests.conftest import REPO, make_settings
from tests.events_tables import GOLD_EVENT_COUNTS_5M, SILVER_QUARANTINE


def _conf(tmp_path: Path, local: str) -> Path:
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(local)
    return conf


def _load(tmp_path: Path, local: str):  # type: ignore[no-untyped-def]
    return load_settings(env="local", conf_dir=_conf(tmp_path, local),
                         landing=str(tmp_path / "l"), lakehouse=str(tmp_path / "h"))


def test_repo_configuration_has_embedded_catalog_comments_and_daily_views(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert settings.catalog.metastore is Metastore.EMBEDDED
    assert settings.catalog_dir() == f"{tmp_path}/lakehouse/_catalog"
    doc = settings.table_doc("gold.event_counts_5m")  # declared in conf/pipelines/events.yaml
    assert doc is not None
    assert doc.column_comments["window_start"] == "Start of the 5-minute window, inclusive (UTC)"
    assert settings.table_doc("quality/results") is None  # the engine's own: tables.py's comment
    # events' daily views are declared with its tables (conf/pipelines/events.yaml)
    assert [v.name for v in settings.views] == [
        "gold.event_counts_daily", "gold.segment_revenue_daily"]
    assert settings.catalog.views == ()
    assert settings.thrift.host == "127.0.0.1"
    assert settings.thrift.port == 0
    assert settings.thrift.auth is ThriftAuth.NONE


def test_dev_and_prod_overlays_stay_valid_on_s3() -> None:
    for env in ("dev", "prod"):
        settings = load_settings(env=env, conf_dir=REPO / "conf")
        assert settings.catalog.metastore is Metastore.IN_MEMORY


def test_column_names_are_read_from_the_ddl() -> None:
    assert GOLD_EVENT_COUNTS_5M.column_names == [
        "window_start", "window_end", "event_type", "event_count", "total_amount"]
    assert SILVER_QUARANTINE.column_names == [
        "raw", "event_id", "reasons", "source_file", "ingested_at"]


def test_views_are_read_and_comments_come_from_a_pipeline_overlay(tmp_path: Path) -> None:
    conf = _conf(tmp_path, """
catalog:
  views:
    silver.few: {sql: "SELECT * FROM silver.events LIMIT 3;", comment: Three}
    gold.daily_both:  # over two pipelines' tables, and a view of one of them
      sql: >-
        WITH d AS (SELECT day FROM gold.event_counts_daily)
        SELECT * FROM d JOIN gold.category_revenue_1h r ON d.day = to_date(r.window_start)
""")
    (conf / "pipelines" / "events.local.yaml").write_text(
        "silver:\n  events:\n    comment: Clean events\n"
        "    column_comments: {event_id: The id}\n", encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "l"),
                             lakehouse=str(tmp_path / "h"))
    doc = settings.table_doc("silver.events")
    assert doc is not None
    assert (doc.comment, dict(doc.column_comments)) == ("Clean events", {"event_id": "The id"})
    few = [v for v in settings.catalog.views if v.name == "silver.few"][0]
    assert (few.sql, few.comment) == ("SELECT * FROM silver.events LIMIT 3", "Three")
    assert [v.name for v in settings.views] == [  # the pipelines' first: catalog views read them
        "gold.event_counts_daily", "gold.segment_revenue_daily", "silver.few", "gold.daily_both"]


@pytest.mark.parametrize(("local", "key", "words"), [
    ("catalog: {metastore: hive}\n", "catalog.metastore", "not one of embedded, external"),
    ("catalog: {metastore: external}\n", "catalog.metastore_uris", "thrift://"),
    # Comments are declared with their tables: an unknown key like any other.
    ("catalog: {tables: {gold.event_counts_5m: {comment: x}}}\n", "catalog.tables",
     "unknown key (known keys: metastore, metastore_uris, views)"),
    ("catalog: {views: {daily: {sql: SELECT 1}}}\n", "catalog.views.daily", "catalog name"),
    ("catalog: {views: {gold.x: {sql: DROP TABLE gold.user_sessions}}}\n",
     "catalog.views.gold.x.sql", "single SELECT"),
    ("catalog: {views: {gold.user_sessions: {sql: SELECT 1}}}\n",
     "catalog.views.gold.user_sessions", "a table already has this name"),
    ("catalog: {views: {gold.store_sessions: {sql: SELECT 1}}}\n",  # the orders pipeline's
     "catalog.views.gold.store_sessions", "a table already has this name"),
    ("catalog: {views: {monitoring.mine: {sql: SELECT 1}}}\n",
     "catalog.views.monitoring.mine", "engine's own tables"),
    # A view over a table no pipeline declares could never be made: it waited at every run.
    ("catalog: {views: {gold.x: {sql: SELECT * FROM gold.event_counts_5min}}}\n",
     "catalog.views.gold.x.sql", "reads gold.event_counts_5min, which no pipeline declares as a "
     "table or view: the view could never be made"),
    ("catalog: {views: {gold.event_counts_daily: {sql: SELECT 1}}}\n",
     "catalog.views.gold.event_counts_daily",
     "pipeline events declares a view of this name: a catalog name has one declaration"),
    ("thrift: {host: 0.0.0.0}\n", "thrift.host", "loopback only"),
    ("thrift: {host: 10.1.2.3, auth: nosasl}\n", "thrift.host", "loopback only"),
    ("thrift: {host: 10.1.2.3, auth: ldap}\n", "thrift.ldap_url", "required"),
    ("thrift: {auth: kerberos, kerberos_principal: hive/_HOST@X}\n", "thrift.kerberos_keytab",
     "required"),
    ("thrift: {port: 70000}\n", "thrift.port", "TCP port"),
    ("thrift: {colour: red}\n", "thrift.colour", "unknown key"),
])
def test_bad_catalog_or_thrift_configuration_names_key_and_file(
        tmp_path: Path, local: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, local)
    assert caught.value.key == key
    assert caught.value.source == str(tmp_path / "conf" / "local.yaml")
    assert words.replace("{conf}", str(tmp_path / "conf")) in str(caught.value)


def test_embedded_metastore_needs_a_local_lakehouse(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env="local", conf_dir=_conf(tmp_path, ""), lakehouse="s3a://bucket/lake")
    assert caught.value.key == "catalog.metastore"
    assert "local lakehouse" in str(caught.value)


def test_ldap_with_tls_off_loopback_is_accepted(tmp_path: Path) -> None:
    keystore = tmp_path / "server.p12"
    keystore.write_bytes(b"not read by configuration")
    settings = _load(tmp_path, "thrift: {host: 10.1.2.3, auth: ldap, ldap_url: 'ldaps://ldap:636', "
                               f"tls: true, keystore: '{keystore}', "
                               "keystore_password_env: THRIFT_KEYSTORE_PASSWORD}\n")
    assert (settings.thrift.host, settings.thrift.auth) == ("10.1.2.3", ThriftAuth.LDAP)
    assert (settings.thrift.tls, settings.thrift.keystore) == (True, str(keystore))
    assert settings.thrift.read_only


def test_two_pipelines_may_not_declare_one_view(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "")
    overlay = conf / "pipelines" / "orders.local.yaml"
    overlay.write_text("views:\n  gold.event_counts_daily:\n"
                       "    sql: SELECT * FROM gold.category_revenue_1h\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "l"),
                      lakehouse=str(tmp_path / "h"))
    assert (caught.value.key, caught.value.source) == ("views.gold.event_counts_daily", str(overlay))
    assert "pipeline events declares a view of this name" in str(caught.value)
