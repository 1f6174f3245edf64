"""The catalog: the lakehouse's tables as ``<layer>.<table>``, their comments, and gold views.

Tables are external: the catalog entry points at the Delta table's location, so dropping or
re-pointing an entry never touches data. With Hive support (the default, an embedded Derby
metastore under ``<lakehouse>/_catalog``) the entries, comments and views survive between runs, so
the Spark Thrift Server and ``spark-sql`` see them without running any of this code.

Comments are declared with each table in its pipeline (``comment``, ``column_comments`` in
``conf/pipelines/<name>.yaml``); the engine's own tables (``monitoring``, ``quality``) keep the
comment of their spec in :mod:`medallion.io.tables`. Comments live in the Delta log itself (table
description, column metadata), so every reader sees them, Spark-free ones included; they are
written only when they differ from the declaration, so a run with no new input still commits
nothing.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import StructField, StructType

from medallion.config.model import Metastore, ViewSpec
from medallion.io.hadoopfs import path_exists, read_text, write_text
from medallion.io.locks import LakehouseBusyError, hold
from medallion.io.tables import TableSpec, lakehouse_tables
from medallion.pipeline.model import TableDoc
from medallion.project import Settings

log = logging.getLogger(__name__)


class CatalogBusyError(LakehouseBusyError):
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


_BUSY_ADVICE = ("a running pipeline, SQL shell or Thrift server: `make thrift-down` stops the "
                "server. Derby allows one process at a time; configure catalog.metastore: "
                "external to share the catalog between processes")


def check_catalog_free(derby_dir: str, wait_seconds: float = 90.0) -> None:
    """Take the embedded metastore for this process, waiting up to ``wait_seconds``; fail with a
    clear message (:class:`CatalogBusyError`) when another process keeps it.

    Two commands started together both found Derby free and the second failed deep in the JVM:
    a lock of medallion's own, taken before Spark starts and held until the process ends, makes
    the check and the taking one step. A JVM that just finished can still hold Derby's own lock
    (``dbex.lck``) for a few seconds while it shuts down, so that one is waited for too. A Thrift
    server keeps the catalog for its life: then there is no point in waiting.
    """
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return  # this process's JVM has it already
    wait = 0.0 if _thrift_server_alive(derby_dir) else wait_seconds
    deadline = time.monotonic() + wait
    try:
        hold(Path(derby_dir).parent / "catalog.lock", f"the embedded metastore {derby_dir}",
             wait, _BUSY_ADVICE)
    except LakehouseBusyError as exc:
        raise CatalogBusyError(str(exc)) from None
    lock_file = Path(derby_dir) / "dbex.lck"
    while lock_file.exists() and _locked(lock_file):
        if time.monotonic() > deadline:
            raise CatalogBusyError(
                f"the embedded metastore {derby_dir} is open in another process ({_BUSY_ADVICE})")
        time.sleep(0.5)


def _same_location(registered: str, path: str) -> bool:
    def strip(location: str) -> str:
        return location.removeprefix("file://").removeprefix("file:").rstrip("/")

    return strip(registered) == strip(path)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def documented_schema(spec: TableSpec, doc: TableDoc | None) -> StructType:
    """The table's schema with the declared column comments in its fields' metadata."""
    columns = doc.column_comments if doc else {}
    return StructType([
        StructField(f.name, f.dataType, f.nullable,
                    {**f.metadata, "comment": columns[f.name]} if f.name in columns else f.metadata)
        for f in spec.schema.fields
    ])


def table_comment(spec: TableSpec, doc: TableDoc | None) -> str:
    """The declared comment of a table, else the one its spec carries."""
    return doc.comment if doc and doc.comment else spec.comment


# Delta's answer for an entry whose location holds no table any more (its folder deleted).
_GONE = "DELTA_PATH_DOES_NOT_EXIST"


def has_entry(spark: SparkSession, name: str) -> bool:
    """Whether the catalog has an entry ``name``, also one whose Delta table is gone from its
    location: for that one Delta raises ``DELTA_PATH_DOES_NOT_EXIST`` instead of answering."""
    try:
        return spark.catalog.tableExists(name)
    except AnalysisException as exc:
        if exc.getCondition() == _GONE:
            return True
        raise


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
    if has_entry(spark, name):
        try:
            detail: Row | None = _detail(spark, name)
        except AnalysisException as exc:
            if exc.getCondition() != _GONE:
                raise
            detail = None  # the entry's location holds no table: stale
        if detail is not None and _same_location(detail["location"], path):
            return detail
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION '{path}'")
    return _detail(spark, name)


def clear_stale_entry(spark: SparkSession, spec: TableSpec) -> None:
    """Before a table is created: make sure its database exists, and drop the catalog entry of
    its name (the entry only: the project registers external tables), which can only be stale
    since no table is at the spec's path (a lakehouse moved, or its table deleted)."""
    name = spec.qualified_name
    if not spark.catalog.databaseExists(spec.layer):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {spec.layer}")
    elif has_entry(spark, name):
        log.info("dropping catalog entry %s: no Delta table at its location", name)
        spark.sql(f"DROP TABLE {name}")


