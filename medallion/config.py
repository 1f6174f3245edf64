"""Typed settings loaded from ``conf/``: a base file plus one overlay per environment.

Everything is validated before Spark starts. A bad value raises :class:`ConfigError`, whose
message names the key and the file it came from, so that a scheduler's log says what to fix.

Precedence, lowest first: ``conf/base.yaml``, ``conf/<env>.yaml``, the environment variables
``MEDALLION_LANDING`` / ``MEDALLION_LAKEHOUSE``, then explicit overrides (the CLI flags).

The same folder's ``pipelines/<name>.yaml`` (with ``<name>.<env>.yaml`` overlays) declares what
the engine runs; they are loaded and validated with the settings (``Settings.pipelines``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The configuration layer: this module, its YAML files and the pipeline declarations (model, loading,
# validation). It imports nothing of the engine (tables, quality, jobs), which all import it.
from medallion.durations import parse_duration_seconds
from medallion.errors import ConfigError
from medallion.pipeline.load import PIPELINES_DIR, landing_folder_problem
from medallion.pipeline.validate import check_pipelines
from medallion.pipeline.views import ViewSpec, name_problem, query_problem
from medallion.redact import has_credentials, is_secret_key
from medallion.yamlfiles import Origins, read_yaml

if TYPE_CHECKING:
    from medallion.pipeline.model import (
        ExpectationSpec,
        GoldSpec,
        PipelineSpec,
        SourceSpec,
        TableDecl,
        TableDoc,
    )

log = logging.getLogger(__name__)

ENV_VAR_ENV = "MEDALLION_ENV"
ENV_VAR_CONF_DIR = "MEDALLION_CONF_DIR"
ENV_VAR_LANDING = "MEDALLION_LANDING"
ENV_VAR_LAKEHOUSE = "MEDALLION_LAKEHOUSE"
ENV_VAR_READ_FROM = "MEDALLION_READ_FROM"
ENV_VAR_EVENTS_KIND = "MEDALLION_EVENTS_KIND"  # read_from's former name, still read
ENV_VAR_KAFKA_BOOTSTRAP = "MEDALLION_KAFKA_BOOTSTRAP"
ENV_VAR_S3_ENDPOINT = "MEDALLION_S3_ENDPOINT"
DEFAULT_ENV = "local"
PIPELINES_FOLDER = PIPELINES_DIR  # <conf_dir>/pipelines/<name>.yaml: the declared pipelines


class TriggerKind(str, Enum):
    """How a streaming query is triggered."""

    AVAILABLE_NOW = "available-now"
    ONCE = "once"
    PROCESSING_TIME = "processing-time"


@dataclass(frozen=True)
class Trigger:
    """A trigger choice; ``interval`` is set only for processing-time triggers."""

    kind: TriggerKind = TriggerKind.AVAILABLE_NOW
    interval: str | None = None

    @staticmethod
    def parse(text: str, source: str = "command line") -> Trigger:
        """Parse ``available-now``, ``once`` or ``processing-time=<duration>``."""
        name, _, value = text.partition("=")
        try:
            kind = TriggerKind(name.strip())
        except ValueError:
            choices = ", ".join(k.value for k in TriggerKind)
            raise ConfigError(
                "trigger", source, f"{text!r} is not one of {choices} (processing-time=30 seconds)"
            ) from None
        if kind is TriggerKind.PROCESSING_TIME:
            interval = value.strip() or "1 minute"
            parse_duration_seconds(interval, "trigger", source)
            return Trigger(kind, interval)
        if value:
            raise ConfigError("trigger", source, f"{kind.value} takes no interval")
        return Trigger(kind)

    def __str__(self) -> str:
        return self.kind.value if self.interval is None else f"{self.kind.value}={self.interval}"


@dataclass(frozen=True)
class Paths:
    """Where input lands and where the lakehouse lives (local directories or ``s3a://`` URIs)."""

    landing: str
    lakehouse: str


@dataclass(frozen=True)
class SparkSettings:
    """Options of the one Spark session factory."""

    app_name: str = "medallion"
    master: str | None = "local[2]"
    shuffle_partitions: int = 2
    log_level: str = "WARN"
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamingSettings:
    """Options shared by the streaming jobs (event-time watermarks are declared per pipeline)."""

    max_files_per_trigger: int = 1000
    trigger: Trigger = Trigger()


class Metastore(str, Enum):
    """Where the catalog (databases, tables, views, comments) is kept."""

    EMBEDDED = "embedded"  # Derby under <lakehouse>/_catalog: persistent, one process at a time
    EXTERNAL = "external"  # a shared Hive metastore (thrift:// URIs or a JDBC database)
    IN_MEMORY = "in-memory"  # Spark's own catalog, rebuilt at every session start


class ThriftAuth(str, Enum):
    """How the Spark Thrift Server authenticates clients (``hive.server2.authentication``)."""

    NONE = "none"  # SASL PLAIN, any user name accepted: loopback only
    NOSASL = "nosasl"  # no SASL at all: loopback only
    LDAP = "ldap"
    KERBEROS = "kerberos"


class SaslQop(str, Enum):
    """``hive.server2.thrift.sasl.qop``: what SASL (Kerberos) protects after authentication."""

    AUTH = "auth"  # authentication only: queries and rows travel in clear
    AUTH_INT = "auth-int"  # integrity, not confidentiality
    AUTH_CONF = "auth-conf"  # integrity and confidentiality


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class CatalogSettings:
    """The persistent catalog: which metastore, and the views it is given.

    Table and column comments are declared with each table in its pipeline (``comment``,
    ``column_comments``): :meth:`Settings.table_doc`.
    """

    metastore: Metastore = Metastore.EMBEDDED
    metastore_uris: str | None = None
    views: tuple[ViewSpec, ...] = ()


@dataclass(frozen=True)
class ThriftSettings:
    """The Spark Thrift Server (HiveServer2 protocol) serving the catalog to JDBC/ODBC clients."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port chosen when the server starts
    auth: ThriftAuth = ThriftAuth.NONE
    ldap_url: str | None = None
    ldap_base_dn: str | None = None
    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None
    # Analysts' default: only SELECT/SHOW/DESCRIBE/EXPLAIN on the catalog's tables and views.
    read_only: bool = True
    tls: bool = False  # hive.server2.use.SSL; required off loopback
    keystore: str | None = None  # path of the server's JKS or PKCS12 keystore
    keystore_password_env: str | None = None  # the *name* of the variable holding its password
    sasl_qop: SaslQop = SaslQop.AUTH_CONF  # Kerberos (GSSAPI) only: auth-conf encrypts

    @property
    def loopback(self) -> bool:
        """Whether the server listens on a loopback address only."""
        return self.host in LOOPBACK_HOSTS


class ReadFrom(str, Enum):
    """Of a source and its alternatives (``alternative_to``), which one lands data: ``files``, the
    one its declaration marks ``active`` (the default pipeline's landing files); ``kafka``, the
    Kafka one, where the group has one."""

    FILES = "files"
    KAFKA = "kafka"


class KafkaProtocol(str, Enum):
    """Kafka's ``security.protocol``."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


@dataclass(frozen=True)
class KafkaSecurity:
    """How to reach a secured cluster. Secrets are named by environment variable, never given."""

    protocol: KafkaProtocol = KafkaProtocol.PLAINTEXT
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username_env: str | None = None
    password_env: str | None = None
    truststore_location: str | None = None
    truststore_type: str | None = None  # JKS, PKCS12 or PEM; when unset, from the file's suffix
    truststore_password_env: str | None = None
    # mTLS: the client's own certificate and key
    keystore_location: str | None = None
    keystore_type: str | None = None  # JKS, PKCS12 or PEM; when unset, from the file's suffix
    keystore_password_env: str | None = None
    key_password_env: str | None = None
    # SASL PLAIN over SASL_PLAINTEXT sends the password as clear text: refused unless this is set.
    allow_cleartext_password: bool = False


@dataclass(frozen=True)
class KafkaPublish:
    """A lakehouse table streamed to a topic as JSON."""

    table: str  # layer/name
    topic: str
    key: tuple[str, ...] = ()  # columns whose JSON is the message key; none: no key


@dataclass(frozen=True)
class KafkaSettings:
    """The Kafka source of bronze and the Kafka sink of published tables."""

    bootstrap_servers: str = "127.0.0.1:9092"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int | None = None
    client_options: Mapping[str, str] = field(default_factory=dict)
    security: KafkaSecurity = KafkaSecurity()
    publish: tuple[KafkaPublish, ...] = ()
    connector_version: str | None = None  # None: the installed pyspark's version


class SseAlgorithm(str, Enum):
    """Server-side encryption of the objects the lakehouse writes to S3."""

    NONE = "none"
    SSE_S3 = "SSE-S3"
    SSE_KMS = "SSE-KMS"


class DeltaLogStore(str, Enum):
    """How Delta makes commits atomic on S3 (S3 has no atomic put-if-absent rename)."""

    SINGLE_DRIVER = "single-driver"  # one writing cluster per table (Delta's default on s3a)
    DYNAMODB = "dynamodb"  # several writers, commits arbitrated by a DynamoDB table


@dataclass(frozen=True)
class S3Settings:
    """How the lakehouse reaches S3 (or an S3-compatible store), and how its buckets are set up.

    Credentials are never configuration: they come from the AWS provider chain (system
    properties, environment, web identity, profile, container or instance role).
    """

    endpoint: str | None = None  # None: AWS's own endpoint for the region
    path_style_access: bool = False  # True for most S3-compatible stores
    region: str | None = None
    sse: SseAlgorithm = SseAlgorithm.NONE
    kms_key_id: str | None = None  # with SSE-KMS: the key's ARN (the IAM policy names it)
    delta_log_store: DeltaLogStore = DeltaLogStore.SINGLE_DRIVER
    dynamodb_table: str = "delta_log"
    dynamodb_region: str | None = None
    account_id: str | None = None  # the AWS account of the DynamoDB table (its ARN in the policy)
    # Provisioning (``medallion infra``): bucket versioning, and how long landed files are kept.
    versioning: bool = True
    landing_expiry_days: int = 30
    abort_incomplete_uploads_days: int = 7


@dataclass(frozen=True)
class StateStoreSettings:
    """Bounds of the RocksDB state store of the stateful (gold) queries, per executor."""

    max_memory_mb: int = 256  # block cache and write buffers together, shared by every instance
    write_buffer_ratio: float = 0.5  # share of that memory the write buffers may take
    count_rows: bool = False  # Spark counts each store's rows (a read before every write)


DEFAULT_VACUUM_RETENTION_HOURS = 168  # Delta's own default: 7 days


@dataclass(frozen=True)
class MaintenanceSettings:
    """What ``medallion maintain`` does: OPTIMIZE with Z-ORDER, then VACUUM."""

    vacuum_retention_hours: int = DEFAULT_VACUUM_RETENTION_HOURS
    small_file_mb: int = 32  # files smaller than this count as small in the report
    # table key -> columns, from the tables' declarations (`zorder`)
    zorder: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class QualitySettings:
    """The data-quality gates as a whole: on or off (the expectations are the tables' own)."""

    enabled: bool = True


@dataclass(frozen=True)
class Settings:
    """The whole configuration of one run."""

    env: str
    paths: Paths
    spark: SparkSettings
    streaming: StreamingSettings
    sources: Mapping[str, str]  # file source name -> landing folder, where not the declared one
    conf_dir: str  # the configuration folder these were loaded from, absolute
    quality: QualitySettings = field(default_factory=lambda: QualitySettings())
    catalog: CatalogSettings = CatalogSettings()
    thrift: ThriftSettings = ThriftSettings()
    read_from: ReadFrom = ReadFrom.FILES
    kafka: KafkaSettings = KafkaSettings()
    s3: S3Settings = S3Settings()
    state_store: StateStoreSettings = StateStoreSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    # What the engine runs: every pipeline of <conf_dir>/pipelines, with the environment's
    # overlays, validated (never empty once loaded by load_settings).
    pipelines: tuple[PipelineSpec, ...] = ()
    # The tables of the declared pipelines that ``only`` set aside (``run --pipeline``): declared,
    # though not run by these settings.
    set_aside: frozenset[str] = frozenset()

    def pipeline(self, name: str) -> PipelineSpec:
        """The declared pipeline called ``name``; KeyError naming the known ones if there is none."""
        for spec in self.pipelines:
            if spec.name == name:
                return spec
        raise KeyError(f"no pipeline {name!r} (pipelines: {', '.join(p.name for p in self.pipelines)})")

    def declared_table(self, key: str) -> tuple[PipelineSpec, TableDecl]:
        """The table ``<layer>/<name>`` (or ``<layer>.<name>``) a pipeline declares, with that pipeline.

        KeyError when no pipeline writes it (engine tables such as ``quality/results`` are not
        declared).
        """
        for spec in self.pipelines:
            try:
                return spec, spec.table(key)
            except KeyError:
                continue
        raise KeyError(f"no declared table {key!r}")

    def table_doc(self, key: str) -> TableDoc | None:
        """The declared comments and expectations of table ``key`` (``layer/name`` or
        ``layer.name``); None for a table no pipeline declares (the engine's own)."""
        try:
            return self.declared_table(key)[1].doc
        except KeyError:
            return None

    def expectations_of(self, key: str) -> tuple[ExpectationSpec, ...]:
        """What gates table ``key``: the expectations its pipeline declares for it; none when the
        gates are off (``quality.enabled: false``) or no pipeline declares the table."""
        doc = self.table_doc(key) if self.quality.enabled else None
        return doc.expectations if doc is not None else ()

    def gold_specs(self) -> tuple[tuple[PipelineSpec, GoldSpec], ...]:
        """Every declared gold table with its pipeline, pipelines in name order, tables as declared."""
        return tuple((spec, gold) for spec in self.pipelines for gold in spec.gold)

    def gold_spec(self, key: str) -> tuple[PipelineSpec, GoldSpec]:
        """The gold table ``gold/<name>`` and its pipeline; KeyError naming the declared ones."""
        wanted = key.replace(".", "/", 1)
        for spec, gold in self.gold_specs():
            if gold.key == wanted:
                return spec, gold
        known = ", ".join(gold.key for _, gold in self.gold_specs())
        raise KeyError(f"no declared gold table {key!r} (declared: {known})")

    def active_sources(self, pipeline: PipelineSpec) -> tuple[SourceSpec, ...]:
        """The sources of ``pipeline`` that land data in this configuration: every source without
        alternatives, and of a source and its alternatives the one that runs. With
        ``sources.read_from: kafka`` that is the Kafka one where a group has one; otherwise the
        one the declaration marks ``active``."""
        chosen = []
        for source in pipeline.sources:
            if source.alternative_to is not None:
                continue
            group = (source, *(s for s in pipeline.sources if s.alternative_to == source.name))
            kafka = [s for s in group if s.format.value == "kafka"]
            if len(group) > 1 and self.read_from is ReadFrom.KAFKA and kafka:
                chosen.append(kafka[0])
            elif len(group) > 1:
                chosen.append(next(s for s in group if s.active))
            else:
                chosen.append(source)
        return tuple(chosen)

    def input_of(self, pipeline: PipelineSpec, table: str) -> str:
        """The table a flow declared to read ``table`` reads: the bronze table of the source that
        runs in its place when ``table`` is the bronze table of a source not chosen."""
        alternatives = (table, *pipeline.alternatives_of(table))
        if len(alternatives) == 1:
            return table
        active = {s.bronze_key for s in self.active_sources(pipeline)}
        return next((key for key in alternatives if key in active), table)

    def only(self, names: Sequence[str]) -> Settings:
        """These settings narrowed to the pipelines ``names`` (``run --pipeline``): their tables
        alone are run, registered and published. ConfigError naming the declared ones otherwise."""
        declared = [p.name for p in self.pipelines]
        unknown = [name for name in names if name not in declared]
        if unknown:
            raise ConfigError("--pipeline", "the command line",
                              f"no declared pipeline {', '.join(map(repr, unknown))} "
                              f"(declared: {', '.join(declared)})")
        kept = tuple(p for p in self.pipelines if p.name in names)
        tables = declared_tables(kept)
        publish = tuple(entry for entry in self.kafka.publish if entry.table in tables)
        return replace(self, pipelines=kept, kafka=replace(self.kafka, publish=publish),
                       set_aside=self.set_aside | (declared_tables(self.pipelines).keys() - tables))

    def kafka_sources(self) -> tuple[SourceSpec, ...]:
        """Every declared Kafka source of every pipeline, the ones that run first."""
        declared = [s for p in self.pipelines for s in p.sources if s.format.value == "kafka"]
        active = [s for p in self.pipelines for s in self.active_sources(p)]
        return tuple(sorted(declared, key=lambda s: s not in active))

    @property
    def uses_kafka(self) -> bool:
        """Whether a job reads or writes Kafka (the session then needs the Kafka connector)."""
        reads = any(s.format.value == "kafka" for p in self.pipelines for s in self.active_sources(p))
        return reads or bool(self.kafka.publish)

    def table_path(self, layer: str, table: str) -> str:
        """Path of a Delta table: ``<lakehouse>/<layer>/<table>``."""
        return f"{self.paths.lakehouse}/{layer}/{table}"

    def checkpoint_path(self, name: str) -> str:
        """Checkpoint folder of one streaming query, outside every table's folder."""
        return f"{self.paths.lakehouse}/_checkpoints/{name}"

    def landing_path(self, entity: str) -> str:
        """Folder of the landing zone that holds one entity's files."""
        return f"{self.paths.landing}/{entity}"

    def source_folder(self, source: SourceSpec) -> str:
        """The landing folder of a file source, under ``<landing>``: its declared ``path``, unless
        the engine setting ``sources.<name>`` (``conf/<env>.yaml``) moves it."""
        return self.sources.get(source.name) or source.path or source.name

    def file_sources(self) -> dict[str, SourceSpec]:
        """Every declared source of landing files, of every pipeline, by name."""
        return {s.name: s for p in self.pipelines for s in p.sources if s.format.value != "kafka"}

    @property
    def views(self) -> tuple[ViewSpec, ...]:
        """The views the catalog is given: each pipeline's own (``views:``), then those of
        ``catalog.views``, which may read them."""
        return (*(view for pipeline in self.pipelines for view in pipeline.views),
                *self.catalog.views)

    def catalog_dir(self) -> str:
        """``<lakehouse>/_catalog``: warehouse of the catalog's databases, embedded metastore."""
        return f"{self.paths.lakehouse}/_catalog"


def _show(key: str, value: Any) -> str:
    """``value`` as an error message may quote it: never the value of a secret-like key."""
    return "(a value, not shown: the key names a secret)" if is_secret_key(key) else repr(value)


def default_conf_dir() -> Path:
    """``$MEDALLION_CONF_DIR``, else ``./conf``, else the ``conf/`` beside the package."""
    if os.environ.get(ENV_VAR_CONF_DIR):
        return Path(os.environ[ENV_VAR_CONF_DIR])
    local = Path.cwd() / "conf"
    if (local / "base.yaml").is_file():
        return local
    return Path(__file__).resolve().parent.parent / "conf"


class _Reader:
    """Takes typed values out of the merged tree, checking for unknown keys."""

    def __init__(self, tree: Mapping[str, Any], source: Origins) -> None:
        self.tree = tree
        self.source = source

    def section(self, name: str, allowed: set[str]) -> Mapping[str, Any]:
        value = self.tree.get(name, {})
        if not isinstance(value, Mapping):
            raise ConfigError(name, self.source.of(name), "must be a mapping")
        for key in value:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise ConfigError(f"{name}.{key}", self.source.of(f"{name}.{key}"),
                                  f"unknown key (known keys: {known})")
        return value

    def section_of(self, parent: Mapping[str, Any], key: str, allowed: set[str] | None = None,
                   name: str | None = None) -> Mapping[str, Any]:
        """A nested mapping (``{}`` when absent), its keys checked against ``allowed`` if given.

        ``name`` is the key inside ``parent`` when it differs from the last part of ``key``
        (a table name such as ``gold.event_counts_5m`` holds a dot).
        """
        value = parent.get(name if name is not None else key.rpartition(".")[2]) or {}
        if not isinstance(value, Mapping):
            raise ConfigError(key, self.source.of(key), "must be a mapping")
        for inner in value:
            if allowed is not None and inner not in allowed:
                raise ConfigError(f"{key}.{inner}", self.source.of(f"{key}.{inner}"),
                                  f"unknown key (known keys: {', '.join(sorted(allowed))})")
        return value

    def string(self, section: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = section.get(key.rpartition(".")[2], default)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(key, self.source.of(key),
                              f"must be a non-empty string, got {_show(key, value)}")
        return value.strip()

    def positive_int(self, section: Mapping[str, Any], key: str, default: int) -> int:
        value = section.get(key.rpartition(".")[2], default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(key, self.source.of(key),
                              f"must be a positive integer, got {_show(key, value)}")
        return value


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
    lakehouse or landing zone made there could not be made: before, a traceback)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _source_folder(key: str, value: str, source: str) -> str:
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
_BOOTSTRAP = re.compile(r"^[A-Za-z0-9._\[\]:-]+:\d{1,5}(,[A-Za-z0-9._\[\]:-]+:\d{1,5})*$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_WORDS = ("password", "secret", "jaas", "token", "key")  # never from a file
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")


def _kafka_settings(reader: _Reader, source: Origins,
                    tables: Mapping[str, TableDecl]) -> KafkaSettings:
    """The ``kafka`` section; secrets only as names of environment variables, which must be set."""
    section = reader.section("kafka", {
        "bootstrap_servers", "topics", "starting_offsets", "max_offsets_per_trigger",
        "fail_on_data_loss", "poll_timeout_ms", "client_options", "security", "publish",
        "connector_version"})
    bootstrap = reader.string(section, "kafka.bootstrap_servers", "127.0.0.1:9092").replace(" ", "")
    if not _BOOTSTRAP.match(bootstrap):
        raise ConfigError("kafka.bootstrap_servers", source.of("kafka.bootstrap_servers"),
                          f"{bootstrap!r} is not a list of host:port")
    if "topics" in section:
        # Known, so that a configuration written before the declarations is told where the topics
        # went rather than having them silently ignored.
        raise ConfigError("kafka.topics", source.of("kafka.topics"),
                          "the topics are declared by the Kafka source that reads them now: set "
                          "`topics` of that source in pipelines/<name>.yaml (or in its "
                          "<name>.<env>.yaml overlay) and remove this key")
    starting = reader.string(section, "kafka.starting_offsets", "earliest")
    if starting not in ("earliest", "latest"):
        try:
            parsed = json.loads(starting)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError("kafka.starting_offsets", source.of("kafka.starting_offsets"),
                              "must be earliest, latest, or JSON like "
                              '{"topic": {"0": 23, "1": -2}}')
    max_offsets = section.get("max_offsets_per_trigger")
    if max_offsets is not None:
        max_offsets = reader.positive_int(section, "kafka.max_offsets_per_trigger", 1)
    poll_timeout = section.get("poll_timeout_ms")
    if poll_timeout is not None:
        poll_timeout = reader.positive_int(section, "kafka.poll_timeout_ms", 1)
    fail_on_data_loss = section.get("fail_on_data_loss", True)
    if not isinstance(fail_on_data_loss, bool):
        raise ConfigError("kafka.fail_on_data_loss", source.of("kafka.fail_on_data_loss"),
                          f"must be true or false, got {fail_on_data_loss!r}")
    client = section.get("client_options", {}) or {}
    if not isinstance(client, Mapping):
        raise ConfigError("kafka.client_options", source.of("kafka.client_options"),
                          "must be a mapping of Kafka client properties")
    for name in client:
        key = f"kafka.client_options.{name}"
        if any(word in str(name).lower() for word in _SECRET_WORDS) or str(name).startswith(
                ("security.", "sasl.", "ssl.")):
            raise ConfigError(key, source.of(key), "security settings and secrets belong in "
                              "kafka.security (secrets as environment variable names)")
    return KafkaSettings(
        bootstrap_servers=bootstrap,
        starting_offsets=starting,
        max_offsets_per_trigger=max_offsets,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout,
        client_options={str(k): str(v).lower() if isinstance(v, bool) else str(v)
                        for k, v in client.items()},
        security=_kafka_security(source, section),
        publish=_kafka_publish(source, section, tables),
        connector_version=_connector_version(source, section),
    )


def _connector_version(source: Origins, kafka: Mapping[str, Any]) -> str | None:
    value = kafka.get("connector_version")
    if value is None:
        return None
    if not isinstance(value, str) or not re.match(r"^4\.0\.\d+$", value.strip()):
        raise ConfigError("kafka.connector_version", source.of("kafka.connector_version"),
                          f"must be a Spark 4.0.x release like 4.0.0, or null, got {value!r}")
    return value.strip()


_STORE_TYPES = ("JKS", "PKCS12", "PEM")
_TLS_PROTOCOLS = (KafkaProtocol.SSL, KafkaProtocol.SASL_SSL)


def _kafka_security(source: Origins, kafka: Mapping[str, Any]) -> KafkaSecurity:
    prefix = "kafka.security"
    section = kafka.get("security", {}) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(prefix, source.of(prefix), "must be a mapping")
    texts = ("sasl_mechanism", "username_env", "password_env", "truststore_location",
             "truststore_type", "truststore_password_env", "keystore_location", "keystore_type",
             "keystore_password_env", "key_password_env")
    allowed = {"protocol", "allow_cleartext_password", *texts}
    for name in section:
        if name not in allowed:
            raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                              f"unknown key (known keys: {', '.join(sorted(allowed))})")
    protocol_text = str(section.get("protocol", "PLAINTEXT")).upper()
    try:
        protocol = KafkaProtocol(protocol_text)
    except ValueError:
        raise ConfigError(f"{prefix}.protocol", source.of(f"{prefix}.protocol"),
                          f"{protocol_text!r} is not one of "
                          f"{', '.join(p.value for p in KafkaProtocol)}") from None
    values: dict[str, str | None] = {}
    for name in texts:
        key = f"{prefix}.{name}"
        value = section.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(key, source.of(key),
                              f"must be a non-empty string or null, got {_show(key, value)}")
        values[name] = value.strip() if isinstance(value, str) else None
    allow_cleartext = _boolean(section, f"{prefix}.allow_cleartext_password", False, source)
    sasl = protocol in (KafkaProtocol.SASL_PLAINTEXT, KafkaProtocol.SASL_SSL)
    if sasl:
        mechanism = (values["sasl_mechanism"] or "").upper()
        if mechanism not in _SASL_MECHANISMS:
            raise ConfigError(f"{prefix}.sasl_mechanism", source.of(f"{prefix}.sasl_mechanism"),
                              f"must be one of {', '.join(_SASL_MECHANISMS)} with {protocol.value}")
        values["sasl_mechanism"] = mechanism
        for name in ("username_env", "password_env"):
            if not values[name]:
                raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                                  f"{protocol.value} needs the name of an environment variable")
        if (protocol is KafkaProtocol.SASL_PLAINTEXT and mechanism == "PLAIN"
                and not allow_cleartext):
            raise ConfigError(f"{prefix}.protocol", source.of(f"{prefix}.protocol"),
                              "SASL_PLAINTEXT with PLAIN sends the password over the network as "
                              "clear text: use SASL_SSL (or SCRAM), or set "
                              f"{prefix}.allow_cleartext_password: true for a trusted network")
    for store in ("truststore", "keystore"):
        key = f"{prefix}.{store}_type"
        if values[f"{store}_type"] is not None:
            kind = str(values[f"{store}_type"]).upper()
            if kind not in _STORE_TYPES:
                raise ConfigError(key, source.of(key),
                                  f"{kind!r} is not one of {', '.join(_STORE_TYPES)}")
            values[f"{store}_type"] = kind
        location = values[f"{store}_location"]
        if location and values[f"{store}_type"] is None:
            # Kafka's default type is JKS whatever the file; the suffix says better.
            suffix = location.rpartition(".")[2].lower()
            values[f"{store}_type"] = {"p12": "PKCS12", "pfx": "PKCS12", "pem": "PEM",
                                       "crt": "PEM"}.get(suffix, "JKS")
    if values["keystore_location"] and protocol not in _TLS_PROTOCOLS:
        raise ConfigError(f"{prefix}.keystore_location", source.of(f"{prefix}.keystore_location"),
                          f"a client certificate (mTLS) needs protocol SSL or SASL_SSL, not "
                          f"{protocol.value}")
    for name, needs in (("keystore_password_env", "keystore_location"),
                        ("key_password_env", "keystore_location"),
                        ("truststore_password_env", "truststore_location")):
        if values[name] and not values[needs]:
            raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                              f"set only with {prefix}.{needs}")
    if (values["keystore_location"] and values["keystore_type"] != "PEM"
            and not values["keystore_password_env"]):
        raise ConfigError(f"{prefix}.keystore_password_env",
                          source.of(f"{prefix}.keystore_location"),
                          "a JKS or PKCS12 keystore needs the name of the environment variable "
                          "holding its password (never the password itself)")
    for name in ("username_env", "password_env", "truststore_password_env",
                 "keystore_password_env", "key_password_env"):
        variable = values[name]
        if variable is None:
            continue
        key = f"{prefix}.{name}"
        if not _ENV_NAME.match(variable):
            # Not echoed: a value here that is no variable name is most likely the secret itself.
            raise ConfigError(key, source.of(key),
                              "is not an environment variable name (the value is not shown; the "
                              "secret itself never goes in a file, only the variable's name)")
        if (sasl or name not in ("username_env", "password_env")) and not os.environ.get(variable):
            raise ConfigError(key, source.of(key), f"environment variable {variable} is not set")
    return KafkaSecurity(protocol=protocol, allow_cleartext_password=allow_cleartext, **values)


def _kafka_publish(source: Origins, kafka: Mapping[str, Any],
                   tables: Mapping[str, TableDecl]) -> tuple[KafkaPublish, ...]:
    entries = kafka.get("publish", []) or []
    if not isinstance(entries, list):
        raise ConfigError("kafka.publish", source.of("kafka.publish"),
                          "must be a list of {table, topic[, key]}")
    published: list[KafkaPublish] = []
    for i, entry in enumerate(entries):
        key = f"kafka.publish[{i}]"
        origin = source.of("kafka.publish")
        if not isinstance(entry, Mapping) or set(entry) - {"table", "topic", "key"}:
            raise ConfigError(key, origin, f"must map table, topic and key, got {entry!r}")
        table, topic, columns = entry.get("table"), entry.get("topic"), entry.get("key", []) or []
        spec = tables.get(str(table).replace(".", "/", 1))
        if spec is None:
            raise ConfigError(f"{key}.table", origin,
                              f"no pipeline declares a table {table!r} (declared: {', '.join(tables)})")
        if spec.layer.value not in ("silver", "gold"):
            raise ConfigError(f"{key}.table", origin, "only silver and gold tables are published")
        if not isinstance(topic, str) or not _TOPIC.match(topic):
            raise ConfigError(f"{key}.topic", origin, f"{topic!r} is not a topic name")
        if isinstance(columns, str):
            columns = [columns]
        unknown = [c for c in columns if c not in spec.column_names]
        if not isinstance(columns, list) or unknown:
            raise ConfigError(f"{key}.key", origin,
                              f"must list columns of {spec.key}; unknown: {unknown or columns!r}")
        published.append(KafkaPublish(spec.key, topic, tuple(columns)))
    return tuple(published)


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


def _read_from(reader: _Reader, section: Mapping[str, Any], source: Origins) -> ReadFrom:
    """``sources.read_from``. Its former name ``sources.events_kind`` (or
    ``$MEDALLION_EVENTS_KIND``) still counts, with a warning, unless both are set differently.
    (``--events-from`` is another spelling of ``--read-from``.)"""
    key, old = "sources.read_from", "sources.events_kind"
    values = {name: reader.string(section, name) for name in (key, old)
              if name.rpartition(".")[2] in section}
    for name, text in values.items():
        try:
            ReadFrom(text.lower())
        except ValueError:
            raise ConfigError(name, source.of(name), f"{text!r} is not one of files, kafka") from None
    if old in values:
        if key in values and values[key].lower() != values[old].lower():
            raise ConfigError(old, source.of(old),
                              f"is {values[old]!r} but {key} ({source.of(key)}) is "
                              f"{values[key]!r}; {old} is that key's former name: keep {key}")
        log.warning("%s (%s) is now called %s; the former name still works", old, source.of(old),
                    key)
    return ReadFrom(values.get(key, values.get(old, "files")).lower())


def load_settings(
    env: str | None = None,
    conf_dir: str | Path | None = None,
    landing: str | None = None,
    lakehouse: str | None = None,
    trigger: str | None = None,
    read_from: str | None = None,
    kafka_bootstrap: str | None = None,
) -> Settings:
    """Load and validate the settings of environment ``env`` (default ``$MEDALLION_ENV`` or local)."""
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
        (os.environ.get(ENV_VAR_EVENTS_KIND), "sources", "events_kind", f"${ENV_VAR_EVENTS_KIND}"),
        (os.environ.get(ENV_VAR_READ_FROM), "sources", "read_from", f"${ENV_VAR_READ_FROM}"),
        (os.environ.get(ENV_VAR_KAFKA_BOOTSTRAP), "kafka", "bootstrap_servers",
         f"${ENV_VAR_KAFKA_BOOTSTRAP}"),
        (read_from, "sources", "read_from", "--read-from"),
        (kafka_bootstrap, "kafka", "bootstrap_servers", "--bootstrap-servers"),
    ):
        if override:
            source.merge(tree, {section: {key: override}}, origin)

    reader = _Reader(tree, source)
    known_sections = ("paths", "spark", "streaming", "sources", "catalog", "thrift", "quality",
                      "kafka", "s3", "state_store", "maintenance")
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
    _check_hadoop_aws(packages, source.of("spark.packages"))
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

    stream_section = reader.section("streaming", {"watermark", "max_files_per_trigger", "trigger"})
    if "watermark" in stream_section:
        # Known, so that a configuration written before the declarations is told where it went
        # rather than having its lateness silently ignored.
        raise ConfigError("streaming.watermark", source.of("streaming.watermark"),
                          f"the event-time watermark is declared per pipeline now: set `watermark` "
                          f"in {directory / PIPELINES_FOLDER}/<name>.yaml, or in its "
                          f"<name>.{env}.yaml overlay for this environment, and remove this key")
    streaming = StreamingSettings(
        max_files_per_trigger=reader.positive_int(
            stream_section, "streaming.max_files_per_trigger", 1000),
        trigger=Trigger.parse(trigger, "--trigger") if trigger else Trigger.parse(
            reader.string(stream_section, "streaming.trigger", "available-now"),
            source.of("streaming.trigger")),
    )

    pipelines = load_declared_pipelines(directory, env)
    file_sources = sorted({s.name for p in pipelines for s in p.sources if s.format.value != "kafka"})
    sources_section = reader.section("sources", {*file_sources, "read_from", "events_kind"})
    # sources.<name>: where this environment's landing zone keeps a declared file source's files,
    # when not at the folder its declaration names.
    sources = {
        name: _source_folder(f"sources.{name}", reader.string(sources_section, f"sources.{name}"),
                             source.of(f"sources.{name}"))
        for name in file_sources if name in sources_section
    }
    read_from = _read_from(reader, sources_section, source)
    _refuse_moved_to_pipelines(tree, source, pipelines, env)
    quality = parse_quality(tree, source.of)
    tables = declared_tables(pipelines)
    catalog = _catalog_settings(reader, paths, spark, tables, pipelines)
    thrift = _thrift_settings(reader)
    return Settings(env=env, paths=paths, spark=spark, streaming=streaming, sources=sources,
                    conf_dir=str(directory.resolve()), catalog=catalog, thrift=thrift,
                    quality=quality, read_from=read_from,
                    kafka=_kafka_settings(reader, source, tables), s3=_read_s3(reader, source),
                    state_store=_state_store(reader), maintenance=_maintenance(reader, tables),
                    pipelines=pipelines)


