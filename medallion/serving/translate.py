"""Spark SQL made DuckDB's, for the fast path of ``medallion sql`` (pure: sqlglot, no I/O).

Analysts and declared views write Spark SQL, the language of the Spark engine, the catalog and
the Thrift server. The fast path reads the same statements: each is parsed as Spark SQL and
written out as DuckDB SQL, with Spark's meaning kept where the two differ:

- ``CAST`` fails on a value it cannot convert (Spark's ANSI mode, on by default); only
  ``try_cast`` gives NULL.
- ``<table> VERSION AS OF n`` and ``TIMESTAMP AS OF '...'`` read that version of the table: the
  table is replaced by a name the caller registers the version under (:class:`Travel`).

A statement that is not a query is refused in one line: one that writes, because the fast path
is read-only; any other (``SHOW``, ``DESCRIBE HISTORY``, ``SET``), because it needs the catalog
or Spark. Both lines name ``--engine spark``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

SPARK = "spark"
DUCKDB = "duckdb"
SPARK_HINT = "--engine spark runs it with Spark"

# Statements that change something: refused on the fast path, which only reads.
_WRITES: tuple[type[exp.Expression], ...] = (
    exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter,
    exp.TruncateTable, exp.Copy, exp.Cache, exp.Uncache, exp.LoadData,
)


class Refused(ValueError):
    """A statement the fast path does not run; the message is one line and says what to do."""


@dataclass(frozen=True)
class Travel:
    """One table read at a version: ``VERSION AS OF`` (``version``) or ``TIMESTAMP AS OF``
    (``timestamp``, UTC), registered under ``alias`` for the translated query."""

    table: str  # catalog name, ``schema.name`` in lower case
    version: int | None = None
    timestamp: datetime | None = None

    @property
    def alias(self) -> str:
        """The name the translated statement reads this version by (a quoted DuckDB name)."""
        at = f"v{self.version}" if self.version is not None else \
            f"t{self.timestamp.isoformat() if self.timestamp else ''}"
        return f"{self.table}@{at}"


@dataclass(frozen=True)
class Translated:
    """A statement in DuckDB's SQL, with the lakehouse tables it reads and the versions it asks."""

    sql: str
    tables: tuple[str, ...]  # catalog names read at their latest version (or the --as-of one)
    travels: tuple[Travel, ...]


def parse_instant(text: str) -> datetime:
    """A ``TIMESTAMP AS OF`` instant: ISO 8601, a date, or Spark's ``yyyy-MM-dd HH:mm:ss``;
    without a zone, UTC (the session zone)."""
    try:
        instant = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise Refused(f"TIMESTAMP AS OF {text!r} is not a timestamp like "
                      "'2025-01-27 10:00:00'") from None
    return instant.replace(tzinfo=timezone.utc) if instant.tzinfo is None else \
        instant.astimezone(timezone.utc)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _parse(statement: str) -> exp.Expression:
    try:
        trees = [tree for tree in sqlglot.parse(statement, read=SPARK) if tree is not None]
    except (ParseError, TokenError) as exc:
        raise Refused(f"cannot read it as Spark SQL ({_one_line(exc)[:300]}); "
                      f"{SPARK_HINT}") from None
    if len(trees) != 1:
        raise Refused("one statement at a time (separate statements with ;)")
    tree = trees[0]
    assert isinstance(tree, exp.Expression)
    return tree


def _kind(tree: exp.Expression) -> str:
    if isinstance(tree, exp.Command):
        return str(tree.this).upper()
    return tree.key.upper()


def check_query(tree: exp.Expression) -> None:
    """Refuse (:class:`Refused`) anything but a query: a write, or a statement for the catalog."""
    if isinstance(tree, _WRITES) or isinstance(tree, exp.Command) and str(tree.this).upper() in {
            "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE",
            "REPLACE", "OPTIMIZE", "VACUUM", "RESTORE", "MSCK", "REFRESH", "COPY", "GRANT"}:
        raise Refused(f"{_kind(tree)} writes, and the fast path only reads the lakehouse; "
                      f"{SPARK_HINT} (the catalog allowing)")
    if not isinstance(tree, exp.Query):
        raise Refused(f"the fast path answers queries (SELECT, WITH ... SELECT); {_kind(tree)} "
                      f"needs the catalog: {SPARK_HINT}")


def _strict_casts(tree: exp.Expression) -> exp.Expression:
    """Spark's ``CAST`` (sqlglot reads it as a TRY_CAST: Spark's legacy, non-ANSI meaning) as a
    strict cast; a written ``try_cast`` (``safe``) stays a TRY_CAST."""
    def strict(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.TryCast) and not node.args.get("safe"):
            return exp.Cast(this=node.this, to=node.args["to"])
        return node
    return tree.transform(strict)


def _travel_of(table: exp.Table) -> Travel:
    version = table.args["version"]
    kind = str(version.this).upper()
    value = version.expression
    name = f"{table.db}.{table.name}".lower()
    if kind == "VERSION":
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise Refused(f"{name} VERSION AS OF {value.sql(SPARK)}: a version is a whole number")
        return Travel(name, version=int(value.this))
    if not (isinstance(value, exp.Literal) and value.is_string):
        raise Refused(f"{name} TIMESTAMP AS OF {value.sql(SPARK)}: give the instant as a string, "
                      "like '2025-01-27 10:00:00'")
    return Travel(name, timestamp=parse_instant(value.this))


def _cte_names(tree: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def translate(statement: str, schemas: tuple[str, ...]) -> Translated:
    """``statement`` (Spark SQL, one query) in DuckDB's SQL; ``schemas``: the lakehouse's
    (``bronze``, ``silver``, ``gold``, ``monitoring``, ``quality`` and the views'), whose tables
    are the ones reported read. Raises :class:`Refused` with the reason in one line."""
    tree = _parse(statement)
    check_query(tree)
    tree = _strict_casts(tree)
    local = _cte_names(tree)
    tables: set[str] = set()
    travels: dict[str, Travel] = {}
    for table in list(tree.find_all(exp.Table)):
        if not table.db or table.db.lower() not in schemas or table.catalog:
            continue
        name = f"{table.db}.{table.name}".lower()
        if not table.args.get("version"):
            if name not in local:
                tables.add(name)
            continue
        travel = _travel_of(table)
        travels[travel.alias] = travel
        alias = table.alias or table.name  # columns may name the table: t.col
        table.replace(exp.Table(this=exp.to_identifier(travel.alias, quoted=True),
                                alias=exp.TableAlias(this=exp.to_identifier(alias))))
    try:
        sql = tree.sql(dialect=DUCKDB)
    except Exception as exc:  # noqa: BLE001 - sqlglot's unsupported-feature errors are of many kinds
        raise Refused(f"DuckDB has no form of this statement ({_one_line(exc)[:200]}); "
                      f"{SPARK_HINT}") from None
    return Translated(sql, tuple(sorted(tables)), tuple(travels.values()))


def translate_view(sql: str) -> str:
    """A declared view's query (Spark SQL) as DuckDB's, casts kept strict."""
    tree = _parse(sql)
    check_query(tree)
    return _strict_casts(tree).sql(dialect=DUCKDB)
