"""``medallion land``: files into the landing zone on the S3 server, whole and verified."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from medallion.cli import main
from medallion.landing import MIB, LandingError, land_files
from medallion.s3 import s3_client
from tests.s3_support import S3SettingsFactory


def test_small_and_multipart_uploads_are_verified_and_idempotent(
    s3_settings_factory: S3SettingsFactory, tmp_path: Path,
) -> None:
    settings = s3_settings_factory()
    bucket = settings.paths.landing.split("/")[2]
    small = tmp_path / "burst-1.json"
    small.write_text('{"event_id":"e1"}\n{"event_id":"e2"}\n', encoding="utf-8")
    big = tmp_path / "big.csv"
    big.write_bytes(os.urandom(5 * MIB) + b"tail\n")  # two parts of 5 MiB

    # The one source reading *.json takes the first; several read *.csv: the source is named.
    landed = [*land_files(settings, [small], part_size=5 * MIB),
              *land_files(settings, [big], entity="customers", part_size=5 * MIB)]

    assert [(f.target, f.parts, f.skipped) for f in landed] == [
        (f"s3a://{bucket}/landing/events/burst-1.json", 1, False),
        (f"s3a://{bucket}/landing/customers/big.csv", 2, False),
    ]
    client = s3_client(settings.s3)
    for path, key in ((small, "landing/events/burst-1.json"), (big, "landing/customers/big.csv")):
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert hashlib.sha256(body).digest() == hashlib.sha256(path.read_bytes()).digest()
    # A multipart checksum is the SHA-256 of the parts' SHA-256s, then "-<parts>".
    parts = [big.read_bytes()[:5 * MIB], big.read_bytes()[5 * MIB:]]
    import base64
    composite = hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest()
    assert landed[1].checksum == base64.b64encode(composite).decode() + "-2"
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []

    again = [*land_files(settings, [small], part_size=5 * MIB),
             *land_files(settings, [big], entity="customers", part_size=5 * MIB)]
    assert [f.skipped for f in again] == [True, True]

    small.write_text('{"event_id":"other"}\n', encoding="utf-8")
    with pytest.raises(LandingError, match="already exists with other content"):
        land_files(settings, [small])


def test_land_command(s3_settings_factory: S3SettingsFactory, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    settings = s3_settings_factory()
    bucket = settings.paths.landing.split("/")[2]
    conf_dir = tmp_path / f"conf-{bucket.removesuffix('-landing')}"
    data = tmp_path / "c.txt"
    data.write_text("customer_id,customer_name,segment\n", encoding="utf-8")
    assert main(["land", "--env", "s3test", "--conf-dir", str(conf_dir), str(data)]) == 1
    assert "no source reads a file of this name" in capsys.readouterr().err
    assert main(["land", "--env", "s3test", "--conf-dir", str(conf_dir), "--entity", "customers",
                 str(data)]) == 1  # customers reads *.csv: there, c.txt would never be read
    assert "source customers reads files named '*.csv' only" in capsys.readouterr().err
    data = data.rename(tmp_path / "c.csv")
    assert main(["land", "--env", "s3test", "--conf-dir", str(conf_dir), "--entity", "customers",
                 str(data)]) == 0
    assert f"s3a://{bucket}/landing/customers/c.csv" in capsys.readouterr().out


def test_generate_lands_sample_files_on_s3(s3_settings_factory: S3SettingsFactory,
                                           tmp_path: Path) -> None:
    settings = s3_settings_factory()
    bucket = settings.paths.landing.split("/")[2]
    conf_dir = tmp_path / f"conf-{bucket.removesuffix('-landing')}"
    assert main(["generate", "--env", "s3test", "--conf-dir", str(conf_dir), "--events", "20",
                 "--files", "2", "--burst", "b1"]) == 0
    listed = s3_client(settings.s3).list_objects_v2(Bucket=bucket, Prefix="landing/")
    assert sorted(obj["Key"] for obj in listed["Contents"]) == [
        "landing/customers/customers-b1.csv",
        "landing/events/b1-0000.json",
        "landing/events/b1-0001.json",
    ]
    assert not (Path.cwd() / "s3a:").exists()