# Settings that moved into the pipeline declarations: (section.key, what a table declares now,
# the keys under the table's declaration that hold it).
_MOVED_TO_PIPELINES = (
    ("quality.tables", "expectations", "{at}.expectations"),
    ("catalog.tables", "comments", "{at}.comment and {at}.column_comments (was columns)"),
    ("maintenance.zorder", "Z-order columns", "{at}.zorder"),
)


def _refuse_moved_to_pipelines(tree: Mapping[str, Any], source: Origins,
                               pipelines: tuple[PipelineSpec, ...], env: str) -> None:
    """Refuse ``quality.tables`` and ``catalog.tables``: the tables declare their expectations and
    comments now. A configuration written before would otherwise have them silently ignored, so
    the error says, table by table, where each now goes."""
    for dotted, what, keys in _MOVED_TO_PIPELINES:
        section, _, key = dotted.partition(".")
        value = tree.get(section)
        if not isinstance(value, Mapping) or key not in value:
            continue
        files = sorted({origin for name, origin in source.files.items()
                        if name == dotted or name.startswith(f"{dotted}.")})
        places = []
        for table in value[key] if isinstance(value[key], Mapping) else {}:
            place = _declaring(pipelines, str(table))
            if place is None:
                places.append(f"{table}: no pipeline declares this table")
                continue
            at, file = place
            overlay = Path(file).with_name(f"{Path(file).stem}.{env}.yaml").name
            places.append(f"{table} -> {keys.format(at=at)} in {file} (or its overlay {overlay})")
        where = "; ".join(places) or (
            f"{keys.format(at='<layer>.<table>')} in conf/{PIPELINES_FOLDER}/<name>.yaml")
        raise ConfigError(dotted, ", ".join(files) or source.of(dotted),
                          f"tables declare their own {what} in their pipeline now: {where}. "
                          "Move the entries there and remove this key")


