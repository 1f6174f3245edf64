"""Views the catalog keeps: a SELECT over the lakehouse's tables, named ``<schema>.<name>``.

A pipeline declares the views over its own tables (``views:`` in ``conf/pipelines/<name>.yaml``);
a view over several pipelines' tables goes in the settings (``catalog.views`` in
``conf/base.yaml``). Either way a view is checked before Spark starts: its name, that it is one
query, and that every lakehouse table it reads (``bronze.``, ``silver.``, ``gold.``) is declared.
A view over a table not declared anywhere could never be made.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from medallion.pipeline.sql import read_tables

# Catalog schemas of the engine's own tables (run records, quality results): not for views.
ENGINE_SCHEMAS = ("monitoring", "quality")
# The schemas of the tables pipelines declare, ``<layer>.<table>``.
LAYER_SCHEMAS = ("bronze", "silver", "gold")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_QUERY = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


def name_problem(name: str, tables: Collection[str]) -> str | None:
    """What is wrong with ``name`` for a view, given the declared tables' catalog names."""
    if not _NAME.match(name):
        return f"{name!r} is not a catalog name like gold.event_counts_daily"
    if name.lower() in {table.lower() for table in tables}:
        return "a table already has this name"
    if name.split(".")[0] in ENGINE_SCHEMAS:
        return (f"the {name.split('.')[0]} schema holds the engine's own tables; name the view "
                "in another schema")
    return None


def query_problem(sql: str, known: Collection[str], who: str) -> str | None:
    """What is wrong with a view's query: not one SELECT, or reading a lakehouse table or view
    that is not in ``known`` (catalog names), which ``who`` (``no pipeline declares``) says."""
    if not _QUERY.match(sql):
        return "must be a single SELECT (or WITH ... SELECT) query"
    declared = {name.lower() for name in known}
    missing = [name for name in read_tables(sql) or ()
               if name.split(".")[0] in LAYER_SCHEMAS and name not in declared]
    if missing:
        return (f"reads {', '.join(missing)}, which {who} as a table or view: the view could "
                "never be made")
    return None
