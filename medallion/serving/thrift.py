"""The Spark Thrift Server: the catalog served over HiveServer2's protocol (JDBC/ODBC).

``medallion thrift up`` starts ``medallion thrift serve`` in the background: a process that
builds the project's session (the one factory: Delta, the persistent metastore, the comments and
views of the configuration) and starts Spark's ``HiveThriftServer2`` inside it with
``startWithContext``. beeline, DBeaver, Power BI (Spark or Hive connector) and Python clients
such as PyHive then connect to ``jdbc:hive2://<host>:<port>/default``.

The server binds to ``thrift.host`` (loopback by default) on ``thrift.port`` (0: a free port
chosen at start), whatever HiveServer2's own environment variables say. Off loopback it needs
TLS (configuration refuses anything else). By default it is read-only (:mod:`medallion.serving.readonly`).
Its pid, address and log live in ``<lakehouse>/_catalog/thrift`` (or, for an S3 lakehouse, in a
per-user folder of the temporary directory), a folder only its owner can enter; ``down`` stops
exactly the process recorded there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from medallion.config.jvm import thriftserver_packages
from medallion.config.model import ThriftAuth, ThriftSettings
from medallion.project import Settings

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
STATE_FILE = "server.json"
LOG_FILE = "server.log"
# HiveServer2 reads these before its configuration (ThriftCLIService, HiveServer2): left in the
# environment they would move the server to another address, port or transport than the one
# configuration checked (e.g. 0.0.0.0 with no authentication).
HIVE_ENVIRONMENT = ("HIVE_SERVER2_THRIFT_BIND_HOST", "HIVE_SERVER2_THRIFT_PORT",
                    "HIVE_SERVER2_THRIFT_HTTP_PORT", "HIVE_SERVER2_TRANSPORT_MODE")
# TLS 1.2 and later only (Hive's default refuses just SSLv2 and SSLv3).
SSL_PROTOCOL_BLACKLIST = "SSLv2,SSLv2Hello,SSLv3,TLSv1,TLSv1.1"


class ThriftError(RuntimeError):
    """The Thrift server could not be started or stopped."""


@dataclass(frozen=True)
class ThriftServer:
    """A running server, as recorded in its state file."""

    host: str
    port: int
    pid: int
    auth: str
    log_file: str
    tls: bool = False
    read_only: bool = False

    @property
    def jdbc_url(self) -> str:
        """The JDBC URL clients connect to (beeline -u, DBeaver, ...)."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6, as URLs write it
        suffix = ";auth=noSasl" if self.auth == ThriftAuth.NOSASL.value else ""
        if self.tls:
            suffix += ";ssl=true"  # the client adds its trust store (sslTrustStore=...)
        return f"jdbc:hive2://{host}:{self.port}/default{suffix}"


def secure_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter: created 0700, or checked if it exists.

    Refused (:class:`ThriftError`) if it is a symbolic link, not a folder, owned by another user,
    or writable by others (someone may have put files in it); one of ours that others may only
    read is narrowed to 0700.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # checked below either way
        path.mkdir(mode=0o700)
    info = path.lstat()
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.getuid():
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {os.getuid()})"
    elif info.st_mode & 0o022:
        problem = f"is writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise ThriftError(f"{path} {problem}: the Thrift server keeps its state, logs and jar "
                          "list only in a folder of its own user with mode 0700; remove it or "
                          "fix it")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def user_dir() -> Path:
    """This user's folder in the temporary directory: ``$TMPDIR/medallion-<uid>``, mode 0700."""
    return secure_dir(Path(tempfile.gettempdir()) / f"medallion-{os.getuid()}")


def run_dir(settings: Settings) -> Path:
    """Where the server's state file and logs live (created 0700, ownership checked).

    ``<lakehouse>/_catalog/thrift`` for a local lakehouse, else ``thrift-<hash>`` in
    :func:`user_dir`.
    """
    if "://" not in settings.paths.lakehouse:
        return secure_dir(Path(settings.catalog_dir()) / "thrift")
    digest = hashlib.sha256(settings.paths.lakehouse.encode()).hexdigest()[:12]
    return secure_dir(user_dir() / f"thrift-{digest}")


def hive_environment() -> list[str]:
    """The HiveServer2 variables set in this process's environment (they would win over conf)."""
    return [name for name in HIVE_ENVIRONMENT if name in os.environ]


def keystore_password(thrift: ThriftSettings) -> str | None:
    """The keystore's password, from the variable ``thrift.keystore_password_env`` names."""
    if not thrift.tls or thrift.keystore_password_env is None:
        return None
    value = os.environ.get(thrift.keystore_password_env)
    if not value:
        raise ThriftError(f"thrift.keystore_password_env: environment variable "
                          f"{thrift.keystore_password_env} (the keystore's password) is not set")
    return value


