"""Great Expectations expectations evaluated with one aggregation over a micro-batch.

Great Expectations' Spark execution engine resolves each expectation's metrics on its own domain,
and fetches each expectation's sample of unexpected values with a query of its own: on a cached
1M-row batch, eight expectations cost 18 Spark jobs (docs/quality.md). The gate keeps Great
Expectations for what it is good at and computes the metrics itself, in one pass:

1. each configured expectation is a GX expectation object (its class validated the arguments);
2. GX says which metrics it needs (``get_validation_dependencies``): ``table.row_count``,
   ``column_values.in_set.unexpected_count``, ``column.max``, ...;
3. every metric of every expectation becomes one Spark aggregate expression, and all of them are
   computed by a single ``DataFrame.agg`` (the ``drop`` masks' row count rides along);
4. only for an expectation that found unexpected rows, a ``limit(20)`` query fetches examples;
5. GX's own ``_validate`` turns the metrics into its ``ExpectationValidationResult`` (success,
   ``mostly``, percentages, observed value), which is what is recorded and rendered.

The aggregate of each metric follows GX's Spark semantics (nulls are not judged by column map
expectations except the null ones; a pair is skipped when both values are missing); a test
compares the outcome with GX's own Spark validation on the same data.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, TimestampNTZType, TimestampType

from medallion.quality.spec import ExpectationSpec, Severity, build_expectation

log = logging.getLogger(__name__)

RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 20}
RUNTIME = {"result_format": RESULT_FORMAT}
SAMPLE_SIZE = 20

# GX's suite-parameter parser keeps its stack in a module global; gold queries run their batches
# on threads of their own, so GX calls are made one at a time.
_GX_LOCK = threading.Lock()


def load_great_expectations() -> None:
    """Import GX once, before batches need it on their threads: its metrics register while its
    modules import, and a thread importing it while another does can find a metric undefined
    ("No definition found for table.row_count")."""
    with _GX_LOCK:
        import great_expectations.core.expectation_validation_result  # noqa: F401
        import great_expectations.expectations.registry  # noqa: F401


_loading: list[threading.Thread] = []


def load_great_expectations_soon() -> None:
    """Start importing GX on a thread of its own, once: a run whose expectations were checked
    before (:func:`~medallion.quality.spec.check_expectations`) has not imported it, and a layer
    with work calls this as its queries start, so the import (seconds of one core) runs while the
    JVM does their work instead of when the first gate is built. The gate's
    :func:`load_great_expectations` waits for it under the same lock."""
    if _loading or "great_expectations.expectations.registry" in sys.modules:
        return
    # Not a daemon: a process whose run ends first waits for the import rather than exit in it.
    thread = threading.Thread(target=load_great_expectations, name="medallion-gx-import")
    _loading.append(thread)
    thread.start()


class UnsupportedMetric(ValueError):
    """An expectation needs a metric the single-pass gate cannot compute."""


@dataclass(frozen=True)
class RowRule:
    """A row-level judgement: which rows are considered, and which of those are unexpected."""

    considered: Column
    unexpected: Column
    columns: tuple[str, ...]

    @property
    def failing(self) -> Column:
        """True exactly on the rows the expectation rejects (never null)."""
        return F.coalesce(self.considered & self.unexpected, F.lit(False))


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one expectation on one batch."""

    spec: ExpectationSpec
    success: bool
    unexpected_count: int | None
    element_count: int | None
    observed: str
    result_json: dict[str, Any]


@dataclass(frozen=True)
class BatchEvaluation:
    """Every expectation's outcome on a batch, and the rows ``drop`` expectations reject."""

    results: tuple[CheckResult, ...]
    row_count: int
    dropped_count: int
    drop_mask: Column | None  # true on rows failing at least one drop expectation
    drop_reasons: Column | None  # names of the drop expectations a row fails

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """Failed expectations whose severity is ``fail``."""
        return tuple(r for r in self.results if not r.success and r.spec.severity is Severity.FAIL)


