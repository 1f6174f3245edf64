"""Paths, source folders and landed file names that would misbehave are refused, with a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.errors import ConfigError
from medallion.ops.landing import LandingError, land_files
from medallion.project import load_settings
from tests.s3_support import write_overlay

pytestmark = pytest.mark.usefixtures("clean_medallion_env")


def _load(tmp_path: Path, overlay: dict, **kw: str) -> object:
    return load_settings(env="bad", conf_dir=write_overlay(tmp_path / "conf", "bad", overlay), **kw)


@pytest.mark.parametrize(("path", "problem"), [
    ("s3a:///lakehouse", "names no bucket"),
    ("s3a://", "names no bucket"),
    ("s3://", "names no bucket"),
    ("s3a:/bucket/lakehouse", "without '//'"),
    ("s3a://bucket/lake/../landing", "'..'"),
    ("s3a://-bucket-/x", "not an S3 bucket name"),
    ("/data/lake:house", "cannot hold ':'"),
])
def test_a_path_that_names_no_place_is_refused(tmp_path: Path, path: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as error:
        _load(tmp_path, {"paths": {"lakehouse": path}})
    assert error.value.key == "paths.lakehouse"
    assert error.value.source.endswith("bad.yaml")


@pytest.mark.parametrize("folder", ["../../etc", "events/../..", ".events", "_events", "ev:ents", "",
                                    "/mnt/events"])
def test_a_source_folder_must_stay_under_the_landing_zone(tmp_path: Path, folder: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {"sources": {"events": folder}})
    assert error.value.key == "sources.events"
    assert error.value.source.endswith("bad.yaml")


def test_plain_and_nested_source_folders_are_accepted(tmp_path: Path) -> None:
    settings = _load(tmp_path, {"sources": {"events": "incoming/events-v2", "customers": "crm.dim",
                                            "stores": "pos/stores"}})
    assert settings.sources == {"events": "incoming/events-v2", "customers": "crm.dim",  # type: ignore[attr-defined]
                                "stores": "pos/stores"}
    declared = settings.file_sources()  # type: ignore[attr-defined]
    assert settings.source_folder(declared["stores"]) == "pos/stores"  # type: ignore[attr-defined]
    assert settings.source_folder(declared["orders"]) == "orders"  # type: ignore[attr-defined]


def test_a_source_folder_is_set_only_for_a_declared_file_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {"sources": {"invoices": "inv"}})
    assert error.value.key == "sources.invoices"
    assert "orders" in str(error.value)  # the message lists the sources one may set


@pytest.mark.parametrize(("name", "problem"), [
    (".burst-1.json", "skipped by Spark"),
    ("_burst-1.json", "skipped by Spark"),
    ("burst:1.json", "cannot hold ':'"),
    ("burst\n1.json", "control characters"),
])
def test_land_refuses_names_spark_skips_or_hadoop_breaks_on(tmp_path: Path, name: str,
                                                           problem: str) -> None:
    settings = _load(tmp_path, {"paths": {"landing": str(tmp_path / "landing"),
                                          "lakehouse": str(tmp_path / "lake")}})
    good = tmp_path / "burst-0.json"
    good.write_text('{"event_id": "e0"}\n')
    bad = tmp_path / name
    bad.write_text('{"event_id": "e1"}\n')
    with pytest.raises(LandingError, match=problem) as error:
        land_files(settings, [good, bad])  # type: ignore[arg-type]
    assert repr(name) in str(error.value)
    assert not (tmp_path / "landing").exists()  # refused before anything was landed
