"""The ``lineage`` settings: whether sessions emit OpenLineage events, and where to.

Off unless ``lineage.transport`` is ``file`` or ``http``; then every session the project starts
gets the OpenLineage Spark listener (``medallion.spark.lineage``). Checked here, before Spark
starts: a file transport's path is a local file the driver can append to, an HTTP one's URL an
http(s) URL without credentials (those are refused anywhere in the settings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medallion.config.model import DEFAULT_LINEAGE_NAMESPACE, LineageSettings, LineageTransport
from medallion.config.reader import SettingsReader, choice, optional_string
from medallion.errors import ConfigError

_URL = re.compile(r"^https?://[^/\s?#]+(/[^\s]*)?$")
# A job namespace: plain characters, so that it reads the same in every backend and on a command line.
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


def read_lineage(reader: SettingsReader) -> LineageSettings:
    """The ``lineage`` section: ``transport`` (none, file or http), ``path`` with a file
    transport, ``url`` with an HTTP one, and the jobs' ``namespace``."""
    section = reader.section("lineage", {"transport", "path", "url", "namespace"})
    transport = choice(reader, section, "lineage.transport", LineageTransport,
                       LineageTransport.NONE)
    path = optional_string(reader, section, "lineage.path")
    url = optional_string(reader, section, "lineage.url")
    namespace = reader.string(section, "lineage.namespace", DEFAULT_LINEAGE_NAMESPACE)
    if not _NAMESPACE.match(namespace):
        raise ConfigError("lineage.namespace", reader.source.of("lineage.namespace"),
                          f"{namespace!r} is not a namespace: letters, digits, '.', '_', '-', ':' "
                          "and '/', starting with a letter or digit")
    for key, value, wanted in (("path", path, LineageTransport.FILE),
                               ("url", url, LineageTransport.HTTP)):
        if value is not None and transport is not wanted:
            raise ConfigError(f"lineage.{key}", reader.source.of(f"lineage.{key}"),
                              f"set only with lineage.transport: {wanted.value} (transport is "
                              f"{transport.value}, from {reader.source.of('lineage.transport')})")
    if transport is LineageTransport.FILE:
        return LineageSettings(transport, path=_event_file(reader, section, path),
                               namespace=namespace)
    if transport is LineageTransport.HTTP:
        if url is None:
            raise ConfigError("lineage.url", reader.source.of("lineage.transport"),
                              "required with lineage.transport: http (the OpenLineage endpoint, "
                              "http(s)://host[:port]; without a path, events go to "
                              "/api/v1/lineage)")
        if not _URL.match(url):
            raise ConfigError("lineage.url", reader.source.of("lineage.url"),
                              f"{url!r} is not an http:// or https:// URL")
        return LineageSettings(transport, url=url, namespace=namespace)
    return LineageSettings(namespace=namespace)


def _event_file(reader: SettingsReader, section: Mapping[str, Any], path: str | None) -> str:
    """A file transport's file: local to the driver (the listener appends to it with plain file
    I/O, so no ``s3a://``), not a folder, made absolute so that spark-submit's command line
    points where the configuration meant."""
    if path is None:
        raise ConfigError("lineage.path", reader.source.of("lineage.transport"),
                          "required with lineage.transport: file (the file events are appended "
                          "to, one JSON event a line)")
    source = reader.source.of("lineage.path")
    if any(ord(char) < 32 for char in path):
        raise ConfigError("lineage.path", source, "holds a control character")
    if "://" in path:
        raise ConfigError("lineage.path", source,
                          f"{path!r} is not a local file: the listener appends to a file on the "
                          "driver's own disk (use transport http to send events elsewhere)")
    file = Path(path).expanduser().resolve()
    if file.is_dir():
        raise ConfigError("lineage.path", source, f"{path!r} is a folder, not a file")
    for parent in file.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError("lineage.path", source,
                                  f"{path!r} cannot be made: {str(parent)!r} is a file")
            break
    return str(file)
