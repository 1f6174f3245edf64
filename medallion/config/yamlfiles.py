"""Layered YAML files, shared by the settings (``conf/*.yaml``) and the pipeline definitions.

A file is read as a mapping of plain values; overlays are merged into it key by key; and every
dotted key remembers the file (or variable, or option) that set it, so an error names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from medallion.errors import ConfigError

# libyaml's parser, when PyYAML was built with it: the same values as the pure-Python one, about
# seven times faster (every command reads the settings and every pipeline file).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Origins:
    """Which file each dotted key came from; a key an overlay set names the overlay."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def mark(self, key: str, value: Any, file: str) -> None:
        """Record ``file`` for ``key`` and everything under it."""
        self.files[key] = file
        if isinstance(value, Mapping):
            for inner, item in value.items():
                self.mark(f"{key}.{inner}", item, file)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.mark(f"{key}.{index}", item, file)

    def merge(self, base: dict[str, Any], overlay: Mapping[str, Any], file: str, prefix: str = "") -> None:
        """Merge ``overlay`` into ``base`` in place: mappings key by key, other values replaced."""
        for key, value in overlay.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping) and isinstance(base.get(key), dict):
                self.merge(base[key], value, file, f"{dotted}.")
            else:
                base[key] = plain(value)
                self.mark(dotted, value, file)

    def of(self, key: str, default: str = "defaults") -> str:
        """The file of ``key``, or of its nearest parent that has one."""
        while key:
            if key in self.files:
                return self.files[key]
            key = key.rpartition(".")[0]
        return default


def plain(value: Any) -> Any:
    """``value`` with its mappings as dicts of string keys and its sequences as lists (a copy)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def read_yaml(path: Path, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """The mapping a YAML file holds (empty for an empty file); ``error`` names the file when it
    cannot be read, is not YAML, or holds something else than a mapping."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise error("<file>", str(path), f"not valid YAML: {exc}") from None
    except OSError as exc:
        raise error("<file>", str(path), f"cannot be read: {exc.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise error("<root>", str(path), "must be a mapping of keys to values")
    mapping: dict[str, Any] = plain(data)
    return mapping
