"""``medallion land FILE...``: put files into the landing zone, whole and verified.

On S3 a file is uploaded with boto3: in one PUT up to ``part_size``, as a multipart upload above
it. Every request carries the MD5 and SHA-256 of its bytes, which S3 checks on receipt (a
corrupted part is refused), and the checksum S3 reports for the finished object is compared with
the one computed here. An object appears only when its upload completes, so the streaming file
source never sees half a file; a failed multipart upload is aborted.

Landing the same file again changes nothing. Landing different content under a name that is
already there is refused: the file source remembers paths it has read and would skip it silently.
A local landing zone gets the same rules, with an atomic rename.
"""

from __future__ import annotations

import base64
import bz2
import codecs
import fnmatch
import gzip
import hashlib
import io
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from medallion.io.s3 import S3Location, error_code, is_s3, parse_s3, s3_client, sse_arguments
from medallion.pipeline.kinds import SourceFormat
from medallion.pipeline.model import SourceSpec
from medallion.project import Settings

log = logging.getLogger(__name__)

MIB = 1024 * 1024
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
DEFAULT_PART_SIZE = 16 * MIB


class LandingError(RuntimeError):
    """A file could not be landed, or landed bytes do not match the file."""


@dataclass(frozen=True)
class LandedFile:
    """One file put into the landing zone."""

    source: Path
    target: str
    size: int
    parts: int
    checksum: str  # SHA-256 (base64), composite ``<digest>-<parts>`` for a multipart upload
    skipped: bool = False  # already there with the same content


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _chunks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        yield chunk


def expected_checksum(path: Path, part_size: int) -> tuple[str, int]:
    """The SHA-256 checksum S3 reports for ``path`` uploaded in parts of ``part_size``.

    A single PUT reports the file's SHA-256; a multipart upload reports the SHA-256 of the
    parts' digests, followed by ``-<number of parts>``.
    """
    size = path.stat().st_size
    with path.open("rb") as stream:
        if size <= part_size:
            return _b64(hashlib.sha256(stream.read()).digest()), 1
        digests = [hashlib.sha256(chunk).digest() for chunk in _chunks(stream, part_size)]
    return f"{_b64(hashlib.sha256(b''.join(digests)).digest())}-{len(digests)}", len(digests)


def check_landing_name(name: str) -> None:
    """Refuse a file name the pipeline would never read, or could not address."""
    if name.startswith((".", "_")):
        # Spark's file source treats such names as hidden (temporary or metadata) and skips them.
        raise LandingError(f"{name!r}: a name starting with '.' or '_' is skipped by Spark's file "
                           "source, so it would never be ingested; rename it")
    if ":" in name:
        raise LandingError(f"{name!r}: Hadoop paths cannot hold ':' (the part before it reads as a "
                           "URI scheme); rename it")
    if any(ord(c) < 32 or ord(c) == 127 for c in name) or name != name.strip():
        raise LandingError(f"{name!r}: control characters or leading/trailing spaces in a name "
                           "break Hadoop paths and logs; rename it")


def source_of(path: Path, entity: str | None, settings: Settings) -> SourceSpec:
    """The declared file source a file is landed for: named (``--entity``) or, when exactly one
    file source's glob matches the file's name, that one."""
    sources = settings.file_sources()
    if entity is not None:
        if entity not in sources:
            raise LandingError(f"{path}: unknown source {entity!r} (file sources: "
                               f"{', '.join(sources)})")
        source = sources[entity]
        if not fnmatch.fnmatch(path.name, source.file_glob):
            # Landed there, it would never be read (bronze warns of such files at every run).
            raise LandingError(f"{path}: source {entity} reads files named {source.file_glob!r} "
                               f"only; rename the file, or declare sources.{entity}.glob")
        return source
    matching = [s for s in sources.values() if fnmatch.fnmatch(path.name, s.file_glob)]
    if len(matching) != 1:  # the sources that read it, or, when none does, every one
        found = "no source reads" if not matching else "more than one source reads"
        described = ", ".join(f"{s.name} ({s.file_glob})" for s in matching or sources.values())
        raise LandingError(f"{path}: {found} a file of this name ({described}); name the source "
                           "with --entity")
    return matching[0]