def declared_tables(pipelines: tuple[PipelineSpec, ...]) -> dict[str, TableDecl]:
    """Every table the pipelines declare (quarantines included), by ``layer/name``."""
    return {decl.key: decl for pipeline in pipelines for decl in pipeline.tables()}


def _declaring(pipelines: tuple[PipelineSpec, ...], table: str) -> tuple[str, str] | None:
    """Where ``table`` (``layer/name`` or ``layer.name``) is declared: its key path and file."""
    for pipeline in pipelines:
        try:
            decl = pipeline.table(table)
        except KeyError:
            continue
        return decl.declared_at, pipeline.file
    return None


def load_declared_pipelines(conf_dir: Path, env: str) -> tuple[PipelineSpec, ...]:
    """Every pipeline of ``<conf_dir>/pipelines`` with ``env``'s overlays, loaded and validated,
    each on its own and against the others (:func:`~medallion.pipeline.validate.check_pipelines`;
    a :class:`~medallion.pipeline.errors.PipelineError` is a :class:`ConfigError`)."""
    return tuple(checked.spec for checked in check_pipelines(conf_dir, env))


_EXTERNAL_METASTORE_CONF = ("spark.hadoop.hive.metastore.uris",
                            "spark.hadoop.javax.jdo.option.ConnectionURL")


