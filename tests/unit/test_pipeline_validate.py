"""Bad pipeline definitions fail before Spark starts, naming the key path and the file (no JVM)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from medallion.config.model import ViewSpec
from medallion.pipeline.errors import PipelineError
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.validate import validate

EVENTS = Path(__file__).resolve().parents[2] / "conf" / "pipelines" / "events.yaml"
Tree = dict[str, Any]


@pytest.fixture(scope="module")
def events_tree() -> Tree:
    tree: Tree = yaml.safe_load(EVENTS.read_text(encoding="utf-8"))
    return tree


def _write(folder: Path, name: str, tree: Tree) -> Path:
    (folder / "pipelines").mkdir(exist_ok=True)
    path = folder / "pipelines" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def _load(folder: Path, env: str = "local") -> PipelineSpec:
    (spec,) = load_pipelines(folder, env)
    validate(spec)
    return spec


def _fails(tmp_path: Path, events_tree: Tree, change: Callable[[Tree], None]) -> PipelineError:
    tree = copy.deepcopy(events_tree)
    change(tree)
    _write(tmp_path, "events", tree)
    with pytest.raises(PipelineError) as caught:
        _load(tmp_path)
    return caught.value


def _file(folder: Path) -> Path:
    return folder / "pipelines" / "events.yaml"


def _names(error: PipelineError, key: str, file: Path) -> None:
    message = str(error)
    assert message.startswith(f"invalid pipeline definition: {key} (from {file}): "), message
    assert (error.key, error.source) == (key, str(file))


def test_unknown_column_in_a_rule(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["columns"]["amount"]["rules"]["negative_amount"] = "amont >= 0"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.columns.amount.rules.negative_amount", _file(tmp_path))
    assert "unknown column 'amont'" in str(error)


def test_unknown_column_in_a_table_rule_and_a_filter(tmp_path: Path, events_tree: Tree) -> None:
    def rule(tree: Tree) -> None:
        tree["silver"]["events"]["rules"] = {"late": "timestamp > ingested_at + INTERVAL 1 DAY OR x"}

    _names(_fails(tmp_path, events_tree, rule), "silver.events.rules.late", _file(tmp_path))

    def gold_filter(tree: Tree) -> None:
        tree["gold"]["segment_revenue_1h"]["filter"] = "kind = 'purchase'"

    error = _fails(tmp_path, events_tree, gold_filter)
    _names(error, "gold.segment_revenue_1h.filter", _file(tmp_path))


def test_a_rule_that_is_not_sql(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["columns"]["amount"]["rules"]["negative_amount"] = "amount >="

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.columns.amount.rules.negative_amount", _file(tmp_path))
    assert "not a Spark SQL expression" in str(error)


def test_unknown_column_in_an_aggregate(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["gold"]["event_counts_5m"]["aggregates"]["total_amount"]["column"] = "amt"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.event_counts_5m.aggregates.total_amount.column", _file(tmp_path))
    assert "unknown column 'amt'" in str(error)


def test_sum_of_text_is_refused(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["gold"]["event_counts_5m"]["aggregates"]["total_amount"]["column"] = "event_type"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.event_counts_5m.aggregates.total_amount.column", _file(tmp_path))
    assert "sum needs a number" in str(error)


def test_window_over_a_non_timestamp_column(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["gold"]["user_activity_sliding"]["window"]["column"] = "amount"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.user_activity_sliding.window.column", _file(tmp_path))
    assert "amount is DECIMAL(18,4)" in str(error)


def test_stateful_session_windows_cannot_be_updated_in_place(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["gold"]["user_sessions"].update(mode="update", refresh="stateful")

    _names(_fails(tmp_path, events_tree, change), "gold.user_sessions.mode", _file(tmp_path))


def test_recomputed_sessions_are_kept_in_mode_update(tmp_path: Path, events_tree: Tree) -> None:
    tree = copy.deepcopy(events_tree)
    tree["gold"]["user_sessions"].update(mode="update")  # recomputed unless declared stateful
    _write(tmp_path, "events", tree)
    gold = {g.name: g for g in _load(tmp_path).gold}
    assert not events_tree["gold"]["user_sessions"].get("refresh")
    assert [name for name, g in gold.items() if g.recomputed] == [
        "event_counts_5m", "user_activity_sliding", "user_sessions", "segment_revenue_1h"]
    sessions = gold["user_sessions"]
    assert sessions.recomputed and sessions.merge_keys == ("session_start", "session_end",
                                                           "user_id")


def test_tumbling_and_sliding_windows_in_mode_append_may_be_recomputed(
        tmp_path: Path, events_tree: Tree) -> None:
    tree = copy.deepcopy(events_tree)
    tree["gold"]["event_counts_5m"].update(mode="append", refresh="recompute")
    tree["gold"]["user_activity_sliding"].update(mode="append")  # stateful unless declared
    _write(tmp_path, "events", tree)
    gold = {g.name: g for g in _load(tmp_path).gold}
    counts, sliding = gold["event_counts_5m"], gold["user_activity_sliding"]
    assert counts.recomputed and not counts.recomputed_in_place and counts.merge_keys == ()
    assert not sliding.recomputed and gold["event_counts_5m"].mode.value == "append"


@pytest.mark.parametrize(("table", "change", "key", "said"), [
    ("user_sessions", {"refresh": "recompute"}, "gold.user_sessions.refresh",
     "sessions in mode append are kept by a stateful query"),
    ("event_counts_5m", {"refresh": "later"}, "gold.event_counts_5m.refresh",
     "'later' is not one of stateful, recompute"),
    ("purchase_attribution", {"refresh": "recompute"}, "gold.purchase_attribution.refresh",
     "only for a window aggregate"),
])
def test_refresh_is_declared_for_window_aggregates_and_append_sessions_are_stateful(
        tmp_path: Path, events_tree: Tree, table: str, change: dict, key: str, said: str) -> None:
    error = _fails(tmp_path, events_tree, lambda tree: tree["gold"][table].update(change))
    _names(error, key, _file(tmp_path))
    assert said in str(error)


def test_missing_dedup_key_column(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["dedup"]["key"] = ["event_id", "id"]

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.dedup.key", _file(tmp_path))
    assert "unknown column 'id'" in str(error)


def test_missing_dedup_declaration(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        del tree["silver"]["events"]["dedup"]

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.dedup", _file(tmp_path))


def test_a_cycle(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        window = {"kind": "tumbling", "size": "1 hour", "column": "window_end"}
        count = {"n": {"function": "count"}}
        tree["gold"]["loop_a"] = {"input": "gold/loop_b", "window": window, "aggregates": count,
                                  "mode": "update"}
        tree["gold"]["loop_b"] = {"input": "gold/loop_a", "window": window, "aggregates": count,
                                  "mode": "update"}

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.loop_b.input", _file(tmp_path))
    assert "a cycle: gold/loop_a <- gold/loop_b <- gold/loop_a" in str(error)


def test_two_flows_writing_one_table(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["sources"]["events_again"] = {"format": "json_lines", "path": "events2",
                                           "bronze": {"table": "events"}}

    error = _fails(tmp_path, events_tree, change)
    _names(error, "sources.events_again.bronze.table", _file(tmp_path))
    assert "bronze/events is already written by ingest:events" in str(error)


def test_a_silver_table_named_like_a_quarantine_has_two_writers(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events_quarantine"] = copy.deepcopy(tree["silver"]["events"])

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events_quarantine", _file(tmp_path))


def test_python_step_that_cannot_be_imported(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["python"] = "medallion_no_such_module.steps:clean"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.python", _file(tmp_path))
    assert "cannot import 'medallion_no_such_module.steps'" in str(error)


def test_python_step_that_is_not_callable(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        gold = tree["gold"]["user_sessions"]
        for derived in ("window", "group_by", "aggregates"):
            del gold[derived]
        gold.update(python="tests.unit.pipeline_steps:NOT_CALLABLE",
                    columns={"user_id": "STRING", "event_count": "BIGINT"})
        del gold["expectations"], gold["column_comments"]

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.user_sessions.python", _file(tmp_path))


def test_a_gold_table_cannot_stream_from_a_table_kept_by_merge(tmp_path: Path,
                                                                events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["gold"]["hourly_counts"] = {
            "input": "gold/event_counts_5m", "mode": "append",
            "window": {"kind": "tumbling", "size": "1 hour", "column": "window_start"},
            "aggregates": {"windows": {"function": "count"}}}

    error = _fails(tmp_path, events_tree, change)
    _names(error, "gold.hourly_counts.input", _file(tmp_path))
    assert "gold/event_counts_5m is kept up to date in place (mode update)" in str(error)


def test_unknown_key(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["dedupe"] = tree["silver"]["events"]["dedup"]

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.dedupe", _file(tmp_path))
    assert "unknown key" in str(error)


def test_bad_type_name(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["columns"]["amount"]["type"] = "DECIMEL(18,4)"

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.columns.amount.type", _file(tmp_path))
    assert "unknown type 'DECIMEL'" in str(error)


def test_unknown_column_in_comments_and_expectations(tmp_path: Path, events_tree: Tree) -> None:
    def comment(tree: Tree) -> None:
        tree["gold"]["user_sessions"]["column_comments"]["window_start"] = "no such column in a session"

    _names(_fails(tmp_path, events_tree, comment), "gold.user_sessions.column_comments.window_start",
           _file(tmp_path))

    def expectation(tree: Tree) -> None:
        tree["silver"]["events"]["expectations"]["event_id_unique"]["kwargs"]["column"] = "id"

    _names(_fails(tmp_path, events_tree, expectation),
           "silver.events.expectations.event_id_unique.kwargs.column",
           _file(tmp_path))


def test_enrichment_must_match_its_dimension(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["enrich"]["customers"]["columns"] = ["customer_name", "tier"]

    _names(_fails(tmp_path, events_tree, change), "silver.events.enrich.customers.columns",
           _file(tmp_path))


def _two_dimensions_with_a_name(tree: Tree) -> None:
    """A second dimension of the same customers source, both with a ``customer_name``."""
    tree["dimensions"]["accounts"] = dict(tree["dimensions"]["customers"])
    tree["silver"]["events"]["enrich"]["accounts"] = {
        "join": {"user_id": "customer_id"}, "columns": ["customer_name"]}


def test_two_dimensions_with_one_column_name_enrich_one_table_under_names_of_its_own(
        tmp_path: Path, events_tree: Tree) -> None:
    refused = _fails(tmp_path, events_tree, _two_dimensions_with_a_name)
    _names(refused, "silver.events.enrich.accounts.columns", _file(tmp_path))
    assert "customer_name is already a column of silver/events" in str(refused)
    assert "columns: {accounts_customer_name: customer_name}" in str(refused)  # the way out

    tree = copy.deepcopy(events_tree)
    _two_dimensions_with_a_name(tree)
    tree["silver"]["events"]["enrich"]["accounts"]["columns"] = {
        "account_name": "customer_name", "account_segment": "segment"}
    tree["silver"]["events"]["enrich"]["accounts"]["defaults"] = {"account_segment": "none"}
    _write(tmp_path, "events", tree)
    spec = _load(tmp_path)
    (table,) = [t for t in spec.tables() if t.key == "silver/events"]
    assert table.column_names[5:9] == ("customer_name", "segment", "account_name",
                                       "account_segment")
    assert str(table.column_type("account_name")) == "STRING"
    enrichment = next(e for s in spec.silver for e in s.enrichments if e.dimension == "accounts")
    assert [enrichment.source_of(c) for c in enrichment.columns] == ["customer_name", "segment"]


@pytest.mark.parametrize(("columns", "key", "said"), [
    ({"account_name": "tier"}, "silver.events.enrich.accounts.columns", "tier"),
    ({"account_name": 3}, "silver.events.enrich.accounts.columns.account_name",
     "must name a column of the dimension"),
    ({"a": "customer_name", "b": "customer_name"}, "silver.events.enrich.accounts.columns",
     "takes a dimension's column twice"),
    ({"bad name": "customer_name"}, "silver.events.enrich.accounts.columns.bad name",
     "identifier"),
    ({"segment": "segment"}, "silver.events.enrich.accounts.columns",
     "segment is already a column"),
    ({}, "silver.events.enrich.accounts.columns", "names no column"),
])
def test_a_renamed_enrichment_column_is_checked_like_any_other(
        tmp_path: Path, events_tree: Tree, columns: dict, key: str, said: str) -> None:
    def change(tree: Tree) -> None:
        _two_dimensions_with_a_name(tree)
        tree["silver"]["events"]["enrich"]["accounts"]["columns"] = columns

    refused = _fails(tmp_path, events_tree, change)
    _names(refused, key, _file(tmp_path))
    assert said in str(refused)


def test_csv_columns_must_come_from_the_header(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["silver"]["clients"] = {
            "input": "bronze/customers", "parse": "columns",
            "columns": {"customer_id": "STRING", "tier": "STRING"},
            "dedup": {"key": "customer_id"},
        }

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.clients.columns.tier", _file(tmp_path))
    assert "unknown column 'tier' in the raw record" in str(error)


def test_exactly_one_alternative_is_active(tmp_path: Path, events_tree: Tree) -> None:
    def change(tree: Tree) -> None:
        tree["sources"]["events_kafka"]["active"] = True

    _names(_fails(tmp_path, events_tree, change), "sources.events_kafka.active",
           _file(tmp_path))


def test_overlay_changes_what_differs_and_errors_name_it(tmp_path: Path, events_tree: Tree) -> None:
    _write(tmp_path, "events", events_tree)
    overlay = tmp_path / "pipelines" / "events.prod.yaml"
    overlay.write_text("sources:\n  events: {active: false}\n"
                       "  events_kafka: {active: true, topics: [prod.events]}\n"
                       "watermark: 30 minutes\n", encoding="utf-8")
    prod = _load(tmp_path, "prod")
    assert (prod.watermark, prod.source("events_kafka").topics) == ("30 minutes", ("prod.events",))
    assert [s.active for s in prod.sources] == [False, True, True]
    assert _load(tmp_path, "local").watermark == "10 minutes"  # other environments: base only
    overlay.write_text("gold:\n  event_counts_5m:\n    window: {size: 5 minuts}\n", encoding="utf-8")
    with pytest.raises(PipelineError) as caught:
        _load(tmp_path, "prod")
    _names(caught.value, "gold.event_counts_5m.window.size", overlay)
    assert prod.source_of("sources.events.format") == str(_file(tmp_path))


def test_overlay_without_its_pipeline(tmp_path: Path) -> None:
    (tmp_path / "pipelines").mkdir()
    orphan = tmp_path / "pipelines" / "orders.prod.yaml"
    orphan.write_text("watermark: 1 hour\n", encoding="utf-8")
    with pytest.raises(PipelineError) as caught:
        load_pipelines(tmp_path, "prod")
    _names(caught.value, "<file>", orphan)


def test_a_decimal_type_split_by_a_flow_mapping_says_to_quote_it(tmp_path: Path,
                                                                  events_tree: Tree) -> None:
    flow = yaml.safe_load("{type: DECIMAL(18,4), required: false}")  # YAML splits at the comma
    assert "4)" in flow

    def change(tree: Tree) -> None:
        tree["silver"]["events"]["columns"]["amount"] = flow

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.columns.amount.4)", _file(tmp_path))
    assert 'must be quoted: "DECIMAL(10,2)"' in str(error)


def test_a_struct_field_name_delta_cannot_hold_is_refused(tmp_path: Path, events_tree: Tree) -> None:
    """Spark's DDL takes `floor no` in backticks, but the Delta table refused it when the run
    made it, after bronze had started."""
    def change(tree: Tree) -> None:
        tree["silver"]["events"]["columns"]["place"] = {
            "type": "ARRAY<STRUCT<site: STRING, `floor no`: INT>>"}

    error = _fails(tmp_path, events_tree, change)
    _names(error, "silver.events.columns.place.type", _file(tmp_path))
    assert "struct field 'floor no' of 'ARRAY<STRUCT<site: STRING, `floor no`: INT>>' holds a " \
           "character a Delta table's column names cannot" in str(error)
    tree = copy.deepcopy(events_tree)  # other names are quoted as Spark's DDL needs them
    tree["silver"]["events"]["columns"]["place"] = {"type": "STRUCT<`floor-no`: INT>"}
    _write(tmp_path, "events", tree)
    place = next(c for c in _load(tmp_path).silver[0].columns if c.name == "place")
    assert str(place.type) == "STRUCT<`floor-no`: INT>"


@pytest.mark.parametrize(("view", "body", "key", "words"), [
    ("daily", {"sql": "SELECT 1"}, "views.daily", "not a catalog name like gold.event_counts_daily"),
    ("gold.user_sessions", {"sql": "SELECT 1"}, "views.gold.user_sessions",
     "a table already has this name"),
    ("quality.mine", {"sql": "SELECT 1"}, "views.quality.mine", "engine's own tables"),
    ("gold.x", {"sql": "DELETE FROM gold.user_sessions"}, "views.gold.x.sql", "single SELECT"),
    ("gold.x", {"sql": "SELECT * FROM gold.category_revenue_1h"}, "views.gold.x.sql",  # orders'
     "reads gold.category_revenue_1h, which this pipeline does not declare as a table or view: "
     "the view could never be made (a view over several pipelines' tables goes in catalog.views "
     "of conf/base.yaml)"),
    ("gold.x", {"comment": "no query"}, "views.gold.x.sql", "required"),
    ("gold.x", {"sql": "SELECT 1", "owner": "me"}, "views.gold.x.owner", "unknown key"),
    # nested under its schema, as the key path views.gold.daily reads (not an "unknown key")
    ("gold", {"daily": {"sql": "SELECT 1"}}, "views.gold",
     "a view is keyed by its catalog name, schema and name in one key (gold.daily: {sql: ...}), "
     "not nested under its schema"),
])
def test_a_view_a_pipeline_cannot_have_is_refused(tmp_path: Path, events_tree: Tree, view: str,
                                                  body: dict[str, str], key: str,
                                                  words: str) -> None:
    def change(tree: Tree) -> None:
        tree["views"][view] = body

    error = _fails(tmp_path, events_tree, change)
    _names(error, key, _file(tmp_path))
    assert words in str(error)


def test_a_pipeline_view_reads_its_tables_and_views(tmp_path: Path, events_tree: Tree) -> None:
    tree = copy.deepcopy(events_tree)
    tree["views"]["gold.weekly"] = {
        "sql": "WITH d AS (SELECT * FROM gold.event_counts_daily) "
               "SELECT * FROM d JOIN silver.events_quarantine q ON true;", "comment": "Weekly"}
    _write(tmp_path, "events", tree)
    assert _load(tmp_path).views[-1] == ViewSpec(
        "gold.weekly", "WITH d AS (SELECT * FROM gold.event_counts_daily) "
        "SELECT * FROM d JOIN silver.events_quarantine q ON true", "Weekly")


@pytest.mark.parametrize(("change", "key", "words"), [
    # A header written as one string is one column, named "a,b,c": Delta refused it at the run.
    (lambda t: t["sources"]["customers"].update(header="customer_id,customer_name,segment"),
     "sources.customers.header.0", "'customer_id,customer_name,segment' holds a character a "
     "Delta table's column names cannot"),
    (lambda t: t["sources"]["customers"].update(header=["customer_id", "customer name"]),
     "sources.customers.header.1", "'customer name' holds a character"),
    (lambda t: t["sources"].update(stores={"format": "parquet", "path": "stores", "schema": {
        "store id": "STRING"}, "bronze": {"table": "stores"}}),
     "sources.stores.schema.store id", "'store id' holds a character"),
    (lambda t: t["sources"]["customers"].update(options={"sep": [";"]}),
     "sources.customers.options.sep", "a reader option is a string, a number or a boolean"),
    # Spark refuses a window of no length only once the query starts.
    (lambda t: t["gold"]["event_counts_5m"]["window"].update(size="0 minutes"),
     "gold.event_counts_5m.window.size", "'0 minutes': must be longer than zero"),
    (lambda t: t["gold"]["user_sessions"]["window"].update(gap="0 seconds"),
     "gold.user_sessions.window.gap", "must be longer than zero"),
    (lambda t: t["gold"]["purchase_attribution"]["join"].update(within="0 minutes"),
     "gold.purchase_attribution.join.within", "must be longer than zero"),
])
def test_a_source_or_window_spark_or_delta_would_refuse_at_the_run_is_refused(
        tmp_path: Path, events_tree: Tree, change: Callable[[Tree], None], key: str,
        words: str) -> None:
    error = _fails(tmp_path, events_tree, change)
    _names(error, key, _file(tmp_path))
    assert words in str(error)


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("path", "../other-team/events", "is not a folder under the landing zone"),
    ("path", "events/../../etc", "is not a folder under the landing zone"),
    ("path", "/mnt/shared/events", "give it relative to the zone ('mnt/shared/events' is "
                                   "<landing>/mnt/shared/events)"),
    ("path", "s3a://bucket/events", "is not a folder under the landing zone"),
    ("glob", "../*.json", "a glob matches a file's own name"),
    ("glob", "2026/*.json", "a glob matches a file's own name"),
])
def test_a_file_source_reads_only_under_the_landing_zone(
        tmp_path: Path, events_tree: Tree, key: str, value: str, problem: str) -> None:
    """A source's ``path`` was joined to the landing zone as given (``../other-team`` read
    another team's files), and a ``glob`` with a '/' matched nothing, so the source read nothing
    and no run said so; an absolute path was read under the zone without a word."""
    error = _fails(tmp_path, events_tree, lambda tree: tree["sources"]["events"].__setitem__(key, value))
    _names(error, f"sources.events.{key}", _file(tmp_path))
    assert problem in str(error)


def test_a_nested_landing_folder_is_a_folder_under_the_zone(tmp_path: Path, events_tree: Tree) -> None:
    tree = copy.deepcopy(events_tree)
    tree["sources"]["events"]["path"] = "web/events/"
    _write(tmp_path, "events", tree)
    assert _load(tmp_path).source("events").path == "web/events"


@pytest.mark.parametrize(("key", "path", "text", "found"), [
    ("silver.events.columns.amount.rules.negative_amount",
     ("silver", "events", "columns", "amount", "rules", "negative_amount"), "amount + 1",
     "DECIMAL(18, 4)"),
    ("silver.events.rules.late", ("silver", "events", "rules", "late"), "ingested_at", "TIMESTAMP"),
    ("gold.segment_revenue_1h.filter", ("gold", "segment_revenue_1h", "filter"), "upper(event_type)",
     "STRING"),
    ("gold.purchase_attribution.join.filter", ("gold", "purchase_attribution", "join", "filter"),
     "event_type", "STRING"),
    ("dimensions.customers.where", ("dimensions", "customers", "where"), "length(customer_id)",
     "INT"),
])
def test_a_rule_or_a_filter_that_is_not_true_or_false_is_refused(
        tmp_path: Path, events_tree: Tree, key: str, path: tuple[str, ...], text: str,
        found: str) -> None:
    """``amount + 1`` as a rule was taken, and the run failed at the query's start in Spark's
    analysis (NOT of a number); a filter or a dimension's ``where`` the same."""
    def change(tree: Tree) -> None:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = text

    error = _fails(tmp_path, events_tree, change)
    _names(error, key, _file(tmp_path))
    assert f"must be true or false, and {text!r} is {found}" in str(error)


