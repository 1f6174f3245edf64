"""Column references of Spark SQL predicates and expressions, found with sqlglot (no Spark).

A rule, a filter or a column expression is checked before Spark starts: it must parse as one
Spark SQL expression, and every column it names must exist where it is evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.tokens import TokenType

DIALECT = "spark"


class SqlError(ValueError):
    """The text is not one Spark SQL expression; the message says why."""


def referenced_columns(text: str, qualified: bool = False) -> tuple[str, ...]:
    """The columns ``text`` names, in order of appearance, each once.

    For ``a.b.c`` (a struct field) the column is ``a``; ``qualified``: ``a.b`` (a join's side
    and its column). Lambda variables (``x -> x + 1``) are not
    columns, and sqlglot already leaves them out.
    """
    names: dict[str, None] = {}
    for parts in referenced_paths(text):
        names[".".join(parts[:2]) if qualified and len(parts) >= 2 else parts[0]] = None
    return tuple(names)


def referenced_paths(text: str) -> tuple[tuple[str, ...], ...]:
    """Each column reference of ``text`` as its dotted parts (``a.b.c``: ``("a", "b", "c")``, a
    struct field), in order of appearance, each once."""
    try:
        parsed = sqlglot.parse(text, dialect=DIALECT)
    except ParseError as exc:
        problem = exc.errors[0]["description"] if exc.errors else str(exc)
        raise SqlError(f"{text!r} is not a Spark SQL expression: {problem}") from None
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise SqlError(f"{text!r} must be one expression, not {len(statements)}")
    tree = statements[0]
    if isinstance(tree, (exp.Query, exp.Command, exp.Create, exp.Drop, exp.Insert, exp.Update,
                         exp.Delete, exp.Merge)) or tree.find(exp.Query) is not None:
        raise SqlError(f"{text!r} must be an expression over the row's columns, not a query")
    paths: dict[tuple[str, ...], None] = {}
    # sqlglot walks breadth-first; sorting by position keeps the text's order for messages.
    for column in sorted(tree.find_all(exp.Column), key=lambda c: _position(c)):
        parts = tuple(part.name for part in column.parts) or (column.name,)
        paths[parts] = None
    return tuple(paths)


_NOT_KNOWN = (exp.DataType.Type.BOOLEAN, exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL)


def non_boolean_type(predicate: str, types: Mapping[str, str]) -> str | None:
    """The SQL type of ``predicate`` over columns of ``types`` when sqlglot can tell it and it is
    not BOOLEAN: a rule or a filter such as ``amount + 1`` would otherwise be taken, and Spark
    would fail the query at its start. None when it is BOOLEAN or sqlglot cannot tell (an unknown
    function, say): Spark decides then."""
    schema: dict[str, object] = {"t": dict(types)}
    try:
        query = exp.select(sqlglot.parse_one(predicate, dialect=DIALECT)).from_("t")
        query = qualify(query, schema=schema, dialect=DIALECT, validate_qualify_columns=False)
        found = annotate_types(query, schema=schema, dialect=DIALECT).selects[0].type
    except Exception:  # noqa: BLE001 - any failure of sqlglot's inference leaves the type unknown
        return None
    if found is None or found.this in _NOT_KNOWN:
        return None
    return found.sql(dialect=DIALECT)


def _position(node: exp.Expression) -> int:
    meta = node.meta if hasattr(node, "meta") else {}
    start = meta.get("start")
    if start is None and isinstance(node, exp.Column) and node.parts:
        start = node.parts[0].meta.get("start")
    return int(start) if start is not None else 0


def read_tables(query: str) -> tuple[str, ...] | None:
    """The tables and views a query reads, ``schema.name`` in lower case (unqualified names and
    the query's own ``WITH`` names left out), sorted; ``None`` when sqlglot cannot parse it
    (Spark then judges it)."""
    try:
        parsed = [p for p in sqlglot.parse(query, dialect=DIALECT) if p is not None]
    except ParseError:
        return None
    return tuple(sorted({f"{table.db}.{table.name}".lower() for tree in parsed
                         for table in tree.find_all(exp.Table) if table.db}))


def split_statements(text: str) -> list[str]:
    """The statements of a SQL script, as written, split at the semicolons that end them (not
    those inside strings, quoted names or comments); empty ones (white space and comments, which
    sqlglot gives no token) left out. Text sqlglot cannot read as tokens (an unclosed quote) is
    one statement, for Spark to judge."""
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
    except TokenError:
        return [text.strip()] if text.strip() else []
    statements, start, has_code = [], 0, False
    for token in tokens:
        if token.token_type is not TokenType.SEMICOLON:
            has_code = True
            continue
        if has_code:
            statements.append(text[start:token.start].strip())
        start, has_code = token.end + 1, False
    if has_code:
        statements.append(text[start:].strip())
    return statements