def _choice(reader: _Reader, section: Mapping[str, Any], key: str, enum: type[Enum],
            default: Enum) -> Any:
    value = section.get(key.rpartition(".")[2], default.value)
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(e.value) for e in enum)
        raise ConfigError(key, reader.source.of(key),
                          f"{value!r} is not one of {choices}") from None


def _optional_string(reader: _Reader, section: Mapping[str, Any], key: str) -> str | None:
    value = section.get(key.rpartition(".")[2])
    if value is None:
        return None
    return reader.string(section, key)


def _catalog_settings(reader: _Reader, paths: Paths, spark: SparkSettings,
                      tables: Mapping[str, TableDecl],
                      pipelines: tuple[PipelineSpec, ...]) -> CatalogSettings:
    section = reader.section("catalog", {"metastore", "metastore_uris", "tables", "views"})
    metastore = _choice(reader, section, "catalog.metastore", Metastore, Metastore.EMBEDDED)
    uris = _optional_string(reader, section, "catalog.metastore_uris")
    if metastore is Metastore.EMBEDDED and "://" in paths.lakehouse:
        raise ConfigError("catalog.metastore", reader.source.of("catalog.metastore"),
                          f"an embedded metastore needs a local lakehouse, not {paths.lakehouse}; "
                          "use external (with catalog.metastore_uris) or in-memory")
    if metastore is Metastore.EXTERNAL and not uris and not any(
            key in spark.conf for key in _EXTERNAL_METASTORE_CONF):
        raise ConfigError("catalog.metastore_uris", reader.source.of("catalog.metastore"),
                          "an external metastore needs thrift:// URIs here, or "
                          f"{' / '.join(_EXTERNAL_METASTORE_CONF)} in spark.conf")

    known = [decl.qualified_name for decl in tables.values()]
    declared_views = {view.name: pipeline for pipeline in pipelines for view in pipeline.views}
    views_section = reader.section_of(section, "catalog.views")
    readable = [*known, *declared_views, *map(str, views_section)]
    views = []
    for name in views_section:
        key = f"catalog.views.{name}"
        problem = name_problem(str(name), known)
        if problem:
            raise ConfigError(key, reader.source.of(key), problem)
        if name in declared_views:
            raise ConfigError(key, reader.source.of(key), f"pipeline {declared_views[name].name} "
                              "declares a view of this name: a catalog name has one declaration "
                              f"(remove this one, or rename it; {declared_views[name].file})")
        view_section = reader.section_of(views_section, key, {"sql", "comment"}, name)
        sql = reader.string(view_section, f"{key}.sql")
        problem = query_problem(sql, readable, "no pipeline declares")
        if problem:
            raise ConfigError(f"{key}.sql", reader.source.of(f"{key}.sql"), problem)
        views.append(ViewSpec(name=name, sql=sql.strip().rstrip(";"),
                              comment=_optional_string(reader, view_section, f"{key}.comment")))
    return CatalogSettings(metastore=metastore, metastore_uris=uris, views=tuple(views))