def free_port(host: str) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def server_conf(settings: Settings, port: int) -> dict[str, str]:
    """HiveServer2 settings of the server: address, transport and authentication."""
    thrift = settings.thrift
    prefix = "spark.hadoop.hive.server2"
    conf = {
        f"{prefix}.thrift.bind.host": thrift.host,
        f"{prefix}.thrift.port": str(port),
        f"{prefix}.transport.mode": "binary",
        f"{prefix}.authentication": thrift.auth.value.upper(),
        # Queries run as the server's user; the lakehouse's files have one owner.
        f"{prefix}.enable.doAs": "false",
        f"{prefix}.logging.operation.log.location": str(run_dir(settings) / "operation_logs"),
    }
    # TLS settings are not here but in tls_conf: this conf reaches the JVM's command line.
    if thrift.read_only:
        # Also enforced by the check rule; this keeps path-based names from resolving at all.
        conf["spark.sql.runSQLOnFiles"] = "false"
    if thrift.auth is ThriftAuth.LDAP:
        conf[f"{prefix}.authentication.ldap.url"] = str(thrift.ldap_url)
        if thrift.ldap_base_dn:
            conf[f"{prefix}.authentication.ldap.baseDN"] = thrift.ldap_base_dn
    if thrift.auth is ThriftAuth.KERBEROS:
        conf[f"{prefix}.authentication.kerberos.principal"] = str(thrift.kerberos_principal)
        conf[f"{prefix}.authentication.kerberos.keytab"] = str(thrift.kerberos_keytab)
        conf[f"{prefix}.thrift.sasl.qop"] = thrift.sasl_qop.value
    return conf


def tls_conf(thrift: ThriftSettings, password: str) -> dict[str, str]:
    """HiveServer2's TLS settings, set in the running JVM's Hadoop configuration (see serve)."""
    return {"hive.server2.use.SSL": "true", "hive.server2.keystore.path": str(thrift.keystore),
            "hive.server2.keystore.password": password,
            "hive.ssl.protocol.blacklist": SSL_PROTOCOL_BLACKLIST}


def with_thriftserver_packages(settings: Settings) -> Settings:
    """``settings`` plus the Thrift server's jars in ``spark.packages`` if pyspark lacks them."""
    extra = tuple(p for p in thriftserver_packages() if p not in settings.spark.packages)
    if not extra:
        return settings
    packages = settings.spark.packages + extra
    return replace(settings, spark=replace(settings.spark, packages=packages))


def package_jars(settings: Settings) -> list[str]:
    """Local paths of the jars ``spark.jars.packages`` resolves to (cached per package list)."""
    from medallion.spark.packages import jvm_packages, resolution_conf

    # the Ivy home is part of the key: jars resolved under another one may be gone
    packages = ",".join([*jvm_packages(settings), *resolution_conf().values()])
    digest = hashlib.sha256(packages.encode()).hexdigest()[:12]
    cache = user_dir() / f"jars-{digest}.txt"  # not a guessable name others could plant
    if cache.is_file():
        jars = cache.read_text(encoding="utf-8").split()
        if jars and all(Path(jar).is_file() for jar in jars):
            return jars
    log.info("resolving %s to local jars", packages)
    subprocess.run([sys.executable, "-m", "medallion.spark.warmup", "--jars-file", str(cache),
                    *[arg for p in settings.spark.packages for arg in ("--package", p)]],
                   check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "MEDALLION_ENV": settings.env})
    return cache.read_text(encoding="utf-8").split()


# ``jackson-databind-2.21.2.jar``, ``org.apache.parquet_parquet-hadoop-1.16.0.jar`` (Ivy's name:
# the group, "_", then what Maven calls it): the artifact is what comes before the version.
_JAR_NAME = re.compile(r"(?:[\w.]+?_)?(?P<artifact>[\w.-]+?)-\d+(?:\.\d+)+[^/]*\.jar")


def _artifact(jar: str) -> str | None:
    match = _JAR_NAME.fullmatch(Path(jar).name)
    return match.group("artifact") if match else None


def not_shipped_by_spark(jars: list[str]) -> list[str]:
    """``jars`` less those of an artifact pyspark ships a jar of (at whatever version).

    Delta 4.4's dependencies (its kernel, the Unity Catalog client) bring Jackson 2.13, Parquet
    1.16 and Hadoop's client jars beside Spark 4.2's own Jackson 2.21 and Parquet 1.17. Before
    Spark's jars, Jackson 2.13 made Jackson's Scala module refuse to load and with it every
    Spark error class ("Could not initialize class org.apache.spark.SparkThrowableHelper$" for
    each statement). A session sees Spark's copies first (its packages come after Spark's
    jars); so does the Thrift server this way."""
    import pyspark

    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    shipped.discard(None)
    return [jar for jar in jars if _artifact(jar) not in shipped]


def read_state(settings: Settings) -> ThriftServer | None:
    """The server recorded for this lakehouse, if its process is still alive."""
    state = run_dir(settings) / STATE_FILE
    if not state.is_file():
        return None
    server = ThriftServer(**json.loads(state.read_text(encoding="utf-8")))
    return server if _is_our_server(server.pid) else None