def _typed_bound(value: Any, data_type: DataType) -> Column:
    temporal = isinstance(data_type, (TimestampType, TimestampNTZType, DateType))
    if temporal and isinstance(value, str):
        return F.lit(value).cast(data_type)
    return F.lit(value)


def _between(value: Column, kwargs: Mapping[str, Any], data_type: DataType) -> Column:
    """Whether ``value`` lies within GX's ``min_value``/``max_value``/``strict_*`` bounds."""
    inside = F.lit(True)
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if low is not None:
        bound = _typed_bound(low, data_type)
        inside = inside & ((value > bound) if kwargs.get("strict_min") else (value >= bound))
    if high is not None:
        bound = _typed_bound(high, data_type)
        inside = inside & ((value < bound) if kwargs.get("strict_max") else (value <= bound))
    return inside


def row_rule(map_metric: str, domain: Mapping[str, Any], values: Mapping[str, Any],
             schema: Mapping[str, DataType]) -> RowRule:
    """The row-level rule behind a GX map metric (``column_values.in_set`` and the like)."""
    if map_metric.startswith("column_pair_values."):
        a, b = F.col(domain["column_A"]), F.col(domain["column_B"])
        ignore = domain.get("ignore_row_if", "both_values_are_missing")
        considered = {
            "both_values_are_missing": ~(a.isNull() & b.isNull()),
            "either_value_is_missing": a.isNotNull() & b.isNotNull(),
        }.get(ignore, F.lit(True))
        if map_metric != "column_pair_values.a_greater_than_b":
            raise UnsupportedMetric(map_metric)
        greater = (a >= b) if values.get("or_equal") else (a > b)
        return RowRule(considered, ~greater, (domain["column_A"], domain["column_B"]))
    name = domain["column"]
    column, data_type = F.col(name), schema[name]
    kind = map_metric.removeprefix("column_values.")
    if kind == "nonnull":
        return RowRule(F.lit(True), column.isNull(), (name,))
    if kind == "null":
        return RowRule(F.lit(True), column.isNotNull(), (name,))
    judged = column.isNotNull()
    if kind == "in_set":
        return RowRule(judged, ~column.isin(list(values.get("value_set") or [])), (name,))
    if kind == "not_in_set":
        return RowRule(judged, column.isin(list(values.get("value_set") or [])), (name,))
    if kind == "between":
        return RowRule(judged, ~_between(column, values, data_type), (name,))
    if kind == "value_length.between":
        return RowRule(judged, ~_between(F.length(column), values, data_type), (name,))
    if kind == "match_regex":
        return RowRule(judged, ~column.rlike(values["regex"]), (name,))
    if kind == "not_match_regex":
        return RowRule(judged, column.rlike(values["regex"]), (name,))
    raise UnsupportedMetric(map_metric)


_AGGREGATES = {"column.max": F.max, "column.min": F.min, "column.mean": F.avg, "column.sum": F.sum}
_OF_COLUMN_VALUES = frozenset({
    "expect_column_max_to_be_between", "expect_column_min_to_be_between",
    "expect_column_mean_to_be_between", "expect_column_sum_to_be_between"})


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _collected(frame: DataFrame) -> list[tuple[Any, ...]]:
    """``frame``'s rows as tuples, each TIMESTAMP computed from Spark's microseconds: a naive
    datetime on the local clock, as PySpark gives it (and as GX's ``now()`` is).

    PySpark's own conversion fails for 0001-01-01 ("year 0 is out of range"): a batch with such
    an event failed its gate at every run. Where the local clock cannot say, the time is given in
    UTC; beyond what Python's ``datetime`` holds (after 9999), its largest (or smallest) value.
    """
    times = [isinstance(f.dataType, TimestampType) for f in frame.schema.fields]
    if any(times):
        frame = frame.select(*[F.unix_micros(F.col(f"`{f.name}`")).alias(f.name) if is_time
                               else F.col(f"`{f.name}`")
                               for f, is_time in zip(frame.schema.fields, times, strict=True)])
    return [tuple(_instant(value) if is_time and value is not None else value
                  for value, is_time in zip(row, times, strict=True)) for row in frame.collect()]


