"""Where a cache of this user's lives: the JVM's class archives, the expectations that passed
their check. Each has an environment variable naming its folder, or ``off``; by default it is a
folder of ``$XDG_CACHE_HOME/medallion`` (``~/.cache/medallion``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def cache_folder(environ: Mapping[str, str], variable: str, name: str) -> Path | None:
    """The folder ``$variable`` names, None when it says ``off``, else ``<cache>/medallion/name``."""
    chosen = environ.get(variable, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "medallion" / name
