"""``medallion land``: files into the landing zone on the S3 server, whole and verified; and the
landing zone listed there as Spark's file source lists it."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.engine import idle
from medallion.engine.idle import files_under, location
from medallion.io import hadoopfs
from medallion.io.s3 import s3_client
from medallion.ops.landing import MIB, LandingError, land_files
from medallion.spark.s3a import apply_hadoop_conf, s3a_conf
from tests.s3_support import FAST_FAILURE, S3SettingsFactory


def test_small_and_multipart_uploads_are_verified_and_idempotent(
    s3_settings_factory: S3SettingsFactory, tmp_path: Path,
) -> None:
    settings = s3_settings_factory()
    bucket = settings.paths.landing.split("/")[2]
    small = tmp_path / "burst-1.json"
    small.write_text('{"event_id":"e1"}\n{"event_id":"e2"}\n', encoding="utf-8")
    big = tmp_path / "big.csv"
    header = b"customer_id,customer_name,segment\n"  # the declared one, or landing refuses it
    big.write_bytes(header + os.urandom(5 * MIB) + b"tail\n")  # two parts of 5 MiB

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


def _refused(*args: object) -> None:
    raise AssertionError(f"a call to Hadoop: {args}")


def test_a_landing_prefix_is_listed_as_s3a_lists_it(
        s3_settings_factory: S3SettingsFactory, s3_spark: SparkSession,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Bronze's checks list a landing prefix with boto3 and compare what they find with what the
    file source logged through S3A: the two listings must give the same files, URIs, and
    modification times to the millisecond, or an idle run would start and an untouched file be
    warned of as changed. When boto3 cannot list (here: keys S3A's chain does not use), S3A
    lists it."""
    settings = s3_settings_factory()
    apply_hadoop_conf(s3_spark, {**s3a_conf(settings.s3), **FAST_FAILURE})
    bucket = settings.paths.landing.split("/")[2]
    folder = f"{settings.paths.landing}/events folder"
    client = s3_client(settings.s3)
    for key in ("a.json", "2025-01-27/b é.json", "_temporary/0/c.json", ".d.json", "e.txt",
                "2025-01-28/"):  # the last, a folder marker: a folder, no file
        client.put_object(Bucket=bucket, Key=f"landing/events folder/{key}", Body=key.encode())
    for key in ("landing/events folder2/x.json", "landing/events/y.json"):
        client.put_object(Bucket=bucket, Key=key, Body=b"{}\n")  # beside it, not under it

    def hadoop_listing(path: str) -> set[tuple[str, tuple[str, str], int, int]] | None:
        fs, target = hadoopfs.hadoop_path(s3_spark, path)
        if not fs.exists(target):
            return None
        found, files = set(), fs.listFiles(target, True)
        while files.hasNext():
            status = files.next()
            found.add((str(status.getPath().toString()), location(str(status.getPath().toUri())),
                       int(status.getModificationTime()), int(status.getLen())))
        return found

    def listing(path: str) -> set[tuple[str, tuple[str, str], int, int]] | None:
        listed = files_under(s3_spark, path, settings.s3)
        return None if listed is None else {(f.uri, f.location, f.modified_ms, f.size) for f in listed}

    with caplog.at_level(logging.INFO, logger="medallion.engine.idle"):
        listed = files_under(s3_spark, folder, settings.s3)
        assert listed is not None
        assert sorted(f.path for f in listed) == [
            ".d.json", "2025-01-27/b é.json", "_temporary/0/c.json", "a.json", "e.txt"]
        expected = hadoop_listing(folder)
        assert listing(folder) == expected
        nothing = f"{settings.paths.landing}/nothing"
        assert hadoop_listing(nothing) is None
        with monkeypatch.context() as bridge_closed:  # boto3's listing, no call to the JVM
            bridge_closed.setattr(idle, "hadoop_path", _refused)
            assert listing(folder) == expected
            assert listing(nothing) is None
    assert "not listed with boto3" not in caplog.text
    # No bucket: S3A's error, as before (not "no folder", which a run would take as nothing new).
    with pytest.raises(Py4JJavaError, match="NoSuchBucket"):
        files_under(s3_spark, "s3a://no-such-bucket-medallion/x", settings.s3)

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-key")  # boto3's; the JVM has its own
    with caplog.at_level(logging.INFO, logger="medallion.engine.idle"):
        assert listing(folder) == hadoop_listing(folder)
    assert f"{folder}: not listed with boto3" in caplog.text
