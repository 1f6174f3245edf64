"""The layers of every declared pipeline in order, run to completion or as a service (needs Spark)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from functools import partial

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from medallion.config.model import Trigger, TriggerKind
from medallion.engine.bronze.job import start_bronze
from medallion.engine.gold.job import gold_waves, start_gold
from medallion.engine.live import BatchCallback
from medallion.engine.monitoring import ProgressCollector, install, uninstall
from medallion.engine.publish import start_publish
from medallion.engine.silver.job import silver_waves, start_silver
from medallion.engine.streaming import (
    JobError,
    RunningQuery,
    TableRun,
    await_all,
    serve,
    service,
)
from medallion.errors import InputRefused
from medallion.io.failures import describe_failure
from medallion.io.tables import undeclared_tables
from medallion.project import Settings
from medallion.quality.evaluate import load_great_expectations_soon
from medallion.quality.spec import declared_expectations
from medallion.spark.session import leave_termination_to_the_driver

log = logging.getLogger(__name__)


class RunTarget(str, Enum):
    """What ``medallion run`` can run."""

    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"
    PUBLISH = "publish"  # the tables listed in kafka.publish, to their topics
    ALL = "all"


Starter = Callable[[SparkSession, Settings, Trigger], list[RunningQuery]]
STARTERS: dict[RunTarget, Starter] = {
    RunTarget.BRONZE: start_bronze,
    RunTarget.SILVER: start_silver,
    RunTarget.GOLD: start_gold,
    RunTarget.PUBLISH: start_publish,
}


def layers_of(layer: RunTarget) -> list[RunTarget]:
    """The layers a run of ``layer`` covers, upstream first."""
    if layer is RunTarget.ALL:
        return [RunTarget.BRONZE, RunTarget.SILVER, RunTarget.GOLD, RunTarget.PUBLISH]
    return [layer]


def run_pipeline(spark: SparkSession, settings: Settings, layer: RunTarget,
                 trigger: Trigger, monitor: bool = True,
                 on_batch: BatchCallback | None = None) -> list[TableRun]:
    """Run ``layer`` (or every layer in order) with ``trigger``; return what each table got.

    With available-now or once, each layer drains what is there before the next starts, so one
    run carries new landing data all the way to gold. With a processing-time trigger the layers
    run side by side until stopped, each picking up what the one before it commits.

    With ``monitor`` every micro-batch's progress and each table's outcome are written to
    ``<lakehouse>/_monitoring`` (after each layer, or every minute for a service), so a run killed
    in gold still leaves the record of its bronze and silver batches. ``on_batch`` (with
    ``monitor``) is given each micro-batch's progress row as it commits (the live display).

    A table whose new input is refused (a landing file its source cannot read as declared) is
    not run; every other table is, and then :class:`RunIncomplete` names the refusal. A service
    (processing-time) does not start without it.
    """
    _warn_of_undeclared_tables(settings)
    collector = install(spark, settings, str(trigger), on_batch) if monitor else None
    try:
        if trigger.kind is TriggerKind.PROCESSING_TIME:
            with service():
                leave_termination_to_the_driver(spark)
                started: list[RunningQuery] = []
                with _stopping_on_failure(spark):
                    for each in layers_of(layer):
                        started += STARTERS[each](spark, settings, trigger)
                    for query in started:  # a service does not start without one of its tables
                        if query.refused:
                            raise query.refused
                return serve(started, collector)
        runs: list[TableRun] = []
        refused: list[InputRefused] = []
        gated = _gated_layers(settings, layer)
        for each in layers_of(layer):
            log.info("running %s with trigger %s", each.value, trigger)
            try:
                for start in _stages(each, settings):
                    with _stopping_on_failure(spark):
                        layer_queries = start(spark, settings, trigger)
                    if gated and any(query.query is not None for query in layer_queries):
                        gated = False  # the gates will be built: load GX while the queries run
                        load_great_expectations_soon()
                    layer_runs = await_all(layer_queries, collector)
                    runs += layer_runs
                    refused += [query.refused for query in layer_queries if query.refused]
                    if collector is not None and any(run.batches for run in layer_runs):
                        # the record of committed batches survives a kill in a later layer; a
                        # layer that found nothing new leaves its outcome rows to the final write
                        _write_monitoring(collector)
            except JobError:
                raise
            except (Py4JError, PySparkException) as exc:
                # Outside a streaming query (creating a table, reading a checkpoint or a table's
                # history), storage errors come as JVM errors: name the layer and the root cause.
                raise JobError(f"{each.value} layer", describe_failure(exc)) from exc
        if refused:
            raise RunIncomplete(refused, runs)
        return runs
    finally:
        if collector is not None:
            _finish_monitoring(spark, collector)


def _gated_layers(settings: Settings, layer: RunTarget) -> bool:
    """Whether a table this run of ``layer`` covers has quality gates to build."""
    covered = {each.value for each in layers_of(layer)}
    return settings.quality.enabled and any(
        spec.table.partition("/")[0] in covered for spec in declared_expectations(settings))


def _stages(layer: RunTarget, settings: Settings) -> list[Starter]:
    """The steps of a layer run to completion, each drained before the next starts: silver's
    and gold's waves (:func:`silver_waves`, a change flow's table a dimension is kept from first;
    :func:`gold_waves`, a gold table read by another one first), one step otherwise."""
    if layer is RunTarget.SILVER:
        silver = silver_waves(settings)
        if len(silver) > 1:
            return [partial(start_silver, flows=wave) for wave in silver]
    if layer is RunTarget.GOLD:
        gold = gold_waves(settings)
        if len(gold) > 1:
            return [partial(start_gold, flows=wave) for wave in gold]
    return [STARTERS[layer]]


def _warn_of_undeclared_tables(settings: Settings) -> None:
    """A table taken out of its pipeline's declaration (or renamed in it) keeps its data, its
    checkpoint and its catalog entry, and analysts could go on reading it without knowing that
    no run updates it any more: each run says so, and how to remove it."""
    for key in undeclared_tables(settings):
        layer, _, name = key.partition("/")
        log.warning("%s: a Delta table at %s that no pipeline declares: no run updates it, and "
                    "the catalog may still offer it as %s.%s (to remove it: DROP TABLE %s.%s with "
                    "medallion sql --engine spark, then delete %s, and %s where it is there)", key,
                    settings.table_path(layer, name),
                    layer, name, layer, name, settings.table_path(layer, name),
                    settings.checkpoint_path(key))


class RunIncomplete(JobError):
    """A run that brought every table up to date but those whose new input was refused (the
    first one names the error); ``runs`` says what each table did."""

    def __init__(self, refused: list[InputRefused], runs: list[TableRun]) -> None:
        first, more = refused[0], refused[1:]
        cause = first.cause + (f" (refused as well: {', '.join(r.table for r in more)}, each "
                               "logged above)" if more else "")
        super().__init__(first.table, cause)
        self.refused, self.runs = refused, runs
        for other in more:
            log.error("%s", other)


@contextmanager
def _stopping_on_failure(spark: SparkSession) -> Iterator[None]:
    """Stop the queries started inside the block if it fails: a starter that fails on its third
    table has already started the first two, and left running they would hold their checkpoints
    (an in-process caller's next run could not start them again) and keep writing."""
    before = {query.id for query in spark.streams.active}
    try:
        yield
    except BaseException:
        for query in spark.streams.active:
            if query.id not in before:
                with contextlib.suppress(Exception):  # the cause matters more than the stop
                    query.stop()
        raise


def _write_monitoring(collector: ProgressCollector) -> None:
    """Write what the collector holds once its queries' events are in; failures are only logged
    (the rows stay buffered for the next write): the run matters more than its record."""
    try:
        collector.wait_for_events()
        collector.flush()
    except Exception:
        log.exception("monitoring: could not write the progress of this run")


def _finish_monitoring(spark: SparkSession, collector: ProgressCollector) -> None:
    """Write what the collector still holds, then detach it."""
    try:
        _write_monitoring(collector)
    finally:
        uninstall(spark, collector)
