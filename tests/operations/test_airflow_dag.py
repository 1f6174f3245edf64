"""infra/scheduling/medallion_dag.py in a real Airflow 3: its DAGs, and what they would submit.

Airflow and its Spark provider live in ``.airflow-venv`` (``make airflow-venv``; ``make test``
builds it first), apart from the project's venv; the DAG folder is parsed there in a process of
its own (tests/operations/airflow_dagbag.py), as Airflow's dag-processor parses it, the project
being this checkout. What each DAG's task would run is compared with what the real
``medallion submit-cmd all --maintain --pipeline NAME --format json`` prints for that pipeline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import REPO

AIRFLOW_PYTHON = REPO / ".airflow-venv" / "bin" / "python"
DAG_FILE = REPO / "infra" / "scheduling" / "medallion_dag.py"
DAGBAG = Path(__file__).with_name("airflow_dagbag.py")
MEDALLION = REPO / ".venv" / "bin" / "medallion"  # the one the DAG calls: $MEDALLION_HOME/.venv
MASTER = "spark://127.0.0.1:7077"  # the Spark connection's: only written into command lines here
WHEEL = "/opt/wheels/medallion-0.1.0-py3-none-any.whl"
SUBMIT_OPTIONS = f"--conf spark.executor.memory=3g --wheel {WHEEL}"


def environment(tmp_path: Path, **medallion: str) -> dict[str, str]:
    """This process's environment without its Airflow and medallion settings, then a fresh
    ``AIRFLOW_HOME``, the Spark connection, and the ``MEDALLION_*`` given."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AIRFLOW", "MEDALLION_"))}
    return {**env, "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_MEDALLION_SPARK": MASTER, **medallion}


