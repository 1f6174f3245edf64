"""``medallion submit-cmd``: the exact spark-submit command line that runs a job.

The command carries everything the session factory would otherwise add (Delta jar and extra
packages, Delta's extension and catalog, the state store and its bounds, shuffle partitions, the
configured Spark settings, the OpenLineage listener when lineage is on), so the job behaves the
same under spark-submit on a cluster as under ``medallion run``; and it passes the resolved
environment, configuration folder and paths to the job's entry point.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medallion.project import Settings
from medallion.redact import quote_command, redact_argv
from medallion.spark.lineage import lineage_conf
from medallion.spark.packages import jvm_packages, resolution_conf
from medallion.spark.session import BASE_CONF, DELTA_CONF, state_store_conf

JOBS = ("bronze", "silver", "gold", "all", "maintain")
DEFAULT_JOBS_DIR = Path(__file__).resolve().parents[2] / "jobs"

# The layers each job writes: a job holds their locks (``medallion.io.locks.hold_writers``, and
# ``infra/scheduling/run-job.sh`` per lakehouse), so two jobs writing one table never overlap.
JOB_LAYERS = {"bronze": ("bronze",), "silver": ("silver",), "gold": ("gold",),
              "all": ("bronze", "silver", "gold"), "maintain": ("bronze", "silver", "gold")}


@dataclass(frozen=True)
class SubmitCommand:
    """One job's spark-submit: what a scheduler needs, field by field (Airflow's
    ``SparkSubmitOperator`` takes them so), and as one argument vector."""

    spark_submit: str
    master: str | None
    name: str
    packages: tuple[str, ...]
    conf: Mapping[str, str]
    py_files: str | None
    application: str
    application_args: tuple[str, ...]
    lakehouse: str
    layers: tuple[str, ...]

    def argv(self) -> list[str]:
        argv = [self.spark_submit]
        if self.master:
            argv += ["--master", self.master]
        argv += ["--name", self.name, "--packages", ",".join(self.packages)]
        for key, value in self.conf.items():
            argv += ["--conf", f"{key}={value}"]
        if self.py_files:
            argv += ["--py-files", self.py_files]
        return [*argv, self.application, *self.application_args]

    def as_dict(self, env: Mapping[str, str]) -> dict[str, Any]:
        """The fields, the environment, and the argument vector, for tools (secrets redacted as
        in :func:`format_command`)."""
        return {
            "application": self.application, "application_args": list(self.application_args),
            "name": self.name, "master": self.master, "packages": ",".join(self.packages),
            "conf": dict(self.conf), "py_files": self.py_files, "spark_submit": self.spark_submit,
            "env": dict(env), "lakehouse": self.lakehouse, "layers": list(self.layers),
            "argv": redact_argv(self.argv())}

    def as_json(self, env: Mapping[str, str]) -> str:
        """:meth:`as_dict` as a JSON document."""
        return json.dumps(self.as_dict(env), indent=1)


def submit_command(settings: Settings, job: str, *, master: str | None = None,
                   wheel: str | None = None, jobs_dir: str | Path | None = None,
                   spark_submit: str | None = None, extra_conf: Mapping[str, str] | None = None,
                   trigger: str | None = None, pipelines: Sequence[str] = (),
                   maintain: bool = False) -> SubmitCommand:
    """The spark-submit running ``jobs/<job>.py`` with ``settings``.

    ``master`` overrides ``spark.master`` (which may be null, for a cluster manager's default);
    ``wheel`` ships the package built by ``make wheel`` with ``--py-files``; ``pipelines``
    narrows the job to those declared pipelines (``run --pipeline``); ``maintain``: the ``all``
    job maintains the tables that are due after its layers (``run --maintain``). The job loads
    the configuration folder the settings came from, wherever it is started.
    """
    if job not in JOBS:
        raise ValueError(f"no job {job!r} (jobs: {', '.join(JOBS)})")
    if maintain and job != "all":
        raise ValueError("--maintain goes with the all job (maintenance after every layer)")
    conf = {
        **resolution_conf(),
        **BASE_CONF,
        **state_store_conf(settings),
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.sql.warehouse.dir": f"{settings.paths.lakehouse}/_catalog",
        **settings.spark.conf,
        **DELTA_CONF,
    }
    conf = {**conf, **lineage_conf(settings, pipelines, configured=conf), **(extra_conf or {})}
    args = ["--env", settings.env, "--conf-dir", settings.conf_dir,
            "--landing", settings.paths.landing, "--lakehouse", settings.paths.lakehouse]
    if trigger:
        args += ["--trigger", trigger]
    for name in pipelines:
        args += ["--pipeline", name]
    if maintain:
        args.append("--maintain")
    return SubmitCommand(
        spark_submit=spark_submit or str(Path(sys.executable).parent / "spark-submit"),
        master=master or settings.spark.master, name=f"{settings.spark.app_name}-{job}",
        packages=tuple(jvm_packages(settings)), conf=conf,
        py_files=str(Path(wheel).resolve()) if wheel else None,
        application=str(Path(jobs_dir or DEFAULT_JOBS_DIR) / f"{job}.py"),
        application_args=tuple(args), lakehouse=settings.paths.lakehouse,
        layers=JOB_LAYERS[job])


def pipeline_commands(settings: Settings, job: str, **options: Any) -> dict[str, SubmitCommand]:
    """One spark-submit of ``job`` per pipeline of ``settings``, by name (``submit-cmd
    --per-pipeline``): each is the command ``submit-cmd JOB --pipeline NAME`` prints, so a
    scheduler asks once for every pipeline's job (:func:`submit_command` for ``options``)."""
    return {pipeline.name: submit_command(settings.only([pipeline.name]), job,
                                          pipelines=[pipeline.name], **options)
            for pipeline in settings.pipelines}


def submit_argv(settings: Settings, job: str, **options: Any) -> list[str]:
    """The spark-submit argument vector running ``jobs/<job>.py`` (:func:`submit_command`)."""
    return submit_command(settings, job, **options).argv()


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
