"""Run by tests/operations/test_airflow_dag.py with the Python of ``.airflow-venv`` (Airflow 3 and
its Spark provider, ``make airflow-venv``), never with the project's: parse a DAG folder as
Airflow's dag-processor does and write what it holds as JSON.

    .airflow-venv/bin/python tests/operations/airflow_dagbag.py DAGS_FOLDER OUTPUT.json

For each DAG, what the scheduler sees (its serialized form, read back: schedule, runs, each task's
pool, retries and neighbours) and what a worker would run (each SparkSubmitOperator's arguments,
and the spark-submit command line and environment its hook builds against the Spark connection
of the environment). The hook's builder is the provider's private API, pinned with it in
infra/scheduling/airflow-requirements.txt.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from airflow.dag_processing.dagbag import BundleDagBag
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.serialization.serialized_objects import DagSerialization


def scheduled(dag: Any) -> dict[str, Any]:
    """What the scheduler reads of a DAG: its serialized form, deserialized."""
    seen = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    return {
        "schedule_seconds": seen.timetable.serialize()["delta"],
        "timetable": type(seen.timetable).__name__,
        "max_active_runs": seen.max_active_runs,
        "catchup": seen.catchup,
        "tags": sorted(seen.tags),
        "tasks": {task.task_id: {
            "operator": task.task_type,
            "pool": task.pool,
            "retries": task.retries,
            "retry_delay_seconds": task.retry_delay.total_seconds(),
            "upstream": sorted(task.upstream_task_ids),
            "downstream": sorted(task.downstream_task_ids),
        } for task in seen.tasks},
    }


def submitted(task: SparkSubmitOperator) -> dict[str, Any]:
    """A SparkSubmitOperator's arguments, and the command line and environment its hook runs."""
    hook = task._get_hook()
    command = hook._build_spark_submit_command(task.application)
    return {
        "conn_id": task._conn_id, "spark_binary": task._spark_binary,
        "application": task.application, "application_args": task.application_args,
        "conf": task.conf, "packages": task.packages, "py_files": task.py_files,
        "name": task.name, "env_vars": task.env_vars,
        "command": command, "command_env": hook._env,
    }


def main(folder: str, output: str) -> None:
    started = time.monotonic()
    bag = BundleDagBag(dag_folder=folder, bundle_path=Path(folder), bundle_name="dags-folder",
                       load_op_links=False)
    parse_seconds = time.monotonic() - started
    report: dict[str, Any] = {"import_errors": dict(bag.import_errors),
                              "parse_seconds": parse_seconds, "dags": {}}
    for dag in bag.dags.values():
        entry = scheduled(dag)
        for task in dag.tasks:
            if isinstance(task, SparkSubmitOperator):
                entry["tasks"][task.task_id]["spark_submit"] = submitted(task)
        report["dags"][dag.dag_id] = entry
    Path(output).write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:3])
