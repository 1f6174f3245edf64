"""Secrets: refused in configuration, never echoed by an error, redacted from commands and logs."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from medallion.cli.main import configure_logging, main
from medallion.errors import ConfigError
from medallion.ops.submit import format_command
from medallion.project import load_settings
from medallion.redact import redact_command, redact_text
from tests.s3_support import write_overlay

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("clean_medallion_env")
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def _load(tmp_path: Path, overlay: dict, **kw: str) -> object:
    return load_settings(env="bad", conf_dir=write_overlay(tmp_path / "conf", "bad", overlay), **kw)


@pytest.mark.parametrize(("key", "hint"), [
    ("spark.hadoop.fs.s3a.secret.key", "AWS provider chain"),
    ("spark.hadoop.fs.s3a.access.key", "AWS provider chain"),
    ("spark.hadoop.fs.s3a.session.token", "AWS provider chain"),
    ("spark.hadoop.fs.s3a.bucket.lake.secret.key", "AWS provider chain"),
    ("spark.hadoop.javax.jdo.option.ConnectionPassword", "environment variable"),
    ("spark.kafka.sasl.jaas.config", "environment variable"),
    ("spark.authenticate.secret", "environment variable"),
    ("spark.ssl.keyStorePassword", "environment variable"),
    ("spark.hadoop.google.cloud.auth.service.account.credentials", "environment variable"),
])
def test_secret_like_spark_settings_are_refused_without_echo(tmp_path: Path, key: str,
                                                             hint: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {"spark": {"conf": {key: SECRET}}})
    assert error.value.key == f"spark.conf.{key}"
    assert error.value.source.endswith("bad.yaml")
    assert hint in str(error.value)
    assert SECRET not in str(error.value)


def test_settings_that_only_name_credentials_are_accepted(tmp_path: Path) -> None:
    provider = "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider"
    settings = _load(tmp_path, {"spark": {"conf": {
        "spark.hadoop.fs.s3a.aws.credentials.provider": provider,
        "spark.hadoop.hadoop.security.credential.provider.path": "jceks://file/etc/lake.jceks",
        "spark.security.credentials.hive.enabled": "false"}}})
    assert settings.spark.conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == provider  # type: ignore[attr-defined]


@pytest.mark.parametrize(("overlay", "key"), [
    ({"paths": {"lakehouse": f"s3a://AKIAEXAMPLE:{SECRET}@lake/lakehouse"}}, "paths.lakehouse"),
    ({"s3": {"endpoint": f"https://minio:{SECRET}@s3.internal:9000"}}, "s3.endpoint"),
    ({"kafka": {"bootstrap_servers": f"svc:{SECRET}@broker:9092"}}, "kafka.bootstrap_servers"),
    ({"catalog": {"metastore": "external", "metastore_uris": f"thrift://hive:{SECRET}@ms:9083"}},
     "catalog.metastore_uris"),
    ({"spark": {"conf": {"spark.hadoop.javax.jdo.option.ConnectionURL":
                         f"jdbc:postgresql://db/hive?user=hive&password={SECRET}"}}},
     "spark.conf.spark.hadoop.javax.jdo.option.ConnectionURL"),
    ({"spark": {"master": f"spark://admin:{SECRET}@master:7077"}}, "spark.master"),
])
def test_credentials_inside_urls_are_refused_without_echo(tmp_path: Path, overlay: dict,
                                                          key: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, overlay)
    assert error.value.key == key
    assert error.value.source.endswith("bad.yaml")
    assert SECRET not in str(error.value)


def test_credentials_in_a_flag_or_the_environment_name_that_origin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {}, landing=f"s3a://k:{SECRET}@bucket/landing")
    assert (error.value.key, error.value.source) == ("paths.landing", "--landing")
    assert SECRET not in str(error.value)
    monkeypatch.setenv("MEDALLION_KAFKA_BOOTSTRAP", f"u:{SECRET}@broker:9092")
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {})
    assert error.value.source == "$MEDALLION_KAFKA_BOOTSTRAP"
    assert SECRET not in str(error.value)


def test_a_configuration_error_never_prints_a_url_password() -> None:
    error = ConfigError("s3.endpoint", "x.yaml", f"'https://u:{SECRET}@h' is not a URL")
    assert SECRET not in str(error)


def test_submit_cmd_refuses_a_secret_conf_and_prints_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = write_overlay(tmp_path / "conf", "local", {})
    assert main(["submit-cmd", "all", "--conf-dir", str(conf),
                 "--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}"]) == 2
    captured = capsys.readouterr()
    assert "spark.hadoop.fs.s3a.secret.key" in captured.err
    assert SECRET not in captured.out + captured.err


def test_a_printed_command_is_redacted() -> None:
    line = format_command(
        ["spark-submit", "--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}",
         "--conf", f"spark.kafka.sasl.jaas.config=PlainLoginModule required password=\"{SECRET}\";",
         "--conf", "spark.sql.shuffle.partitions=4", "jobs/all.py"],
        {"PYSPARK_PYTHON": "/venv/bin/python", "AWS_SECRET_ACCESS_KEY": SECRET})
    assert SECRET not in line
    assert line.startswith("PYSPARK_PYTHON=/venv/bin/python AWS_SECRET_ACCESS_KEY='***' spark-submit")
    assert "--conf spark.sql.shuffle.partitions=4" in line
    assert "--conf 'spark.hadoop.fs.s3a.secret.key=***'" in line


@pytest.mark.parametrize("text", [
    f"--conf spark.hadoop.fs.s3a.secret.key={SECRET}",
    f"thrift://hive:{SECRET}@metastore:9083",
    f"jdbc:mysql://db/hive?user=hive&password={SECRET}",
    f"svc:{SECRET}@broker:9092,broker2:9092",
    f'{{"fs.s3a.access.key": "{SECRET}"}}',
    f'username="svc" password="{SECRET}";',
    f"AWS_SESSION_TOKEN={SECRET}",
])
def test_redaction_hides_every_form_a_secret_takes(text: str) -> None:
    assert SECRET not in redact_text(text)
    assert SECRET not in redact_command(text)


def test_redaction_keeps_what_is_not_secret() -> None:
    text = ("spark.hadoop.fs.s3a.aws.credentials.provider=DefaultCredentialsProvider "
            "s3a://lake/lakehouse at 10:00:00 kafka.security.truststore_location: /etc/ts.jks")
    assert redact_text(text) == text


def test_every_log_line_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    factory = logging.getLogRecordFactory()
    try:
        configure_logging(verbose=False)
        with caplog.at_level(logging.INFO):
            logging.getLogger("medallion.test").info("starting %s", [
                "spark-submit", "--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}"])
            try:
                raise RuntimeError(f"cannot reach thrift://u:{SECRET}@host:9083")
            except RuntimeError:
                logging.getLogger("medallion.test").exception("failed")
        assert "starting" in caplog.text and "failed" in caplog.text
        assert SECRET not in caplog.text
    finally:
        logging.setLogRecordFactory(factory)


def test_run_job_logs_the_command_redacted(tmp_path: Path) -> None:
    # A stand-in MEDALLION_HOME whose `medallion submit-cmd` prints a command carrying a secret.
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "medallion"
    job = {"lakehouse": str(tmp_path / "lakehouse"), "layers": ["bronze"], "env": {},
           "argv": ["true", "--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}", "--password",
                    SECRET]}
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(job)}\nEOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    script = REPO / "infra" / "scheduling" / "run-job.sh"
    result = subprocess.run([str(script), "all"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "MEDALLION_HOME": str(tmp_path),
                                 "MEDALLION_LOCK_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "medallion all: true --conf 'spark.hadoop.fs.s3a.secret.key=***'" in result.stderr
    assert SECRET not in result.stderr + result.stdout
