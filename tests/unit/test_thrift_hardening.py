"""The Thrift server's hardening that needs no server: configuration refused before Spark
starts, its per-user folders, its JDBC URL and the CLI's ``--port``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from medallion.cli.main import main
from medallion.config.model import SaslQop
from medallion.errors import ConfigError
from medallion.project import load_settings
from medallion.serving import thrift
from tests.conf_support import copy_base_conf
from tests.conftest import REPO, make_settings


def _load(tmp_path: Path, local: str):  # type: ignore[no-untyped-def]
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(local)
    return load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "l"),
                         lakehouse=str(tmp_path / "h"))


@pytest.fixture
def keystore(tmp_path: Path) -> Path:
    path = tmp_path / "server.p12"
    path.write_bytes(b"a keystore: configuration only checks that it is a file")
    return path


def test_defaults_are_loopback_read_only_without_tls(tmp_path: Path) -> None:
    thrift_settings = _load(tmp_path, "").thrift
    assert (thrift_settings.host, thrift_settings.read_only, thrift_settings.tls) == (
        "127.0.0.1", True, False)
    assert thrift_settings.sasl_qop is SaslQop.AUTH_CONF


LDAPS = "auth: ldap, ldap_url: 'ldaps://ldap:636'"
TLS = "tls: true, keystore: '{keystore}', keystore_password_env: THRIFT_KEYSTORE_PASSWORD"


@pytest.mark.parametrize(("local", "key", "words"), [
    # off loopback without TLS: passwords and rows in clear on the network
    (f"thrift: {{host: 10.1.2.3, {LDAPS}}}\n", "thrift.tls", "not loopback"),
    ("thrift: {host: 10.1.2.3, auth: kerberos, kerberos_principal: hive/_HOST@X, "
     "kerberos_keytab: /k}\n", "thrift.tls", "not loopback"),
    # LDAP without TLS to the directory, wherever the server listens
    ("thrift: {auth: ldap, ldap_url: 'ldap://ldap:389'}\n", "thrift.ldap_url", "ldaps://"),
    (f"thrift: {{host: 10.1.2.3, auth: ldap, ldap_url: 'ldap://ldap', {TLS}}}\n",
     "thrift.ldap_url", "ldaps://"),
    # Kerberos off loopback without confidentiality
    ("thrift: {host: 10.1.2.3, auth: kerberos, kerberos_principal: hive/_HOST@X, "
     f"kerberos_keytab: /k, sasl_qop: auth, {TLS}}}\n", "thrift.sasl_qop", "auth-conf"),
    ("thrift: {sasl_qop: none}\n", "thrift.sasl_qop", "not one of"),
    # TLS half configured
    ("thrift: {tls: true, keystore_password_env: P}\n", "thrift.keystore", "required"),
    ("thrift: {tls: true, keystore: /nowhere/server.p12, keystore_password_env: P}\n",
     "thrift.keystore", "not a file"),
    ("thrift: {tls: true, keystore: '{keystore}'}\n", "thrift.keystore_password_env", "required"),
    ("thrift: {keystore: '{keystore}'}\n", "thrift.keystore", "only with thrift.tls"),
    ("thrift: {read_only: sometimes}\n", "thrift.read_only", "true or false"),
])
def test_insecure_thrift_configuration_is_refused_naming_key_and_file(
        tmp_path: Path, keystore: Path, local: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, local.replace("{keystore}", str(keystore)))
    assert caught.value.key == key
    assert caught.value.source == str(tmp_path / "conf" / "local.yaml")
    assert words in str(caught.value)


def test_a_password_written_where_its_variable_name_belongs_is_refused_unseen(
        tmp_path: Path, keystore: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f"thrift: {{tls: true, keystore: '{keystore}', "
                        "keystore_password_env: 'hunter2!secret'}\n")
    assert caught.value.key == "thrift.keystore_password_env"
    assert "hunter2" not in str(caught.value)


def test_tls_kerberos_off_loopback_with_auth_conf_is_accepted(
        tmp_path: Path, keystore: Path) -> None:
    settings = _load(tmp_path, "thrift: {host: 10.1.2.3, auth: kerberos, kerberos_principal: "
                               f"hive/_HOST@X, kerberos_keytab: /k, {TLS}, read_only: false}}\n"
                     .replace("{keystore}", str(keystore)))
    conf = thrift.server_conf(settings, 10000)
    assert conf["spark.hadoop.hive.server2.thrift.sasl.qop"] == "auth-conf"
    # TLS is set in the running JVM (tls_conf), never on its command line with the password.
    assert not any("SSL" in key or "keystore" in key or "password" in key for key in conf)
    assert thrift.tls_conf(settings.thrift, "pw") == {
        "hive.server2.use.SSL": "true", "hive.server2.keystore.path": str(keystore),
        "hive.server2.keystore.password": "pw",
        "hive.ssl.protocol.blacklist": "SSLv2,SSLv2Hello,SSLv3,TLSv1,TLSv1.1"}
    assert "spark.sql.runSQLOnFiles" not in conf  # read_only: false, written explicitly


def test_keystore_password_variable_must_be_set_before_the_server_starts(
        tmp_path: Path, keystore: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(tmp_path, f"thrift: {{{TLS}}}\n".replace("{keystore}", str(keystore)))
    monkeypatch.delenv("THRIFT_KEYSTORE_PASSWORD", raising=False)
    with pytest.raises(thrift.ThriftError, match="THRIFT_KEYSTORE_PASSWORD"):
        thrift.start(settings)
    monkeypatch.setenv("THRIFT_KEYSTORE_PASSWORD", "s3cret-value")
    assert thrift.keystore_password(settings.thrift) == "s3cret-value"


def test_read_only_server_turns_path_based_sql_off(tmp_path: Path) -> None:
    conf = thrift.server_conf(make_settings(tmp_path), 10000)
    assert conf["spark.sql.runSQLOnFiles"] == "false"


def test_run_folder_is_created_0700(tmp_path: Path) -> None:
    directory = thrift.run_dir(make_settings(tmp_path))
    info = directory.lstat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o700, os.getuid())


def test_s3_lakehouse_state_goes_to_a_per_user_folder_of_tmp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    for exported in ("MEDALLION_LANDING", "MEDALLION_LAKEHOUSE"):  # make exports local paths
        monkeypatch.delenv(exported, raising=False)
    settings = load_settings(env="dev", conf_dir=REPO / "conf")
    directory = thrift.run_dir(settings)
    assert directory.parent == tmp_path / "tmp" / f"medallion-{os.getuid()}"
    for folder in (directory, directory.parent):
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700


def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    if os.getuid() != 0:
        pytest.skip("only root can give a folder to another user")
    os.chown(planted, 4242, 4242)
    with pytest.raises(thrift.ThriftError, match="belongs to uid 4242"):
        thrift.secure_dir(planted)


def test_a_folder_others_may_write_or_a_symlink_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(thrift.ThriftError, match="writable by other users"):
        thrift.secure_dir(shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with pytest.raises(thrift.ThriftError, match="symbolic link"):
        thrift.secure_dir(link)


def test_a_folder_of_ours_others_may_only_read_is_narrowed(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    mine.chmod(0o755)
    thrift.secure_dir(mine)
    assert stat.S_IMODE(mine.lstat().st_mode) == 0o700


@pytest.mark.parametrize(("host", "tls", "url"), [
    ("127.0.0.1", False, "jdbc:hive2://127.0.0.1:10000/default"),
    ("::1", False, "jdbc:hive2://[::1]:10000/default"),
    ("fd00::5", True, "jdbc:hive2://[fd00::5]:10000/default;ssl=true"),
])
def test_jdbc_url_brackets_ipv6_hosts_and_says_ssl(host: str, tls: bool, url: str) -> None:
    server = thrift.ThriftServer(host, 10000, 1, "none", "/x/server.log", tls=tls)
    assert server.jdbc_url == url


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_cli_refuses_a_port_that_is_no_tcp_port(
        port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:  # argparse's usage error, before any settings
        main(["thrift", "up", "--port", port, "--lakehouse", str(tmp_path / "h"),
              "--landing", str(tmp_path / "l")])
    assert caught.value.code == 2
    assert "--port" in capsys.readouterr().err


def test_the_servers_class_path_leaves_out_what_spark_ships_itself() -> None:
    """The packages' jars go before Spark's on the server's class path: a second, older copy of
    something Spark ships (Delta's kernel brings Jackson 2.13 beside Spark's own) would be the
    one loaded, and Jackson's Scala module refuses it."""
    import pyspark

    spark_jars = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert any(name.startswith("jackson-databind-") for name in spark_jars)
    ivy = "/ivy/jars/"
    jars = [f"{ivy}io.delta_delta-spark_4.2_2.13-4.4.0.jar",
            f"{ivy}com.fasterxml.jackson.core_jackson-databind-2.13.5.jar",
            f"{ivy}org.apache.parquet_parquet-hadoop-1.16.0.jar",
            f"{ivy}org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar",
            f"{ivy}com.github.luben_zstd-jni-1.5.7-3.jar",
            f"{ivy}org.apache.hadoop_hadoop-aws-3.5.0.jar",
            f"{ivy}software.amazon.awssdk_bundle-2.35.4.jar"]
    assert thrift.not_shipped_by_spark(jars) == [
        f"{ivy}io.delta_delta-spark_4.2_2.13-4.4.0.jar",
        f"{ivy}org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar",
        f"{ivy}org.apache.hadoop_hadoop-aws-3.5.0.jar",
        f"{ivy}software.amazon.awssdk_bundle-2.35.4.jar"]
