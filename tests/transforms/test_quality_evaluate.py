"""The single-pass gate against hand-written expectations and against GX's own Spark validation."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession

from medallion.quality.evaluate import evaluate_batch
from medallion.quality.spec import ExpectationSpec, Severity, build_expectation

SCHEMA = ("event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
          "amount DECIMAL(18,4), window_start TIMESTAMP, window_end TIMESTAMP")
T0, T1 = datetime(2025, 1, 27, 10, 0), datetime(2025, 1, 27, 10, 5)
ROWS = [
    ("e1", "u0001", "view", T0, None, T0, T1),
    ("e2", "u0002", "purchase", T1, Decimal("12.5000"), T0, T1),
    ("e2", "guest", "refund", T1, Decimal("-3.0000"), T1, T0),  # e2 again; 3 rules broken
    ("e4", None, "click", None, Decimal("2500.0000"), None, None),
    ("e5", "  ", "view", T0, Decimal("0.0000"), T0, None),
]


def _spec(name: str, kind: str, severity: Severity = Severity.WARN, **kwargs: object
          ) -> ExpectationSpec:
    return ExpectationSpec("silver/events", name, kind, kwargs, severity)


SPECS = (
    _spec("id_not_null", "expect_column_values_to_not_be_null", column="event_id"),
    _spec("user_not_null", "expect_column_values_to_not_be_null", column="user_id", mostly=0.7),
    _spec("id_unique", "expect_column_values_to_be_unique", column="event_id"),
    _spec("type_in_set", "expect_column_values_to_be_in_set", Severity.DROP, column="event_type",
          value_set=["view", "click", "add_to_cart", "purchase"]),
    _spec("type_not_refund", "expect_column_values_to_not_be_in_set", column="event_type",
          value_set=["refund"]),
    _spec("amount_range", "expect_column_values_to_be_between", Severity.DROP, column="amount",
          min_value=0, max_value=1000),
    _spec("user_format", "expect_column_values_to_match_regex", Severity.DROP, column="user_id",
          regex=r"^u\d{4}$"),
    _spec("user_no_space", "expect_column_values_to_not_match_regex", column="user_id",
          regex=r"\s"),
    _spec("id_length", "expect_column_value_lengths_to_be_between", column="event_id",
          min_value=2, max_value=2),
    _spec("window_ordered", "expect_column_pair_values_a_to_be_greater_than_b",
          column_A="window_end", column_B="window_start"),
    _spec("rows", "expect_table_row_count_to_be_between", Severity.FAIL, min_value=1,
          max_value=4),
    _spec("newest", "expect_column_max_to_be_between", column="timestamp",
          min_value="2025-01-27T10:00:00", max_value="2025-01-27T10:10:00"),
    _spec("oldest", "expect_column_min_to_be_between", column="amount", min_value=0),
    _spec("mean_amount", "expect_column_mean_to_be_between", column="amount", max_value=100),
    _spec("sum_amount", "expect_column_sum_to_be_between", column="amount", min_value=0),
)


@pytest.fixture
def batch(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(ROWS, SCHEMA)


def test_outcomes_match_hand_counted_values(batch: DataFrame) -> None:
    evaluation = evaluate_batch(batch, SPECS)
    got = {r.spec.name: (r.success, r.unexpected_count) for r in evaluation.results}
    assert got == {
        "id_not_null": (True, 0),
        "user_not_null": (True, 1),  # 1 of 5 missing, mostly 0.7
        "id_unique": (False, 2),  # both rows of e2
        "type_in_set": (False, 1),
        "type_not_refund": (False, 1),
        "amount_range": (False, 2),  # -3 and 2500; the null amount is not judged
        "user_format": (False, 2),  # guest and blanks; the null user is not judged
        "user_no_space": (False, 1),
        "id_length": (True, 0),
        "window_ordered": (False, 1),  # end before start; pairs with a missing side are skipped
        "rows": (False, None),
        "newest": (True, None),
        "oldest": (False, None),
        "mean_amount": (False, None),  # (12.5 - 3 + 2500 + 0) / 4
        "sum_amount": (True, None),
    }
    assert evaluation.row_count == 5
    assert [r.spec.name for r in evaluation.failures] == ["rows"]
    observed = {r.spec.name: r.observed for r in evaluation.results}
    assert observed["rows"] == "observed 5"
    assert observed["type_in_set"] == "1 of 5 rows unexpected (e.g. 'refund')"
    assert observed["id_unique"] == "2 of 5 rows share a value with another row (e.g. 'e2')"


def test_drop_rows_carry_the_names_of_the_expectations_they_fail(batch: DataFrame) -> None:
    evaluation = evaluate_batch(batch, SPECS)
    assert evaluation.dropped_count == 3
    assert evaluation.drop_mask is not None and evaluation.drop_reasons is not None
    dropped = {(r["event_id"], r["user_id"], tuple(r["reasons"])) for r in batch.where(
        evaluation.drop_mask).withColumn("reasons", evaluation.drop_reasons).collect()}
    assert dropped == {
        ("e2", "guest", ("type_in_set", "amount_range", "user_format")),
        ("e4", None, ("amount_range",)),
        ("e5", "  ", ("user_format",)),
    }


def test_same_verdicts_as_great_expectations_spark_validation(batch: DataFrame) -> None:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.util import convert_to_json_serializable

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_spark("test").add_dataframe_asset("batch")
    definition = asset.add_batch_definition_whole_dataframe("whole")
    suite = gx.ExpectationSuite(name="cross-check",
                                expectations=[build_expectation(s) for s in SPECS])
    native = definition.get_batch(batch_parameters={"dataframe": batch}).validate(
        suite, result_format="BASIC")
    theirs = {r.expectation_config.meta["medallion"]["name"]: r for r in native.results}
    ours = evaluate_batch(batch, SPECS).results
    assert len(theirs) == len(ours) == len(SPECS)
    for mine in ours:
        reference = theirs[mine.spec.name]
        assert mine.success == reference.success, mine.spec.name
        for key in ("unexpected_count", "element_count", "missing_count", "observed_value"):
            if key in reference.result:
                expected = convert_to_json_serializable(reference.result[key])
                assert mine.result_json["result"].get(key) == expected, (mine.spec.name, key)


def test_an_empty_batch_fails_only_row_count_expectations(spark: SparkSession) -> None:
    empty = spark.createDataFrame([], SCHEMA)
    results = {r.spec.name: r.success for r in evaluate_batch(empty, SPECS).results}
    assert [name for name, success in results.items() if not success] == ["rows"]  # min 1
    low = _spec("some_rows", "expect_table_row_count_to_be_between", min_value=1)
    (result,) = evaluate_batch(empty, (low,)).results
    assert (result.success, result.observed) == (False, "observed 0")


def test_times_at_the_ends_of_what_spark_holds_are_judged_not_fatal(spark: SparkSession) -> None:
    """Times at 0001-01-01 and 9999-12-31 are judged like any other: PySpark's conversion of them
    to Python ("year 0 is out of range") must not fail the gate, and with it the batch."""
    frame = spark.sql("SELECT TIMESTAMP'0001-01-01 00:00:00' AS timestamp UNION ALL "
                      "SELECT TIMESTAMP'9999-12-31 23:59:59.5' UNION ALL SELECT NULL")
    specs = (
        _spec("oldest", "expect_column_min_to_be_between", column="timestamp",
              min_value="2000-01-01T00:00:00"),
        _spec("newest", "expect_column_max_to_be_between", column="timestamp",
              max_value="2100-01-01T00:00:00"),
        _spec("in_range", "expect_column_values_to_be_between", column="timestamp",
              min_value="2000-01-01T00:00:00", max_value="2100-01-01T00:00:00"),
    )
    results = {r.spec.name: r for r in evaluate_batch(frame, specs).results}
    assert not any(r.success for r in results.values())
    assert "0001-01-01T00:00:00" in results["oldest"].observed
    assert "9999-12-31T23:59:59.500000" in results["newest"].observed
    assert results["in_range"].unexpected_count == 2
    assert "0001-01-01T00:00:00" in results["in_range"].observed
