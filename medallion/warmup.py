"""Fetch the JVM packages once at set-up, so the first real run and the first test do not.

``python -m medallion.warmup`` starts and stops a local session for each set of packages the
project's sessions ask for: a run reading files (Delta, S3A and any configured
``spark.packages``) and a run with Kafka (the same and the Kafka connector). Ivy fetches them from
Maven Central, through the project's own settings (``medallion/ivysettings.xml``), into the Ivy
home (``MEDALLION_IVY_HOME``, else ``~/.ivy2.5.2``), and each set's resolved jars are recorded
there: a later session of that set starts with them on its class path, without Ivy (its
resolution report) and without copying every jar into its temporary folder.
With ``--jars-file PATH`` it also writes the local paths of the resolved jars there, one a line
(the Thrift server puts them on the driver's class path).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from medallion.config import load_settings
from medallion.spark import build_session


def main(argv: Sequence[str] | None = None) -> int:
    """Start one session per package set the project uses (each in a JVM of its own), then stop."""
    parser = argparse.ArgumentParser(prog="python -m medallion.warmup")
    parser.add_argument("--jars-file", help="write the resolved jars' paths to this file")
    parser.add_argument("--package", action="append", default=[],
                        help="Maven coordinates to resolve besides the project's own")
    parser.add_argument("--files-only", action="store_true",
                        help="only the set a run without Kafka asks for (in this process)")
    args = parser.parse_args(argv)
    if not args.files_only:
        # A JVM resolves its packages once, when it starts: the other set needs a JVM of its own.
        subprocess.run([sys.executable, "-m", "medallion.warmup", "--files-only"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(landing=f"{tmp}/landing", lakehouse=f"{tmp}/lakehouse",
                                 events_kind=None if args.files_only else "kafka")
        if args.package:
            packages = tuple(dict.fromkeys([*settings.spark.packages, *args.package]))
            settings = replace(settings, spark=replace(settings.spark, packages=packages))
        spark = build_session(settings, register_tables=False, resolve_packages=True)
        spark.range(1).collect()
        if not args.files_only:
            # the connector's classes load (a source is defined, nothing is connected to)
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9") \
                .option("subscribe", "warmup").load()
        jars = spark.sparkContext.getConf().get("spark.jars") or ""
        spark.stop()
    if args.jars_file:
        paths = [j.removeprefix("file://").removeprefix("file:") for j in jars.split(",") if j]
        Path(args.jars_file).write_text("\n".join(paths) + "\n", encoding="utf-8")
    if not args.files_only:
        print("JVM packages ready")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
