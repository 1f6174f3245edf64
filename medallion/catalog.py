"""The catalog: the lakehouse's tables as ``<layer>.<table>``, their comments, and gold views.

Tables are external: the catalog entry points at the Delta table's location, so dropping or
re-pointing an entry never touches data. With Hive support (the default, an embedded Derby
metastore under ``<lakehouse>/_catalog``) the entries, comments and views survive between runs, so
the Spark Thrift Server and ``spark-sql`` see them without running any of this code.

Comments live in the Delta log itself (table description, column metadata), so every reader sees
them, Spark-free ones included; they are written only when they differ from the configuration,
so a run with no new input still commits nothing.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import time
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import StructField, StructType

from medallion.config import Settings, TableDoc, ViewSpec
from medallion.tables import ALL_TABLES, TableSpec, known_tables

log = logging.getLogger(__name__)


class CatalogBusyError(RuntimeError):
    """The embedded metastore is open in another process (Derby allows one at a time)."""


def _locked(lock_file: Path) -> bool:
    """Whether another process holds Derby's exclusive lock on ``lock_file``."""
    with open(lock_file, "rb+") as handle:
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            return True
        fcntl.lockf(handle, fcntl.LOCK_UN)
        return False


def _thrift_server_alive(derby_dir: str) -> bool:
    state = Path(derby_dir).parent / "thrift" / "server.json"
    try:
        os.kill(int(json.loads(state.read_text(encoding="utf-8"))["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return False
    return True


def check_catalog_free(derby_dir: str, wait_seconds: float = 90.0) -> None:
    """Fail with a clear message when another process has the embedded metastore open.

    Derby holds an exclusive lock on ``dbex.lck`` while a JVM has the database booted. The JVM of
    a command that just finished can hold it for a few seconds more while it shuts down, so this
    waits up to ``wait_seconds`` for it (not when a Thrift server holds it: that one stays).
    Checked only before this process starts its own JVM, which would hold the lock itself.
    """
    from pyspark import SparkContext

    lock_file = Path(derby_dir) / "dbex.lck"
    if SparkContext._active_spark_context is not None or not lock_file.exists():
        return
    deadline = time.monotonic() + wait_seconds
    waited = False
    while _locked(lock_file):
        if _thrift_server_alive(derby_dir) or time.monotonic() > deadline:
            raise CatalogBusyError(
                f"the embedded metastore {derby_dir} is open in another process (a running "
                "pipeline, SQL shell or Thrift server: `make thrift-down` stops the server). "
                "Derby allows one process at a time; configure catalog.metastore: external to "
                "share the catalog between processes.")
        if not waited:
            log.info("waiting for another process to release the embedded metastore %s", derby_dir)
            waited = True
        time.sleep(1.0)


def _same_location(registered: str, path: str) -> bool:
    def strip(location: str) -> str:
        return location.removeprefix("file://").removeprefix("file:").rstrip("/")

    return strip(registered) == strip(path)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def documented_schema(spec: TableSpec, doc: TableDoc | None) -> StructType:
    """The table's schema with the configured column comments in its fields' metadata."""
    columns = doc.columns if doc else {}
    return StructType([
        StructField(f.name, f.dataType, f.nullable,
                    {**f.metadata, "comment": columns[f.name]} if f.name in columns else f.metadata)
        for f in spec.schema.fields
    ])


def table_comment(spec: TableSpec, doc: TableDoc | None) -> str:
    """The configured comment of a table, else the one its spec carries."""
    return doc.comment if doc and doc.comment else spec.comment


def _detail(spark: SparkSession, name: str) -> Row:
    row = spark.sql(f"DESCRIBE DETAIL {name}").first()
    assert row is not None  # DESCRIBE DETAIL always returns one row
    return row


def register_table(spark: SparkSession, spec: TableSpec, path: str) -> Row:
    """Register the Delta table at ``path`` as ``<layer>.<table>`` (re-pointing a stale entry).

    Returns the table's ``DESCRIBE DETAIL`` row.
    """
    name = spec.qualified_name
    if not spark.catalog.databaseExists(spec.layer):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {spec.layer}")
    if spark.catalog.tableExists(name):
        detail = _detail(spark, name)
        if _same_location(detail["location"], path):
            return detail
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION '{path}'")
    return _detail(spark, name)


def _unregister_missing(spark: SparkSession, spec: TableSpec) -> None:
    """Drop the catalog entry of a table whose data is gone (the entry only: it is external)."""
    name = spec.qualified_name
    if spark.catalog.databaseExists(spec.layer) and spark.catalog.tableExists(name):
        log.info("dropping catalog entry %s: no Delta table at its location any more", name)
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def apply_comments(spark: SparkSession, spec: TableSpec, doc: TableDoc | None,
                   detail: Row | None = None) -> int:
    """Write the configured comments of a registered table where they differ; return how many.

    ``detail`` is the table's ``DESCRIBE DETAIL`` row when the caller already has it.
    """
    name = spec.qualified_name
    changed = 0
    wanted = table_comment(spec, doc)
    current = (detail or _detail(spark, name))["description"]
    if current != wanted:
        spark.sql(f"COMMENT ON TABLE {name} IS {_quote(wanted)}")
        changed += 1
    fields = {f.name: f for f in spark.table(name).schema.fields}
    for column, comment in (doc.columns if doc else {}).items():
        if column in fields and fields[column].metadata.get("comment") != comment:
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN `{column}` COMMENT {_quote(comment)}")
            changed += 1
    return changed


def create_view(spark: SparkSession, view: ViewSpec) -> None:
    """Create or replace a configured view in the catalog."""
    layer = view.name.split(".")[0]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {layer}")
    comment = f" COMMENT {_quote(view.comment)}" if view.comment else ""
    spark.sql(f"CREATE OR REPLACE VIEW {view.name}{comment} AS {view.sql}")


def register_tables(spark: SparkSession, settings: Settings,
                    with_comments: bool = False) -> list[str]:
    """Register every existing table of the lakehouse; return the names registered.

    ``with_comments`` also brings each table's comments up to date with the configuration.
    """
    registered = []
    for spec in ALL_TABLES:
        path = spec.path(settings)
        if DeltaTable.isDeltaTable(spark, path):
            detail = register_table(spark, spec, path)
            if with_comments:
                apply_comments(spark, spec, settings.catalog.tables.get(spec.qualified_name),
                               detail)
            registered.append(spec.qualified_name)
        else:
            _unregister_missing(spark, spec)
    log.debug("registered %s", registered)
    return registered


def prepare_catalog(spark: SparkSession, settings: Settings) -> list[str]:
    """Register the tables, bring their comments up to date, create the views whose tables exist.

    Returns the names of the tables and views the catalog now offers.
    """
    registered = register_tables(spark, settings, with_comments=True)
    views = []
    for view in settings.catalog.views:
        waiting = [name for name in known_tables() if name not in registered
                   and re.search(rf"\b{re.escape(name)}\b", view.sql, re.IGNORECASE)]
        if waiting:
            log.info("view %s waits for its tables: %s", view.name, ", ".join(waiting))
            continue
        try:
            create_view(spark, view)
            views.append(view.name)
        except Exception as exc:  # noqa: BLE001 - a view over a table not yet written waits
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                raise
            log.info("view %s waits for its tables: %s", view.name, str(exc).splitlines()[0])
    return registered + views
