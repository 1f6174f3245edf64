"""``medallion sql`` on a terminal: an interactive shell on the fast path (no JVM).

Statements end with ``;`` and may span lines; ``.tables`` lists what can be queried, ``.quit``
(or end of input) leaves. The tables and views are registered once, at the start; each statement
reads the versions committed then (start again to see newer ones).
"""

from __future__ import annotations

import contextlib
import sys
from datetime import datetime
from typing import TextIO

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from medallion.pipeline.sql import split_statements
from medallion.project import Settings
from medallion.serving.lakehouse import Lakehouse, QueryError
from medallion.serving.output import python_rows, write_rows
from medallion.serving.translate import Refused

PROMPT = "medallion> "
MORE = "        -> "
LIMIT = 1000


def complete(buffer: str) -> bool:
    """Whether ``buffer`` ends a statement: its last token is a ``;`` (not one inside a string,
    a quoted name or a comment)."""
    try:
        tokens = sqlglot.tokenize(buffer, read="spark")
    except TokenError:  # an unclosed quote: more lines to come
        return False
    return bool(tokens) and tokens[-1].token_type is TokenType.SEMICOLON


def run_shell(settings: Settings, as_of: int | datetime | None = None,
              read: TextIO = sys.stdin, out: TextIO = sys.stdout) -> int:
    """Read statements until ``.quit`` or the end of input, print each result as a grid."""
    with contextlib.suppress(ImportError):  # line editing and history for input()
        import readline  # noqa: F401
    house = Lakehouse(settings, as_of)
    waiting = house.register_all()
    names = sorted(set(house.names()) - set(waiting))
    out.write(f"medallion sql: {len(names)} tables and views (.tables lists them); statements "
              "end with ; (Spark SQL, run by DuckDB), .quit leaves\n")
    interactive = read is sys.stdin and sys.stdin.isatty()
    buffer = ""
    while True:
        try:
            line = input(MORE if buffer else PROMPT) if interactive else read.readline()
        except (EOFError, KeyboardInterrupt):
            out.write("\n")
            return 0
        if not interactive and line == "":
            return 0
        if not buffer and line.strip() in (".quit", ".exit", "quit", "exit"):
            return 0
        if not buffer and line.strip() == ".tables":
            out.write("\n".join(names) + "\n")
            continue
        buffer += line if line.endswith("\n") else line + "\n"
        if not complete(buffer):
            continue
        for statement in split_statements(buffer):
            try:
                result = house.query(statement, LIMIT)
            except (Refused, QueryError) as exc:
                out.write(f"error: {exc}\n")
                continue
            write_rows(result.table.column_names, python_rows(result.table), "table", out,
                       result.more)
        buffer = ""
