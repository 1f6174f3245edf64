"""The tests' list of the JDKs installed in the usual places (made up here: no JVM starts)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.jdks import installed, release_of


def jdk(root: Path, name: str, version: str | None, java: bool = True) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    if java:
        (home / "bin" / "java").write_text("#!/bin/sh\n")
        (home / "bin" / "java").chmod(0o755)
    if version is not None:
        (home / "release").write_text(f'JAVA_VERSION="{version}"\nOS_NAME="Linux"\n')
    return home


def test_installed_jdks_newest_first_each_home_once(tmp_path: Path) -> None:
    jvm = tmp_path / "jvm"
    seventeen = jdk(jvm, "java-17-openjdk-amd64", "17.0.15")
    twenty_five = jdk(jvm, "temurin-25-jdk-amd64", "25.0.3")
    jdk(jvm, "openjdk-17", None)  # a folder without a release file
    jdk(jvm, "jre-without-java", "21.0.1", java=False)
    os.symlink(seventeen, jvm / "java-1.17.0-openjdk-amd64")
    assert installed([f"{jvm}/*"]) == [(25, twenty_five.resolve()), (17, seventeen.resolve())]


def test_release_files_of_old_and_new_numbering(tmp_path: Path) -> None:
    assert release_of(jdk(tmp_path, "a", "1.8.0_412")) == 8
    assert release_of(jdk(tmp_path, "b", "21")) == 21
    assert release_of(jdk(tmp_path, "c", "26-ea")) == 26
    assert release_of(tmp_path / "missing") is None