def _thrift_settings(reader: _Reader) -> ThriftSettings:
    section = reader.section("thrift", {"host", "port", "auth", "ldap_url", "ldap_base_dn",
                                        "kerberos_principal", "kerberos_keytab", "read_only",
                                        "tls", "keystore", "keystore_password_env", "sasl_qop"})
    host = reader.string(section, "thrift.host", "127.0.0.1")
    port = section.get("port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError("thrift.port", reader.source.of("thrift.port"),
                          f"must be a TCP port, or 0 for a free one, got {port!r}")
    auth = _choice(reader, section, "thrift.auth", ThriftAuth, ThriftAuth.NONE)
    loopback = host in LOOPBACK_HOSTS
    if auth in (ThriftAuth.NONE, ThriftAuth.NOSASL) and not loopback:
        raise ConfigError("thrift.host", reader.source.of("thrift.host"),
                          f"{host!r} is not loopback, and thrift.auth {auth.value!r} (from "
                          f"{reader.source.of('thrift.auth')}) is allowed on loopback only; "
                          "set thrift.auth to ldap or kerberos")
    settings = ThriftSettings(
        host=host, port=port, auth=auth,
        ldap_url=_optional_string(reader, section, "thrift.ldap_url"),
        ldap_base_dn=_optional_string(reader, section, "thrift.ldap_base_dn"),
        kerberos_principal=_optional_string(reader, section, "thrift.kerberos_principal"),
        kerberos_keytab=_optional_string(reader, section, "thrift.kerberos_keytab"),
        read_only=_boolean(section, "thrift.read_only", True, reader.source),
        tls=_boolean(section, "thrift.tls", False, reader.source),
        keystore=_optional_string(reader, section, "thrift.keystore"),
        keystore_password_env=_optional_string(reader, section, "thrift.keystore_password_env"),
        sasl_qop=_choice(reader, section, "thrift.sasl_qop", SaslQop, SaslQop.AUTH_CONF),
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


def _check_thrift_transport(reader: _Reader, settings: ThriftSettings) -> None:
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
    if not _ENV_NAME.match(variable):
        # Not echoed: a value here that is no variable name is most likely the secret itself.
        raise fail("keystore_password_env", "is not an environment variable name (the value is "
                                            "not shown; the password never goes in a file, only "
                                            "the variable's name)")


def _state_store(reader: _Reader) -> StateStoreSettings:
    section = reader.section("state_store", {"max_memory_mb", "write_buffer_ratio", "count_rows"})
    ratio = section.get("write_buffer_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1:
        raise ConfigError("state_store.write_buffer_ratio",
                          reader.source.of("state_store.write_buffer_ratio"),
                          f"must be a number between 0 and 1, got {ratio!r}")
    return StateStoreSettings(
        max_memory_mb=reader.positive_int(section, "state_store.max_memory_mb", 256),
        write_buffer_ratio=float(ratio),
        count_rows=_boolean(section, "state_store.count_rows", False, reader.source),
    )


def _maintenance(reader: _Reader, tables: Mapping[str, TableDecl]) -> MaintenanceSettings:
    # zorder is known so that _refuse_moved_to_pipelines can say where it went (the tables').
    section = reader.section("maintenance", {"vacuum_retention", "small_file_mb", "zorder"})
    key = "maintenance.vacuum_retention"
    retention = reader.string(section, key, "7 days")
    seconds = parse_duration_seconds(retention, key, reader.source.of(key))
    if seconds % 3600:
        raise ConfigError(key, reader.source.of(key), f"{retention!r} is not a whole number of hours")
    return MaintenanceSettings(
        vacuum_retention_hours=seconds // 3600,
        small_file_mb=reader.positive_int(section, "maintenance.small_file_mb", 32),
        zorder={key: decl.doc.zorder for key, decl in tables.items() if decl.doc.zorder},
    )


def bundled_hadoop_version() -> str | None:
    """The Hadoop version of the installed pyspark (hadoop-aws must match it exactly)."""
    from importlib.util import find_spec

    # Found, not imported: commands that never start Spark (status, show, ...) skip PySpark.
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:  # pragma: no cover - pyspark is a dependency
        return None
    jars = Path(spec.origin).resolve().parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    return None


def _check_hadoop_aws(packages: list[str], source: str) -> None:
    hadoop = bundled_hadoop_version()
    for coordinate in packages:
        group, artifact, version = coordinate.split(":")
        if (group, artifact) == ("org.apache.hadoop", "hadoop-aws") and hadoop and version != hadoop:
            raise ConfigError("spark.packages", source,
                              f"{coordinate} does not match the Hadoop {hadoop} that pyspark ships; "
                              f"use org.apache.hadoop:hadoop-aws:{hadoop}")


def _boolean(section: Mapping[str, Any], key: str, default: bool, source: Origins) -> bool:
    value = section.get(key.rpartition(".")[2], default)
    if not isinstance(value, bool):
        raise ConfigError(key, source.of(key), f"must be true or false, got {_show(key, value)}")
    return value


def _s3_optional_string(section: Mapping[str, Any], key: str, source: Origins) -> str | None:
    value = section.get(key.rpartition(".")[2])
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, source.of(key),
                          f"must be a non-empty string or null, got {_show(key, value)}")
    return value.strip()


def _s3_choice(section: Mapping[str, Any], key: str, enum: type[Enum], default: Enum,
            source: Origins) -> Any:
    value = section.get(key.rpartition(".")[2], default.value)
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in enum)
        raise ConfigError(key, source.of(key), f"{value!r} is not one of {choices}") from None


