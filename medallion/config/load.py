"""Loading the engine settings from ``conf/``: a base file plus one overlay per environment.

Everything is checked before Spark starts. A bad value raises :class:`ConfigError`, whose message
names the key and the file it came from, so that a scheduler's log says what to fix.

Precedence, lowest first: ``conf/base.yaml``, ``conf/<env>.yaml``, the environment variables
(``MEDALLION_LANDING``, ``MEDALLION_LAKEHOUSE``, ...), then explicit overrides (the CLI flags).
The sections that name declared tables and sources are checked with the declarations, in
:mod:`medallion.project`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from medallion.config.durations import parse_duration_seconds
from medallion.config.jvm import package_problem
from medallion.config.kafka import kafka_settings
from medallion.config.lineage import read_lineage
from medallion.config.model import (
    DEFAULT_ENV,
    ENV_VAR_CONF_DIR,
    ENV_VAR_ENV,
    ENV_VAR_KAFKA_BOOTSTRAP,
    ENV_VAR_LAKEHOUSE,
    ENV_VAR_LANDING,
    ENV_VAR_READ_FROM,
    ENV_VAR_S3_ENDPOINT,
    LOOPBACK_HOSTS,
    CatalogSettings,
    KafkaSettings,
    LineageSettings,
    MaintenanceSettings,
    Metastore,
    Paths,
    QualitySettings,
    ReadFrom,
    S3Settings,
    SaslQop,
    SparkSettings,
    StateStoreSettings,
    StreamingSettings,
    ThriftAuth,
    ThriftSettings,
    Trigger,
)
from medallion.config.reader import ENV_NAME, SettingsReader, boolean, choice, optional_string
from medallion.config.s3 import read_s3
from medallion.config.yamlfiles import Origins, read_yaml
from medallion.errors import ConfigError
from medallion.redact import has_credentials, is_secret_key

log = logging.getLogger(__name__)

PIPELINES_DIR = "pipelines"  # <conf_dir>/pipelines/<name>.yaml: the declared pipelines

_FOLDER_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings of one environment, read and checked; the declarations not yet known."""

    env: str
    conf_dir: Path
    paths: Paths
    spark: SparkSettings
    streaming: StreamingSettings
    quality: QualitySettings
    catalog: CatalogSettings
    thrift: ThriftSettings
    read_from: ReadFrom
    kafka: KafkaSettings
    s3: S3Settings
    state_store: StateStoreSettings
    maintenance: MaintenanceSettings
    lineage: LineageSettings


def default_conf_dir() -> Path:
    """``$MEDALLION_CONF_DIR``, else ``./conf``, else the ``conf/`` beside the package."""
    if os.environ.get(ENV_VAR_CONF_DIR):
        return Path(os.environ[ENV_VAR_CONF_DIR])
    local = Path.cwd() / "conf"
    if (local / "base.yaml").is_file():
        return local
    return Path(__file__).resolve().parents[2] / "conf"

def _normalise_path(path: str) -> str:
    if "://" in path:
        return path.rstrip("/")
    return str(Path(path).expanduser().resolve())

_S3_PATH_SCHEMES = ("s3a", "s3", "s3n")

# Letters, digits, '.', '_' and '-' between a letter or digit at each end: S3's rules for new
# buckets are stricter, but legacy buckets and S3-compatible stores allow these.
_BUCKET = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,253}[A-Za-z0-9])?$")

