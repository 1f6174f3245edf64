"""Airflow DAG example: bronze -> silver -> gold through spark-submit, every 10 minutes.

Each task asks ``medallion submit-cmd`` for the exact spark-submit command line of its job (Delta
package, Spark settings, entry point, environment) and runs it, so the DAG never repeats the
configuration. ``max_active_runs=1``: a streaming checkpoint must have one writer at a time.
Put this file in Airflow's ``dags/`` folder; set ``MEDALLION_HOME`` and ``MEDALLION_ENV`` in the
workers' environment (credentials come from the cluster's instance role, never from here).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

RUN_JOB = "${MEDALLION_HOME:-/opt/medallion}/infra/scheduling/run-job.sh"

with DAG(
    dag_id="medallion_events",
    description="bronze -> silver -> gold of the events pipeline, available-now, via spark-submit",
    schedule=timedelta(minutes=10),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["medallion"],
) as dag:
    layers = [
        BashOperator(task_id=layer, bash_command=f"{RUN_JOB} {layer} --master yarn ")
        for layer in ("bronze", "silver", "gold")
    ]
    layers[0] >> layers[1] >> layers[2]

with DAG(
    dag_id="medallion_maintenance",
    description="OPTIMIZE with Z-ORDER and VACUUM of every table, nightly",
    schedule="30 2 * * *",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["medallion"],
) as maintenance_dag:
    BashOperator(
        task_id="maintain",
        bash_command="cd ${MEDALLION_HOME:-/opt/medallion} && .venv/bin/medallion maintain ",
    )
