"""Fetch the JVM packages once at set-up, so the first real run and the first test do not.

``python -m medallion.spark.warmup`` starts and stops a local session that asks for every package the
project's sessions may ask for: Delta, S3A (hadoop-aws), the Kafka connector and any configured
``spark.packages``. Ivy fetches them from Maven Central, through the project's own settings
(``medallion/spark/ivysettings.xml``), into the Ivy home (``MEDALLION_IVY_HOME``, else ``~/.ivy2.5.2``).
With ``--jars-file PATH`` it also writes the local paths of the resolved jars there, one a line
(the Thrift server puts them on the driver's class path).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from medallion.project import load_settings
from medallion.spark.packages import kafka_connector
from medallion.spark.session import build_session


def main(argv: Sequence[str] | None = None) -> int:
    """Start one session with every package the project uses, then stop it."""
    parser = argparse.ArgumentParser(prog="python -m medallion.spark.warmup")
    parser.add_argument("--jars-file", help="write the resolved jars' paths to this file")
    parser.add_argument("--package", action="append", default=[],
                        help="Maven coordinates to resolve besides the project's own")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(landing=f"{tmp}/landing", lakehouse=f"{tmp}/lakehouse")
        packages = tuple(dict.fromkeys(
            [*settings.spark.packages, kafka_connector(settings), *args.package]))
        settings = replace(settings, spark=replace(settings.spark, packages=packages))
        spark = build_session(settings, register_tables=False, resolve_packages=True)
        spark.range(1).collect()
        # the connector's classes load (a source is defined, nothing is connected to)
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9") \
            .option("subscribe", "warmup").load()
        jars = spark.sparkContext.getConf().get("spark.jars") or ""
        spark.stop()
    if args.jars_file:
        paths = [j.removeprefix("file://").removeprefix("file:") for j in jars.split(",") if j]
        Path(args.jars_file).write_text("\n".join(paths) + "\n", encoding="utf-8")
    print("JVM packages ready")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