def _read_s3(reader: _Reader, source: Origins) -> S3Settings:
    section = reader.section("s3", {
        "endpoint", "path_style_access", "region", "sse", "kms_key_id", "delta_log_store",
        "dynamodb_table", "dynamodb_region", "account_id", "versioning", "landing_expiry_days",
        "abort_incomplete_uploads_days",
    })
    endpoint = _s3_optional_string(section, "s3.endpoint", source)
    if endpoint is not None and not re.match(r"^https?://[^/\s]+/?$", endpoint):
        raise ConfigError("s3.endpoint", source.of("s3.endpoint"),
                          f"{endpoint!r} is not an http(s)://host[:port] URL")
    sse = _s3_choice(section, "s3.sse", SseAlgorithm, SseAlgorithm.NONE, source)
    kms_key_id = _s3_optional_string(section, "s3.kms_key_id", source)
    if sse is SseAlgorithm.SSE_KMS and kms_key_id is None:
        raise ConfigError("s3.kms_key_id", source.of("s3.sse"), "SSE-KMS needs the key's ARN")
    if kms_key_id is not None and not _KMS_KEY_ARN.match(kms_key_id):
        # An id or alias cannot be an IAM policy's Resource: the grant would be on every key ("*").
        raise ConfigError("s3.kms_key_id", source.of("s3.kms_key_id"),
                          f"{kms_key_id!r} is not a key ARN like "
                          "arn:aws:kms:eu-west-1:111122223333:key/<key id> (an id or an alias "
                          "cannot be named in the job role's IAM policy)")
    if sse is not SseAlgorithm.SSE_KMS and kms_key_id is not None:
        raise ConfigError("s3.kms_key_id", source.of("s3.kms_key_id"),
                          f"a KMS key is only used with sse: SSE-KMS (sse is {sse.value})")
    delta_log_store = _s3_choice(section, "s3.delta_log_store", DeltaLogStore,
                                 DeltaLogStore.SINGLE_DRIVER, source)
    region = _s3_optional_string(section, "s3.region", source)
    dynamodb_region = _s3_optional_string(section, "s3.dynamodb_region", source)
    account = section.get("account_id")
    if account is not None and (not isinstance(account, str) or not re.match(r"^\d{12}$", account)):
        raise ConfigError("s3.account_id", source.of("s3.account_id"),
                          f"must be the 12-digit AWS account id as a quoted string, got {account!r}")
    if delta_log_store is DeltaLogStore.DYNAMODB:
        # The job role's policy names the commit table by its full ARN: region and account.
        if not (dynamodb_region or region):
            raise ConfigError("s3.dynamodb_region", source.of("s3.delta_log_store"),
                              "the DynamoDB log store needs s3.dynamodb_region or s3.region")
        if account is None:
            raise ConfigError("s3.account_id", source.of("s3.delta_log_store"),
                              "the DynamoDB log store needs the table's AWS account id, so that "
                              "the IAM policy grants that one table and no other")
    return S3Settings(
        endpoint=endpoint.rstrip("/") if endpoint else None,
        path_style_access=_boolean(section, "s3.path_style_access", False, source),
        region=region,
        sse=sse,
        kms_key_id=kms_key_id,
        delta_log_store=delta_log_store,
        dynamodb_table=reader.string(section, "s3.dynamodb_table", "delta_log"),
        dynamodb_region=dynamodb_region,
        account_id=account,
        versioning=_boolean(section, "s3.versioning", True, source),
        landing_expiry_days=reader.positive_int(section, "s3.landing_expiry_days", 30),
        abort_incomplete_uploads_days=reader.positive_int(
            section, "s3.abort_incomplete_uploads_days", 7),
    )
