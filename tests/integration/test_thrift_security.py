"""The Thrift server's hardening, with one real server and real clients (PyHive, beeline).

The server of this module is started the way an unlucky operator would: with HiveServer2's
``HIVE_SERVER2_THRIFT_BIND_HOST=0.0.0.0`` and ``HIVE_SERVER2_THRIFT_PORT`` in its environment.
It runs with TLS (a self-signed keystore made here with ``keytool``, its password in an
environment variable) and in the default read-only mode. The one table it serves is written
with delta-rs, so this module starts no JVM of its own.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import stat
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from deltalake import write_deltalake

from medallion.project import Settings, load_settings
from medallion.serving import thrift
from tests.conf_support import copy_base_conf
from tests.conftest import REPO
from tests.events_tables import GOLD_EVENT_COUNTS_5M

BEELINE = Path(pyspark.__file__).parent / "bin" / "beeline"
PASSWORD_ENV = "MEDALLION_TEST_KEYSTORE_PASSWORD"
PASSWORD = "kS-" + os.urandom(6).hex()  # a value to look for where it must not be
TRUST_PASSWORD = "trust-" + os.urandom(4).hex()
REFUSED = "read-only Thrift server"
# A path-based read fails either way: the name does not resolve (runSQLOnFiles is off) or, if a
# client turned that back on, the check rule refuses it.
PATH_REFUSED = f"{REFUSED}|TABLE_OR_VIEW_NOT_FOUND"
TABLE = "gold.event_counts_5m"
SCHEMA = pa.schema([("window_start", pa.timestamp("us", tz="UTC")),
                    ("window_end", pa.timestamp("us", tz="UTC")),
                    ("event_type", pa.string()), ("event_count", pa.int64()),
                    ("total_amount", pa.decimal128(28, 4))])


def _rows(event_type: str, count: int) -> pa.Table:
    start = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
    end = datetime(2025, 1, 27, 10, 5, tzinfo=timezone.utc)
    return pa.Table.from_pylist([{"window_start": start, "window_end": end,
                                  "event_type": event_type, "event_count": count,
                                  "total_amount": Decimal("1.5000")}], schema=SCHEMA)


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True, timeout=120)


class Secured:
    """The module's server and what a client needs to reach it."""

    def __init__(self, settings: Settings, server: thrift.ThriftServer, decoy_port: int,
                 ca_file: Path, truststore: Path) -> None:
        self.settings = settings
        self.server = server
        self.decoy_port = decoy_port
        self.ca_file = ca_file
        self.truststore = truststore


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A TLS, read-only server started with HiveServer2's variables pointing elsewhere."""
    root = tmp_path_factory.mktemp("thrift_security")
    keystore, ca_file, truststore = root / "server.p12", root / "server.pem", root / "trust.p12"
    _keytool("-genkeypair", "-alias", "thrift", "-keyalg", "RSA", "-keysize", "2048",
             "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost",
             "-validity", "2", "-storetype", "PKCS12", "-keystore", str(keystore),
             "-storepass", PASSWORD, "-keypass", PASSWORD)
    _keytool("-exportcert", "-rfc", "-alias", "thrift", "-keystore", str(keystore),
             "-storepass", PASSWORD, "-file", str(ca_file))
    _keytool("-importcert", "-noprompt", "-alias", "thrift", "-file", str(ca_file),
             "-storetype", "PKCS12", "-keystore", str(truststore), "-storepass", TRUST_PASSWORD)
    conf = root / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text(
        f"thrift: {{tls: true, keystore: '{keystore}', keystore_password_env: {PASSWORD_ENV}}}\n")
    settings = load_settings(env="local", conf_dir=conf, landing=str(root / "landing"),
                             lakehouse=str(root / "lakehouse"))
    assert settings.thrift.read_only  # the default
    write_deltalake(GOLD_EVENT_COUNTS_5M.path(settings), _rows("view", 2))
    decoy_port = thrift.free_port("127.0.0.1")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PASSWORD_ENV, PASSWORD)
        patch.setenv("HIVE_SERVER2_THRIFT_BIND_HOST", "0.0.0.0")
        patch.setenv("HIVE_SERVER2_THRIFT_PORT", str(decoy_port))
        server = thrift.start(settings, timeout=240)
    try:
        yield Secured(settings, server, decoy_port, ca_file, truststore)
    finally:
        thrift.stop(settings)


