"""The JVM packages a session needs (Delta, the Kafka connector, those configured), resolved
from Maven Central through Ivy once and remembered as a manifest of jar paths. Every coordinate
is derived from the installed pyspark and delta-spark in :mod:`medallion.config.jvm`."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config import jvm
from medallion.config.jvm import delta_coordinate
from medallion.project import Settings
from medallion.spark.lineage import lineage_packages
from medallion.spark.s3a import s3_packages

log = logging.getLogger(__name__)


def delta_packages(extra: tuple[str, ...] = ()) -> list[str]:
    """Maven coordinates of the Delta jar for the installed delta-spark and Spark line, plus
    ``extra``."""
    packages = [delta_coordinate()]
    return packages + [p for p in extra if p not in packages]


# The project's own Ivy settings: Maven Central only, never ~/.m2 or the local Ivy repository
# (see the file for why). Shipped inside the package, so a wheel under spark-submit has it too.
IVY_SETTINGS = Path(__file__).resolve().with_name("ivysettings.xml")


# Where Ivy keeps what it fetched; unset: Spark's default (~/.ivy2.5.2). CI points it at an
# empty folder so that every run proves the packages resolve on a fresh machine.
IVY_HOME_ENV = "MEDALLION_IVY_HOME"


def resolution_conf() -> dict[str, str]:
    """How every session the project starts resolves its JVM packages (``spark.jars.*``)."""
    conf = {"spark.jars.ivySettings": str(IVY_SETTINGS)}
    ivy_home = os.environ.get(IVY_HOME_ENV)
    if ivy_home:
        conf["spark.jars.ivy"] = str(Path(ivy_home).expanduser().resolve())
    return conf


def ivy_home() -> Path:
    """Where Ivy keeps what it fetched (Spark's default when ``MEDALLION_IVY_HOME`` is unset)."""
    configured = os.environ.get(IVY_HOME_ENV)
    return Path(configured).expanduser().resolve() if configured else Path.home() / ".ivy2.5.2"


MANIFEST_HEADER = "# packages "


def _jars_manifest(packages: list[str]) -> Path:
    # the set, not its order: set-up and a run may list the same packages in another order
    digest = hashlib.sha256(",".join(sorted(packages)).encode()).hexdigest()[:16]
    return ivy_home() / "medallion" / f"jars-{digest}.txt"


def _read_manifest(manifest: Path) -> tuple[frozenset[str], list[str]] | None:
    """The package set a manifest was recorded for and its jars, if every jar still exists."""
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if not lines or not lines[0].startswith(MANIFEST_HEADER):
        return None  # not written by this version: resolve again, which rewrites it
    packages = frozenset(filter(None, lines[0].removeprefix(MANIFEST_HEADER).split(",")))
    jars = [line for line in lines[1:] if line.strip()]
    return (packages, jars) if jars and all(Path(jar).is_file() for jar in jars) else None


def resolved_jars(packages: list[str]) -> list[str] | None:
    """The local jars ``packages`` resolved to at an earlier session start, if all still exist.

    Handing these to Spark spares every later start Ivy's resolution (seconds of start-up, its
    report on the console, and 800 MB of jars copied into a scratch folder); a missing file
    means resolving again. A set resolved together with more packages serves too: set-up
    resolves the Kafka connector with the rest, and a run without Kafka uses those jars (the
    smallest such set, so a Thrift server's extra jars stay out of a pipeline run's JVM).
    """
    exact = _read_manifest(_jars_manifest(packages))
    if exact is not None:
        return exact[1]
    wanted = set(packages)
    supersets = []
    for manifest in sorted((ivy_home() / "medallion").glob("jars-*.txt")):
        recorded = _read_manifest(manifest)
        if recorded is not None and wanted <= recorded[0]:
            supersets.append((len(recorded[0]), manifest.name, recorded[1]))
    return min(supersets)[2] if supersets else None


def remember_jars(packages: list[str], spark: SparkSession) -> None:
    """Record the local jars Ivy resolved ``packages`` to, for :func:`resolved_jars`."""
    record_jars(packages, [j.removeprefix("file://").removeprefix("file:")
                           for j in (spark.sparkContext.getConf().get("spark.jars") or "").split(",")
                           if j])


def record_jars(packages: list[str], jars: list[str]) -> None:
    """Write the manifest of ``packages``: the package list, then the local jars, one a line."""
    home = str(ivy_home())
    if not jars or not all(jar.startswith(home) for jar in jars):
        return  # resolved into another Ivy home (a JVM given another user.home): not ours to list
    manifest = _jars_manifest(packages)
    try:
        manifest.parent.mkdir(parents=True, exist_ok=True)
        partial = manifest.with_name(f".{manifest.name}.{os.getpid()}")
        partial.write_text("\n".join([MANIFEST_HEADER + ",".join(packages), *jars]) + "\n",
                           encoding="utf-8")
        os.replace(partial, manifest)  # a reader never sees half a list
    except OSError as exc:  # a read-only home: resolve at every start, as before
        log.debug("could not record the resolved jars in %s: %s", manifest, exc)


def jvm_packages(settings: Settings, extra: tuple[str, ...] = ()) -> list[str]:
    """Every Maven coordinate a session of ``settings`` asks for: Delta, ``spark.packages``,
    S3A (and the DynamoDB log store if configured), the Kafka connector when Kafka is used, the
    OpenLineage listener when lineage is on."""
    extras = (*settings.spark.packages, *s3_packages(settings), *kafka_packages(settings),
              *lineage_packages(settings), *extra)
    return delta_packages(tuple(dict.fromkeys(extras)))


def kafka_connector(settings: Settings) -> str:
    """Maven coordinate of Spark's Kafka connector: at ``kafka.connector_version`` if set (a
    release of the installed Spark line, checked by the loader), else at the installed pyspark's."""
    return jvm.kafka_connector(settings.kafka.connector_version)


def kafka_packages(settings: Settings) -> tuple[str, ...]:
    """The Kafka connector, when a job uses Kafka; else nothing."""
    return (kafka_connector(settings),) if settings.uses_kafka else ()
