"""The table specs the engine builds from the events declaration are the ones tables.py names
(no JVM): same catalog names, schemas, paths and checkpoints, so a lakehouse written before the
declarations carries on, and the two cannot drift apart."""

from __future__ import annotations

import pytest

from medallion.io.tables import TableSpec
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.validate import validate
from medallion.project import Settings
from tests.conftest import REPO
from tests.events_tables import (
    BRONZE_CUSTOMERS,
    BRONZE_EVENTS,
    BRONZE_EVENTS_KAFKA,
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
    SILVER_EVENTS,
    SILVER_QUARANTINE,
)

CONSTANTS = (BRONZE_EVENTS, BRONZE_EVENTS_KAFKA, BRONZE_CUSTOMERS, SILVER_EVENTS, SILVER_QUARANTINE,
             GOLD_EVENT_COUNTS_5M, GOLD_USER_ACTIVITY_SLIDING, GOLD_USER_SESSIONS,
             GOLD_SEGMENT_REVENUE_1H)


@pytest.fixture(scope="module")
def events() -> PipelineSpec:
    spec = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
    validate(spec)
    return spec


@pytest.mark.parametrize("constant", CONSTANTS, ids=lambda spec: spec.key)
def test_the_declaration_derives_the_schema_tables_py_names(events: PipelineSpec,
                                                            constant: TableSpec) -> None:
    derived = TableSpec.from_decl(events.table(constant.key))
    assert (derived.qualified_name, derived.schema_ddl) == (constant.qualified_name,
                                                             constant.schema_ddl)


def test_declared_tables_keep_their_paths_and_checkpoints(events: PipelineSpec,
                                                          settings: Settings) -> None:
    for constant in CONSTANTS:
        derived = TableSpec.from_decl(events.table(constant.key))
        assert derived.path(settings) == constant.path(settings) == (
            f"{settings.paths.lakehouse}/{constant.layer}/{constant.name}")
        assert derived.checkpoint(settings) == constant.checkpoint(settings) == (
            f"{settings.paths.lakehouse}/_checkpoints/{constant.layer}/{constant.name}")


def test_the_events_pipeline_declares_these_tables_and_the_ones_added_since(
        events: PipelineSpec) -> None:
    # Tables declared after the engine stopped naming tables in tables.py have no constant.
    assert {t.key for t in events.tables()} == {c.key for c in CONSTANTS} | {
        "gold/purchase_attribution"}