def _unregister_missing(spark: SparkSession, spec: TableSpec) -> None:
    """Drop the catalog entry of a table whose data is gone (the entry only: it is external)."""
    name = spec.qualified_name
    if spark.catalog.databaseExists(spec.layer) and has_entry(spark, name):
        log.info("dropping catalog entry %s: no Delta table at its location any more", name)
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def apply_comments(spark: SparkSession, spec: TableSpec, doc: TableDoc | None,
                   detail: Row | None = None) -> int:
    """Write the declared comments of a registered table where they differ; return how many.

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
    for column, comment in (doc.column_comments if doc else {}).items():
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

    ``with_comments`` also brings each table's comments up to date with its declaration.
    """
    registered = []
    for spec in lakehouse_tables(settings):
        path = spec.path(settings)
        if DeltaTable.isDeltaTable(spark, path):
            detail = register_table(spark, spec, path)
            if with_comments:
                apply_comments(spark, spec, settings.table_doc(spec.key), detail)
            registered.append(spec.qualified_name)
        else:
            _unregister_missing(spark, spec)
    log.debug("registered %s", registered)
    return registered


PREPARED_MARKER = "prepared.json"


def _held(spark: SparkSession, names: set[str]) -> list[str]:
    """Which of ``names`` (``schema.name``, tables and views) the metastore holds, one call per
    schema and no Spark job."""
    external = spark._jsparkSession.sharedState().externalCatalog()
    held = []
    for schema in sorted({name.partition(".")[0] for name in names}):
        if external.databaseExists(schema):
            listed = str(external.listTables(schema).mkString("\n"))
            held += [f"{schema}.{table}" for table in listed.split("\n") if table]
    return sorted(name for name in held if name in names)


def catalog_fingerprint(spark: SparkSession, settings: Settings, names: bool = True) -> str:
    """What the catalog's preparation depends on, read without a Spark job: which tables have a
    Delta log, their declared comments, the views in configuration, which metastore holds them,
    and (``names``) which of their names it holds. The last is what a ``DROP TABLE`` or ``DROP
    VIEW`` outside a run changes (``medallion sql``, the shell, a client of a shared metastore):
    the next session's preparation then registers the table, or makes the view, again; without
    it the preparation was skipped and the name stayed missing for good. Listing the names boots
    an embedded metastore (about 1.5 s), which nothing else in a run without new tables needs:
    ``names`` False leaves them out."""
    tables = lakehouse_tables(settings)
    present = [spec.key for spec in tables
               if path_exists(spark, f"{spec.path(settings)}/_delta_log")]
    docs = {spec.qualified_name: [doc.comment, dict(doc.column_comments)] for spec in tables
            if (doc := settings.table_doc(spec.key)) is not None}
    catalog = settings.catalog
    conf = spark.sparkContext.getConf()
    state = {
        "lakehouse": settings.paths.lakehouse,
        # the metastore this session really talks to (a session that was already running may
        # have been built for another lakehouse), and whether its database is still there
        "metastore": [catalog.metastore.value, catalog.metastore_uris,
                      conf.get("spark.sql.catalogImplementation"),
                      conf.get("spark.hadoop.javax.jdo.option.ConnectionURL"),
                      conf.get("spark.hadoop.hive.metastore.uris")],
        "derby": catalog.metastore is Metastore.EMBEDDED
        and path_exists(spark, f"{settings.catalog_dir()}/metastore_db"),
        "tables": present,
        "docs": docs,
        "views": [[view.name, view.sql, view.comment] for view in settings.views],
    }
    if names:  # last: listing them boots an embedded metastore, which makes its database
        state["held"] = _held(spark, {spec.qualified_name.lower() for spec in tables}
                              | {view.name.lower() for view in settings.views})
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def _recorded(spark: SparkSession, marker: str) -> dict[str, object] | None:
    """The marker's record, or None when there is none or it is damaged (prepare again)."""
    if not path_exists(spark, marker):
        return None
    try:
        recorded = json.loads(read_text(spark, marker))
    except ValueError:
        return None
    return recorded if isinstance(recorded, dict) else None