def _checked_path(key: str, path: str, source: str) -> str:
    """A landing or lakehouse path: a local folder, or a URI that names where it points."""
    if any(ord(char) < 32 for char in path):
        raise ConfigError(key, source, f"{path!r} holds a control character (a NUL, a newline)")
    scheme, sep, rest = path.partition("://")
    if not sep:
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
            raise ConfigError(key, source, f"{path!r} looks like a URI without '//' "
                                           "(s3a://bucket/prefix)")
        if ":" in path:
            # Hadoop reads the part before a colon as a URI scheme ("Relative path in absolute URI").
            raise ConfigError(key, source, f"{path!r}: a local path cannot hold ':'")
        if (file := _file_in_the_way(Path(path).expanduser())) is not None:
            raise ConfigError(key, source, f"{path!r} is not a folder: {str(file)!r} is a file")
        return path
    authority, _, prefix = rest.partition("/")
    if scheme.lower() in _S3_PATH_SCHEMES:
        if not authority:
            raise ConfigError(key, source, f"{path!r} names no bucket (s3a://bucket/prefix)")
        if not _BUCKET.match(authority):
            raise ConfigError(key, source, f"{authority!r} is not an S3 bucket name (letters, "
                                           "digits, '.', '_' and '-')")
    if any(part in (".", "..") for part in prefix.split("/")):
        raise ConfigError(key, source, f"{path!r}: '.' and '..' segments are not resolved in a URI")
    return path

def _file_in_the_way(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists, when it is not a folder (a local
    lakehouse or landing zone could not be made there, so the caller refuses it in one line)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def landing_folder_problem(value: str) -> str | None:
    """Why ``value`` is not a folder under the landing zone (None when it is one): plain names
    only, so that a source reads no folder outside the zone (``/etc``, ``../other-team``)."""
    if value.startswith("/"):
        return (f"{value!r} is not a folder under the landing zone: give it relative to the zone "
                f"({value.strip('/')!r} is <landing>/{value.strip('/')})")
    if all(_FOLDER_PART.match(part) for part in value.rstrip("/").split("/")):
        return None
    return (f"{value!r} is not a folder under the landing zone: each part must be letters, "
            "digits, '.', '_' or '-', not start with '.' or '_' (Spark skips those as hidden), "
            "and neither '..' nor ':' is allowed")


def source_folder_setting(key: str, value: str, source: str) -> str:
    """A folder under the landing zone: plain names only, so it stays under the landing zone."""
    if problem := landing_folder_problem(value):
        raise ConfigError(key, source, problem)
    return value.rstrip("/")

def _check_no_credentials(tree: Mapping[str, Any], source: Origins, prefix: str = "") -> None:
    """Refuse credentials carried inside any value (URLs with user:password@, password=...)."""
    for name, value in tree.items():
        key = f"{prefix}{name}"
        values = value if isinstance(value, list) else [value]
        for index, item in enumerate(values):
            where = f"{key}[{index}]" if isinstance(value, list) else key
            if isinstance(item, Mapping):
                _check_no_credentials(item, source, f"{where}.")
            elif isinstance(item, str) and has_credentials(item):
                raise ConfigError(where, source.of(key),
                                  "holds credentials (user:password@ in a URL or host list, or a "
                                  "password=/token= parameter); the value is not shown. Give them "
                                  "through the AWS provider chain or an environment variable, "
                                  "never in a URL")

def check_spark_setting(key: str, value: str, name: str, source: str) -> None:
    """Refuse a Spark setting that carries a secret: it would show in submit-cmd's command line,
    in cron logs and in ``ps``. ``name`` is how the setting is named in the message."""
    if is_secret_key(key):
        where = ("S3 keys come from the AWS provider chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                 "or AWS_SESSION_TOKEN in the environment, a profile, an instance or container role)"
                 if ".s3a." in key or key.startswith("fs.s3") else
                 "give it through an environment variable (kafka.security.*_env for Kafka) or a "
                 "Hadoop credential provider file (hadoop.security.credential.provider.path)")
        raise ConfigError(name, source, f"a secret-like setting; secrets never go in configuration "
                                        f"or on a command line (the value is not shown): {where}")
    if has_credentials(value):
        raise ConfigError(name, source, "holds credentials (user:password@ or password=...); the "
                                        "value is not shown: use the provider chain or a "
                                        "credential provider instead")

# The master URLs Spark's SparkContext accepts (its createTaskScheduler; yarn and k8s through
# their cluster managers): anything else fails the session's start with a JVM stack trace.
_MASTER = re.compile(r"^(local(\[([1-9][0-9]*|\*)(\s*,\s*[0-9]+)?\])?"
                     r"|local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*\]"
                     r"|spark://\S+|yarn|k8s://\S+)$")

