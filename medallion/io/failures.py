"""How a Spark job's failure is told: one line naming the cause, from the JVM's exception chain,
a batch function's Python traceback or Kafka's lost offsets."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from medallion.errors import JobError
from medallion.io.sources.kafka import describe_kafka_failure


def describe_failure(exc: BaseException) -> str:
    """Why a job failed, in one line: Kafka's lost offsets, else the error's first line (the JVM
    exception's own, not Py4J's) with the innermost JVM cause."""
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip() and not line.strip()
                  .startswith(("Traceback", "File ", "JVM stacktrace"))), type(exc).__name__)
    # Kafka's data loss is told deep in the JVM trace: bring topic, partition, offsets up.
    loss = describe_kafka_failure(f"{text}\n{getattr(exc, '_stackTrace', '') or ''}")
    if loss:
        return f"{loss} [{first[:1000]}]"
    python = python_error(text)
    if python:  # a batch function raised: Spark's own lines stop at "Traceback (most recent ...)"
        root = root_cause(exc)
        if root and "Python Proxy" not in root and root not in python:
            python = f"{python} (root cause: {root})"
        return python[:2000]
    java = getattr(exc, "java_exception", None)
    if java is not None:  # Py4J's own first line only names the JVM call; the exception says more
        with contextlib.suppress(Exception):  # the JVM may be gone: keep Py4J's line
            first = str(java.toString()).splitlines()[0]
    root = root_cause(exc)
    # ``Class: message``: already told when the message is in the line, or when it has none
    # and the line names Spark's error condition (``[PARSE_SYNTAX_ERROR] ...``)
    said = root.partition(": ")[2].strip()
    told = said in first if said else first.startswith("[")
    if root and root not in first and not told:
        first = f"{first} (root cause: {root})"
    return first[:2000]


TRACEBACK = "Traceback (most recent call last):"
_LIBRARY_FRAME = re.compile(r"[/\\](pyspark|py4j)[/\\]")


def python_error(text: str) -> str | None:
    """The Python exception in a JVM error's text, as ``Type: message (at file:line, in f)``.

    A ``foreachBatch`` function that raises reaches the query as Spark's
    ``FOREACH_BATCH_USER_FUNCTION_ERROR``, whose first line ends at the traceback's header; the
    exception's type and message (and where it was raised) are further down. With chained
    exceptions the last traceback is the one that ended the batch. Where: the last frame outside
    PySpark and Py4J (the code that called Spark), else the last one.
    """
    start = text.rfind(TRACEBACK)
    if start < 0:
        return None
    last = caller = ""
    lines = text[start + len(TRACEBACK):].splitlines()
    for number, line in enumerate(lines):
        frame = re.match(r'\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)', line)
        if frame:
            last = f"{frame['file']}:{frame['line']}, in {frame['func']}"
            if not _LIBRARY_FRAME.search(frame["file"]):
                caller = last
        elif line.strip() and not line[0].isspace():
            where = caller or last
            error = line.strip()
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            if error.startswith("py4j.protocol.Py4JJavaError") and following.startswith(": "):
                error += following  # Py4J's line names the JVM call; the JVM's error follows
            return f"{error} (at {where})" if where else error
    return None


@contextmanager
def failing_as(table: str) -> Iterator[None]:
    """Turn any error while setting up or starting ``table``'s query into a ``JobError``."""
    try:
        yield
    except JobError:
        raise
    except Exception as exc:  # Spark's errors come as many types; each names its cause
        raise JobError(table, describe_failure(exc)) from exc


def _java_throwable(exc: BaseException) -> Any:
    """The JVM exception behind a PySpark or Py4J error, if there is one."""
    return getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)


def root_cause(exc: BaseException) -> str:
    """The innermost JVM cause of ``exc`` as ``Class: message`` (empty when there is none).

    A storage outage surfaces as a stage failure wrapping a Hadoop error wrapping the SDK's
    connection error; the innermost one says what actually went wrong.
    """
    throwable = _java_throwable(exc)
    try:
        seen = 0
        while throwable is not None and throwable.getCause() is not None and seen < 30:
            throwable = throwable.getCause()
            seen += 1
        return "" if throwable is None else str(throwable.toString()).splitlines()[0][:500]
    except Exception:  # noqa: BLE001 - the JVM may be gone; the message is a courtesy
        return ""