# Hadoop's codecs that Python's library lacks: such files are checked by the run that reads them.
_CODECS_NOT_HERE = (".deflate", ".lz4", ".snappy", ".zst")


def _first_line(path: Path, charset: str) -> str | None:
    """The first line of a text file, decompressed as Spark's readers would by its extension
    (``.gz``, ``.bz2``) and decoded with ``charset``; ``None`` for an empty file."""
    opener: Any = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    with opener(path, "rb") as raw, io.TextIOWrapper(raw, encoding=charset, errors="replace",
                                                     newline=None) as text:
        line = text.readline()
    return line.rstrip("\n") if line else None


def _csv_misfit(path: Path, source: SourceSpec, declared: str) -> str | None:
    # The run's own comparisons, imported here: they import PySpark's types, and every command
    # imports this module (for LandingError), the read-only ones without importing PySpark.
    from medallion.io.sources.files import csv_charset, csv_header, header_differs, shown_header

    if path.suffix in _CODECS_NOT_HERE:
        return None
    charset = csv_charset(source)
    try:
        codecs.lookup(charset)
    except LookupError:  # a Java charset name Python does not know: the run checks the file
        return None
    try:
        line = _first_line(path, charset)
    except (OSError, EOFError) as exc:  # a broken .gz or .bz2
        return f"it cannot be decompressed as its name says ({exc})"
    found = csv_header(line, source) if line is not None else []
    if line is None or not header_differs(found, source):
        return None
    return (f"its header is {shown_header(found)}, not the declared {','.join(source.header)} "
            f"({declared}), and its columns would be read by position into other fields")


def _parquet_misfit(path: Path, source: SourceSpec, declared: str) -> str | None:
    if path.stat().st_size == 0:  # Spark's reader skips an empty file
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    from medallion.io.sources.files import arrow_columns, declared_schema, parquet_misfits

    try:
        found, unknown = arrow_columns(pq.read_schema(path))
    except (pa.ArrowException, OSError) as exc:
        return f"it is not a Parquet file bronze can read: its footer cannot be read ({exc})"
    missing, misfits = parquet_misfits(found, declared_schema(source))
    lacking = [name for name in missing if name.lower() not in unknown]
    if lacking:
        log.warning("%s lacks columns that %s declares, and they will be read as null: %s",
                    path, declared, ", ".join(lacking))
    if not misfits:
        return None
    return f"{', '.join(misfits)}: it cannot be read as the columns that {declared} declares"


def refuse_misfit(path: Path, source: SourceSpec, settings: Settings) -> None:
    """Refuse a file whose columns the source cannot read as declared, as the run that reads it
    would (a CSV header other than the declared one; a Parquet file that is not Parquet, or has a
    column the reader cannot read as declared): landed, it would hold its source back at every
    run until it is moved out."""
    pipeline = next(p for p in settings.pipelines if source in p.sources)
    if source.format is SourceFormat.CSV:
        problem = _csv_misfit(path, source, pipeline.declared_at(f"sources.{source.name}.header"))
    elif source.format is SourceFormat.PARQUET:
        problem = _parquet_misfit(path, source,
                                  pipeline.declared_at(f"sources.{source.name}.schema"))
    else:
        return
    if problem:
        raise LandingError(f"{path}: {problem}. Nothing was landed: correct the file (or the "
                           "declaration), then land it again")


def land_files(settings: Settings, files: list[Path], entity: str | None = None,
               part_size: int = DEFAULT_PART_SIZE, client: Any = None) -> list[LandedFile]:
    """Put ``files`` into ``<landing>/<source folder>/``; return what happened to each. Every
    file is checked (its name, its source, its columns) before any is landed."""
    if part_size < MIN_PART_SIZE:
        raise LandingError(f"part size {part_size} is below S3's minimum of {MIN_PART_SIZE} bytes")
    for path in files:
        if not path.is_file():
            raise LandingError(f"{path}: no such file")
        check_landing_name(path.name)
    sources = [source_of(path, entity, settings) for path in files]
    for path, source in zip(files, sources, strict=True):
        refuse_misfit(path, source, settings)
    landing = settings.paths.landing
    landed = []
    for path, source in zip(files, sources, strict=True):
        folder = settings.source_folder(source)
        if is_s3(landing):
            client = client or s3_client(settings.s3)
            landed.append(_upload(client, settings, path, parse_s3(landing), folder, part_size))
        else:
            landed.append(_copy_local(path, Path(landing) / folder, part_size))
        log.info("%s %s -> %s (%d bytes, %d part(s))",
                 "already landed" if landed[-1].skipped else "landed", path, landed[-1].target,
                 landed[-1].size, landed[-1].parts)
    return landed


