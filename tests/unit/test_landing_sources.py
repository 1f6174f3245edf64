"""Which landing folder ``medallion land`` puts a file in: the declared file sources decide (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.landing import LandingError, entity_of
from tests.conftest import make_settings


def test_a_file_goes_to_the_one_source_whose_glob_matches(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert entity_of(Path("x/batch-1.json"), None, settings) == "events"  # only events reads *.json


def test_a_name_several_sources_read_needs_the_source_named(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match="more than one source.*customers.*orders.*--entity"):
        entity_of(Path("x/2026-03-02.csv"), None, settings)
    assert entity_of(Path("x/2026-03-02.csv"), "orders", settings) == "orders"
    assert entity_of(Path("x/products.csv"), "products", settings) == "products"


def test_an_unknown_or_kafka_source_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match="unknown source 'events_kafka'.*file sources: events"):
        entity_of(Path("x/a.json"), "events_kafka", settings)
    with pytest.raises(LandingError, match="no source reads"):
        entity_of(Path("x/a.txt"), None, settings)


def test_a_named_source_refuses_a_file_it_would_never_read(tmp_path: Path) -> None:
    """Before, ``--entity events`` landed ``batch-1.jsonl`` where bronze never reads it (events
    reads ``*.json``): the upload succeeded, and the data never arrived."""
    settings = make_settings(tmp_path)
    with pytest.raises(LandingError, match=r"x/batch-1\.jsonl: source events reads files named "
                                           r"'\*\.json' only; rename the file, or declare "
                                           r"sources\.events\.glob"):
        entity_of(Path("x/batch-1.jsonl"), "events", settings)