def parse_quality(tree: Mapping[str, Any], origin: Any) -> QualitySettings:
    """Read the ``quality`` section of the merged configuration tree.

    ``origin(dotted_key)`` names the file a key came from. ``quality.tables`` is refused by
    :func:`medallion.config.load_settings` before this runs (expectations moved to the pipelines).
    """
    section = tree.get("quality", {}) or {}
    if not isinstance(section, Mapping):
        raise ConfigError("quality", origin("quality"), "must be a mapping")
    for key in section:
        if key != "enabled":
            raise ConfigError(f"quality.{key}", origin(f"quality.{key}"),
                              "unknown key (known keys: enabled; expectations are declared with "
                              "their table in conf/pipelines/<name>.yaml)")
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError("quality.enabled", origin("quality.enabled"),
                          f"must be true or false, got {enabled!r}")
    return QualitySettings(enabled=enabled)

def _read_from(reader: SettingsReader, section: Mapping[str, Any], source: Origins) -> ReadFrom:
    """``sources.read_from``: ``files`` (the default) or ``kafka``."""
    key = "sources.read_from"
    if "read_from" not in section:
        return ReadFrom.FILES
    text = reader.string(section, key)
    try:
        return ReadFrom(text.lower())
    except ValueError:
        raise ConfigError(key, source.of(key), f"{text!r} is not one of files, kafka") from None