def _is_our_server(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in cmdline and any(b"medallion" in part for part in cmdline)


def serve(settings: Settings, port: int | None = None) -> int:
    """Run the server in this process until SIGTERM or SIGINT; return the exit status."""
    from medallion.io.catalog import prepare_catalog
    from medallion.serving.readonly import read_only_session
    from medallion.spark.session import build_session

    settings = with_thriftserver_packages(settings)
    password = keystore_password(settings.thrift)  # before Spark starts: a clear message
    for name in hive_environment():
        log.warning("ignoring %s: the server binds where thrift.* says", name)
        del os.environ[name]  # the JVM, started below, inherits this environment
    chosen = port or settings.thrift.port or free_port(settings.thrift.host)
    # Client sessions run on threads whose class loader is Hive's (the application class path):
    # the jars of spark.jars.packages must be on the driver's class path itself, or a session
    # opened with a database (`jdbc:hive2://.../default`, beeline's and DBeaver's way) cannot
    # load DeltaCatalog. That class path puts them before Spark's own jars, so those Spark ships
    # itself are left out (see not_shipped_by_spark).
    classpath = [settings.spark.conf.get("spark.driver.extraClassPath", ""),
                 *not_shipped_by_spark(package_jars(settings))]
    extra = {**server_conf(settings, chosen),
             "spark.driver.extraClassPath": ":".join(p for p in classpath if p)}
    # The catalog is prepared below, after TLS is set: HiveServer2 reuses the Hive session state
    # the first catalog access creates, with the Hadoop configuration of that moment.
    spark = build_session(settings, register_tables=False, extra_conf=extra)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    inherited = [name for name in HIVE_ENVIRONMENT if jvm.java.lang.System.getenv(name)]
    if inherited:  # a JVM started earlier in this process, with the variables set
        spark.stop()
        raise ThriftError(f"{', '.join(inherited)} set in the JVM's environment would override "
                          "thrift.host/thrift.port; unset them and start again")
    if password is not None:
        # Set in the running JVM, never as a --conf (the process list shows those).
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in tls_conf(settings.thrift, password).items():
            hadoop.set(key, value)
    prepare_catalog(spark, settings)
    # Clients get sessions made from this one: with read_only, a session whose every statement
    # goes through the read-only check rule.
    session = (read_only_session(spark) if settings.thrift.read_only
               else spark._jsparkSession.newSession())
    server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        session.sqlContext())
    directory = run_dir(settings)
    record = ThriftServer(settings.thrift.host, chosen, os.getpid(), settings.thrift.auth.value,
                          str(directory / LOG_FILE), settings.thrift.tls, settings.thrift.read_only)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    (directory / STATE_FILE).write_text(json.dumps(record.__dict__), encoding="utf-8")
    log.info("thrift server listening on %s (auth %s)", record.jdbc_url, record.auth)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        (directory / STATE_FILE).unlink(missing_ok=True)
        server.stop()
        spark.stop()
    log.info("thrift server stopped")
    return 0


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def start(settings: Settings, timeout: float = 300.0) -> ThriftServer:
    """Start ``medallion thrift serve`` in the background, on the configuration folder
    ``settings`` came from, and wait until it accepts connections."""
    running = read_state(settings)
    if running is not None:
        raise ThriftError(f"a thrift server already serves this lakehouse at {running.jdbc_url} "
                          f"(pid {running.pid}); `make thrift-down` stops it")
    keystore_password(settings.thrift)  # the variable must be set here, for the child
    directory = run_dir(settings)
    (directory / STATE_FILE).unlink(missing_ok=True)
    port = settings.thrift.port or free_port(settings.thrift.host)
    command = [sys.executable, "-m", "medallion.cli.main", "thrift", "serve", "--port", str(port),
               "--env", settings.env, "--conf-dir", settings.conf_dir,
               "--landing", settings.paths.landing, "--lakehouse", settings.paths.lakehouse]
    ignored = hive_environment()
    if ignored:
        log.warning("not passing %s to the server: it binds where thrift.* says",
                    ", ".join(ignored))
    env = {name: value for name, value in os.environ.items() if name not in HIVE_ENVIRONMENT}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_file = directory / LOG_FILE
    with open(log_file, "ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise ThriftError(f"the thrift server exited with status {process.returncode}:\n"
                              + "\n".join(tail))
        server = read_state(settings)
        if server is not None and server.pid == process.pid and _listening(server.host, port):
            log.info("thrift server ready at %s", server.jdbc_url)
            return server
        time.sleep(1.0)
    process.terminate()
    raise ThriftError(f"the thrift server did not listen within {timeout:.0f}s; see {log_file}")


def stop(settings: Settings, timeout: float = 60.0) -> ThriftServer | None:
    """Stop the server recorded for this lakehouse; return it (None if none was running)."""
    server = read_state(settings)
    if server is None:
        return None
    os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_our_server(server.pid):
        time.sleep(0.5)
    if _is_our_server(server.pid):
        log.warning("thrift server pid %d ignored SIGTERM; killing it", server.pid)
        os.kill(server.pid, signal.SIGKILL)
    (run_dir(settings) / STATE_FILE).unlink(missing_ok=True)
    return server
