"""Appending rows the driver holds (run records, batch metrics, quality results) with delta-rs.

These rows are born in Python: a streaming listener's progress reports, a run's outcomes, a
batch's counts, a gate's results. Through Spark, each append sends them to the JVM, plans a job,
writes one Parquet file from a task and commits, about 0.45 s on a small table, and a run makes
two to four of them per layer. delta-rs writes the same Parquet file and the same commit from the
driver's process in about 10 ms, with no Spark job.

The commit carries the caller's mark as its ``userMetadata``, as a Spark append does, so the marks
that keep retries and replays exactly-once (:mod:`medallion.io.sinks.delta`) read the same whichever
engine wrote. Commits are atomic: on a local disk by rename-if-absent, on S3 by a conditional put
(``If-None-Match``), and a writer that finds its version taken retries on the next one.

delta-rs does not write every table: one with a feature it cannot write (in-commit timestamps,
row tracking, type widening, turned on by a session default) or one whose commits a DynamoDB log
store arbitrates (Spark's writers take their turn there, which a conditional put would bypass).
:func:`delta_rs_can_write` says which; the caller falls back to Spark for the others, and after any
failure, once it has checked that the failed attempt's commit did not land
(:class:`NotAppended` gives the version to check from).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from medallion.config.model import DeltaLogStore, S3Settings
from medallion.io.deltaread import DeltaLocation, aws_credentials, delta_location, one_line
from medallion.io.s3 import is_s3, sse_arguments

log = logging.getLogger(__name__)

# Table features delta-rs refuses to write; a table that has one is written through Spark.
_UNSUPPORTED = "Unsupported table features"

# One append at a time to a table from this process (queries side by side record their quality
# results in one table): on a store that ignores ``If-None-Match`` this is what keeps two commits
# from taking the same version, as Spark's single-driver log store does inside its JVM.
_TABLE_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_LOCKS_LOCK = threading.Lock()


class NotAppended(Exception):
    """delta-rs did not append: why, and the table's version before the attempt (None: the
    attempt did not get as far as opening the table, so it committed nothing)."""

    def __init__(self, reason: str, before: int | None, *, unsupported: bool = False) -> None:
        super().__init__(reason)
        self.before = before
        self.unsupported = unsupported  # the table has a feature delta-rs cannot write


def delta_rs_can_write(path: str, s3: S3Settings) -> bool:
    """Whether delta-rs may commit to the table at ``path``: a local one, or one on S3 whose
    commits are not arbitrated by a DynamoDB table."""
    return not is_s3(path) or s3.delta_log_store is not DeltaLogStore.DYNAMODB


def write_options(s3: S3Settings) -> dict[str, str]:
    """The options a write to S3 adds to a read's: conditional puts for the commits, few retries
    (Spark, with the S3A retry settings, is the fallback: a store that does not answer should
    send the append there within seconds, not after up to three minutes of object_store's own
    retries, its default ``retry_timeout``), and the server-side encryption the Spark side uses
    (a bucket policy may refuse objects without it)."""
    options = {"conditional_put": "etag", "max_retries": "2", "retry_timeout": "10s"}
    sse = sse_arguments(s3)  # the same headers boto3's uploads send
    if sse.get("ServerSideEncryption"):
        options["AWS_SERVER_SIDE_ENCRYPTION"] = sse["ServerSideEncryption"]
    if sse.get("SSEKMSKeyId"):
        options["AWS_SSE_KMS_KEY_ID"] = sse["SSEKMSKeyId"]
    return options


def location_for_writing(path: str, s3: S3Settings) -> DeltaLocation:
    """Where delta-rs writes ``path``, with credentials (resolved for each call, so a long-running
    service's expiring ones are fresh) and the write options."""
    if not is_s3(path):
        return delta_location(path, s3)
    read = delta_location(path, s3, aws_credentials())
    return DeltaLocation(read.uri, {**read.options, **write_options(s3)})


def append_with_delta_rs(location: DeltaLocation, rows: Sequence[Mapping[str, Any]],
                         marker: str) -> None:
    """Append ``rows`` (dicts by column name, typed as the table's columns) to the existing Delta
    table at ``location`` as one commit with ``marker`` as its ``userMetadata``.

    Raises :class:`NotAppended` on any failure.
    """
    with _LOCKS_LOCK:
        lock = _TABLE_LOCKS[location.uri]
    with lock:
        _append(location, rows, marker)


def _append(location: DeltaLocation, rows: Sequence[Mapping[str, Any]], marker: str) -> None:
    try:
        import pyarrow as pa
        from deltalake import CommitProperties, DeltaTable, write_deltalake

        table = DeltaTable(location.uri, storage_options=dict(location.options))
    except Exception as exc:  # noqa: BLE001 - whatever it is, nothing was written
        raise NotAppended(one_line(exc), None) from exc
    before = table.version()
    try:
        data = pa.Table.from_pylist(list(rows), schema=pa.schema(table.schema().to_arrow()))
        write_deltalake(table, data, mode="append",
                        commit_properties=CommitProperties(custom_metadata={"userMetadata": marker}))
    except Exception as exc:  # noqa: BLE001 - the caller checks whether the commit landed
        reason = one_line(exc)
        raise NotAppended(reason, before, unsupported=_UNSUPPORTED in reason) from exc
