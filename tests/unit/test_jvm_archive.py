"""The driver JVM's class archive, its bookkeeping only: which options a JVM gets, when an archive
written at exit is put in place, and what is removed (no JVM; the integration test runs two)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from medallion.spark import jvm_archive
from medallion.spark.jvm_archive import ARCHIVE_ENV, archive_folder, archive_plan

MAGIC = (0xF00BABA8).to_bytes(4, "little")


@pytest.fixture
def spark_jars(tmp_path: Path) -> Path:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    return jars


def env(folder: Path) -> dict[str, str]:
    return {ARCHIVE_ENV: str(folder), "PATH": os.environ["PATH"]}


def plan(folder: Path, jars: Path, class_path: list[str] | None = None,
         options: str = "-Dx=1") -> jvm_archive.ArchivePlan:
    return archive_plan(env(folder), jars, class_path or [], options, "2g")


def test_folder_from_the_variable_or_the_cache_home_and_off(tmp_path: Path) -> None:
    assert archive_folder({ARCHIVE_ENV: str(tmp_path / "a")}) == tmp_path / "a"
    assert archive_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "medallion" / "jvm"
    assert archive_folder({ARCHIVE_ENV: "off", "XDG_CACHE_HOME": str(tmp_path)}) is None
    assert archive_plan({ARCHIVE_ENV: "OFF", "PATH": os.environ["PATH"]}, tmp_path, [], "", None) \
        == jvm_archive.ArchivePlan()


def test_a_first_jvm_writes_one_at_exit_and_the_next_maps_it(tmp_path: Path,
                                                               spark_jars: Path) -> None:
    folder = tmp_path / "archives"
    first = plan(folder, spark_jars)
    assert first.written is not None and first.final is not None
    assert first.options.startswith(f"-XX:ArchiveClassesAtExit={first.written} ")
    assert "-Xlog:cds*=off" in first.options  # nothing on a command's output
    first.written.write_bytes(MAGIC + b"rest")  # what the JVM leaves once done
    first.settle()
    assert not first.written.exists() and first.final.read_bytes() == MAGIC + b"rest"

    second = plan(folder, spark_jars)
    assert second.written is None
    assert second.options.startswith(f"-XX:SharedArchiveFile={first.final} ")


def test_an_archive_of_other_jars_or_options_is_not_used(tmp_path: Path,
                                                         spark_jars: Path) -> None:
    folder = tmp_path / "archives"
    first = plan(folder, spark_jars)
    assert first.written is not None
    first.written.write_bytes(MAGIC)
    first.settle()
    extra = tmp_path / "delta.jar"
    extra.write_bytes(b"delta")
    for other in (plan(folder, spark_jars, class_path=[str(extra)]),
                  plan(folder, spark_jars, options="-Dx=2")):
        assert other.written is not None and other.final != first.final
    (spark_jars / "spark-core.jar").write_bytes(b"core, another build")
    assert plan(folder, spark_jars).final != first.final


def test_a_jar_before_sparks_is_another_class_path_than_the_same_jar_after_them(
        tmp_path: Path, spark_jars: Path) -> None:
    """The JVM maps an archive only for the class path it was written with, in its order: the
    Thrift server's JVM (the packages' jars before Spark's) and a run's (after them) each have
    their own, where one archive for both left every run without one."""
    folder = tmp_path / "archives"
    extra = tmp_path / "delta.jar"
    extra.write_bytes(b"delta")
    after = plan(folder, spark_jars, class_path=[str(extra)])
    before = archive_plan(env(folder), spark_jars, [], "-Dx=1", "2g", before=[str(extra)])
    both = archive_plan(env(folder), spark_jars, [str(extra)], "-Dx=1", "2g", before=[str(extra)])
    assert len({after.final, before.final, both.final}) == 3


def test_the_session_plans_archive_follows_the_jvms_whole_class_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_session``'s plan names the archive after the class path the launcher will build:
    ``spark.driver.extraClassPath`` (before Spark's jars) and an inherited
    ``SPARK_DIST_CLASSPATH`` (after them) each give another archive."""
    from pyspark import SparkContext

    from medallion.spark import session as session_factory
    from tests.conftest import make_settings

    # The plan reads the java binary's stamp; it starts no JVM.
    monkeypatch.delenv("JAVA_HOME", raising=False)
    # As in a process without a JVM yet (the suite's own session has one: its settings would read
    # as spark-submit's).
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setattr(SparkContext, "_jvm", None)
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path / "archives"))
    monkeypatch.delenv(session_factory.DIST_CLASSPATH, raising=False)
    settings = make_settings(tmp_path)
    extra = tmp_path / "extra.jar"
    extra.write_bytes(b"extra")

    def archive(extra_conf: dict[str, str] | None = None) -> Path | None:
        return session_factory._session_plan(settings, extra_conf, resolve_packages=False
                                             ).archive.final

    plain = archive()
    assert plain is not None  # a JVM of its own, asked to write one
    assert archive() == plain  # the same JVM again: the same archive
    with_before = archive({"spark.driver.extraClassPath": str(extra)})
    monkeypatch.setenv(session_factory.DIST_CLASSPATH, str(extra))
    with_after = archive()
    assert len({plain, with_before, with_after}) == 3


def test_an_incomplete_archive_is_removed_and_a_killed_jvms_complete_one_taken(
        tmp_path: Path, spark_jars: Path) -> None:
    folder = tmp_path / "archives"
    first = plan(folder, spark_jars)
    assert first.written is not None and first.final is not None
    first.written.write_bytes(b"\0\0\0\0 regions, header not yet written")
    first.settle()  # the JVM exited without finishing it
    assert not first.written.exists() and not first.final.exists()

    # A process killed before it could wait for its JVM: the JVM finished on its own.
    killed = plan(folder, spark_jars)
    assert killed.written is not None
    killed.written.write_bytes(MAGIC)
    # An older run's JVM, killed while writing: its file is left until it is clearly abandoned.
    stale = folder / f"{killed.written.name.split('.')[0]}.1-dead.tmp"
    stale.write_bytes(b"\0\0\0\0")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    after = plan(folder, spark_jars)
    assert after.options.startswith(f"-XX:SharedArchiveFile={killed.final} ")
    assert not killed.written.exists()


def test_no_more_exits_are_asked_after_repeated_failures(tmp_path: Path,
                                                         spark_jars: Path) -> None:
    folder = tmp_path / "archives"
    for _ in range(jvm_archive.ATTEMPTS):
        assert plan(folder, spark_jars).written is not None  # each JVM killed, nothing written
    assert plan(folder, spark_jars) == jvm_archive.ArchivePlan()
    counter = next(folder.glob("*.attempts"))
    os.utime(counter, (time.time() - 2 * 86400, time.time() - 2 * 86400))
    assert plan(folder, spark_jars).written is not None  # a day later, asked again


def test_only_the_most_recently_used_archives_are_kept(tmp_path: Path, spark_jars: Path) -> None:
    folder = tmp_path / "archives"
    finals = []
    for number in range(jvm_archive.KEEP + 2):
        made = plan(folder, spark_jars, options=f"-Dconfiguration={number}")
        assert made.written is not None and made.final is not None
        made.written.write_bytes(MAGIC)
        made.settle()
        finals.append(made.final)
        os.utime(made.final, (time.time() - 100 + number, time.time() - 100 + number))
    assert sorted(folder.glob("*.jsa")) == sorted(finals[-jvm_archive.KEEP:])


def test_a_folder_that_cannot_be_made_means_no_archive(tmp_path: Path, spark_jars: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert plan(blocker / "archives", spark_jars) == jvm_archive.ArchivePlan()
