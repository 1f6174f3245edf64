"""Typed settings loaded from ``conf/``: a base file plus one overlay per environment.

Everything is validated before Spark starts. A bad value raises :class:`ConfigError`, whose
message names the key and the file it came from, so that a scheduler's log says what to fix.

Precedence, lowest first: ``conf/base.yaml``, ``conf/<env>.yaml``, the environment variables
``MEDALLION_LANDING`` / ``MEDALLION_LAKEHOUSE``, then explicit overrides (the CLI flags).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

ENV_VAR_ENV = "MEDALLION_ENV"
ENV_VAR_CONF_DIR = "MEDALLION_CONF_DIR"
ENV_VAR_LANDING = "MEDALLION_LANDING"
ENV_VAR_LAKEHOUSE = "MEDALLION_LAKEHOUSE"
ENV_VAR_S3_ENDPOINT = "MEDALLION_S3_ENDPOINT"
DEFAULT_ENV = "local"

_DURATION = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day)s?\s*$")
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the key and the file."""

    def __init__(self, key: str, source: str, problem: str) -> None:
        super().__init__(f"invalid configuration: {key} (from {source}): {problem}")
        self.key = key
        self.source = source


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
    shuffle_partitions: int = 4
    log_level: str = "WARN"
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamingSettings:
    """Options shared by the streaming jobs."""

    watermark: str = "10 minutes"
    max_files_per_trigger: int = 1000
    trigger: Trigger = Trigger()


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
    kms_key_id: str | None = None  # with SSE-KMS: the key's id, ARN or alias
    delta_log_store: DeltaLogStore = DeltaLogStore.SINGLE_DRIVER
    dynamodb_table: str = "delta_log"
    dynamodb_region: str | None = None
    # Provisioning (``medallion infra``): bucket versioning, and how long landed files are kept.
    versioning: bool = True
    landing_expiry_days: int = 30
    abort_incomplete_uploads_days: int = 7


@dataclass(frozen=True)
class Settings:
    """The whole configuration of one run."""

    env: str
    paths: Paths
    spark: SparkSettings
    streaming: StreamingSettings
    sources: Mapping[str, str]
    s3: S3Settings = S3Settings()

    def table_path(self, layer: str, table: str) -> str:
        """Path of a Delta table: ``<lakehouse>/<layer>/<table>``."""
        return f"{self.paths.lakehouse}/{layer}/{table}"

    def checkpoint_path(self, name: str) -> str:
        """Checkpoint folder of one streaming query, outside every table's folder."""
        return f"{self.paths.lakehouse}/_checkpoints/{name}"

    def landing_path(self, entity: str) -> str:
        """Folder of the landing zone that holds one entity's files."""
        return f"{self.paths.landing}/{entity}"


