"""Checks on a streaming query's checkpoint, run before the query starts (DESIGN I4).

Spark trusts its checkpoint: a damaged file surfaces as a JSON parser's error deep in the JVM,
a deleted state store as a missing ``.changelog``, and a checkpoint restored from an older copy
is not noticed at all (its batches are planned again, and Delta skips their writes as already
done). Each of these is found here first, and reported as a ``CheckpointError`` that names the
table, the checkpoint, the damage and what to do.

What a checkpoint holds (Spark 4.0 to 4.2): ``metadata`` (the query id), ``offsets/<batch>`` (what each
batch reads: a version line, the batch's metadata and one offset per source, each JSON),
``commits/<batch>`` (the batch finished) and, for a stateful query, ``state/<operator>/<partition>``
(one state store version per batch: batch ``b`` commits version ``b + 1``).

One thing is also finished here, not only checked: a windowed query stopped (or killed) after a
batch's commit and before the batch without data that would close the windows its watermark
passed. See :func:`plan_watermark_batch`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from medallion.errors import CheckpointError
from medallion.io.hadoopfs import (
    folder_names,
    hadoop_path,
    is_checksum_file,
    local_path,
    path_exists,
    read_text,
    write_text,
)

log = logging.getLogger(__name__)

_VERSION_LINE = re.compile(r"v\d+")
# What a state store provider writes for a version: RocksDB (changelog or zip), HDFS-backed.
_STATE_SUFFIXES = (".changelog", ".zip", ".delta", ".snapshot")


@dataclass(frozen=True)
class CheckpointState:
    """What a readable checkpoint says: its query and how far it got."""

    query_id: str
    last_planned: int  # the newest offsets/<batch> (-1: none)
    last_committed: int  # the newest commits/<batch> (-1: none)
    shuffle_partitions: int  # fixed by the first batch; the state has one store per partition
    last_planned_ms: int = 0  # when the newest batch was planned (its batchTimestampMs; 0: unknown)

    @property
    def replayed(self) -> int | None:
        """The batch Spark runs first, again (planned, not committed: a run before this one may
        have written part of it); None when the newest planned batch is committed."""
        return self.last_planned if self.last_planned > self.last_committed else None


def rebuild_advice(table: str) -> str:
    """What to do about a checkpoint that cannot be trusted."""
    return ("Put back a copy of the whole checkpoint taken after the table's last write, or "
            f"rebuild the table and everything downstream of it: `medallion backfill {table} "
            "--full-refresh`.")


def batch_numbers(names: list[str]) -> list[int]:
    """The batch files among ``names`` (``offsets/<N>``, ``commits/<N>``), in order."""
    return sorted(int(name) for name in names if name.isdigit())


def drop_leftovers(spark: SparkSession, checkpoint: str) -> None:
    """Delete what interrupted writes left in a checkpoint's logs (see ``_drop_leftovers``)."""
    for folder in ("offsets", "commits"):
        _drop_leftovers(spark, f"{checkpoint}/{folder}")


def _drop_leftovers(spark: SparkSession, folder: str) -> None:
    """Delete what interrupted writes left in an ``offsets`` or ``commits`` folder.

    Spark writes a batch file as a temporary ``.<batch>.<uuid>.tmp`` and renames it. A query
    stopped or killed between the two leaves the temporary file, which Spark never reads; but a
    query that has planned no batch yet refuses to start while its folders hold anything
    ("STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"), so a job killed while planning its first
    batch could never run again. On a local file system Hadoop also keeps a checksum beside each
    file: when a ``commits/<batch>`` file is deleted by hand its ``.crc`` stays, and Spark's
    rewrite of the batch's file then fails on the rename ("Multiple streaming queries are
    concurrently using ..."), although the replay itself is safe. A checksum of a file that does
    not exist checks nothing. Runs before the query starts, under the table's writer lock. A
    local folder is listed by Python (with the bridge, two calls per name, at every query's start).
    """
    local = local_path(spark, folder)
    if local is not None:
        try:
            names = set(os.listdir(local))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in leftovers(names):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(local, name))
            log.warning("%s/%s: deleted, %s", folder, name, _why(name))
        return
    fs, path = hadoop_path(spark, folder)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if jvm.org.apache.hadoop.fs.ChecksumFileSystem._java_lang_class.isInstance(fs):
        fs = fs.getRawFileSystem()  # the checksummed one hides .crc files from listings
    if not fs.exists(path):
        return
    for name in leftovers({str(status.getPath().getName()) for status in fs.listStatus(path)}):
        fs.delete(jvm.org.apache.hadoop.fs.Path(path, name), False)
        log.warning("%s/%s: deleted, %s", folder, name, _why(name))


# Spark's temporary name for a checkpoint file it is writing: ``.<name>.<uuid>[.TID<n>].tmp``.
_UNFINISHED = re.compile(r"\.\d+\.[0-9a-fA-F-]{36}(\.TID\d+)?\.tmp")