def _instant(micros: int) -> datetime:
    try:
        instant = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return datetime.max if micros > 0 else datetime.min
    try:
        return instant.astimezone().replace(tzinfo=None)
    except (OverflowError, ValueError, OSError):
        return instant.replace(tzinfo=None)


class _Plan:
    """The aggregate expressions of one batch, shared between expectations that need the same."""

    def __init__(self, schema: Mapping[str, DataType]) -> None:
        self.schema = schema
        self.columns: list[Column] = []
        self.index: dict[str, int] = {}

    def add(self, key: str, column: Column) -> str:
        if key not in self.index:
            self.index[key] = len(self.columns)
            self.columns.append(column.alias(f"m{len(self.columns)}"))
        return key

    def metric(self, name: str, configuration: Any) -> str | None:
        """Add the aggregate of a GX metric; ``None`` for metrics fetched after the pass."""
        domain, values = dict(configuration.metric_domain_kwargs), dict(
            configuration.metric_value_kwargs)
        key = str(configuration.id)
        if name == "table.row_count":
            return self.add("table.row_count", F.count(F.lit(1)))
        if name in _AGGREGATES:
            return self.add(key, _AGGREGATES[name](F.col(domain["column"])))
        map_metric, _, suffix = name.rpartition(".")
        if suffix == "unexpected_values":
            return None
        if map_metric == "column_values.unique" and suffix == "unexpected_count":
            # Duplicated values, as a lower bound counted in the same pass (one distinct aggregate
            # needs no extra shuffle when the batch is already partitioned by the column); the
            # exact GX count (every row of a duplicated value) is computed only when it is > 0.
            column = F.col(domain["column"])
            return self.add(key, F.count(column) - F.count_distinct(column))
        rule = row_rule(map_metric, domain, values, self.schema)
        if suffix == "unexpected_count":
            return self.add(key, F.count_if(rule.failing))
        if suffix == "filtered_row_count":
            return self.add(key, F.count_if(F.coalesce(rule.considered, F.lit(False))))
        raise UnsupportedMetric(name)


@dataclass
class _Pending:
    spec: ExpectationSpec
    expectation: Any
    metric_keys: dict[str, str | None]
    configurations: dict[str, Any]


def _prepare(spec: ExpectationSpec) -> Any:
    """The spec's GX expectation with suite parameters (``now()`` and the like) resolved now."""
    configuration = build_expectation(spec).configuration
    configuration.process_suite_parameters({}, True, None)
    return configuration.to_domain_obj()


def _unique_unexpected(frame: DataFrame, column: str) -> int:
    counts = frame.where(F.col(column).isNotNull()).groupBy(column).count()
    total = counts.where(F.col("count") > 1).agg(F.sum("count")).first()[0]  # type: ignore[index]
    return int(total or 0)


def _samples(frame: DataFrame, failing: Column, columns: Sequence[str]) -> list[Any]:
    from great_expectations.util import convert_to_json_serializable

    rows = _collected(frame.where(failing).select(*columns).limit(SAMPLE_SIZE))
    values = [row[0] if len(columns) == 1 else row for row in rows]
    return [convert_to_json_serializable(_plain(v)) for v in values]


def _describe(kind: str, result: Mapping[str, Any]) -> str:
    if "observed_value" in result:
        return f"observed {result['observed_value']}"
    unexpected, total = result.get("unexpected_count"), result.get("element_count")
    text = f"{unexpected} of {total} rows unexpected"
    if kind == "expect_column_values_to_be_unique" and unexpected:
        text = f"{unexpected} of {total} rows share a value with another row"
    examples = result.get("partial_unexpected_list") or []
    if examples:
        shown = ", ".join(repr(v) for v in examples[:3])
        text += f" (e.g. {shown})"
    return text


