"""Typed values taken out of the merged settings tree, each error naming its key and file."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import Any

from medallion.config.yamlfiles import Origins
from medallion.errors import ConfigError
from medallion.redact import is_secret_key

# The name of an environment variable that holds a secret (the secret itself never goes in a file).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def shown(key: str, value: Any) -> str:
    """``value`` as an error message may quote it: never the value of a secret-like key."""
    return "(a value, not shown: the key names a secret)" if is_secret_key(key) else repr(value)

class SettingsReader:
    """Takes typed values out of the merged tree, checking for unknown keys."""

    def __init__(self, tree: Mapping[str, Any], source: Origins) -> None:
        self.tree = tree
        self.source = source

    def section(self, name: str, allowed: set[str] | None) -> Mapping[str, Any]:
        """The mapping at ``name`` (``{}`` when absent); its keys checked against ``allowed``
        unless None (a section whose keys name declared things, checked with the declarations)."""
        value = self.tree.get(name, {})
        if not isinstance(value, Mapping):
            raise ConfigError(name, self.source.of(name), "must be a mapping")
        for key in value:
            if allowed is not None and key not in allowed:
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
                              f"must be a non-empty string, got {shown(key, value)}")
        return value.strip()

    def positive_int(self, section: Mapping[str, Any], key: str, default: int) -> int:
        value = section.get(key.rpartition(".")[2], default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(key, self.source.of(key),
                              f"must be a positive integer, got {shown(key, value)}")
        return value

def choice(reader: SettingsReader, section: Mapping[str, Any], key: str, enum: type[Enum],
            default: Enum) -> Any:
    value = section.get(key.rpartition(".")[2], default.value)
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(e.value) for e in enum)
        raise ConfigError(key, reader.source.of(key),
                          f"{value!r} is not one of {choices}") from None

def optional_string(reader: SettingsReader, section: Mapping[str, Any], key: str) -> str | None:
    value = section.get(key.rpartition(".")[2])
    if value is None:
        return None
    return reader.string(section, key)

def boolean(section: Mapping[str, Any], key: str, default: bool, source: Origins) -> bool:
    value = section.get(key.rpartition(".")[2], default)
    if not isinstance(value, bool):
        raise ConfigError(key, source.of(key), f"must be true or false, got {shown(key, value)}")
    return value
