"""The configuration layer (settings, pipeline declarations: model, loading, validation) is a leaf:
it imports nothing of the engine, lazily or not, so it loads without Spark and without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

from medallion.io.tables import ENGINE_TABLES
from medallion.pipeline.views import ENGINE_SCHEMAS

PACKAGE = Path(__file__).resolve().parents[2] / "medallion"
CONFIGURATION = ("medallion.config", "medallion.errors", "medallion.durations", "medallion.redact",
                 "medallion.yamlfiles", "medallion.pipeline")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_configuration(module: str) -> bool:
    return any(module == m or module.startswith(f"{m}.") for m in CONFIGURATION)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "medallion"}


def test_the_configuration_layer_imports_nothing_of_the_engine() -> None:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    layer = [name for name in modules if _in_configuration(name)]
    assert {"medallion.config", "medallion.pipeline.load", "medallion.pipeline.validate"} <= set(layer)
    outside = {name: sorted(i for i in _imports(modules[name]) if not _in_configuration(i))
               for name in layer}
    assert {name: found for name, found in outside.items() if found} == {}


def test_engine_tables_live_in_the_schemas_reserved_for_them() -> None:
    assert {spec.layer for spec in ENGINE_TABLES} == set(ENGINE_SCHEMAS)
