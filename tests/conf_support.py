"""Configuration folders for tests: the repo's settings and its pipeline declarations.

A configuration folder is ``base.yaml``, its overlays and ``pipelines/`` (the engine refuses one
without declared pipelines), so a test that builds its own copies both, then adds its overlays.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REPO_CONF = REPO / "conf"


def copy_pipelines(conf: Path) -> Path:
    """Copy the repo's ``conf/pipelines/`` into ``conf``; return ``conf``."""
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO_CONF / "pipelines", conf / "pipelines", dirs_exist_ok=True)
    return conf


def copy_base_conf(conf: Path) -> Path:
    """``conf`` holding the repo's ``base.yaml`` and ``pipelines/``, for a test to add overlays to."""
    copy_pipelines(conf)
    shutil.copy(REPO_CONF / "base.yaml", conf / "base.yaml")
    return conf
