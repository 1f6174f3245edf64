"""Errors a run reports to its user: each names the table it concerns and the cause."""

from __future__ import annotations


class JobError(RuntimeError):
    """A job failed on a table; the message names the table and the cause."""

    def __init__(self, table: str, cause: str) -> None:
        super().__init__(f"{table}: {cause}")
        self.table = table
        self.cause = cause


class CheckpointError(JobError):
    """A checkpoint is missing or does not belong to the table it would write."""