def read_settings(
    env: str | None = None,
    conf_dir: str | Path | None = None,
    landing: str | None = None,
    lakehouse: str | None = None,
    trigger: str | None = None,
    read_from: str | None = None,
    kafka_bootstrap: str | None = None,
) -> tuple[EngineSettings, SettingsReader]:
    """Read and check the engine settings of environment ``env`` (default ``$MEDALLION_ENV`` or
    local), with the reader that checks the sections naming declared tables and sources."""
    env = env or os.environ.get(ENV_VAR_ENV) or DEFAULT_ENV
    directory = Path(conf_dir) if conf_dir else default_conf_dir()
    base_file = directory / "base.yaml"
    env_file = directory / f"{env}.yaml"
    if not base_file.is_file():
        raise ConfigError("<file>", str(base_file), "base configuration file not found")
    if not env_file.is_file():
        available = sorted(p.stem for p in directory.glob("*.yaml") if p.stem != "base")
        raise ConfigError("env", str(env_file),
                          f"no overlay for environment {env!r} (available: {', '.join(available)})")

    source = Origins()
    tree: dict[str, Any] = {}
    for file in (base_file, env_file):
        source.merge(tree, read_yaml(file), str(file))
    for var, key in ((ENV_VAR_LANDING, "landing"), (ENV_VAR_LAKEHOUSE, "lakehouse")):
        if os.environ.get(var):
            source.merge(tree, {"paths": {key: os.environ[var]}}, f"${var}")
    if os.environ.get(ENV_VAR_S3_ENDPOINT):
        source.merge(tree, {"s3": {"endpoint": os.environ[ENV_VAR_S3_ENDPOINT]}},
                     f"${ENV_VAR_S3_ENDPOINT}")
    for value, key in ((landing, "landing"), (lakehouse, "lakehouse")):
        if value:
            source.merge(tree, {"paths": {key: value}}, f"--{key}")
    for override, section, key, origin in (
        (os.environ.get(ENV_VAR_READ_FROM), "sources", "read_from", f"${ENV_VAR_READ_FROM}"),
        (os.environ.get(ENV_VAR_KAFKA_BOOTSTRAP), "kafka", "bootstrap_servers",
         f"${ENV_VAR_KAFKA_BOOTSTRAP}"),
        (read_from, "sources", "read_from", "--read-from"),
        (kafka_bootstrap, "kafka", "bootstrap_servers", "--bootstrap-servers"),
    ):
        if override:
            source.merge(tree, {section: {key: override}}, origin)

    reader = SettingsReader(tree, source)
    known_sections = ("paths", "spark", "streaming", "sources", "catalog", "thrift", "quality",
                      "kafka", "s3", "state_store", "maintenance", "lineage")
    for key in tree:
        if key not in known_sections:
            raise ConfigError(key, source.of(key),
                              f"unknown top-level key (known: {', '.join(known_sections)})")
    _check_no_credentials(tree, source)

    paths_section = reader.section("paths", {"landing", "lakehouse"})
    paths = Paths(**{
        name: _normalise_path(_checked_path(
            f"paths.{name}", reader.string(paths_section, f"paths.{name}"),
            source.of(f"paths.{name}")))
        for name in ("landing", "lakehouse")})

    spark_section = reader.section(
        "spark", {"app_name", "master", "shuffle_partitions", "log_level", "packages", "conf"}
    )
    master = spark_section.get("master", "local[2]")
    if master is not None and (not isinstance(master, str) or not _MASTER.match(master.strip())):
        raise ConfigError("spark.master", source.of("spark.master"),
                          f"must be a Spark master URL (local, local[N], local[*], local[N,F], "
                          f"local-cluster[N,C,M], spark://host:port, yarn, k8s://...) or null, "
                          f"got {master!r}")
    packages = spark_section.get("packages", []) or []
    if not isinstance(packages, list) or not all(
        isinstance(p, str) and p.count(":") == 2 for p in packages
    ):
        raise ConfigError("spark.packages", source.of("spark.packages"),
                          "must be a list of Maven coordinates group:artifact:version")
    _check_packages(packages, source.of("spark.packages"))
    spark_conf = spark_section.get("conf", {}) or {}
    if not isinstance(spark_conf, Mapping):
        raise ConfigError("spark.conf", source.of("spark.conf"), "must be a mapping")
    for conf_key, conf_value in spark_conf.items():
        if not isinstance(conf_value, (str, int, float, bool)):  # a list, a mapping, null
            kind = "null" if conf_value is None else f"a {type(conf_value).__name__}"
            raise ConfigError(f"spark.conf.{conf_key}", source.of(f"spark.conf.{conf_key}"),
                              f"a Spark setting's value is one text, number or boolean, not {kind}")
        check_spark_setting(str(conf_key), str(conf_value), f"spark.conf.{conf_key}",
                            source.of(f"spark.conf.{conf_key}"))
    log_level = reader.string(spark_section, "spark.log_level", "WARN").upper()
    if log_level not in {"ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"}:
        raise ConfigError("spark.log_level", source.of("spark.log_level"),
                          f"{log_level!r} is not a log4j level")
    spark = SparkSettings(
        app_name=reader.string(spark_section, "spark.app_name", "medallion"),
        master=master.strip() if isinstance(master, str) else None,
        shuffle_partitions=reader.positive_int(spark_section, "spark.shuffle_partitions", 2),
        log_level=log_level,
        packages=tuple(packages),
        conf={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark_conf.items()},
    )

    stream_section = reader.section("streaming", {"max_files_per_trigger", "trigger"})
    streaming = StreamingSettings(
        max_files_per_trigger=reader.positive_int(
            stream_section, "streaming.max_files_per_trigger", 1000),
        trigger=Trigger.parse(trigger, "--trigger") if trigger else Trigger.parse(
            reader.string(stream_section, "streaming.trigger", "available-now"),
            source.of("streaming.trigger")),
    )

    sources_section = reader.section("sources", None)
    read_from = _read_from(reader, sources_section, source)
    settings = EngineSettings(
        env=env, conf_dir=directory, paths=paths, spark=spark, streaming=streaming,
        quality=parse_quality(tree, source.of), catalog=_catalog_settings(reader, paths, spark),
        thrift=_thrift_settings(reader), read_from=read_from, kafka=kafka_settings(reader, source),
        s3=read_s3(reader, source), state_store=_state_store(reader), maintenance=_maintenance(reader),
        lineage=read_lineage(reader))
    return settings, reader


_EXTERNAL_METASTORE_CONF = ("spark.hadoop.hive.metastore.uris",
                            "spark.hadoop.javax.jdo.option.ConnectionURL")


