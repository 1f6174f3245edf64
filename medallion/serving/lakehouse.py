"""The lakehouse as an in-process SQL engine sees it: no JVM, no catalog, read-only.

DuckDB answers over Arrow datasets that delta-rs hands out: each table is read at the version its
Delta log says is the latest committed one (or the one asked for), so a query needs no lock and
runs while a pipeline writes. Tables are named as in the catalog (``gold.event_counts_5m``), the
declared views are made from their Spark SQL (:mod:`medallion.serving.translate`), the session
time zone is UTC as Spark's, and nothing of the lakehouse can be changed through the connection:
it has no access to files of its own, and its configuration is locked.

DuckDB, not another engine: it runs in the process (no server, no JVM), scans Arrow datasets with
the query's columns and filters pushed down, reads Spark's decimals and timestamps without loss,
and is one wheel from PyPI with no extension fetched at run time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from medallion.io.deltaread import (
    DeltaReader,
    DeltaReadError,
    arrow_table,
    has_deletion_vectors,
    one_line,
)
from medallion.io.tables import TableSpec, lakehouse_tables
from medallion.pipeline.sql import read_tables
from medallion.pipeline.views import ENGINE_SCHEMAS, LAYER_SCHEMAS
from medallion.project import Settings
from medallion.serving.translate import Refused, Travel, translate, translate_view

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

AsOf = int | datetime  # a version (one table), or an instant (every table)


class _NoPandas:
    """An import finder that says pandas is not installed."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError(f"{name} is not imported by medallion sql")


def load_without_pandas() -> None:
    """Import pyarrow's dataset module without pandas: it imports pandas when installed (half a
    second of every ``medallion sql`` process) and works without it. For processes that never
    hand a result to pandas (the command line); a notebook's :func:`connect` imports it as is."""
    import sys

    if "pyarrow.dataset" in sys.modules or "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow.dataset  # noqa: F401
    finally:
        sys.meta_path.remove(finder)


class QueryError(Exception):
    """DuckDB could not run a query: one line, naming ``--engine spark`` when Spark might."""


class NotCreated(QueryError):
    """A declared table no run has created yet."""


@dataclass(frozen=True)
class Result:
    """What a query gave: its rows (at most the limit asked) and whether more were left out."""

    table: pa.Table
    more: bool


