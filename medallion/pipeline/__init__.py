"""Pipelines declared, not hard-wired: the declaration model, its loading, checks and graph.

Nothing in this package imports pyspark: a definition is loaded and checked, and its graph printed
(``medallion pipelines``), before any JVM starts.

``Layer`` and ``run_pipeline`` (the runner of the ``events`` layers, which needs Spark) used to live
in a module of this name; they now live in :mod:`medallion.runner`, and are still found here,
imported only when asked for, so ``from medallion.pipeline import Layer, run_pipeline`` keeps working
without making this package import Spark.
"""

from __future__ import annotations

from typing import Any

_RUNNER_NAMES = frozenset({"Layer", "STARTERS", "Starter", "layers_of", "run_pipeline"})


def __getattr__(name: str) -> Any:
    """The runner's names, imported on first use (the runner imports pyspark)."""
    if name in _RUNNER_NAMES:
        from medallion import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