def _catalog_settings(reader: SettingsReader, paths: Paths, spark: SparkSettings) -> CatalogSettings:
    """The ``catalog`` section but its views, which :mod:`medallion.project` checks against the
    declared tables."""
    section = reader.section("catalog", {"metastore", "metastore_uris", "views"})
    metastore = choice(reader, section, "catalog.metastore", Metastore, Metastore.EMBEDDED)
    uris = optional_string(reader, section, "catalog.metastore_uris")
    if metastore is Metastore.EMBEDDED and "://" in paths.lakehouse:
        raise ConfigError("catalog.metastore", reader.source.of("catalog.metastore"),
                          f"an embedded metastore needs a local lakehouse, not {paths.lakehouse}; "
                          "use external (with catalog.metastore_uris) or in-memory")
    if metastore is Metastore.EXTERNAL and not uris and not any(
            key in spark.conf for key in _EXTERNAL_METASTORE_CONF):
        raise ConfigError("catalog.metastore_uris", reader.source.of("catalog.metastore"),
                          "an external metastore needs thrift:// URIs here, or "
                          f"{' / '.join(_EXTERNAL_METASTORE_CONF)} in spark.conf")

    return CatalogSettings(metastore=metastore, metastore_uris=uris)


def _thrift_settings(reader: SettingsReader) -> ThriftSettings:
    section = reader.section("thrift", {"host", "port", "auth", "ldap_url", "ldap_base_dn",
                                        "kerberos_principal", "kerberos_keytab", "read_only",
                                        "tls", "keystore", "keystore_password_env", "sasl_qop"})
    host = reader.string(section, "thrift.host", "127.0.0.1")
    port = section.get("port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError("thrift.port", reader.source.of("thrift.port"),
                          f"must be a TCP port, or 0 for a free one, got {port!r}")
    auth = choice(reader, section, "thrift.auth", ThriftAuth, ThriftAuth.NONE)
    loopback = host in LOOPBACK_HOSTS
    if auth in (ThriftAuth.NONE, ThriftAuth.NOSASL) and not loopback:
        raise ConfigError("thrift.host", reader.source.of("thrift.host"),
                          f"{host!r} is not loopback, and thrift.auth {auth.value!r} (from "
                          f"{reader.source.of('thrift.auth')}) is allowed on loopback only; "
                          "set thrift.auth to ldap or kerberos")
    settings = ThriftSettings(
        host=host, port=port, auth=auth,
        ldap_url=optional_string(reader, section, "thrift.ldap_url"),
        ldap_base_dn=optional_string(reader, section, "thrift.ldap_base_dn"),
        kerberos_principal=optional_string(reader, section, "thrift.kerberos_principal"),
        kerberos_keytab=optional_string(reader, section, "thrift.kerberos_keytab"),
        read_only=boolean(section, "thrift.read_only", True, reader.source),
        tls=boolean(section, "thrift.tls", False, reader.source),
        keystore=optional_string(reader, section, "thrift.keystore"),
        keystore_password_env=optional_string(reader, section, "thrift.keystore_password_env"),
        sasl_qop=choice(reader, section, "thrift.sasl_qop", SaslQop, SaslQop.AUTH_CONF),
    )
    needed = {ThriftAuth.LDAP: ("ldap_url",),
              ThriftAuth.KERBEROS: ("kerberos_principal", "kerberos_keytab")}.get(auth, ())
    for name in needed:
        if getattr(settings, name) is None:
            raise ConfigError(f"thrift.{name}", reader.source.of("thrift.auth"),
                              f"required when thrift.auth is {auth.value}")
    _check_thrift_transport(reader, settings)
    if settings.keystore is not None:  # the server may start from another working directory
        settings = replace(settings, keystore=str(Path(settings.keystore).expanduser().resolve()))
    return settings

