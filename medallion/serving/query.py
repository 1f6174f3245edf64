"""Answers to analysts' SQL: results printed as a table, CSV or JSON, and the interactive shell."""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path
from typing import TextIO

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.config.model import Metastore
from medallion.project import Settings

log = logging.getLogger(__name__)


def print_result(result: DataFrame, fmt: str, limit: int, out: TextIO) -> int:
    """Print ``result`` as ``table``, ``csv`` (with a header) or ``json`` (JSON Lines).

    Timestamps are printed in the session time zone (UTC). At most ``limit`` rows (0: all).
    Returns the number of rows printed.
    """
    if not result.columns:  # DDL and other statements without a result set
        return 0
    rows = result.limit(limit) if limit > 0 else result
    if fmt == "table":
        count = rows.count()
        out.write(rows._jdf.showString(max(count, 1), 0, False))
        out.flush()
        return count
    if fmt == "csv":
        texts = rows.select([F.col(f"`{c}`").cast("string").alias(c) for c in rows.columns])
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(rows.columns)
        collected = texts.collect()
        writer.writerows([list(row) for row in collected])
        return len(collected)
    if fmt == "json":
        lines = rows.select(F.to_json(F.struct("*"), {"ignoreNullFields": "false"})).collect()
        for line in lines:
            out.write(line[0] + "\n")
        return len(lines)
    raise ValueError(f"unknown format {fmt!r} (table, csv, json)")


def spark_sql_command(settings: Settings) -> list[str]:
    """The ``spark-sql`` command line (pyspark's own launcher) with the project's settings."""
    import pyspark

    from medallion.spark.packages import jvm_packages
    from medallion.spark.session import session_conf

    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-sql"),
               "--name", f"{settings.spark.app_name}-sql",
               "--packages", ",".join(jvm_packages(settings))]
    if settings.spark.master:
        command += ["--master", settings.spark.master]
    if settings.catalog.metastore is Metastore.EMBEDDED:
        command += ["--driver-java-options",
                    f"-Dderby.stream.error.file={settings.catalog_dir()}/derby.log"]
    for key, value in session_conf(settings).items():
        command += ["--conf", f"{key}={value}"]
    return command


def spark_sql_shell(settings: Settings) -> int:
    """Replace this process with the interactive ``spark-sql`` shell (returns only on failure)."""
    from medallion.io.catalog import check_catalog_free
    from medallion.spark.session import derby_dir

    if settings.catalog.metastore is Metastore.EMBEDDED:
        Path(settings.catalog_dir()).mkdir(parents=True, exist_ok=True)
        check_catalog_free(derby_dir(settings))
    command = spark_sql_command(settings)
    log.info("starting %s", command[0])
    os.execv(command[0], command)
    return 1  # not reached
