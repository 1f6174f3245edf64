"""A pipeline declared as a Python tree, written to a configuration folder, loaded and checked as
the engine would (no JVM): for the tests of what a declaration derives and what it refuses."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from medallion.pipeline.errors import PipelineError
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.validate import validate

Tree = dict[str, Any]


def load_tree(folder: Path, change: Callable[[Tree], None] | None = None, *, name: str,
              tree: Tree) -> PipelineSpec:
    """A copy of ``tree``, changed by ``change``, as ``<folder>/pipelines/<name>.yaml``, loaded
    and validated."""
    changed = copy.deepcopy(tree)
    if change is not None:
        change(changed)
    (folder / "pipelines").mkdir(exist_ok=True)
    (folder / "pipelines" / f"{name}.yaml").write_text(yaml.safe_dump(changed, sort_keys=False),
                                                      encoding="utf-8")
    (spec,) = load_pipelines(folder, "local")
    validate(spec)
    return spec


def refused(folder: Path, change: Callable[[Tree], None], key: str, words: str, *, name: str,
            tree: Tree) -> None:
    """Loading ``tree`` changed by ``change`` fails naming ``key`` and the pipeline's file, with
    ``words`` in the message."""
    with pytest.raises(PipelineError) as caught:
        load_tree(folder, change, name=name, tree=tree)
    assert (caught.value.key, caught.value.source) == (key, str(folder / "pipelines" / f"{name}.yaml"))
    assert words in str(caught.value)