def _check_thrift_transport(reader: SettingsReader, settings: ThriftSettings) -> None:
    """Refuse a Thrift server whose passwords or rows would cross the network in clear."""
    def fail(name: str, problem: str, because: str | None = None) -> ConfigError:
        # A key that is missing is named with the file of the key that made it necessary.
        return ConfigError(f"thrift.{name}", reader.source.of(f"thrift.{because or name}"),
                           problem)

    if settings.ldap_url is not None and not settings.ldap_url.lower().startswith("ldaps://"):
        # The server binds to the directory with the client's own password: never in clear.
        raise fail("ldap_url", "must be an ldaps:// URL (LDAP over TLS); ldap:// would send "
                               "every analyst's password to the directory in clear text")
    if not settings.loopback and not settings.tls:
        raise fail("tls", f"must be true when thrift.host ({settings.host!r}, from "
                          f"{reader.source.of('thrift.host')}) is not loopback: without TLS, "
                          "passwords, queries and rows cross the network in clear text",
                   "host")
    if (settings.auth is ThriftAuth.KERBEROS and not settings.loopback
            and settings.sasl_qop is not SaslQop.AUTH_CONF):
        raise fail("sasl_qop", f"must be auth-conf off loopback with Kerberos, not "
                               f"{settings.sasl_qop.value!r} (queries and rows unencrypted)")
    if not settings.tls:
        for name in ("keystore", "keystore_password_env"):
            if getattr(settings, name) is not None:
                raise fail(name, "set only with thrift.tls: true")
        return
    if settings.keystore is None:
        raise fail("keystore", "required with thrift.tls: true (a JKS or PKCS12 file)", "tls")
    if not Path(settings.keystore).expanduser().is_file():
        raise fail("keystore", f"{settings.keystore!r} is not a file")
    variable = settings.keystore_password_env
    if variable is None:
        raise fail("keystore_password_env", "required with thrift.tls: true: the name of the "
                                            "environment variable holding the keystore's "
                                            "password (never the password itself)", "tls")
    if not ENV_NAME.match(variable):
        # Not echoed: a value here that is no variable name is most likely the secret itself.
        raise fail("keystore_password_env", "is not an environment variable name (the value is "
                                            "not shown; the password never goes in a file, only "
                                            "the variable's name)")

def _state_store(reader: SettingsReader) -> StateStoreSettings:
    section = reader.section("state_store", {"max_memory_mb", "write_buffer_ratio", "count_rows"})
    ratio = section.get("write_buffer_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1:
        raise ConfigError("state_store.write_buffer_ratio",
                          reader.source.of("state_store.write_buffer_ratio"),
                          f"must be a number between 0 and 1, got {ratio!r}")
    return StateStoreSettings(
        max_memory_mb=reader.positive_int(section, "state_store.max_memory_mb", 256),
        write_buffer_ratio=float(ratio),
        count_rows=boolean(section, "state_store.count_rows", False, reader.source),
    )


def _maintenance(reader: SettingsReader) -> MaintenanceSettings:
    section = reader.section("maintenance", {"vacuum_retention", "small_file_mb", "every"})
    every_key = "maintenance.every"
    every = parse_duration_seconds(reader.string(section, every_key, "1 day"), every_key,
                                   reader.source.of(every_key))
    if every <= 0:
        raise ConfigError(every_key, reader.source.of(every_key), "must be a positive duration")
    key = "maintenance.vacuum_retention"
    retention = reader.string(section, key, "7 days")
    seconds = parse_duration_seconds(retention, key, reader.source.of(key))
    if seconds % 3600:
        raise ConfigError(key, reader.source.of(key), f"{retention!r} is not a whole number of hours")
    return MaintenanceSettings(
        vacuum_retention_hours=seconds // 3600,
        small_file_mb=reader.positive_int(section, "maintenance.small_file_mb", 32),
        every_seconds=every,
    )


def _check_packages(packages: list[str], source: str) -> None:
    """Refuse a pinned package that does not fit the installed pyspark and delta-spark (Delta's
    jar for another Spark line, hadoop-aws of another Hadoop, a Spark module of another release)
    before any JVM starts: the wrong jar fails only later, deep in a run, if at all."""
    for coordinate in packages:
        problem = package_problem(coordinate)
        if problem:
            raise ConfigError("spark.packages", source, problem)
