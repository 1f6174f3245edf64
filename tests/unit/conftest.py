"""The unit tests start no JVM: a test that needs Spark is in ``tests/transforms`` (the shared
session), ``tests/integration`` or beyond. Asking for the session, or starting a JVM in a process
of one's own, fails the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[None]:
    pytest.fail("tests/unit starts no JVM: a test that needs the Spark session belongs in "
                "tests/transforms")
    yield None


@pytest.fixture(autouse=True)
def _no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's launcher runs ``$JAVA_HOME/bin/java``: a JVM started by a unit test, in its process
    or a child's, fails to start."""
    monkeypatch.setenv("JAVA_HOME", "/nonexistent/unit-tests-start-no-jvm")
