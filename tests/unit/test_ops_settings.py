"""Configuration of state store bounds and maintenance, and the spark-submit command line."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta, timezone
from importlib.metadata import version
from pathlib import Path

import pytest

from medallion.cli.main import main
from medallion.errors import ConfigError
from medallion.ops.maintenance import due, maintain_problem
from medallion.ops.submit import format_command, submit_argv, submit_command
from medallion.project import load_settings
from medallion.spark.session import DELTA_CONF, counts_state_rows, session_conf
from tests.conf_support import copy_base_conf
from tests.conftest import REPO

# Delta's jar for the installed Spark line (tests/unit/test_jvm_coordinates.py checks the name)
DELTA_JAR = (f"io.delta:delta-spark_{'.'.join(version('pyspark').split('.')[:2])}_2.13:"
             f"{version('delta-spark')}")


def conf_dir(tmp_path: Path, overlay: str) -> Path:
    folder = tmp_path / "conf"
    copy_base_conf(folder)
    (folder / "local.yaml").write_text(overlay)
    return folder


def test_defaults_of_the_new_sections() -> None:
    settings = load_settings(env="local", conf_dir=REPO / "conf", lakehouse="/tmp/lh")
    assert settings.state_store.max_memory_mb == 256
    assert settings.state_store.write_buffer_ratio == 0.5
    assert settings.maintenance.vacuum_retention_hours == 168
    assert settings.maintenance.every_seconds == 86400
    assert settings.maintenance.zorder["silver/events"] == ("user_id", "timestamp")


def test_zorder_is_declared_with_any_table(tmp_path: Path) -> None:
    # silver/order_lines is the orders pipeline's: nothing of the engine knows it by name.
    folder = conf_dir(tmp_path, "")
    (folder / "pipelines" / "orders.local.yaml").write_text(
        "silver:\n  order_lines:\n    zorder: [store_id, ordered_at]\n")
    settings = load_settings(env="local", conf_dir=folder)
    assert settings.maintenance.zorder["silver/order_lines"] == ("store_id", "ordered_at")
    assert settings.maintenance.zorder["gold/user_activity_sliding"] == ("user_id",)


def test_zorder_of_an_unknown_column_names_the_key_and_the_file(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "")
    overlay = folder / "pipelines" / "orders.local.yaml"
    overlay.write_text("gold:\n  store_sessions:\n    zorder: [nope]\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=folder)
    assert error.value.key == "gold.store_sessions.zorder"
    assert error.value.source == str(overlay)


def test_cluster_by_is_declared_with_any_table(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "")
    (folder / "pipelines" / "orders.local.yaml").write_text(
        "gold:\n  store_sessions:\n    cluster_by: [store_id, session_start]\n")
    settings = load_settings(env="local", conf_dir=folder)
    assert settings.maintenance.cluster_by == {"gold/store_sessions": ("store_id", "session_start")}


@pytest.mark.parametrize(("declared", "said"), [
    ("cluster_by: [nope]", "unknown column 'nope'"),
    ("cluster_by: [store_id]\n    zorder: [city]", "either clustered (cluster_by) or Z-ordered"),
    ("cluster_by: [store_id, city, session_start, session_end, lines]",
     "5 columns; Delta clusters by at most 4"),
    ("cluster_by: [city, city]", "names a column twice"),
])
def test_a_cluster_by_delta_would_refuse_is_refused_naming_the_key_and_the_file(
        tmp_path: Path, declared: str, said: str) -> None:
    folder = conf_dir(tmp_path, "")
    overlay = folder / "pipelines" / "orders.local.yaml"
    overlay.write_text(f"gold:\n  store_sessions:\n    {declared}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=folder)
    assert error.value.key == "gold.store_sessions.cluster_by"
    assert error.value.source == str(overlay)
    assert said in str(error.value)


def test_a_cluster_by_column_of_a_type_delta_keeps_no_statistics_of_is_refused(
        tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "")
    overlay = folder / "pipelines" / "orders.local.yaml"
    overlay.write_text("silver:\n  order_lines:\n    columns:\n      promo: {type: BOOLEAN, "
                       "expr: \"false\"}\n    cluster_by: [promo]\n")
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=folder)
    assert error.value.key == "silver.order_lines.cluster_by"
    assert "column promo is BOOLEAN; Delta clusters by columns of type" in str(error.value)


def test_zorder_in_the_settings_is_an_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf_dir(
            tmp_path, "maintenance:\n  zorder:\n    silver/events: [user_id]\n"))
    assert error.value.key == "maintenance.zorder"
    assert "unknown key (known keys: every, small_file_mb, vacuum_retention)" in str(error.value)


@pytest.mark.parametrize(("overlay", "key"), [
    ("state_store:\n  max_memory_mb: 0\n", "state_store.max_memory_mb"),
    ("state_store:\n  write_buffer_ratio: 1.5\n", "state_store.write_buffer_ratio"),
    ("state_store:\n  block_cache: 3\n", "state_store.block_cache"),
    ("state_store:\n  count_rows: yes please\n", "state_store.count_rows"),
    ("maintenance:\n  vacuum_retention: 90 minutes\n", "maintenance.vacuum_retention"),
    ("maintenance:\n  vacuum_retention: soon\n", "maintenance.vacuum_retention"),
    ("maintenance:\n  zorder:\n    gold/nope: [user_id]\n", "maintenance.zorder"),
    ("maintenance:\n  every: 0 seconds\n", "maintenance.every"),
    ("maintenance:\n  every: nightly\n", "maintenance.every"),
])
def test_bad_values_name_the_key_and_the_file(tmp_path: Path, overlay: str, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(env="local", conf_dir=conf_dir(tmp_path, overlay))
    assert error.value.key == key
    assert error.value.source.endswith("local.yaml")


@pytest.mark.parametrize(("overlay", "counted"), [
    ("", False),  # the default: RocksDB, not counting
    ("state_store:\n  count_rows: true\n", True),
    ("spark:\n  conf:\n    spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows: true\n", True),
    ("state_store:\n  count_rows: true\nspark:\n  conf:\n"
     "    spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows: false\n", False),
    ("spark:\n  conf:\n    spark.sql.streaming.stateStore.providerClass: "
     "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider\n", True),
])
def test_whether_the_state_stores_count_their_rows(tmp_path: Path, overlay: str, counted: bool) -> None:
    """What the session is given decides (``spark.conf`` is applied over ``state_store``); the
    HDFS-backed provider always counts."""
    settings = load_settings(env="local", conf_dir=conf_dir(tmp_path, overlay))
    assert counts_state_rows(settings) is counted
    conf = session_conf(settings)
    if "RocksDB" in conf["spark.sql.streaming.stateStore.providerClass"]:
        assert conf["spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"] == \
            str(counted).lower()


def test_submit_command_carries_the_packages_the_settings_and_the_entry_point(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, "spark:\n  packages: [org.example:extra:1.0]\n  conf:\n"
                                "    spark.executor.cores: 2\nstate_store:\n  max_memory_mb: 64\n")
    settings = load_settings(env="local", conf_dir=folder, landing="/data/in", lakehouse="/data/lh")
    argv = submit_argv(settings, "silver", master="spark://127.0.0.1:7077", wheel="dist/m.whl",
                       spark_submit="spark-submit", extra_conf={"spark.executor.memory": "1g"},
                       pipelines=["events"])
    assert argv[:3] == ["spark-submit", "--master", "spark://127.0.0.1:7077"]
    packages = argv[argv.index("--packages") + 1].split(",")
    assert packages[:2] == [DELTA_JAR, "org.example:extra:1.0"]
    confs = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    assert {k: confs[k] for k in DELTA_CONF} == DELTA_CONF
    assert confs["spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"] == "64"
    assert confs["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "false"
    assert confs["spark.executor.cores"] == "2" and confs["spark.executor.memory"] == "1g"
    assert argv[argv.index("--py-files") + 1] == str(Path("dist/m.whl").resolve())
    entry = argv.index(str(REPO / "jobs" / "silver.py"))
    # The job loads the configuration folder these settings came from (not the default one,
    # whatever --conf-dir said), and runs the pipelines named.
    assert argv[entry + 1:] == ["--env", "local", "--conf-dir", str(folder.resolve()),
                                "--landing", "/data/in", "--lakehouse", "/data/lh",
                                "--pipeline", "events"]
    line = format_command(argv, {"PYSPARK_PYTHON": "/opt/py thon"})
    assert shlex.split(line) == ["PYSPARK_PYTHON=/opt/py thon", *argv]
    with pytest.raises(ValueError, match="no job"):
        submit_argv(settings, "platinum")


@pytest.mark.parametrize(("overlay", "tasks"), [
    ("", "8"),  # local[2], two shuffle partitions
    ("spark:\n  shuffle_partitions: 64\n", "256"),
    ("spark:\n  conf:\n    spark.sql.sources.parallelPartitionDiscovery.parallelism: 3\n", "3"),
])
def test_file_listings_are_as_wide_as_the_shuffles_unless_the_configuration_says(
        tmp_path: Path, overlay: str, tasks: str) -> None:
    """Spark's default of 10,000 tasks per listing made VACUUM of a small table take 20-30 s."""
    settings = load_settings(env="local", conf_dir=conf_dir(tmp_path, overlay))
    assert session_conf(settings)["spark.sql.sources.parallelPartitionDiscovery.parallelism"] == tasks


