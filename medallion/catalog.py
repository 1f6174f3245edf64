"""Registration of the lakehouse's tables in the session catalog as ``<layer>.<table>``."""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config import Settings
from medallion.tables import ALL_TABLES

log = logging.getLogger(__name__)


def register_tables(spark: SparkSession, settings: Settings) -> list[str]:
    """Register every existing table of the lakehouse; return the names registered."""
    registered = []
    for spec in ALL_TABLES:
        path = spec.path(settings)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {spec.layer}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {spec.qualified_name} USING DELTA LOCATION '{path}'")
        registered.append(spec.qualified_name)
    log.debug("registered %s", registered)
    return registered