def leftovers(names: set[str]) -> list[str]:
    """The names among an ``offsets`` or ``commits`` folder's that no batch needs: unfinished
    writes, and checksums of files that are not there (once the unfinished ones are gone)."""
    unfinished = {name for name in names if _UNFINISHED.fullmatch(name)}
    kept = names - unfinished
    orphans = {name for name in kept if is_checksum_file(name) and name[1:-4] not in kept}
    return sorted(unfinished | orphans)


def _why(name: str) -> str:
    """Why :func:`leftovers` named ``name``, for the log."""
    if _UNFINISHED.fullmatch(name):
        return "a batch file whose write was interrupted (never read)"
    return "the checksum of a file that is gone"


def _read_checked(spark: SparkSession, file: str) -> str:
    """A checkpoint file's text; a checksum mismatch (local file systems keep a ``.crc``) is
    reported as a ``ValueError`` like any other damage, other read errors pass as they are."""
    try:
        return read_text(spark, file)
    except Py4JJavaError as exc:
        if "org.apache.hadoop.fs.ChecksumException" not in str(exc.java_exception):
            raise  # say, storage out of reach: not damage, and the runner names its cause
        raise ValueError("its content does not match its checksum") from exc


def log_entries(text: str, minimum: int = 0) -> list[Any]:
    """The entries of one of Spark's streaming log files (a batch's offsets or commit, a file
    source's log): a version line (``v1``), then one JSON value a line, ``-`` (None) for a source
    with no offset yet. Spark writes no blank line, not even at the end, so one is damage (a
    file cut short) as much as a line that is not JSON or fewer than ``minimum`` entries: each
    raises ``ValueError``."""
    lines = text.split("\n")
    if not _VERSION_LINE.fullmatch(lines[0].strip()) or len(lines) - 1 < minimum:
        raise ValueError(f"{len(lines) - 1} line(s) after the version line, "
                         f"expected at least {minimum}")
    return [None if line.strip() == "-" else json.loads(line) for line in lines[1:]]


def read_log_file(spark: SparkSession, file: str) -> list[Any]:
    """The entries of a streaming log file (see :func:`log_entries`)."""
    return log_entries(read_text(spark, file))


def _log_entries(spark: SparkSession, table: str, file: str, minimum: int) -> list[Any]:
    """The JSON entries of an offsets or commits file; a damaged one raises ``CheckpointError``."""
    try:
        return log_entries(_read_checked(spark, file), minimum)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise CheckpointError(
            table, f"checkpoint file {file} is damaged ({exc}); Spark cannot tell what that batch "
            f"read, so the query cannot resume from it. {rebuild_advice(table)}") from exc


