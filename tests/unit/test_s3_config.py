"""The typed ``s3`` section, and the S3A / Delta settings the session factory derives from it."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from medallion.config.model import DeltaLogStore, SseAlgorithm
from medallion.errors import ConfigError
from medallion.project import load_settings
from medallion.spark.s3a import hadoop_settings, s3_packages, s3a_conf
from tests.s3_support import write_overlay

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("clean_medallion_env")


def _load(tmp_path: Path, overlay: dict, env: str = "t") -> object:
    return load_settings(env=env, conf_dir=write_overlay(tmp_path / "conf", env, overlay))


def test_defaults_talk_to_aws_with_the_provider_chain(tmp_path: Path) -> None:
    settings = _load(tmp_path, {})
    conf = s3a_conf(settings.s3)  # type: ignore[attr-defined]
    assert conf == {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "spark.hadoop.fs.s3a.path.style.access": "false",
        "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
        "spark.delta.logStore.s3.impl": "io.delta.storage.S3SingleDriverLogStore",
    }
    assert not any("secret" in k or "access.key" in k for k in conf)


def test_endpoint_path_style_region_and_kms(tmp_path: Path) -> None:
    settings = _load(tmp_path, {"s3": {
        "endpoint": "http://127.0.0.1:9000/", "path_style_access": True, "region": "eu-west-1",
        "sse": "SSE-KMS", "kms_key_id": "arn:aws:kms:eu-west-1:111122223333:key/k1"}})
    s3 = settings.s3  # type: ignore[attr-defined]
    assert s3.sse is SseAlgorithm.SSE_KMS
    hadoop = hadoop_settings(s3a_conf(s3))
    assert hadoop["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert hadoop["fs.s3a.connection.ssl.enabled"] == "false"
    assert hadoop["fs.s3a.path.style.access"] == "true"
    assert hadoop["fs.s3a.endpoint.region"] == "eu-west-1"
    assert hadoop["fs.s3a.encryption.algorithm"] == "SSE-KMS"
    assert hadoop["fs.s3a.encryption.key"] == "arn:aws:kms:eu-west-1:111122223333:key/k1"


def test_sse_s3_is_s3as_aes256(tmp_path: Path) -> None:
    """S3A names SSE-S3 "AES256" (``S3AEncryptionMethods``); "SSE-S3" fails every S3A call."""
    s3 = _load(tmp_path, {"s3": {"sse": "SSE-S3"}}).s3  # type: ignore[attr-defined]
    hadoop = hadoop_settings(s3a_conf(s3))
    assert hadoop["fs.s3a.encryption.algorithm"] == "AES256"
    assert "fs.s3a.encryption.key" not in hadoop


def test_dynamodb_log_store_for_several_writers(tmp_path: Path) -> None:
    settings = _load(tmp_path, {"s3": {"delta_log_store": "dynamodb", "dynamodb_table": "commits",
                                       "region": "eu-west-1", "account_id": "111122223333"}})
    s3 = settings.s3  # type: ignore[attr-defined]
    assert s3.delta_log_store is DeltaLogStore.DYNAMODB
    conf = s3a_conf(s3)
    assert conf["spark.delta.logStore.s3a.impl"] == "io.delta.storage.S3DynamoDBLogStore"
    assert conf["spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName"] == "commits"
    assert conf["spark.io.delta.storage.S3DynamoDBLogStore.ddb.region"] == "eu-west-1"
    assert f"io.delta:delta-storage-s3-dynamodb:{version('delta-spark')}" in s3_packages(
        settings)  # type: ignore[arg-type]


def test_hadoop_aws_matches_pysparks_hadoop(tmp_path: Path) -> None:
    import pyspark

    [client] = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    hadoop = client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    settings = _load(tmp_path, {})
    assert s3_packages(settings) == [f"org.apache.hadoop:hadoop-aws:{hadoop}"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {"spark": {"packages": ["org.apache.hadoop:hadoop-aws:3.3.4"]}}, env="old")
    assert "spark.packages" in str(error.value) and "old.yaml" in str(error.value)
    assert f"hadoop-aws:{hadoop}" in str(error.value)


@pytest.mark.parametrize(("overlay", "key"), [
    ({"s3": {"endpoint": "127.0.0.1:9000"}}, "s3.endpoint"),
    ({"s3": {"sse": "AES"}}, "s3.sse"),
    ({"s3": {"sse": "SSE-KMS"}}, "s3.kms_key_id"),
    ({"s3": {"sse": "SSE-S3", "kms_key_id": "k"}}, "s3.kms_key_id"),
    ({"s3": {"path_style_access": "yes"}}, "s3.path_style_access"),
    ({"s3": {"landing_expiry_days": 0}}, "s3.landing_expiry_days"),
    ({"s3": {"access_key": "AKIA..."}}, "s3.access_key"),
    # An id or an alias cannot be named in the IAM policy (the grant would be on every key).
    ({"s3": {"sse": "SSE-KMS", "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab"}}, "s3.kms_key_id"),
    ({"s3": {"sse": "SSE-KMS", "kms_key_id": "alias/lakehouse"}}, "s3.kms_key_id"),
    ({"s3": {"sse": "SSE-KMS", "kms_key_id": "arn:aws:kms:eu-west-1:111122223333:alias/lake"}},
     "s3.kms_key_id"),
    # The commit table's ARN in the policy needs its region and account.
    ({"s3": {"delta_log_store": "dynamodb", "region": "eu-west-1"}}, "s3.account_id"),
    ({"s3": {"delta_log_store": "dynamodb", "account_id": "111122223333"}}, "s3.dynamodb_region"),
    ({"s3": {"account_id": 111122223333}}, "s3.account_id"),
])
def test_bad_s3_settings_name_the_key_and_file(tmp_path: Path, overlay: dict, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, overlay, env="bad")
    assert error.value.key == key
    assert error.value.source.endswith("bad.yaml")


def test_endpoint_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDALLION_S3_ENDPOINT", "http://127.0.0.1:1234")
    assert _load(tmp_path, {}).s3.endpoint == "http://127.0.0.1:1234"  # type: ignore[attr-defined]


def test_dev_and_prod_overlays_load() -> None:
    for env in ("dev", "prod"):
        settings = load_settings(env=env, conf_dir=REPO / "conf")
        assert settings.paths.lakehouse.startswith("s3a://")