def _listening_addresses(port: int) -> set[str]:
    """The IPv4 and IPv6 addresses a TCP socket listens on at ``port`` on this machine."""
    found = set()
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                # /proc writes each 32-bit word in host (little-endian) order
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))
                text = socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, words)
                found.add(text.removeprefix("::ffff:"))  # an IPv4 address on an IPv6 socket
    return found


def _tls_connection(secured: Secured, configuration: dict[str, str] | None = None) -> Any:
    """PyHive over TLS: its own transport (SASL PLAIN inside a verified TLS socket)."""
    import thrift_sasl
    from pyhive import hive
    from pyhive.sasl_compat import PureSASLClient
    from thrift.transport.TSSLSocket import TSSLSocket

    context = ssl.create_default_context(cafile=str(secured.ca_file))
    sock = TSSLSocket(secured.server.host, secured.server.port, ssl_context=context,
                      server_hostname="localhost")
    transport = thrift_sasl.TSaslClientTransport(
        lambda: PureSASLClient(host=secured.server.host, username="analyst", password="x"),
        "PLAIN", sock)
    return hive.connect(thrift_transport=transport, configuration=configuration)


def _query(connection: Any, statement: str) -> list[tuple[Any, ...]]:
    cursor = connection.cursor()
    cursor.execute(statement)
    return list(cursor.fetchall()) if cursor.description else []


def test_server_binds_where_configuration_says_whatever_hive_environment_says(
        secured: Secured) -> None:
    assert (secured.server.host, secured.server.port) == ("127.0.0.1", secured.server.port)
    assert _listening_addresses(secured.server.port) == {"127.0.0.1"}
    assert _listening_addresses(secured.decoy_port) == set()


