"""JVM packages resolve on a fresh machine, whatever else lives in ``~/.m2``.

The machine this reproduces: a Maven build (S3Proxy's, say) left ``~/.m2/repository`` holding
slf4j-api's pom but not its jar, and the Ivy cache is empty. Spark's default Ivy chain
"finds" slf4j-api in ``~/.m2``, fails to fetch its jar, and no session with the Kafka connector
(which depends on it) can start. The project's own Ivy settings consult Maven Central alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from medallion.config.jvm import kafka_connector
from medallion.project import load_settings
from medallion.spark.packages import IVY_HOME_ENV, jvm_packages, resolved_jars
from tests.conftest import REPO

# the slf4j-api the Kafka connector of the installed Spark brings (through kafka-clients)
SLF4J_VERSION = "2.0.13"
SLF4J = f"org/slf4j/slf4j-api/{SLF4J_VERSION}"
KAFKA_JAR = f"org.apache.spark_{kafka_connector().split(':')[1]}-{version('pyspark')}.jar"


def _home_with_a_pom_without_its_jar(home: Path) -> None:
    folder = home / ".m2" / "repository" / SLF4J
    folder.mkdir(parents=True)
    (folder / f"slf4j-api-{SLF4J_VERSION}.pom").write_text(
        "<project><modelVersion>4.0.0</modelVersion><groupId>org.slf4j</groupId>"
        f"<artifactId>slf4j-api</artifactId><version>{SLF4J_VERSION}</version></project>\n",
        encoding="utf-8")


@pytest.mark.slow
def test_a_session_with_the_kafka_connector_starts_from_empty_caches_and_a_poisoned_m2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    _home_with_a_pom_without_its_jar(home)
    env = {k: v for k, v in os.environ.items() if k not in (IVY_HOME_ENV, "PYSPARK_PYTHON")}
    env[IVY_HOME_ENV] = str(home / ".ivy2.5.2")
    # Every JVM (Spark's Ivy included) takes this as the user's home: ~/.m2 and ~/.ivy2.5.2 are
    # the ones made above, so nothing cached on this machine can help.
    env["JAVA_TOOL_OPTIONS"] = f"-Duser.home={home}"
    done = subprocess.run([sys.executable, "-m", "medallion.spark.warmup"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "JVM packages ready" in done.stdout
    jars = {p.name for p in (home / ".ivy2.5.2" / "jars").iterdir()}
    assert KAFKA_JAR in jars
    assert f"org.slf4j_slf4j-api-{SLF4J_VERSION}.jar" in jars  # fetched from Central, not "found" in ~/.m2
    assert "local-m2-cache" not in output
    # the pom in ~/.m2 is still alone: resolution neither read nor wrote the Maven repository
    assert sorted(p.name for p in (home / ".m2" / "repository" / SLF4J).iterdir()) == [
        f"slf4j-api-{SLF4J_VERSION}.pom"]

    # Both sets the runs ask for start from what set-up recorded, without Ivy: a Kafka run's
    # (the same packages, in its own order) and a files-only run's (the same less the connector).
    monkeypatch.setenv(IVY_HOME_ENV, env[IVY_HOME_ENV])
    settings = load_settings(landing=str(tmp_path / "landing"), lakehouse=str(tmp_path / "lh"))
    files_only = jvm_packages(settings)
    kafka_run = load_settings(landing=str(tmp_path / "landing"), lakehouse=str(tmp_path / "lh"),
                              read_from="kafka")
    with_kafka = jvm_packages(kafka_run)
    assert settings.uses_kafka is False and len(with_kafka) == len(files_only) + 1
    for packages in (files_only, with_kafka):
        jars = resolved_jars(packages)
        assert jars is not None, packages
        assert KAFKA_JAR in {Path(j).name for j in jars}