def _copy_local(path: Path, folder: Path, part_size: int) -> LandedFile:
    target = folder / path.name
    checksum, parts = expected_checksum(path, part_size)
    size = path.stat().st_size
    if target.exists():
        if expected_checksum(target, part_size)[0] != checksum:
            raise LandingError(
                f"{target} already exists with other content; land it under a new name")
        return LandedFile(path, str(target), size, parts, checksum, skipped=True)
    folder.mkdir(parents=True, exist_ok=True)
    hidden = folder / f".{path.name}.landing"
    shutil.copyfile(path, hidden)
    if expected_checksum(hidden, part_size)[0] != checksum:
        hidden.unlink()
        raise LandingError(f"{target}: the copy does not match {path}")
    os.replace(hidden, target)
    return LandedFile(path, str(target), size, parts, checksum)


def _existing_checksum(client: Any, bucket: str, key: str) -> str | None:
    try:
        head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except Exception as exc:  # noqa: BLE001 - only "not there" is expected
        if error_code(exc) in {"404", "NoSuchKey", "NotFound"}:
            return None
        raise
    return str(head.get("ChecksumSHA256") or f"(no SHA-256; ETag {head.get('ETag')})")


def _upload(client: Any, settings: Settings, path: Path, landing: S3Location, folder: str,
            part_size: int) -> LandedFile:
    key = landing.key(folder, path.name)
    target = f"s3a://{landing.bucket}/{key}"
    size = path.stat().st_size
    checksum, parts = expected_checksum(path, part_size)
    existing = _existing_checksum(client, landing.bucket, key)
    if existing is not None:
        if existing != checksum:
            raise LandingError(f"{target} already exists with other content (checksum {existing}, "
                               f"file {checksum}); land it under a new name")
        return LandedFile(path, target, size, parts, checksum, skipped=True)
    extra = sse_arguments(settings.s3)
    with path.open("rb") as stream:
        if parts == 1:
            body = stream.read()
            response = client.put_object(
                Bucket=landing.bucket, Key=key, Body=body, **_digests(body), **extra)
            reported = response.get("ChecksumSHA256")
        else:
            reported = _multipart(client, landing.bucket, key, stream, part_size, extra)
    if reported != checksum:
        raise LandingError(f"{target}: S3 reports checksum {reported}, the file has {checksum}")
    return LandedFile(path, target, size, parts, checksum)


def _digests(body: bytes) -> dict[str, str]:
    return {
        "ContentMD5": _b64(hashlib.md5(body).digest()),  # noqa: S324 - S3's integrity header
        "ChecksumSHA256": _b64(hashlib.sha256(body).digest()),
    }


def _multipart(client: Any, bucket: str, key: str, stream: BinaryIO, part_size: int,
               extra: dict[str, str]) -> str | None:
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256", **extra)
    upload_id = upload["UploadId"]
    try:
        completed = []
        for number, chunk in enumerate(_chunks(stream, part_size), start=1):
            digests = _digests(chunk)
            response = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                          PartNumber=number, Body=chunk, **digests)
            if response.get("ChecksumSHA256") not in (None, digests["ChecksumSHA256"]):
                raise LandingError(f"s3a://{bucket}/{key}: part {number} checksum mismatch")
            completed.append({"PartNumber": number, "ETag": response["ETag"],
                              "ChecksumSHA256": digests["ChecksumSHA256"]})
        result = client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": completed})
    except BaseException:
        try:
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception:  # noqa: BLE001 - the first failure is the one to report
            log.warning("could not abort upload %s of s3a://%s/%s; the lifecycle rule will",
                        upload_id, bucket, key)
        raise
    return result.get("ChecksumSHA256")