def parse_duration_seconds(text: str, key: str, source: str) -> int:
    """Seconds in a Spark-style duration such as ``10 minutes``."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(key, source, f"{text!r} is not a duration like '10 minutes'")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def default_conf_dir() -> Path:
    """``$MEDALLION_CONF_DIR``, else ``./conf``, else the ``conf/`` beside the package."""
    if os.environ.get(ENV_VAR_CONF_DIR):
        return Path(os.environ[ENV_VAR_CONF_DIR])
    local = Path.cwd() / "conf"
    if (local / "base.yaml").is_file():
        return local
    return Path(__file__).resolve().parent.parent / "conf"


class _Source:
    """Remembers which file each key came from, to name it in errors."""

    def __init__(self) -> None:
        self.origin: dict[str, str] = {}

    def merge(self, base: dict[str, Any], overlay: Mapping[str, Any], file: str, prefix: str = "") -> None:
        for key, value in overlay.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping) and isinstance(base.get(key), dict):
                self.merge(base[key], value, file, f"{dotted}.")
            else:
                base[key] = dict(value) if isinstance(value, Mapping) else value
                self._mark(dotted, value, file)

    def _mark(self, dotted: str, value: Any, file: str) -> None:
        self.origin[dotted] = file
        if isinstance(value, Mapping):
            for key, inner in value.items():
                self._mark(f"{dotted}.{key}", inner, file)

    def of(self, dotted: str) -> str:
        while dotted:
            if dotted in self.origin:
                return self.origin[dotted]
            dotted = dotted.rpartition(".")[0]
        return "defaults"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError("<file>", str(path), f"not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("<root>", str(path), "must be a mapping of keys to values")
    return data


class _Reader:
    """Takes typed values out of the merged tree, checking for unknown keys."""

    def __init__(self, tree: Mapping[str, Any], source: _Source) -> None:
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

    def string(self, section: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = section.get(key.rpartition(".")[2], default)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(key, self.source.of(key), f"must be a non-empty string, got {value!r}")
        return value.strip()

    def positive_int(self, section: Mapping[str, Any], key: str, default: int) -> int:
        value = section.get(key.rpartition(".")[2], default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(key, self.source.of(key), f"must be a positive integer, got {value!r}")
        return value


def _normalise_path(path: str) -> str:
    if "://" in path:
        return path.rstrip("/")
    return str(Path(path).expanduser().resolve())


def load_settings(
    env: str | None = None,
    conf_dir: str | Path | None = None,
    landing: str | None = None,
    lakehouse: str | None = None,
    trigger: str | None = None,
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

    source = _Source()
    tree: dict[str, Any] = {}
    for file in (base_file, env_file):
        source.merge(tree, _read_yaml(file), str(file))
    for var, key in ((ENV_VAR_LANDING, "landing"), (ENV_VAR_LAKEHOUSE, "lakehouse")):
        if os.environ.get(var):
            source.merge(tree, {"paths": {key: os.environ[var]}}, f"${var}")
    if os.environ.get(ENV_VAR_S3_ENDPOINT):
        source.merge(tree, {"s3": {"endpoint": os.environ[ENV_VAR_S3_ENDPOINT]}},
                     f"${ENV_VAR_S3_ENDPOINT}")
    for value, key in ((landing, "landing"), (lakehouse, "lakehouse")):
        if value:
            source.merge(tree, {"paths": {key: value}}, f"--{key}")

    reader = _Reader(tree, source)
    for key in tree:
        if key not in {"paths", "spark", "streaming", "sources", "s3"}:
            raise ConfigError(key, source.of(key),
                              "unknown top-level key (known: paths, spark, streaming, sources, s3)")

    paths_section = reader.section("paths", {"landing", "lakehouse"})
    paths = Paths(
        landing=_normalise_path(reader.string(paths_section, "paths.landing")),
        lakehouse=_normalise_path(reader.string(paths_section, "paths.lakehouse")),
    )

    spark_section = reader.section(
        "spark", {"app_name", "master", "shuffle_partitions", "log_level", "packages", "conf"}
    )
    master = spark_section.get("master", "local[2]")
    if master is not None and (not isinstance(master, str) or not master.strip()):
        raise ConfigError("spark.master", source.of("spark.master"),
                          f"must be a Spark master URL or null, got {master!r}")
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
    log_level = reader.string(spark_section, "spark.log_level", "WARN").upper()
    if log_level not in {"ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"}:
        raise ConfigError("spark.log_level", source.of("spark.log_level"),
                          f"{log_level!r} is not a log4j level")
    spark = SparkSettings(
        app_name=reader.string(spark_section, "spark.app_name", "medallion"),
        master=master.strip() if isinstance(master, str) else None,
        shuffle_partitions=reader.positive_int(spark_section, "spark.shuffle_partitions", 4),
        log_level=log_level,
        packages=tuple(packages),
        conf={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark_conf.items()},
    )

    stream_section = reader.section("streaming", {"watermark", "max_files_per_trigger", "trigger"})
    watermark = reader.string(stream_section, "streaming.watermark", "10 minutes")
    parse_duration_seconds(watermark, "streaming.watermark", source.of("streaming.watermark"))
    streaming = StreamingSettings(
        watermark=watermark,
        max_files_per_trigger=reader.positive_int(
            stream_section, "streaming.max_files_per_trigger", 1000),
        trigger=Trigger.parse(trigger, "--trigger") if trigger else Trigger.parse(
            reader.string(stream_section, "streaming.trigger", "available-now"),
            source.of("streaming.trigger")),
    )

    sources_section = reader.section("sources", {"events", "customers"})
    sources = {
        "events": reader.string(sources_section, "sources.events", "events"),
        "customers": reader.string(sources_section, "sources.customers", "customers"),
    }
    s3 = _read_s3(reader, source)
    return Settings(env=env, paths=paths, spark=spark, streaming=streaming, sources=sources, s3=s3)


def bundled_hadoop_version() -> str | None:
    """The Hadoop version of the installed pyspark (hadoop-aws must match it exactly)."""
    try:
        import pyspark
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
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


def _boolean(section: Mapping[str, Any], key: str, default: bool, source: _Source) -> bool:
    value = section.get(key.rpartition(".")[2], default)
    if not isinstance(value, bool):
        raise ConfigError(key, source.of(key), f"must be true or false, got {value!r}")
    return value


def _optional_string(section: Mapping[str, Any], key: str, source: _Source) -> str | None:
    value = section.get(key.rpartition(".")[2])
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, source.of(key), f"must be a non-empty string or null, got {value!r}")
    return value.strip()


def _choice(section: Mapping[str, Any], key: str, enum: type[Enum], default: Enum,
            source: _Source) -> Any:
    value = section.get(key.rpartition(".")[2], default.value)
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in enum)
        raise ConfigError(key, source.of(key), f"{value!r} is not one of {choices}") from None


def _read_s3(reader: _Reader, source: _Source) -> S3Settings:
    section = reader.section("s3", {
        "endpoint", "path_style_access", "region", "sse", "kms_key_id", "delta_log_store",
        "dynamodb_table", "dynamodb_region", "versioning", "landing_expiry_days",
        "abort_incomplete_uploads_days",
    })
    endpoint = _optional_string(section, "s3.endpoint", source)
    if endpoint is not None and not re.match(r"^https?://[^/\s]+/?$", endpoint):
        raise ConfigError("s3.endpoint", source.of("s3.endpoint"),
                          f"{endpoint!r} is not an http(s)://host[:port] URL")
    sse = _choice(section, "s3.sse", SseAlgorithm, SseAlgorithm.NONE, source)
    kms_key_id = _optional_string(section, "s3.kms_key_id", source)
    if sse is SseAlgorithm.SSE_KMS and kms_key_id is None:
        raise ConfigError("s3.kms_key_id", source.of("s3.sse"), "SSE-KMS needs the key's id or ARN")
    if sse is not SseAlgorithm.SSE_KMS and kms_key_id is not None:
        raise ConfigError("s3.kms_key_id", source.of("s3.kms_key_id"),
                          f"a KMS key is only used with sse: SSE-KMS (sse is {sse.value})")
    return S3Settings(
        endpoint=endpoint.rstrip("/") if endpoint else None,
        path_style_access=_boolean(section, "s3.path_style_access", False, source),
        region=_optional_string(section, "s3.region", source),
        sse=sse,
        kms_key_id=kms_key_id,
        delta_log_store=_choice(section, "s3.delta_log_store", DeltaLogStore,
                                DeltaLogStore.SINGLE_DRIVER, source),
        dynamodb_table=reader.string(section, "s3.dynamodb_table", "delta_log"),
        dynamodb_region=_optional_string(section, "s3.dynamodb_region", source),
        versioning=_boolean(section, "s3.versioning", True, source),
        landing_expiry_days=reader.positive_int(section, "s3.landing_expiry_days", 30),
        abort_incomplete_uploads_days=reader.positive_int(
            section, "s3.abort_incomplete_uploads_days", 7),
    )
