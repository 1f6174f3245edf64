"""medallion on Airflow 3: a DAG per declared pipeline, each run spark-submits that pipeline's
``all --maintain`` job every 10 minutes; one pool slot per lakehouse keeps one writer at a time.

What each DAG runs is what ``medallion submit-cmd all --maintain --pipeline NAME --format json``
gives, part for part, in the Spark provider's ``SparkSubmitOperator``: the entry point
``jobs/all.py`` with the environment, configuration folder and paths resolved, the Delta package,
every Spark setting the session factory would add, and ``PYSPARK_PYTHON`` set to the project's
own Python. The job processes what is new in bronze, silver and gold, then, in the same driver,
OPTIMIZE and VACUUM of the pipeline's tables whose maintenance is due (``maintenance.every``): no
maintenance DAG writes beside the runs.

One writer per lakehouse. The DAGs share the pool ``medallion``, of one slot (made once:
``airflow pools set medallion 1 "medallion: one job writes the lakehouse at a time"``; until it
exists, no task runs, and the scheduler says why), so their jobs take turns whichever workers run
them; ``max_active_runs=1`` keeps each pipeline's runs apart, since a streaming
checkpoint takes one query at a time. medallion's own locks hold on one host only, and Airflow
may start two tasks on two workers: the pool is what keeps them apart. A DAG per pipeline, rather
than one DAG chaining them, lets a pipeline that fails or is paused leave the others running on
schedule, each with its own history; the pool still makes them take turns. This file schedules
the lakehouse of one environment: one Airflow per lakehouse.

Where the DAG runs. Each parse runs ``$MEDALLION_HOME/.venv/bin/medallion submit-cmd`` once, for
every pipeline at once (about 1 s), rather than importing medallion: Airflow's environment cannot
hold medallion's dependencies (pandas 3 beside pandas 2, the provider's pyspark-client beside
pyspark 4.0), and the workers need that venv anyway: its ``spark-submit`` and Python run the job.
The dag-processor, and the workers (which parse the file again before a task), need:

- ``MEDALLION_HOME``: the project (with its ``.venv``), at the same path on each of them (default:
  the checkout this file lies in, when Airflow's ``dags/`` holds a link to it);
- ``MEDALLION_ENV`` (and whatever that environment's configuration reads from the environment):
  read at parse time, and resolved into each job's arguments;
- the Spark connection ``medallion_spark``, whose host gives the master (``spark://host:7077``,
  ``yarn``, ``k8s://...``; ``spark.master`` of conf/ is not used) and whose extra may set
  ``deploy-mode``: ``client``, the default, runs the driver on the worker (on a standalone
  cluster it is the only one: the provider passes no environment to a driver it deploys there);
- ``MEDALLION_SUBMIT_OPTIONS``: more ``submit-cmd`` options, e.g. ``--wheel <wheel> --conf k=v``.

A configuration that does not load shows as this file's import error, with medallion's message.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

HOME = Path(os.environ.get("MEDALLION_HOME") or Path(__file__).resolve().parents[2])
POOL = "medallion"
SPARK_CONN = "medallion_spark"
SUBMIT_OPTIONS = shlex.split(os.environ.get("MEDALLION_SUBMIT_OPTIONS", ""))


def pipeline_jobs() -> dict[str, dict[str, Any]]:
    """Each declared pipeline's ``all --maintain`` job, by pipeline, in ``submit-cmd --format
    json``'s parts: one process for all of them, within Airflow's import timeout."""
    medallion = HOME / ".venv" / "bin" / "medallion"
    if not medallion.is_file():
        raise FileNotFoundError(f"{medallion} does not exist: set MEDALLION_HOME to the project "
                                "folder holding .venv (make setup)")
    command = [str(medallion), "submit-cmd", "all", "--maintain", "--per-pipeline",
               "--format", "json", *SUBMIT_OPTIONS]
    done = subprocess.run(command, cwd=HOME, capture_output=True, text=True, timeout=25,
                          check=False)
    if done.returncode != 0:  # medallion's message, which names no secret (the options might)
        raise RuntimeError(f"{medallion} submit-cmd exited {done.returncode}: {done.stderr.strip()}")
    jobs: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return jobs


for pipeline, job in pipeline_jobs().items():
    with DAG(
        dag_id=f"medallion_{pipeline}",
        description=f"medallion's {pipeline} pipeline: bronze, silver, gold, then the maintenance "
                    "that is due, in one spark-submit",
        schedule=timedelta(minutes=10),
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
        tags=["medallion"],
    ):
        SparkSubmitOperator(
            task_id="all",
            pool=POOL,
            conn_id=SPARK_CONN,
            spark_binary=job["spark_submit"],
            application=job["application"],
            application_args=job["application_args"],
            conf=job["conf"],
            packages=job["packages"],
            py_files=job["py_files"],
            name=job["name"],
            env_vars=job["env"],
        )