def inspect_checkpoint(spark: SparkSession, table: str, checkpoint: str) -> CheckpointState:
    """Read what Spark will read when the query starts; raise ``CheckpointError`` on damage.

    The newest two offsets files (the newest batch's start is the one before's end) and the
    newest commit must parse; a commit needs its offsets file. What interrupted writes and
    deleted batch files left behind is removed first (see ``drop_leftovers``).
    """
    drop_leftovers(spark, checkpoint)
    planned = batch_numbers(folder_names(spark, f"{checkpoint}/offsets"))
    committed = batch_numbers(folder_names(spark, f"{checkpoint}/commits"))
    if not path_exists(spark, f"{checkpoint}/metadata"):
        if not planned:
            return CheckpointState("", -1, -1, 0)  # killed before its first batch: nothing to lose
        # Spark would give the query a new id, and with it new Delta transaction ids: a replayed
        # batch's writes would no longer be recognised, and would be made twice.
        raise CheckpointError(table, f"checkpoint file {checkpoint}/metadata is missing; it names "
                              f"the query its batches belong to. {rebuild_advice(table)}")
    try:
        query_id = str(json.loads(_read_checked(spark, f"{checkpoint}/metadata"))["id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(table, f"checkpoint file {checkpoint}/metadata is damaged ({exc}); "
                              f"it names the query. {rebuild_advice(table)}") from exc
    last_planned, last_committed = (planned or [-1])[-1], (committed or [-1])[-1]
    if last_committed > last_planned:
        raise CheckpointError(
            table, f"checkpoint {checkpoint} has commits/{last_committed} but no "
            f"offsets/{last_committed}: what that batch read is lost. {rebuild_advice(table)}")
    partitions, planned_ms = 0, 0
    for batch in planned[-2:]:
        entries = _log_entries(spark, table, f"{checkpoint}/offsets/{batch}", minimum=2)
        metadata = entries[0] if isinstance(entries[0], dict) else {}
        conf = metadata.get("conf", {})
        partitions = int(conf.get("spark.sql.shuffle.partitions", partitions))
        stamp = metadata.get("batchTimestampMs")
        planned_ms = stamp if isinstance(stamp, int) else 0
    if last_committed >= 0:
        _log_entries(spark, table, f"{checkpoint}/commits/{last_committed}", minimum=1)
    return CheckpointState(query_id, last_planned, last_committed, partitions, planned_ms)


def check_state(spark: SparkSession, table: str, checkpoint: str, state: CheckpointState) -> None:
    """A stateful query that has committed a batch needs the state that batch left behind.

    Batch ``b`` commits state version ``b + 1`` in every shuffle partition's store; the next
    batch loads it. Without it Spark fails inside the batch ("CANNOT_LOAD_STATE_STORE"), or,
    when no batch runs, not at all until new data comes.
    """
    if state.last_committed < 0:
        return
    version = state.last_committed + 1
    folder = f"{checkpoint}/state/0"
    if not path_exists(spark, folder):
        missing = f"{folder} is missing"
    else:
        lost = [partition for partition in range(max(state.shuffle_partitions, 1))
                if not _has_version(spark, f"{folder}/{partition}", version)]
        if not lost:
            return
        missing = (f"state version {version} (left by batch {state.last_committed}) is missing "
                   f"from {folder} for partition(s) {', '.join(map(str, lost))}")
    raise CheckpointError(
        table, f"checkpoint {checkpoint}: {missing}. The aggregation's open windows and sessions "
        "live there; starting without them would lose what they held. "
        f"{rebuild_advice(table)}")


def _has_version(spark: SparkSession, folder: str, version: int) -> bool:
    """Whether a partition's state store has ``version`` (the engine's stateful queries, its
    aggregations, keep one store a partition; its join keeps no state)."""
    return any(name.startswith(f"{version}.") and name.endswith(_STATE_SUFFIXES)
               for name in folder_names(spark, folder))


def check_not_behind(table: str, checkpoint: str, table_path: str, state: CheckpointState,
                     written: int) -> None:
    """Refuse a checkpoint older than the table it writes.

    ``written`` is the newest batch id the table holds a write of from this query (Delta's
    transaction id of the query's writer; -1 for none). A crash leaves at most the newest planned
    batch written and not committed, which Spark replays with the same offsets. A batch written
    beyond the newest planned one means the checkpoint was put back from an older copy: Spark
    would plan those batches again, possibly over other data, and Delta would skip their writes
    as done, losing whatever differs.
    """
    if written <= state.last_planned:
        return
    raise CheckpointError(
        table, f"checkpoint {checkpoint} is older than the table at {table_path}: the table holds "
        f"batch {written} of this query but the checkpoint's newest batch is "
        f"{state.last_planned}. Running from it would plan batches {state.last_planned + 1} to "
        f"{written} again and Delta would skip their writes as already done. "
        f"{rebuild_advice(table)}")


def plan_watermark_batch(spark: SparkSession, table: str, checkpoint: str,
                         state: CheckpointState) -> bool:
    """Plan the batch without data that a stopped windowed query still owes; whether it did.

    After a batch that moves the watermark on, Spark runs a batch without data with the new
    watermark: it emits the windows and sessions the watermark has closed and drops them from
    the state. It decides to from the previous batch's plan in memory, so a query stopped or
    killed between the commit of a batch and the planning of the next one does not run it when
    it starts again: those windows would wait for the next data, and the table would lack rows
    that one uninterrupted run writes. The newest commit says so (its ``nextBatchWatermarkMs``
    is past the batch's ``batchWatermarkMs``); then the next batch is planned here as Spark
    would have: the same offsets (nothing new to read), the commit's watermark. Spark runs a
    planned, uncommitted batch first when it starts.
    """
    batch = state.last_committed
    if batch < 0 or batch != state.last_planned:
        return False  # nothing committed yet, or a planned batch Spark replays itself
    offsets_file = f"{checkpoint}/offsets/{batch}"
    lines = _read_checked(spark, offsets_file).split("\n")
    metadata = json.loads(lines[1])
    commit = _log_entries(spark, table, f"{checkpoint}/commits/{batch}", minimum=1)[0]
    watermark = metadata.get("batchWatermarkMs") if isinstance(metadata, dict) else None
    pending = commit.get("nextBatchWatermarkMs") if isinstance(commit, dict) else None
    if not isinstance(watermark, int) or not isinstance(pending, int) or pending <= watermark:
        return False
    metadata.update(batchWatermarkMs=pending, batchTimestampMs=int(time.time() * 1000))
    text = "\n".join([lines[0], json.dumps(metadata, separators=(",", ":")), *lines[2:]])
    write_text(spark, f"{checkpoint}/offsets/{batch + 1}", text, replace=False)
    log.info("%s: planned batch %d without data, to close the windows the watermark of batch %d "
             "passed (%d -> %d ms)", table, batch + 1, batch, watermark, pending)
    return True


def emitted_watermark(spark: SparkSession, table: str, checkpoint: str) -> int | None:
    """The watermark (epoch ms) of a query's newest committed batch; None before its first.

    An aggregation in append mode has written every window (session) that ends at or before it,
    and none that ends after: those are still open in its state, and it writes them once closed.
    """
    state = inspect_checkpoint(spark, table, checkpoint)
    if state.last_committed < 0:
        return None
    entries = _log_entries(spark, table, f"{checkpoint}/offsets/{state.last_committed}", minimum=2)
    watermark = entries[0].get("batchWatermarkMs") if isinstance(entries[0], dict) else None
    return watermark if isinstance(watermark, int) else None
