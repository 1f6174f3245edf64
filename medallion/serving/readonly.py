"""Read-only SQL for the Thrift server's clients: a check rule in Spark's analyzer.

Spark has no SQL authorizer for its Thrift server, and no setting makes a session read-only
(``spark.sql.runSQLOnFiles=false`` only hides path-based reads, and any client can set it back
with ``SET`` or in its JDBC URL). So the server's sessions get a check rule
(``SparkSessionExtensions.injectCheckRule``), written here in Python and called by the JVM through
py4j's callback server: every statement a client sends is analysed, then refused unless it is

- a query whose every relation (subqueries included) is a table or view of the catalog, or
  something a statement cannot name (Delta's own log replay, a literal ``VALUES``, ``range``);
- ``SHOW``, ``DESCRIBE`` (``DESCRIBE HISTORY``/``DETAIL`` of catalog tables), ``EXPLAIN``,
  ``USE``, or ``SET`` without a value (reading a setting).

Everything else (DDL, DML, ``ADD JAR``, ``CREATE FUNCTION``, ``CACHE``, ``ANALYZE``, ``SET k=v``,
``text.`/etc/passwd```, ``delta.`/path```) fails before it runs, and so does a query calling a JVM
method by name (``reflect``, ``java_method``, ``try_reflect``: any static method with text or number
arguments, ``java.lang.System.exit`` included). The rule fails closed: a plan
node it does not know, or any error while inspecting one, refuses the statement.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

REFUSED = "read-only Thrift server"

# Commands that only read the catalog (the logical form, and the v1 form Spark may turn it into).
READING_COMMANDS = frozenset({
    "SetCatalogAndNamespace", "SetNamespaceCommand",
    "ShowNamespaces", "ShowNamespacesCommand", "ShowCatalogs", "ShowCatalogsCommand",
    "ShowCurrentNamespace", "ShowCurrentNamespaceCommand",
    "ShowTables", "ShowTablesExtended", "ShowTablesCommand", "ShowViews", "ShowViewsCommand",
    "ShowColumns", "ShowColumnsCommand", "ShowFunctions", "ShowFunctionsCommand",
    "ShowTableProperties", "ShowTablePropertiesCommand", "ShowCreateTable",
    "ShowCreateTableCommand", "ShowPartitions", "ShowPartitionsCommand",
    "DescribeRelation", "DescribeTableCommand", "DescribeColumn", "DescribeColumnCommand",
    "DescribeNamespace", "DescribeDatabaseCommand", "DescribeFunction", "DescribeFunctionCommand",
    "DescribeQueryCommand", "ExplainCommand",
    "DescribeDeltaHistory", "DescribeDeltaHistoryCommand", "DescribeDeltaDetailCommand",
})
# Leaves no statement can point at a file with.
HARMLESS_LEAVES = frozenset({"OneRowRelation", "LocalRelation", "Range", "LogicalRDD",
                             "ResolvedNamespace", "ResolvedPersistentView", "ResolvedTempView",
                             "ResolvedNonPersistentFunc", "ResolvedPersistentFunc",
                             "HiveTableRelation"})
TABLES = frozenset({"LogicalRelation", "DataSourceV2Relation", "ResolvedTable"})
# Settings a client may still change with SET: none that widens what it can reach.
SETTABLE = frozenset({"spark.sql.session.timeZone"})
# Expressions that call JVM code chosen by the statement (reflect, java_method, try_reflect).
REFLECTION = frozenset({"CallMethodViaReflection", "TryReflect"})
_COMMAND = "org.apache.spark.sql.catalyst.plans.logical.Command"


class ReadOnlyViolation(PermissionError):
    """A statement a read-only server refuses."""


def _seq(scala_seq: Any) -> list[Any]:
    """A Scala collection, as a Python list."""
    items = []
    iterator = scala_seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def _simple_name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _is_command(plan: Any, gateway: Any) -> bool:
    loader = plan.getClass().getClassLoader()
    command = gateway.jvm.java.lang.Class.forName(_COMMAND, False, loader)
    return bool(command.isInstance(plan))


def _catalog_table(table: Any) -> bool:
    """Whether a Spark ``Table`` (v2) was loaded from the catalog rather than from a path."""
    name = _simple_name(table)
    if name == "DeltaTableV2":
        return bool(table.catalogTable().isDefined())
    return name == "V1Table"  # the session catalog's own tables


def _reads_catalog_only(leaf: Any) -> bool:
    """Whether a leaf of a plan is a catalog table, or something no statement can name."""
    name = _simple_name(leaf)
    if name in HARMLESS_LEAVES:
        return True
    if name == "LogicalRelation":
        if leaf.catalogTable().isDefined():
            return True
        relation = leaf.relation()
        # Delta replays a table's log through such relations while it resolves the table.
        return (_simple_name(relation) == "HadoopFsRelation"
                and _simple_name(relation.location()) == "DeltaLogFileIndex")
    if name in ("DataSourceV2Relation", "ResolvedTable"):
        return _catalog_table(leaf.table())
    return False


def _reflection_call(plan: Any) -> str | None:
    """The name of a reflection expression anywhere in ``plan`` (its subqueries included)."""
    nodes = [plan, *_seq(plan.subqueriesAll())]
    while nodes:
        node = nodes.pop()
        nodes += _seq(node.children())
        expressions = _seq(node.expressions())
        while expressions:
            expression = expressions.pop()
            name = _simple_name(expression)
            if name in REFLECTION:
                return name
            expressions += _seq(expression.children())
    return None


def refusal(plan: Any, gateway: Any) -> str | None:
    """Why a read-only server refuses an analysed plan, or None if it may run."""
    name = _simple_name(plan)
    if _is_command(plan, gateway):
        if name == "SetCommand":
            setting = plan.kv()
            if setting.isDefined() and setting.get()._2().isDefined():
                key = str(setting.get()._1())
                if key not in SETTABLE:
                    return f"SET {key}=... is not allowed (session settings are fixed)"
            return None
        if name not in READING_COMMANDS:
            return f"{name} is not allowed: only SELECT, SHOW, DESCRIBE and EXPLAIN are"
        if name == "DescribeDeltaHistoryCommand":
            return None if _catalog_table(plan.table()) else (
                "DESCRIBE HISTORY of a path is not allowed, only of the catalog's tables")
        # A command's leaf is often the command itself: only the tables it names are checked.
        leaves = [leaf for leaf in _seq(plan.collectLeaves()) if _simple_name(leaf) in TABLES]
    else:
        leaves = [leaf for part in [plan, *_seq(plan.subqueriesAll())]
                  for leaf in _seq(part.collectLeaves())]
        call = _reflection_call(plan)
        if call is not None:
            return (f"{call} is not allowed: reflect, java_method and try_reflect run "
                    "arbitrary JVM methods")
    for leaf in leaves:
        if not _reads_catalog_only(leaf):
            return (f"reading {_simple_name(leaf)} is not allowed: only the catalog's tables "
                    "and views can be read (no path-based reads such as text.`/path`)")
    return None


class _CheckRule:
    """``LogicalPlan => Unit`` for Spark's analyzer, answered by Python through py4j."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway

    def apply(self, plan: Any) -> None:
        """Raise :class:`ReadOnlyViolation` for a refused plan (the JVM gets the message)."""
        try:
            reason = refusal(plan, self.gateway)
        except Exception as exc:  # noqa: BLE001 - fail closed on anything unexpected
            reason = f"the statement could not be checked ({type(exc).__name__}: {exc})"
        if reason is not None:
            log.warning("refused a statement: %s", reason)
            raise ReadOnlyViolation(f"{REFUSED}: {reason}")

    class Java:
        implements = ["scala.Function1"]


class _CheckRuleBuilder:
    """``SparkSession => (LogicalPlan => Unit)``: the same rule for every client session."""

    def __init__(self, rule: _CheckRule) -> None:
        self.rule = rule

    def apply(self, _session: Any) -> _CheckRule:
        """The rule, for a session whose analyzer is being built."""
        return self.rule

    class Java:
        implements = ["scala.Function1"]


def read_only_session(spark: SparkSession) -> Any:
    """A new (Java) session of ``spark`` whose statements, and its children's, are checked.

    The rule is added to the extensions ``spark`` shares with every session made from it after
    now; sessions whose analyzer already exists (``spark``'s own) are not affected.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    assert gateway is not None
    ensure_callback_server_started(gateway)
    spark._jsparkSession.extensions().injectCheckRule(_CheckRuleBuilder(_CheckRule(gateway)))
    return spark._jsparkSession.newSession()
