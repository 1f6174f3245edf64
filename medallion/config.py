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


@dataclass(frozen=True)
class StateStoreSettings:
    """Bounds of the RocksDB state store of the stateful (gold) queries, per executor."""

    max_memory_mb: int = 256  # block cache and write buffers together, shared by every instance
    write_buffer_ratio: float = 0.5  # share of that memory the write buffers may take


DEFAULT_VACUUM_RETENTION_HOURS = 168  # Delta's own default: 7 days


@dataclass(frozen=True)
class MaintenanceSettings:
    """What ``medallion maintain`` does: OPTIMIZE with Z-ORDER, then VACUUM."""

    vacuum_retention_hours: int = DEFAULT_VACUUM_RETENTION_HOURS
    small_file_mb: int = 32  # files smaller than this count as small in the report
    zorder: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table key -> columns


@dataclass(frozen=True)
class Settings:
    """The whole configuration of one run."""

    env: str
    paths: Paths
    spark: SparkSettings
    streaming: StreamingSettings
    sources: Mapping[str, str]
    state_store: StateStoreSettings = StateStoreSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()

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
    for value, key in ((landing, "landing"), (lakehouse, "lakehouse")):
        if value:
            source.merge(tree, {"paths": {key: value}}, f"--{key}")

    reader = _Reader(tree, source)
    known_sections = ("paths", "spark", "streaming", "sources", "state_store", "maintenance")
    for key in tree:
        if key not in known_sections:
            raise ConfigError(key, source.of(key),
                              f"unknown top-level key (known: {', '.join(known_sections)})")

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
    return Settings(env=env, paths=paths, spark=spark, streaming=streaming, sources=sources,
                    state_store=_state_store(reader), maintenance=_maintenance(reader))


def _state_store(reader: _Reader) -> StateStoreSettings:
    section = reader.section("state_store", {"max_memory_mb", "write_buffer_ratio"})
    ratio = section.get("write_buffer_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1:
        raise ConfigError("state_store.write_buffer_ratio",
                          reader.source.of("state_store.write_buffer_ratio"),
                          f"must be a number between 0 and 1, got {ratio!r}")
    return StateStoreSettings(
        max_memory_mb=reader.positive_int(section, "state_store.max_memory_mb", 256),
        write_buffer_ratio=float(ratio),
    )


def _maintenance(reader: _Reader) -> MaintenanceSettings:
    from medallion.tables import ALL_TABLES  # tables imports this module at its top

    section = reader.section("maintenance", {"vacuum_retention", "small_file_mb", "zorder"})
    key = "maintenance.vacuum_retention"
    retention = reader.string(section, key, "7 days")
    seconds = parse_duration_seconds(retention, key, reader.source.of(key))
    if seconds % 3600:
        raise ConfigError(key, reader.source.of(key), f"{retention!r} is not a whole number of hours")
    zorder_key = "maintenance.zorder"
    zorder = section.get("zorder", {}) or {}
    if not isinstance(zorder, Mapping):
        raise ConfigError(zorder_key, reader.source.of(zorder_key),
                          "must map a table (layer/name) to a list of columns")
    tables = {spec.key: spec for spec in ALL_TABLES}
    checked: dict[str, tuple[str, ...]] = {}
    for table, columns in zorder.items():
        where = reader.source.of(f"{zorder_key}.{table}")
        if table not in tables:
            raise ConfigError(f"{zorder_key}.{table}", where,
                              f"no such table (known: {', '.join(tables)})")
        if not isinstance(columns, list) or not columns or not all(
                isinstance(c, str) and c in tables[table].column_names for c in columns):
            raise ConfigError(f"{zorder_key}.{table}", where,
                              f"must be a list of columns of {table} "
                              f"({', '.join(tables[table].column_names)}), got {columns!r}")
        checked[table] = tuple(columns)
    return MaintenanceSettings(
        vacuum_retention_hours=seconds // 3600,
        small_file_mb=reader.positive_int(section, "maintenance.small_file_mb", 32),
        zorder=checked,
    )
