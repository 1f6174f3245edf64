"""The engine's settings as typed, frozen objects: paths, Spark, streaming, catalog, Thrift, Kafka,
S3, state store, maintenance, quality and lineage, each with its defaults.

What a pipeline declares is in :mod:`medallion.pipeline.model`; :mod:`medallion.project` holds
both together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from medallion.config.durations import parse_duration_seconds
from medallion.errors import ConfigError

ENV_VAR_ENV = "MEDALLION_ENV"
ENV_VAR_CONF_DIR = "MEDALLION_CONF_DIR"
ENV_VAR_LANDING = "MEDALLION_LANDING"
ENV_VAR_LAKEHOUSE = "MEDALLION_LAKEHOUSE"
ENV_VAR_READ_FROM = "MEDALLION_READ_FROM"
ENV_VAR_KAFKA_BOOTSTRAP = "MEDALLION_KAFKA_BOOTSTRAP"
ENV_VAR_S3_ENDPOINT = "MEDALLION_S3_ENDPOINT"
DEFAULT_ENV = "local"


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
class ViewSpec:
    """A view kept in the catalog, ``<schema>.<name>``, defined by a SELECT over the tables."""

    name: str
    sql: str
    comment: str | None = None


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
    """What ``medallion maintain`` does: OPTIMIZE (Z-ordered, or clustered), then VACUUM."""

    vacuum_retention_hours: int = DEFAULT_VACUUM_RETENTION_HOURS
    small_file_mb: int = 32  # files smaller than this count as small in the report
    every_seconds: int = 86400  # `run --maintain`: a table is maintained when this has passed
    # table key -> columns, from the tables' declarations (`zorder`, `cluster_by`)
    zorder: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

@dataclass(frozen=True)
class QualitySettings:
    """The data-quality gates as a whole: on or off (the expectations are the tables' own)."""

    enabled: bool = True


class LineageTransport(str, Enum):
    """Where the OpenLineage listener sends its events; ``none``: no listener at all."""

    NONE = "none"
    FILE = "file"  # one JSON event a line, appended to a file on the driver's machine
    HTTP = "http"  # POSTed to an OpenLineage endpoint (Marquez's, or any that speaks the API)


DEFAULT_LINEAGE_NAMESPACE = "medallion"


@dataclass(frozen=True)
class LineageSettings:
    """OpenLineage events of every session: off unless a transport is chosen."""

    transport: LineageTransport = LineageTransport.NONE
    path: str | None = None  # file: an absolute local path
    url: str | None = None  # http: http(s)://host[:port][/path]
    namespace: str = DEFAULT_LINEAGE_NAMESPACE  # the namespace of the jobs the events name

    @property
    def enabled(self) -> bool:
        """Whether sessions get the listener (and its jar)."""
        return self.transport is not LineageTransport.NONE