def evaluate_batch(frame: DataFrame, specs: Sequence[ExpectationSpec]) -> BatchEvaluation:
    """Evaluate ``specs`` on ``frame`` (best persisted): one aggregation, GX's verdicts."""
    load_great_expectations()
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )

    schema = {f.name: f.dataType for f in frame.schema.fields}
    plan = _Plan(schema)
    pending: list[_Pending] = []
    drop_rules: list[tuple[str, Column]] = []
    with _GX_LOCK:
        for spec in specs:
            expectation = _prepare(spec)
            dependencies = expectation.get_validation_dependencies(runtime_configuration=RUNTIME)
            keys: dict[str, str | None] = {}
            configurations: dict[str, Any] = {}
            for name, configuration in dependencies.metric_configurations.items():
                keys[name] = plan.metric(name, configuration)
                configurations[name] = configuration
            pending.append(_Pending(spec, expectation, keys, configurations))
            if spec.severity is Severity.DROP:
                count_metric = f"{expectation.map_metric}.unexpected_count"
                configuration = configurations[count_metric]
                rule = row_rule(expectation.map_metric, configuration.metric_domain_kwargs,
                                configuration.metric_value_kwargs, schema)
                drop_rules.append((spec.name, rule.failing))
    drop_mask: Column | None = None
    drop_reasons: Column | None = None
    if drop_rules:
        drop_mask = drop_rules[0][1]
        for _, failing in drop_rules[1:]:
            drop_mask = drop_mask | failing
        drop_reasons = F.array_compact(F.array(*[F.when(failing, F.lit(name))
                                                 for name, failing in drop_rules]))
        plan.add("drop.count", F.count_if(drop_mask))
    plan.add("table.row_count", F.count(F.lit(1)))
    (row,) = _collected(frame.agg(*plan.columns))  # a global aggregate has one row
    values = {key: _plain(row[i]) for key, i in plan.index.items()}

    results: list[CheckResult] = []
    for item in pending:
        metrics: dict[str, Any] = {}
        for name, key in item.metric_keys.items():
            if key is not None:
                metrics[name] = values[key]
        map_metric: str = getattr(item.expectation, "map_metric", None) or ""
        count_name = f"{map_metric}.unexpected_count"
        if map_metric == "column_values.unique" and metrics.get(count_name):
            metrics[count_name] = _unique_unexpected(frame, item.spec.kwargs["column"])
        sample_name = f"{map_metric}.unexpected_values"
        if sample_name in item.metric_keys:
            samples: list[Any] = []
            if metrics.get(count_name):
                configuration = item.configurations[count_name]
                if map_metric == "column_values.unique":
                    column = item.spec.kwargs["column"]
                    duplicated = (frame.groupBy(column).count().where(F.col("count") > 1)
                                  .select(column))
                    samples = [r[0] for r in _collected(duplicated.limit(SAMPLE_SIZE))]
                else:
                    rule = row_rule(map_metric, configuration.metric_domain_kwargs,
                                    configuration.metric_value_kwargs, schema)
                    samples = _samples(frame, rule.failing, rule.columns)
            metrics[sample_name] = samples
        with _GX_LOCK:
            if values["table.row_count"] == 0 and item.spec.expectation_type in _OF_COLUMN_VALUES:
                # No rows, no newest value to judge: vacuously true, as GX's map expectations are
                # (a batch of duplicates only is no reason to stop a pipeline).
                verdict: dict[str, Any] = {"success": True, "result": {"observed_value": None}}
            else:
                verdict = item.expectation._validate(metrics, runtime_configuration=RUNTIME)
            validation = ExpectationValidationResult(
                success=bool(verdict["success"]),
                expectation_config=item.expectation.configuration,
                result=verdict.get("result", {}),
            )
            as_json: dict[str, Any] = dict(validation.to_json_dict())
        result: dict[str, Any] = as_json.get("result") or {}
        results.append(CheckResult(
            spec=item.spec,
            success=bool(verdict["success"]),
            unexpected_count=result.get("unexpected_count"),
            element_count=result.get("element_count", values.get("table.row_count")),
            observed=_describe(item.spec.expectation_type, result),
            result_json=as_json,
        ))
    return BatchEvaluation(
        results=tuple(results),
        row_count=int(values["table.row_count"]),
        dropped_count=int(values.get("drop.count") or 0),
        drop_mask=drop_mask,
        drop_reasons=drop_reasons,
    )
