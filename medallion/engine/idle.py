"""Whether a query has anything to do, read from its checkpoint and its input without a Spark job.

Starting a query only for it to plan an empty batch costs seconds per table (Delta snapshots of
the input and the table, the checkpoint checks, the query's start and stop), and a scheduled run
often has nothing new. :func:`nothing_new` tells from a few small files that an available-now run of the
query would do nothing at all, and the starters then report the table as up to date without
starting it. The answer is ``True`` only when it is certain; anything unexpected (a file that
does not parse, an offset of a kind not known here, a batch planned but not committed) answers
``False``, and the query starts, with its checks.

What "nothing" means, as Spark decides it (Spark 4.0 to 4.2, delta-spark 4.0 to 4.4):

* the newest planned batch is committed (else Spark replays it);
* the watermark the last commit leaves for the next batch (``nextBatchWatermarkMs``) equals the
  one that batch ran with (else Spark may run a batch without data, to close windows);
* the input has nothing past the last batch's end offset:

  - a Delta table: the end offset ``(reservoirVersion, index)`` with ``index`` -1 means "from
    the start of ``reservoirVersion``"; nothing is new while the table's newest version is
    below it. A table commit without data (a maintenance's) makes the query start: it finds
    nothing and stops, as before;
  - a landing folder: every file the reader would list is in the file source's log.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cached_property
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession

from medallion.config.model import S3Settings, Trigger, TriggerKind
from medallion.io.checkpoints import batch_numbers, read_log_file
from medallion.io.hadoopfs import folder_names, hadoop_path, is_checksum_file, path_exists
from medallion.io.s3 import is_s3, parse_s3, s3_client
from medallion.io.sources.delta import between_versions, newest_table_version, version_read

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class DeltaInput:
    """A query reading a Delta table as a stream."""

    path: str


@dataclass(frozen=True)
class FolderInput:
    """A query reading the files of a landing folder whose names match ``glob``; ``look`` is the
    run's one look at that folder and at the query's file source log."""

    look: FolderLook
    glob: str


StreamInput = DeltaInput | FolderInput


def _delta_caught_up(spark: SparkSession, source: DeltaInput, offset: dict) -> bool:
    if not between_versions(offset):
        return False  # reading the table's first snapshot, or stopped inside a version
    return newest_table_version(spark, source.path) <= version_read(offset)


def location(uri: str) -> tuple[str, str]:
    """A file's bucket (empty for local files) and path, however its URI is spelled."""
    parsed = urlparse(uri)
    return parsed.netloc, unquote(parsed.path)


@dataclass(frozen=True)
class ListedFile:
    """A file under a landing folder (in it, or in a folder under it)."""

    path: str  # from the landing folder, "/"-separated: "a.json", "2025-01-27/a.json"
    uri: str  # as Hadoop spells it: file:/x/a.json, s3a://bucket/x/a.json
    location: tuple[str, str]
    modified_ms: int
    size: int  # bytes

    @property
    def name(self) -> str:
        """The file's own name, which a source's glob matches."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def in_hidden_folder(self) -> bool:
        """Whether a folder on its way is one Spark's file reader skips (``_temporary``, ...)."""
        return any(_hidden(part) for part in self.path.split("/")[:-1])

    @property
    def hidden(self) -> bool:
        """Whether Spark's file reader skips it by design: it, or a folder on its way, is named
        ``.`` or ``_`` first (a temporary or metadata file)."""
        return self.in_hidden_folder or _hidden(self.name)

    def read_by(self, glob: str) -> bool:
        """Whether a file source reading the files named ``glob`` in the folder reads it."""
        return not self.hidden and fnmatch.fnmatch(self.name, glob)


def _hidden(name: str) -> bool:
    return name[:1] == "." or name[:1] == "_" and "=" not in name


