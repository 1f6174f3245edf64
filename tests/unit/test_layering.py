"""The package's layers, read from its imports (lazy ones included), without importing it.

From the bottom up: the configuration (``config``, ``errors``, ``redact``) and the declarations
(``pipeline``); the project that holds both; I/O at the edges (``io``); the quality gates;
the session factory (``spark``); the engine; operations and serving; the command line. A layer
imports only the layers below it, and no modules import each other in a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from medallion.io.tables import ENGINE_TABLES
from medallion.pipeline.views import ENGINE_SCHEMAS

PACKAGE = Path(__file__).resolve().parents[2] / "medallion"
CONFIGURATION = ("config", "errors", "redact")

# layer -> the layers it must never import
FORBIDDEN: dict[str, frozenset[str]] = {
    "configuration": frozenset({"pipeline", "project", "io", "quality", "spark", "engine", "ops",
                                "serving", "cli", "samples"}),
    "pipeline": frozenset({"project", "io", "quality", "spark", "engine", "ops", "serving", "cli",
                           "samples"}),
    "io": frozenset({"engine", "ops", "serving", "cli", "samples"}),
    "quality": frozenset({"engine", "ops", "serving", "cli", "samples"}),
    "spark": frozenset({"engine", "ops", "serving", "cli", "samples"}),
    "engine": frozenset({"ops", "serving", "cli"}),
    "ops": frozenset({"cli"}),
    "serving": frozenset({"cli"}),
}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """``medallion.io.sinks.delta`` -> ``io``; the configuration's modules are one layer."""
    first = module.split(".")[1] if "." in module else ""
    return "configuration" if first in CONFIGURATION else first


def imports_of(source: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    resolved = set()
    for name in found:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    return resolved


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(p, package): p for p in package.rglob("*.py")}
    known = set(files)
    return {name: imports_of(path.read_text(encoding="utf-8"), known) - {name}
            for name, path in files.items()}


def forbidden_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module's imports of a layer above its own."""
    found = {}
    for name, imported in graph.items():
        banned = FORBIDDEN.get(layer_of(name), frozenset())
        wrong = sorted(i for i in imported if layer_of(i) in banned)
        if wrong:
            found[name] = wrong
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_layer_imports_only_the_layers_below_it() -> None:
    graph = import_graph()
    assert {"medallion.config", "medallion.io.sinks.delta", "medallion.engine.runner",
            "medallion.cli.main"} <= set(graph)
    assert forbidden_imports(graph) == {}


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert circles(import_graph()) == []


def test_at_most_six_modules_at_the_top_of_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 6, top


@pytest.mark.parametrize(("module", "line", "layer"), [
    ("io/sinks/delta.py", "from medallion.engine.streaming import await_all\n", "io"),
    ("pipeline/model.py", "def f():\n    from medallion.spark.session import build_session\n", "pipeline"),
    ("engine/layer.py", "from medallion.ops import status\n", "engine"),
])
def test_an_import_of_a_layer_above_is_found(tmp_path: Path, module: str, line: str, layer: str) -> None:
    copy = tmp_path / "medallion"
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (copy / module).write_text((copy / module).read_text(encoding="utf-8") + "\n" + line,
                               encoding="utf-8")
    wrong = forbidden_imports(import_graph(copy))
    assert list(wrong) == [module_name(copy / module, copy)]
    assert layer_of(module_name(copy / module, copy)) == layer


def test_a_circle_is_found() -> None:
    graph = {"medallion.a": {"medallion.b"}, "medallion.b": {"medallion.c"},
             "medallion.c": {"medallion.a"}, "medallion.d": {"medallion.a"}}
    assert circles(graph) == [["medallion.a", "medallion.b", "medallion.c"]]


def test_engine_tables_live_in_the_schemas_reserved_for_them() -> None:
    assert {spec.layer for spec in ENGINE_TABLES} == set(ENGINE_SCHEMAS)