def test_plain_connections_are_refused_and_tls_clients_are_served(secured: Secured) -> None:
    from pyhive import hive

    with pytest.raises(Exception):  # noqa: B017 - the TLS server hangs up on plain Thrift
        hive.connect(host=secured.server.host, port=secured.server.port,
                     username="analyst", auth="NONE").cursor().execute("SELECT 1")

    connection = _tls_connection(secured)
    try:
        assert _query(connection, f"SELECT event_type, event_count FROM {TABLE}") == [("view", 2)]
    finally:
        connection.close()

    url = (f"{secured.server.jdbc_url};sslTrustStore={secured.truststore};"
           f"trustStorePassword={TRUST_PASSWORD}")
    assert url.startswith(f"jdbc:hive2://127.0.0.1:{secured.server.port}/default;ssl=true;")
    beeline = subprocess.run(
        [str(BEELINE), "-u", url, "-n", "analyst", "--silent=true", "--outputformat=csv2",
         "-e", f"SELECT event_type, event_count FROM {TABLE};"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert beeline.returncode == 0, beeline.stdout[-2000:] + beeline.stderr[-2000:]
    assert "view,2" in beeline.stdout.splitlines()


def test_keystore_password_is_in_no_command_line_and_no_file_of_the_server(
        secured: Secured) -> None:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert PASSWORD.encode() not in cmdline.read_bytes(), cmdline
        except OSError:
            continue  # a process that ended meanwhile
    directory = thrift.run_dir(secured.settings)
    for path in [*directory.rglob("*"), *(REPO / "conf").rglob("*")]:
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path


def test_state_and_logs_live_in_a_folder_only_the_user_can_enter(secured: Secured) -> None:
    directory = thrift.run_dir(secured.settings)
    info = directory.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o700, os.getuid())
    assert (directory / thrift.STATE_FILE).is_file()
    assert Path(secured.server.log_file).parent == directory


# Each statement a read-only server must refuse, with why it matters.
REFUSED_STATEMENTS = [
    "ADD JAR /tmp/anything.jar",  # code into the server's JVM
    "SELECT * FROM text.`/etc/passwd`",  # any file the server's user can read
    "SELECT * FROM parquet.`/tmp`",
    "SELECT (SELECT count(*) FROM json.`/etc`) AS n",  # hidden in a subquery
    f"DROP TABLE {TABLE}",
    f"INSERT INTO {TABLE} SELECT * FROM {TABLE}",
    f"DELETE FROM {TABLE}",
    "CREATE TABLE gold.copy AS SELECT 1 AS x",
    "CREATE TEMPORARY FUNCTION f AS 'org.example.F' USING JAR '/tmp/f.jar'",
    "SET spark.sql.runSQLOnFiles=true",
    f"CACHE TABLE {TABLE}",
    f"VACUUM {TABLE} RETAIN 0 HOURS",
    # JVM methods by name (java.lang.System.exit takes an int): in a select list, a filter, a
    # subquery
    "SELECT reflect('java.lang.System', 'getProperty', 'user.home')",
    f"SELECT * FROM {TABLE} WHERE java_method('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "SELECT 1 AS x WHERE EXISTS (SELECT try_reflect('java.lang.System', 'getProperty', 'x'))",
]


def test_read_only_server_refuses_writes_jars_and_files(secured: Secured) -> None:
    connection = _tls_connection(secured)
    try:
        for statement in REFUSED_STATEMENTS:
            with pytest.raises(Exception, match=PATH_REFUSED if "`/" in statement else REFUSED):
                _query(connection, statement)
        path = GOLD_EVENT_COUNTS_5M.path(secured.settings)
        with pytest.raises(Exception, match=PATH_REFUSED):
            _query(connection, f"SELECT * FROM delta.`{path}`")
        with pytest.raises(Exception, match=REFUSED):
            _query(connection, f"DESCRIBE HISTORY '{path}'")
        # Nothing changed: the table is there with its one row.
        assert _query(connection, f"SELECT count(*) FROM {TABLE}") == [(1,)]
    finally:
        connection.close()


def test_read_only_server_answers_queries_and_metadata(secured: Secured) -> None:
    connection = _tls_connection(secured)
    try:
        tables = {row[1] for row in _query(connection, "SHOW TABLES IN gold")}
        assert "event_counts_5m" in tables
        described = {row[0] for row in _query(connection, f"DESCRIBE TABLE {TABLE}")}
        assert {"window_start", "event_count"} <= described
        history = _query(connection, f"DESCRIBE HISTORY {TABLE}")
        assert history  # versions of a catalog table are readable
        assert _query(connection, f"SELECT event_count FROM {TABLE} VERSION AS OF 0") == [(2,)]
        assert _query(connection, "EXPLAIN SELECT 1")
        assert _query(connection, "SELECT 1 + 1") == [(2,)]
        assert _query(connection, "SET spark.sql.runSQLOnFiles") == [
            ("spark.sql.runSQLOnFiles", "false")]

        # Another writer commits: the client's own session replays the Delta log, which the
        # read-only check must let through.
        write_deltalake(GOLD_EVENT_COUNTS_5M.path(secured.settings), _rows("click", 5),
                        mode="append")
        assert sorted(_query(connection, f"SELECT event_type, event_count FROM {TABLE}")) == [
            ("click", 5), ("view", 2)]
    finally:
        connection.close()


def test_session_settings_from_the_client_cannot_reopen_file_reads(secured: Secured) -> None:
    """A JDBC URL's ``?key=value`` settings are applied at session start, without SQL."""
    # What a JDBC URL's ?spark.sql.runSQLOnFiles=true becomes in the session request.
    connection = _tls_connection(
        secured, configuration={"set:hiveconf:spark.sql.runSQLOnFiles": "true"})
    try:
        with pytest.raises(Exception, match=REFUSED):
            _query(connection, "SELECT * FROM text.`/etc/passwd`")
    finally:
        connection.close()


def test_server_log_names_refusals_without_the_password(secured: Secured) -> None:
    text = Path(secured.server.log_file).read_text(errors="replace")
    assert re.search(r"refused a statement: .*AddJarsCommand", text)
    assert PASSWORD not in text
