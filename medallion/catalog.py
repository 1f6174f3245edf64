"""Registration of the lakehouse's tables in the session catalog as ``<layer>.<table>``.

Tables are external: the catalog entry points at the Delta table's location, so dropping or
re-pointing an entry never touches data.
"""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config import Settings
from medallion.tables import ALL_TABLES, TableSpec

log = logging.getLogger(__name__)


def _same_location(registered: str, path: str) -> bool:
    def strip(location: str) -> str:
        return location.removeprefix("file://").removeprefix("file:").rstrip("/")

    return strip(registered) == strip(path)


def register_table(spark: SparkSession, spec: TableSpec, path: str) -> None:
    """Register the Delta table at ``path`` as ``<layer>.<table>`` (re-pointing a stale entry)."""
    name = spec.qualified_name
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {spec.layer}")
    if spark.catalog.tableExists(name):
        location = spark.sql(f"DESCRIBE DETAIL {name}").first()["location"]  # type: ignore[index]
        if _same_location(location, path):
            return
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION '{path}'")


def register_tables(spark: SparkSession, settings: Settings) -> list[str]:
    """Register every existing table of the lakehouse; return the names registered."""
    registered = []
    for spec in ALL_TABLES:
        path = spec.path(settings)
        if DeltaTable.isDeltaTable(spark, path):
            register_table(spark, spec, path)
            registered.append(spec.qualified_name)
    log.debug("registered %s", registered)
    return registered
