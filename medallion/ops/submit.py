"""``medallion submit-cmd``: the exact spark-submit command line that runs a job.

The command carries everything the session factory would otherwise add (Delta jar and extra
packages, Delta's extension and catalog, the state store and its bounds, shuffle partitions, the
configured Spark settings), so the job behaves the same under spark-submit on a cluster as under
``medallion run``; and it passes the resolved environment, configuration folder and paths to the
job's entry point.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from medallion.project import Settings
from medallion.redact import quote_command, redact_argv
from medallion.spark.packages import jvm_packages, resolution_conf
from medallion.spark.session import BASE_CONF, DELTA_CONF, state_store_conf

JOBS = ("bronze", "silver", "gold", "all")
DEFAULT_JOBS_DIR = Path(__file__).resolve().parents[2] / "jobs"


def submit_argv(settings: Settings, job: str, *, master: str | None = None,
                wheel: str | None = None, jobs_dir: str | Path | None = None,
                spark_submit: str | None = None, extra_conf: Mapping[str, str] | None = None,
                trigger: str | None = None, pipelines: Sequence[str] = ()) -> list[str]:
    """The spark-submit argument vector running ``jobs/<job>.py`` with ``settings``.

    ``master`` overrides ``spark.master`` (which may be null, for a cluster manager's default);
    ``wheel`` ships the package built by ``make wheel`` with ``--py-files``; ``pipelines``
    narrows the job to those declared pipelines (``run --pipeline``). The job loads the
    configuration folder the settings came from, wherever it is started.
    """
    if job not in JOBS:
        raise ValueError(f"no job {job!r} (jobs: {', '.join(JOBS)})")
    entry = Path(jobs_dir or DEFAULT_JOBS_DIR) / f"{job}.py"
    argv = [spark_submit or str(Path(sys.executable).parent / "spark-submit")]
    chosen_master = master or settings.spark.master
    if chosen_master:
        argv += ["--master", chosen_master]
    argv += ["--name", f"{settings.spark.app_name}-{job}",
             "--packages", ",".join(jvm_packages(settings))]
    conf = {
        **resolution_conf(),
        **BASE_CONF,
        **state_store_conf(settings),
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.sql.warehouse.dir": f"{settings.paths.lakehouse}/_catalog",
        **settings.spark.conf,
        **DELTA_CONF,
        **(extra_conf or {}),
    }
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    if wheel:
        argv += ["--py-files", str(Path(wheel).resolve())]
    argv += [str(entry), "--env", settings.env, "--conf-dir", settings.conf_dir,
             "--landing", settings.paths.landing, "--lakehouse", settings.paths.lakehouse]
    if trigger:
        argv += ["--trigger", trigger]
    for name in pipelines:
        argv += ["--pipeline", name]
    return argv


def submit_env(python: str | None = None) -> dict[str, str]:
    """Environment spark-submit needs: the Python that has the package and its dependencies."""
    interpreter = python or sys.executable
    return {"PYSPARK_PYTHON": interpreter, "PYSPARK_DRIVER_PYTHON": interpreter}


def format_command(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """One shell line: ``VAR=value ... spark-submit ...``, quoted for a POSIX shell, secrets
    redacted.

    Secret-like settings are refused before they get here (configuration and ``--conf``), so a
    valid command has nothing to redact; should one slip through, the printed line shows ``***``
    (and the job fails on it) rather than putting the secret in a terminal, a cron log or ``ps``.
    """
    return quote_command(redact_argv([*(f"{key}={value}" for key, value in env.items()), *argv]))