def test_predicates_of_every_shape_are_taken(tmp_path: Path, events_tree: Tree) -> None:
    """The check refuses only what sqlglot types as a value; functions it does not know, lambdas
    and casts to BOOLEAN are left to Spark."""
    predicates = ["amount >= 0 OR amount IS NULL", "rlike(event_type, '^[a-z_]+$')",
                  "startswith(user_id, 'u')", "coalesce(amount > 0, true)",
                  "if(amount > 0, true, false)", "CASE WHEN amount > 0 THEN TRUE ELSE FALSE END",
                  "timestamp > ingested_at - INTERVAL 365 DAYS", "hour(timestamp) BETWEEN 0 AND 23",
                  "exists(array(amount), a -> a >= 0)", "try_cast(event_id AS BOOLEAN) IS NULL",
                  "some_udf_spark_knows(event_id)", "event_id ILIKE 'e%'", "amount <=> amount"]
    tree = copy.deepcopy(events_tree)
    tree["silver"]["events"]["rules"] = {f"rule_{n}": p for n, p in enumerate(predicates)}
    _write(tmp_path, "events", tree)
    rules = {r.name: r.predicate for r in _load(tmp_path).silver[0].rules}
    assert list(rules.values()) == predicates


@pytest.mark.parametrize(("source", "problem"), [
    ("card.nope", "'card.nope' is not a field of card (STRUCT<brand: STRING, tags: ARRAY<STRING>>)"),
    ("card.tags.x", "'card.tags.x' is not a field of card"),  # inside an array: no struct field
    ("wallet.brand", "unknown column 'wallet' in the raw record (columns: id, card)"),
])
def test_a_struct_field_source_of_a_typed_input_must_name_a_field(
        tmp_path: Path, source: str, problem: str) -> None:
    tree = {
        "sources": {"payments": {"format": "parquet", "path": "payments", "schema": {
            "id": "STRING", "card": "STRUCT<brand: STRING, tags: ARRAY<STRING>>"},
            "bronze": {"table": "payments"}}},
        "silver": {"payments": {"input": "bronze/payments", "parse": "columns", "columns": {
            "id": "STRING", "brand": {"type": "STRING", "source": source}},
            "dedup": {"key": ["id"]}}}}
    file = _write(tmp_path, "payments", tree)
    with pytest.raises(PipelineError) as caught:
        _load(tmp_path)
    _names(caught.value, "silver.payments.columns.brand.source", file)
    assert problem in str(caught.value)
