"""The pipeline format's JSON Schema: made from the keys the loader takes, shipped as a file equal
to it, accepting the shipped pipelines and refusing what the loader refuses by shape (no JVM)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from medallion.pipeline.errors import PipelineError
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.schema import SCHEMA_FILE, pipeline_schema, schema_text
from tests.conftest import REPO

VALIDATOR = jsonschema.Draft202012Validator(pipeline_schema())
SHIPPED = sorted((REPO / "conf" / "pipelines").glob("*.yaml"))


def _tree(path: Path) -> dict[str, Any]:
    tree: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tree


def test_the_shipped_file_is_the_schema_the_format_gives() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), \
        "run: python -m medallion.pipeline.schema"
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_shipped_pipelines_validate(path: Path) -> None:
    assert list(VALIDATOR.iter_errors(_tree(path))) == []


@pytest.mark.parametrize(("where", "change"), [
    ("top", lambda t: t.update(owner="me")),
    ("a source", lambda t: t["sources"]["orders"].update(encoding="latin1")),
    ("a silver column", lambda t: t["silver"]["order_lines"]["columns"]["quantity"].update(
        minimum=1)),
    ("a window", lambda t: t["gold"]["category_revenue_1h"]["window"].update(offset="5 minutes")),
    ("an enrichment", lambda t: t["silver"]["order_lines"]["enrich"]["products"].update(
        on={"sku": "sku"})),
    ("a choice", lambda t: t["sources"]["orders"].update(format="xml")),
    ("a kind of value", lambda t: t["silver"]["order_lines"]["dedup"].update(key=3)),
])
def test_a_key_or_value_the_loader_refuses_the_schema_refuses_too(
        where: str, change: Any, tmp_path: Path) -> None:
    tree = copy.deepcopy(_tree(REPO / "conf" / "pipelines" / "orders.yaml"))
    change(tree)
    assert list(VALIDATOR.iter_errors(tree)), where
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "orders.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
    with pytest.raises(PipelineError):
        load_pipelines(tmp_path, "local")


def test_the_schema_ships_with_the_package() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"medallion.pipeline" = ["pipeline.schema.json"]' in pyproject
