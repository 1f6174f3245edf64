"""Fetch the JVM packages once at set-up, so the first real run does not pay for it.

``python -m medallion.warmup`` starts and stops a local session with the project's packages;
Ivy caches the Delta jar (and any configured package) from Maven Central under ``~/.ivy2*``.
"""

from __future__ import annotations

import tempfile

from medallion.config import load_settings
from medallion.spark import build_session


def main() -> int:
    """Start one session with the configured packages, then stop it."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(landing=f"{tmp}/landing", lakehouse=f"{tmp}/lakehouse")
        spark = build_session(settings, register_tables=False)
        spark.range(1).collect()
        spark.stop()
    print("JVM packages ready")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