def _record(spark: SparkSession, settings: Settings, marker: str, names: list[str]) -> None:
    """Record the catalog as prepared, both ways its fingerprint is compared."""
    write_text(spark, marker, json.dumps({
        "unlisted": catalog_fingerprint(spark, settings, names=False),
        "fingerprint": catalog_fingerprint(spark, settings), "names": names}))


def prepare_catalog(spark: SparkSession, settings: Settings, list_names: bool = True) -> list[str]:
    """Register the tables, bring their comments up to date, create the views whose tables exist.

    Returns the names of the tables and views the catalog now offers (empty when nothing needed
    doing). A persistent catalog keeps what an earlier preparation did: when nothing it depends
    on has changed since (:func:`catalog_fingerprint`, recorded under ``<lakehouse>/_catalog``),
    the checks, which cost a Delta snapshot per table, are skipped. Tables created during a run
    are registered by their creation (``ensure_table``), which also changes the fingerprint.

    ``list_names`` False (``medallion run`` on the embedded metastore) does not ask the
    metastore which names it holds: a name dropped since is made again by the next session that
    asks (``medallion sql``, ``medallion thrift``, maintenance, a backfill) or by the next run
    that has a table to make, not by a run that would otherwise never boot the metastore.
    """
    marker = f"{settings.catalog_dir()}/{PREPARED_MARKER}"
    persistent = settings.catalog.metastore is not Metastore.IN_MEMORY
    if persistent and (recorded := _recorded(spark, marker)) is not None:
        if not list_names and "unlisted" in recorded:
            unchanged = recorded["unlisted"] == catalog_fingerprint(spark, settings, names=False)
        else:  # a marker written before there were two fingerprints is compared in full
            unchanged = recorded.get("fingerprint") == catalog_fingerprint(spark, settings)
            if unchanged and "unlisted" not in recorded:
                names = recorded.get("names")
                _record(spark, settings, marker,
                        [str(name) for name in names] if isinstance(names, list) else [])
        if unchanged:
            log.debug("catalog unchanged since its last preparation")
            return []
    names = _prepare(spark, settings)
    if persistent:  # as it is now (booting the embedded metastore created its database)
        _record(spark, settings, marker, names)
    return names


def record_run_creations(spark: SparkSession, settings: Settings) -> list[str]:
    """After a run in a session whose catalog was prepared at its start: record the catalog as
    prepared again, so the next run skips the preparation; return the views created.

    The tables the run created were registered with their comments by their creation
    (``ensure_table``); what a preparation would still do is create the views that waited for
    them. Without this the next run would find the fingerprint changed by the creations and
    prepare everything again, a Delta snapshot per table (18.8 s of a 27.6 s run with nothing new, in
    ``make bench``). A run that created nothing finds the fingerprint without the metastore's
    names unchanged, and does not boot the metastore to tell.
    """
    if settings.catalog.metastore is Metastore.IN_MEMORY:
        return []
    marker = f"{settings.catalog_dir()}/{PREPARED_MARKER}"
    recorded = _recorded(spark, marker)
    if recorded is None:
        return []  # the start of the run did not prepare it, or a damaged marker: the next run will
    if recorded.get("unlisted") == catalog_fingerprint(spark, settings, names=False):
        return []  # nothing was created
    present = [spec.qualified_name for spec in lakehouse_tables(settings)
               if path_exists(spark, f"{spec.path(settings)}/_delta_log")]
    views = _create_views(spark, settings, present)
    held = _held(spark, {name.lower() for name in present})
    if len(held) < len(present):
        # An entry dropped before this run, which did not list the names at its start: recorded
        # as prepared, it would stay missing. Left as it was, the next session prepares in full.
        log.debug("catalog entries missing: %s", sorted({n.lower() for n in present} - set(held)))
        return views
    _record(spark, settings, marker, present + views)
    return views


def _prepare(spark: SparkSession, settings: Settings) -> list[str]:
    registered = register_tables(spark, settings, with_comments=True)
    return registered + _create_views(spark, settings, registered)


def _create_views(spark: SparkSession, settings: Settings, registered: list[str]) -> list[str]:
    """Create the configured views whose tables are all registered; return their names."""
    known = [spec.qualified_name for spec in lakehouse_tables(settings)]
    views = []
    for view in settings.views:
        waiting = [name for name in known if name not in registered
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
    return views
