"""Expectations as the gate uses them: declared with their table, checked before Spark starts.

Each table of ``conf/pipelines/<name>.yaml`` (bronze, silver or gold) may declare, under
``expectations``, a mapping of expectation names to their definition::

    gold:
      event_counts_5m:
        ...
        expectations:
          event_type_in_set:
            expectation: expect_column_values_to_be_in_set   # a GX 1.x expectation type
            kwargs: {column: event_type, value_set: [view, click, add_to_cart, purchase]}
            severity: fail                                    # warn | drop | fail

Entries are keyed by name, so a pipeline overlay (``<name>.<env>.yaml``) can change one
expectation (say its severity) without repeating the others. The pipeline loader
(:mod:`medallion.pipeline.load`) checks the type (one the gate can compute in a single pass), the
severity and the shape; the validator checks that the columns named exist; the arguments are
checked by Great Expectations' own expectation classes in :func:`check_expectations`, which every
command that runs a job calls before Spark starts. An error names the key and the file.

``conf/base.yaml``'s ``quality`` section keeps what is not about one table: ``enabled``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medallion.errors import ConfigError
from medallion.pipeline.kinds import BATCH_LEVEL_TYPES, ROW_LEVEL_TYPES, SUPPORTED_TYPES, Severity
from medallion.pipeline.model import ExpectationSpec
from medallion.spark.usercache import cache_folder

if TYPE_CHECKING:
    from medallion.project import Settings

log = logging.getLogger(__name__)

__all__ = ["BATCH_LEVEL_TYPES", "ROW_LEVEL_TYPES", "SUPPORTED_TYPES", "ExpectationSpec",
           "Severity", "build_expectation", "check_expectations"]


def build_expectation(spec: ExpectationSpec) -> Any:
    """The Great Expectations expectation object of ``spec`` (its class validates the arguments)."""
    from great_expectations.expectations.registry import get_expectation_impl

    impl = get_expectation_impl(spec.expectation_type)
    meta = {"medallion": {"name": spec.name, "severity": spec.severity.value, "table": spec.table}}
    return impl(**dict(spec.kwargs), meta=meta,
                description=spec.description or None)


def _key(spec: ExpectationSpec) -> str:
    return spec.declared_at or f"{spec.table}.expectations.{spec.name}"


def _check_locally(spec: ExpectationSpec) -> None:
    """What is refused without Great Expectations."""
    if "row_condition" in spec.kwargs or "condition_parser" in spec.kwargs:
        raise ConfigError(f"{_key(spec)}.kwargs.row_condition", spec.kwargs_source,
                          "row conditions are not supported by the gate; use a narrower column")


def _check_with_gx(spec: ExpectationSpec) -> None:
    """The arguments as Great Expectations judges them (after :func:`_check_locally`)."""
    key = _key(spec)
    try:
        configuration = build_expectation(spec).configuration
    except Exception as exc:  # pydantic's errors: each line names an argument and the problem
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{key}.kwargs", spec.kwargs_source,
                          f"not valid for {spec.expectation_type}: {problem}") from None
    try:
        # What the gate does at every batch: {$PARAMETER: now() - ...} evaluated, here once.
        configuration.process_suite_parameters({}, True, None)
    except Exception as exc:  # noqa: BLE001 - GX raises many kinds for an expression it cannot read
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{key}.kwargs", spec.kwargs_source,
                          f"a $PARAMETER of {spec.expectation_type} cannot be evaluated: "
                          f"{problem}") from None


def declared_expectations(settings: Settings) -> tuple[ExpectationSpec, ...]:
    """Every expectation every pipeline declares, table by table (gates on or off)."""
    return tuple(expectation for pipeline in settings.pipelines for table in pipeline.tables()
                 for expectation in table.doc.expectations)


def check_expectations(settings: Settings, environ: Mapping[str, str] = os.environ) -> None:
    """Check every declared expectation's arguments with Great Expectations' own classes.

    Kept apart from loading because importing Great Expectations takes seconds: commands that run
    a job call this before they start Spark; the others never pay for it. Nothing is checked when
    the gates are off (``quality.enabled: false``), as nothing will be evaluated.

    An expectation that passed is remembered (:func:`checked_folder`) by a digest of what the
    check reads: its type, arguments and description, and the versions of Great Expectations and
    pydantic that judged them. When every declared one is remembered, Great Expectations is not
    imported at all: a scheduled run with nothing new does not pay its import (about 1 s of such
    a run's wall time, beside the JVM's start); a run with work loads it while its first layer
    runs (:func:`medallion.quality.evaluate.load_great_expectations_soon`). A refused one is never
    remembered, so it is refused at every run until it is fixed.
    """
    if not settings.quality.enabled:
        return
    folder = checked_folder(environ)
    judges = [_CHECK_REVISION, _version("great_expectations"), _version("pydantic")]
    for spec in declared_expectations(settings):
        _check_locally(spec)
        digest = _check_digest(spec, judges)
        if folder is not None and (folder / digest).exists():
            continue
        _check_with_gx(spec)
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / digest).touch()
            except OSError as exc:  # a cache that cannot be written only costs the next check
                log.debug("cannot remember checked expectations in %s: %s", folder, exc)


CHECKED_ENV = "MEDALLION_CHECKED_EXPECTATIONS"
_CHECK_REVISION = "1"  # raise when what _check_with_gx accepts changes


def checked_folder(environ: Mapping[str, str]) -> Path | None:
    """Where expectations that passed the check are remembered (``~/.cache/medallion/
    expectations`` by default, ``$MEDALLION_CHECKED_EXPECTATIONS`` to choose, ``off`` for none)."""
    return cache_folder(environ, CHECKED_ENV, "expectations")


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "missing"


def _check_digest(spec: ExpectationSpec, judges: list[str]) -> str:
    """A digest of everything :func:`_check_with_gx` judges, and of who judges it (``judges``:
    the check's revision and the versions of Great Expectations and pydantic)."""
    judged = [*judges, spec.expectation_type, dict(spec.kwargs), spec.description]
    text = json.dumps(judged, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
