"""Errors reported to the user: bad configuration (naming the key and the file) and failed jobs
(naming the table and the cause).

A leaf: the configuration layer (:mod:`medallion.config`, :mod:`medallion.pipeline`) and the
engine import it, and it imports nothing of either.
"""

from __future__ import annotations

from medallion.redact import redact_text


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the key and the file."""

    def __init__(self, key: str, source: str, problem: str) -> None:
        # Redacted as a last line of defence: a problem quoting a value may quote a URL's password.
        super().__init__(redact_text(f"invalid configuration: {key} (from {source}): {problem}"))
        self.key = key
        self.source = source


class JobError(RuntimeError):
    """A job failed on a table; the message names the table and the cause."""

    def __init__(self, table: str, cause: str) -> None:
        super().__init__(f"{table}: {cause}")
        self.table = table
        self.cause = cause


class InputRefused(JobError):
    """A query was refused before it started: its new input (a landing file its source cannot
    read as declared: nothing of it is read), or a lakehouse its declaration cannot carry on from
    (:class:`DeclarationChanged`). That query does not start, and the run's other queries go on."""

    note = "its new input was refused"  # what the run's summary says of the table


class DeclarationChanged(InputRefused):
    """A table, or its query's state, was made by another declaration than the run's, in a way it
    cannot carry on from (:mod:`medallion.io.sinks.evolution`)."""

    note = "its declaration changed"


class CheckpointError(JobError):
    """A checkpoint is missing or does not belong to the table it would write."""