def test_submit_json_gives_the_parts_a_scheduler_takes_and_the_same_command(tmp_path: Path) -> None:
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing="/data/in",
                             lakehouse="/data/lh")
    command = submit_command(settings, "all", spark_submit="spark-submit", maintain=True)
    document = json.loads(command.as_json({"PYSPARK_PYTHON": "/opt/py"}))
    assert document["application"] == str(REPO / "jobs" / "all.py")
    assert document["application_args"][-1] == "--maintain"
    assert document["application_args"][:2] == ["--env", "local"]
    assert document["packages"].split(",")[0] == DELTA_JAR
    assert {k: document["conf"][k] for k in DELTA_CONF} == DELTA_CONF
    assert document["env"] == {"PYSPARK_PYTHON": "/opt/py"}
    assert (document["lakehouse"], document["layers"]) == ("/data/lh",
                                                            ["bronze", "silver", "gold"])
    # the same spark-submit as the shell form, part for part
    argv = document["argv"]
    assert argv == submit_argv(settings, "all", spark_submit="spark-submit", maintain=True)
    assert argv[argv.index("--packages") + 1] == document["packages"]
    assert argv[-len(document["application_args"]) - 1:] == [document["application"],
                                                             *document["application_args"]]
    maintenance = submit_command(settings, "maintain")
    assert maintenance.application.endswith("/jobs/maintain.py") and maintenance.layers == (
        "bronze", "silver", "gold")
    assert Path(maintenance.application).is_file()
    with pytest.raises(ValueError, match="--maintain goes with the all job"):
        submit_command(settings, "silver", maintain=True)