def parse_dags(tmp_path: Path, env: dict[str, str], *, link: bool = False) -> dict[str, Any]:
    """The DAG file, put into a DAG folder as a user installs it (linked, or copied), parsed by
    Airflow."""
    assert AIRFLOW_PYTHON.is_file(), "no Airflow venv: `make airflow-venv` builds it"
    dags = tmp_path / "dags"
    dags.mkdir(exist_ok=True)
    if link:  # docs/operations.md's way: the project is then the checkout the link leads to
        (dags / DAG_FILE.name).symlink_to(DAG_FILE)
    else:
        shutil.copy(DAG_FILE, dags / DAG_FILE.name)
    output = tmp_path / "dagbag.json"
    done = subprocess.run([str(AIRFLOW_PYTHON), str(DAGBAG), str(dags), str(output)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(output.read_text())
    return report


def submit_cmd(env: dict[str, str], pipeline: str) -> dict[str, Any]:
    """What the real ``medallion submit-cmd`` gives for one pipeline's scheduled job."""
    done = subprocess.run(
        [str(MEDALLION), "submit-cmd", "all", "--maintain", "--pipeline", pipeline,
         "--format", "json", *SUBMIT_OPTIONS.split()],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    job: dict[str, Any] = json.loads(done.stdout)
    return job


def options(argv: list[str]) -> tuple[str, list[tuple[str, str]], list[str]]:
    """A spark-submit argument vector as (program, sorted option pairs, application and its
    arguments): the provider orders the options its own way."""
    pairs = []
    rest = argv[1:]
    while rest[0].startswith("--"):
        pairs.append((rest[0], rest[1]))
        rest = rest[2:]
    return argv[0], sorted(pairs), rest


def test_each_declared_pipeline_has_a_dag_submitting_its_all_maintain_job(tmp_path: Path) -> None:
    env = environment(tmp_path, MEDALLION_ENV="local",
                      MEDALLION_LAKEHOUSE=str(tmp_path / "lakehouse"),
                      MEDALLION_LANDING=str(tmp_path / "landing"),
                      MEDALLION_SUBMIT_OPTIONS=SUBMIT_OPTIONS)
    report = parse_dags(tmp_path, env, link=True)  # no MEDALLION_HOME: the link's checkout
    assert report["import_errors"] == {}
    # conf/pipelines/accounts.yaml, events.yaml and orders.yaml
    assert sorted(report["dags"]) == ["medallion_accounts", "medallion_events", "medallion_orders"]
    # One call of `medallion submit-cmd` per parse (about 1 s; Airflow parses every 30 s and
    # gives up on a file after 30 s by default).
    assert report["parse_seconds"] < 10, report["parse_seconds"]
    for pipeline in ("accounts", "events", "orders"):
        dag = report["dags"][f"medallion_{pipeline}"]
        assert (dag["timetable"], dag["schedule_seconds"]) == ("DeltaTriggerTimetable", 600)
        assert (dag["max_active_runs"], dag["catchup"], dag["tags"]) == (1, False, ["medallion"])
        assert list(dag["tasks"]) == ["all"]
        task = dag["tasks"]["all"]
        submitted = task.pop("spark_submit")
        # one task, alone in the lakehouse's one-slot pool: one writer at a time across DAGs
        assert task == {"operator": "SparkSubmitOperator", "pool": "medallion", "retries": 2,
                        "retry_delay_seconds": 120.0, "upstream": [], "downstream": []}

        job = submit_cmd(env, pipeline)
        # the environment and the options reached the job (what is compared below is not empty)
        assert job["lakehouse"] == str(tmp_path / "lakehouse")
        assert job["application_args"][-3:] == ["--pipeline", pipeline, "--maintain"]
        assert (job["conf"]["spark.executor.memory"], job["py_files"]) == ("3g", WHEEL)
        assert submitted.pop("conn_id") == "medallion_spark"
        command, command_env = submitted.pop("command"), submitted.pop("command_env")
        assert submitted == {
            "spark_binary": job["spark_submit"], "application": job["application"],
            "application_args": job["application_args"], "conf": job["conf"],
            "packages": job["packages"], "py_files": job["py_files"], "name": job["name"],
            "env_vars": job["env"]}
        # The command line Airflow's worker would run is submit-cmd's, with the connection's
        # master in place of conf/'s spark.master, in the environment submit-cmd names.
        program, pairs, application = options(command)
        expected_program, expected_pairs, expected_application = options(job["argv"])
        assert ("--master", MASTER) in pairs and ("--master", job["master"]) in expected_pairs
        assert program == expected_program == job["spark_submit"]
        assert [p for p in pairs if p[0] != "--master"] == [
            p for p in expected_pairs if p[0] != "--master"]
        assert application == expected_application
        assert command_env == job["env"]


def test_a_configuration_that_does_not_load_is_the_dag_files_import_error(tmp_path: Path) -> None:
    secret = "Do-not-show-me-1234"
    report = parse_dags(tmp_path, environment(
        tmp_path, MEDALLION_HOME=str(REPO), MEDALLION_ENV="nosuchenv",
        MEDALLION_SUBMIT_OPTIONS=f"--conf spark.hadoop.fs.s3a.secret.key={secret}"))
    assert report["dags"] == {}
    [(path, error)] = report["import_errors"].items()
    assert path.endswith("medallion_dag.py")
    assert "no overlay for environment 'nosuchenv'" in error, error
    assert secret not in error  # Airflow shows import errors to every user of its UI


def test_without_the_project_venv_the_import_error_says_where_it_looked(tmp_path: Path) -> None:
    home = tmp_path / "not-medallion"
    home.mkdir()
    report = parse_dags(tmp_path, environment(tmp_path, MEDALLION_HOME=str(home)))
    assert report["dags"] == {}
    [error] = report["import_errors"].values()
    assert f"{home}/.venv/bin/medallion does not exist: set MEDALLION_HOME" in error, error


def test_options_reads_a_command_line() -> None:
    argv = ["spark-submit", "--name", "n", "--conf", "a=b", "app.py", "--x"]
    assert options(argv) == ("spark-submit", [("--conf", "a=b"), ("--name", "n")], ["app.py", "--x"])