def files_under(spark: SparkSession, folder: str, s3: S3Settings
                ) -> tuple[ListedFile, ...] | None:
    """The files in ``folder`` and in the folders under it, as a file source reading it lists
    them (``None``: there is no folder). Local and S3 folders are listed by Python, which the
    bridge's calls per file would make cost seconds per thousand files; any other through
    Hadoop."""
    if is_s3(folder):
        with contextlib.suppress(_NotListed):
            return _s3_files_under(folder, s3)
    fs, path = hadoop_path(spark, folder)
    if not fs.exists(path):
        return None
    root = location(str(fs.makeQualified(path).toUri()))[1].rstrip("/") + "/"
    if str(fs.getScheme()) == "file":
        return _local_files_under(root)
    found, files = [], fs.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        where = location(str(status.getPath().toUri()))
        found.append(ListedFile(where[1].removeprefix(root), str(status.getPath().toString()),
                                where, int(status.getModificationTime()), int(status.getLen())))
    return tuple(found)


class _NotListed(Exception):
    """boto3 could not list the prefix; Hadoop's S3A, with its own settings, is asked instead."""


def _s3_files_under(folder: str, s3: S3Settings) -> tuple[ListedFile, ...] | None:
    """:func:`files_under` an S3 prefix, listed with boto3 (``list_objects_v2``, 1,000 keys per
    request): 10,000 files took 5.5 s through S3A and the bridge, 1.6 s so. What S3A lists:
    every object under ``prefix/`` but folder markers (keys ending in ``/``), with S3's
    modification time in whole milliseconds. Credentials come from the same provider chain."""
    where = parse_s3(folder)
    scheme = folder.split("://", 1)[0]
    prefix = f"{where.prefix}/" if where.prefix else ""
    found, seen = [], False
    try:
        pages = s3_client(s3).get_paginator("list_objects_v2").paginate(
            Bucket=where.bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents", ()):
                seen, key = True, str(item["Key"])
                if key.endswith("/"):
                    continue  # a folder marker: S3A's, or a console's "Create folder"
                found.append(ListedFile(
                    key.removeprefix(prefix), f"{scheme}://{where.bucket}/{key}",
                    (where.bucket, f"/{key}"),
                    (item["LastModified"] - _EPOCH) // timedelta(milliseconds=1),
                    int(item["Size"])))
    except Exception as exc:  # noqa: BLE001 - S3A lists it, or says what is wrong (no bucket)
        log.info("%s: not listed with boto3 (%s); listing it through Hadoop", folder, exc)
        raise _NotListed from exc
    return tuple(found) if seen else None


def _local_files_under(root: str) -> tuple[ListedFile, ...]:
    """:func:`files_under` a local folder, listed by Python: through the JVM each file costs
    several calls across the Py4J bridge (33 s for a folder of 10,000 files, against 0.05 s).
    What Hadoop's local file system lists, with its times: whole milliseconds, rounded down."""
    found = []
    for where, _, names in os.walk(root, followlinks=True):
        for name in names:
            if is_checksum_file(name):
                continue  # Hadoop's checksum of a file beside it, which Hadoop does not list
            full = os.path.join(where, name)
            with contextlib.suppress(FileNotFoundError):  # gone since the walk saw it
                stat = os.stat(full)
                found.append(ListedFile(full.removeprefix(root), f"file:{full}", ("", full),
                                        stat.st_mtime_ns // 1_000_000, stat.st_size))
    return tuple(found)


class FolderLook:
    """One look at a landing folder and at the log of the file source reading it (its
    checkpoint's ``sources/0``), shared by every check of a run: the idle check and bronze's
    warnings list the folder once and read each log file once (on S3: one LIST, a few GETs)."""

    def __init__(self, spark: SparkSession, folder: str, checkpoint: str,
                 s3: S3Settings) -> None:
        self._spark, self.folder, self._log = spark, folder, f"{checkpoint}/sources/0"
        self._s3 = s3
        self._logged: dict[int, dict[tuple[str, str], int]] = {}

    @cached_property
    def listed(self) -> tuple[ListedFile, ...] | None:
        """:func:`files_under` the folder, listed once."""
        return files_under(self._spark, self.folder, self._s3)

    @cached_property
    def _log_names(self) -> list[str]:
        return folder_names(self._spark, self._log)

    def logged(self, upto: int | None = None) -> dict[tuple[str, str], int]:
        """The files the source's log holds up to batch ``upto`` (default: its newest), each
        with the modification time (epoch ms) it had when the source read it: the newest
        compaction at or below it, then every batch after that. Empty: nothing read yet."""
        names = self._log_names
        batches = [int(name.removesuffix(".compact")) for name in names
                   if name.removesuffix(".compact").isdigit()]
        upto = max(batches, default=-1) if upto is None else upto
        if upto not in self._logged:
            compacted = max((int(name.removesuffix(".compact")) for name in names
                             if name.endswith(".compact") and name.removesuffix(".compact").isdigit()
                             and int(name.removesuffix(".compact")) <= upto), default=-1)
            files: dict[tuple[str, str], int] = {}
            logs = ([f"{self._log}/{compacted}.compact"] if compacted >= 0 else []) + [
                f"{self._log}/{batch}" for batch in range(compacted + 1, upto + 1)]
            for log_file in logs:
                files.update({location(entry["path"]): int(entry.get("timestamp") or 0)
                              for entry in read_log_file(self._spark, log_file)})
            self._logged[upto] = files
        return self._logged[upto]


def _folder_caught_up(source: FolderInput, offset: dict) -> bool:
    look = source.look
    if look.listed is None:
        return False  # the starter says what a missing folder means
    # Every file the reader could list (hidden names included: more files can only mean
    # "start"), in folders under it too, but those it skips (``_temporary``, ...).
    matching = {listed.location for listed in look.listed
                if fnmatch.fnmatch(listed.name, source.glob) and not listed.in_hidden_folder}
    return matching <= look.logged(int(offset["logOffset"])).keys()


def file_source_log_batch(spark: SparkSession, checkpoint: str, batch: int) -> int:
    """The batch of the file source's log (``sources/0``) that the query's ``batch`` read up to,
    from the batch's offsets (-1: before any, for ``batch`` -1). A file source reading alone."""
    if batch < 0:
        return -1
    return int(read_log_file(spark, f"{checkpoint}/offsets/{batch}")[1]["logOffset"])


def nothing_new(spark: SparkSession, checkpoint: str,
                sources: StreamInput | tuple[StreamInput, ...]) -> bool:
    """Whether an available-now run of the query with ``checkpoint`` would do nothing.

    ``sources``: the query's inputs in the order it reads them (Spark's offsets follow it).
    """
    inputs = sources if isinstance(sources, tuple) else (sources,)
    try:
        if not path_exists(spark, f"{checkpoint}/metadata"):
            return False
        planned = (batch_numbers(folder_names(spark, f"{checkpoint}/offsets")) or [-1])[-1]
        committed = (batch_numbers(folder_names(spark, f"{checkpoint}/commits")) or [-1])[-1]
        if planned < 0 or planned != committed:
            return False
        offsets = read_log_file(spark, f"{checkpoint}/offsets/{planned}")
        commit = read_log_file(spark, f"{checkpoint}/commits/{committed}")
        if len(offsets) != 1 + len(inputs) or not commit:  # the batch's metadata, then offsets
            return False
        if offsets[0].get("batchWatermarkMs") != commit[0].get("nextBatchWatermarkMs"):
            return False  # Spark may run a batch without data to move the watermark on
        return all(_delta_caught_up(spark, source, offset) if isinstance(source, DeltaInput)
                   else index == 0 and _folder_caught_up(source, offset)
                   for index, (source, offset) in enumerate(zip(inputs, offsets[1:], strict=True)))
    except Exception as exc:  # noqa: BLE001 - any doubt: start the query, which checks loudly
        log.debug("%s: cannot tell whether anything is new (%s); starting it", checkpoint, exc)
        return False


def skippable(spark: SparkSession, trigger: Trigger, table_path: str, checkpoint: str,
              sources: StreamInput | tuple[StreamInput, ...]) -> bool:
    """Whether a run with ``trigger`` may leave the query unstarted: it drains what is there and
    stops (a service waits for data instead), the table exists, and nothing is new."""
    return (trigger.kind in (TriggerKind.AVAILABLE_NOW, TriggerKind.ONCE)
            and newest_table_version(spark, table_path) >= 0
            and nothing_new(spark, checkpoint, sources))