def test_per_pipeline_gives_each_pipeline_the_command_its_own_submit_cmd_prints(
        capsys: pytest.CaptureFixture[str]) -> None:
    """What a scheduler asks once (infra/scheduling/medallion_dag.py) is, pipeline by pipeline,
    what ``submit-cmd all --maintain --pipeline NAME`` prints."""
    common = ["all", "--maintain", "--conf-dir", str(REPO / "conf"), "--landing", "/data/in",
              "--lakehouse", "/data/lh", "--spark-submit", "spark-submit", "--conf", "spark.a=b"]

    def printed(*options: str) -> str:
        assert main(["submit-cmd", *common, *options]) == 0
        return capsys.readouterr().out

    jobs = json.loads(printed("--per-pipeline", "--format", "json"))
    assert list(jobs) == ["accounts", "events", "orders"]  # conf/pipelines/*.yaml, in name order
    for name, job in jobs.items():
        assert job == json.loads(printed("--pipeline", name, "--format", "json"))
        assert job["application_args"][-3:] == ["--pipeline", name, "--maintain"]
        assert job["conf"]["spark.a"] == "b"
    assert printed("--per-pipeline").splitlines() == [
        printed("--pipeline", name).strip() for name in ("accounts", "events", "orders")]
    only = json.loads(printed("--per-pipeline", "--pipeline", "orders", "--format", "json"))
    assert list(only) == ["orders"] and only["orders"] == jobs["orders"]


def test_maintenance_is_due_when_never_done_or_its_interval_has_passed() -> None:
    now = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
    day = timedelta(days=1)
    assert due({"silver/a": None, "gold/b": now - day, "gold/c": now - day + timedelta(seconds=1),
                "bronze/d": now - 3 * day}, now, day) == ["silver/a", "gold/b", "bronze/d"]
    assert due({}, now, day) == []


@pytest.mark.parametrize(("job", "overlay", "said"), [
    ("all", "", None),
    ("silver", "", "goes with `all` (not silver)"),
    ("all", "streaming:\n  trigger: processing-time=1 minute\n", "does not end"),
    ("all", "maintenance:\n  vacuum_retention: 24 hours\n", "keeps at least 7 days"),
])
def test_maintenance_after_the_layers_is_refused_where_it_cannot_be_safe(
        tmp_path: Path, job: str, overlay: str, said: str | None) -> None:
    settings = load_settings(env="local", conf_dir=conf_dir(tmp_path, overlay))
    problem = maintain_problem(job, settings)
    assert problem is None if said is None else said in (problem or ""), problem