class Lakehouse:
    """One DuckDB connection over the tables and views of the lakehouse ``settings`` describe.

    Tables and views are registered when a statement first reads them (:meth:`query`), or all
    at once (:meth:`register_all`). ``as_of``: read every table as of that instant, or the one
    table a statement reads at that version.
    """

    def __init__(self, settings: Settings, as_of: AsOf | None = None) -> None:
        import duckdb

        self.settings = settings
        self.as_of = as_of
        self._reader = DeltaReader(settings)
        self._specs: dict[str, TableSpec] = {s.qualified_name.lower(): s
                                             for s in lakehouse_tables(settings)}
        self._views = {view.name.lower(): view for view in settings.views}
        self.schemas = tuple(dict.fromkeys((*LAYER_SCHEMAS, *ENGINE_SCHEMAS,
                                            *(name.split(".")[0] for name in self._views))))
        self._registered: set[str] = set()
        self._absent: dict[str, str] = {}  # name -> why it cannot be read
        self._sealed = False
        self.connection = duckdb.connect(":memory:")
        self.connection.execute("SET TimeZone = 'UTC'")
        for schema in self.schemas:
            self.connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')

    # --- tables and views ------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every table and view name of the lakehouse, declared or the engine's."""
        return [*self._specs, *self._views]

    def _open(self, name: str, version: int | None = None,
              timestamp: datetime | None = None) -> DeltaTable | None:
        spec = self._specs[name]
        table = self._reader.open(spec.path(self.settings), spec.key)
        if table is None:
            return None
        try:
            if version is not None:
                table.load_as_version(version)
            elif timestamp is not None:
                table.load_as_version(timestamp)
        except Exception as exc:  # noqa: BLE001 - delta-rs says why in many types
            at = f"version {version}" if version is not None else f"{timestamp}"
            raise QueryError(f"{name} has no version at {at}: {one_line(exc)}") from None
        return table

    def _dataset(self, table: DeltaTable, name: str) -> Any:
        try:
            if has_deletion_vectors(table):
                # A dataset cannot leave out the rows a deletion vector marks: the table is read
                # whole by delta-rs's engine, which does.
                return arrow_table(table.scan())
            return table.to_pyarrow_dataset()
        except Exception as exc:  # noqa: BLE001 - a feature delta-rs does not read: one line
            raise DeltaReadError(f"{name}: delta-rs cannot read it ({one_line(exc)}); "
                                 "--engine spark reads it with Spark") from None

    def _register_table(self, name: str, travel: Travel | None = None) -> bool:
        version = travel.version if travel else self.as_of if isinstance(self.as_of, int) else None
        instant = travel.timestamp if travel else \
            self.as_of if isinstance(self.as_of, datetime) else None
        table = self._open(name, version, instant)
        if table is None:
            self._absent[name] = (f"{name} is not created yet (no Delta table at "
                                  f"{self._specs[name].path(self.settings)})")
            return False
        dataset = self._dataset(table, name)
        if travel is not None:
            self.connection.register(travel.alias, dataset)
        else:
            hidden = f"__delta__{name}"
            self.connection.register(hidden, dataset)
            schema, _, table_name = name.partition(".")
            self.connection.execute(
                f'CREATE VIEW "{schema}"."{table_name}" AS SELECT * FROM "{hidden}"')
        log.info("%s: version %d registered", travel.alias if travel else name, table.version())
        return True

    def _register_view(self, name: str) -> bool:
        view = self._views[name]
        waiting = [table for table in read_tables(view.sql) or () if not self.register([table])]
        if waiting:
            self._absent[name] = f"view {name} waits for {', '.join(waiting)}"
            return False
        schema, _, view_name = name.partition(".")
        try:
            self.connection.execute(f'CREATE VIEW "{schema}"."{view_name}" AS '
                                    f"{translate_view(view.sql)}")
        except Refused as exc:
            raise QueryError(f"view {name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - DuckDB's error kinds: one line
            raise QueryError(f"view {name}: DuckDB cannot make it ({_first_line(exc)}); "
                             "--engine spark reads it through the catalog") from None
        return True

    def register(self, names: Iterable[str]) -> bool:
        """Register each of ``names`` (tables, views with what they read) not yet registered;
        True when all of them could be."""
        ready = True
        for name in names:
            if name in self._registered:
                continue
            if name in self._absent:
                ready = False
                continue
            if name in self._specs:
                done = self._register_table(name)
            elif name in self._views:
                done = self._register_view(name)
            else:
                continue  # not the lakehouse's: DuckDB says what it is not
            if done:
                self._registered.add(name)
            ready = ready and done
        return ready

    def register_all(self) -> list[str]:
        """Register every table and view that can be read; the names of those that cannot yet."""
        self.register(self.names())
        return sorted(self._absent)

    def seal(self) -> None:
        """No file access of the connection's own (``read_csv``, ``COPY``, ``ATTACH``), and no
        setting changed after this: what it reads is the registered tables."""
        if not self._sealed:
            self.connection.execute("SET enable_external_access = false")
            self.connection.execute("SET lock_configuration = true")
            self._sealed = True

    # --- queries ---------------------------------------------------------------------------

    def query(self, statement: str, limit: int = 0) -> Result:
        """Run one Spark SQL query; at most ``limit`` rows (0: all). Raises
        :class:`~medallion.serving.translate.Refused` or :class:`QueryError`, one line each."""
        translated = translate(statement, self.schemas)
        reads = set(translated.tables)
        for view in [name for name in reads if name in self._views]:
            reads.update(read_tables(self._views[view].sql) or ())
        if isinstance(self.as_of, int) and len(reads | {t.table for t in translated.travels}) > 1:
            raise Refused(f"--as-of {self.as_of} is a version of one table, and the query reads "
                          f"{', '.join(sorted(reads))}: give an instant, or VERSION AS OF per table")
        unknown = [name for name in translated.tables if name not in self._specs
                   and name not in self._views]
        if unknown:
            raise QueryError(f"no table or view {', '.join(unknown)} in the lakehouse "
                             f"(declared: {', '.join(sorted(self.names()))})")
        if not self.register(translated.tables):
            raise NotCreated("; ".join(self._absent[name] for name in translated.tables
                                       if name in self._absent))
        for travel in translated.travels:
            if travel.table not in self._specs:
                raise QueryError(f"{travel.table}: time travel reads a table of the lakehouse")
            if travel.alias not in self._registered:
                if not self._register_table(travel.table, travel):
                    raise QueryError(self._absent[travel.table])
                self._registered.add(travel.alias)
        self.seal()
        return self._run(translated.sql, limit)

    def _run(self, sql: str, limit: int) -> Result:
        import duckdb

        try:
            relation = self.connection.sql(sql)
            if relation is None:
                raise QueryError("the statement gave no result")
            if limit > 0:
                relation = relation.limit(limit + 1)
            table = _arrow(relation)
        except duckdb.Error as exc:
            raise QueryError(_explain(exc)) from None
        more = limit > 0 and table.num_rows > limit
        return Result(table.slice(0, limit) if more else table, more)


def _arrow(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return fetch()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _explain(exc: BaseException) -> str:
    """DuckDB's error in one line; a function it lacks, or a form it reads otherwise, names the
    Spark engine."""
    line = _first_line(exc)
    if "Function with name" in line or "Parser Error" in line or "not implemented" in line.lower():
        return f"{line} (the fast path runs DuckDB; --engine spark runs it with Spark)"
    return line


def connect(conf_dir: str | None = None, env: str | None = None,
            lakehouse: str | None = None, as_of: datetime | None = None
            ) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection with every table and declared view of the lakehouse
    registered under its catalog name (``gold.event_counts_5m``), as of ``as_of`` (default: the
    latest committed version of each). For notebooks and scripts::

        from medallion.serving.lakehouse import connect
        db = connect()
        daily = db.sql("SELECT * FROM gold.event_counts_daily")
        daily.df()   # pandas; daily.pl(): Polars; daily.to_arrow_table(): Arrow

    Queries are DuckDB SQL; the views' Spark SQL is translated when they are made.
    """
    from medallion.project import load_settings

    house = Lakehouse(load_settings(env, conf_dir, lakehouse=lakehouse), as_of)
    waiting = house.register_all()
    if waiting:
        log.info("not readable yet: %s", ", ".join(waiting))
    house.seal()
    return house.connection
