"""The driver JVM's class-data archive (HotSpot's AppCDS): a local JVM starts in about half the
time when the classes it loaded last time are mapped from an archive instead of parsed and
verified from some 300 jars again.

Only for a JVM this process launches itself (the CLI, an in-process session); spark-submit starts
its own. The archive belongs to one JVM and one class path (Spark's jars, the resolved packages)
and options, so its name is a digest of them. A run that finds none asks the JVM to write one when
it exits (``-XX:ArchiveClassesAtExit``, a temporary name of its own); the process waits for its
JVM to finish and renames a complete archive into place (after a kill, the next start does). The
JVM checks an archive before it maps it and runs without one it cannot use, so a stale or damaged
archive only costs the time it was meant to save. Its messages are off: a command's output is its
result.

``$MEDALLION_JVM_ARCHIVE`` is the folder (``~/.cache/medallion/jvm`` by default), or ``off``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from medallion.spark.usercache import cache_folder

log = logging.getLogger(__name__)

ARCHIVE_ENV = "MEDALLION_JVM_ARCHIVE"
QUIET = "-Xlog:cds*=off -Xlog:class+path=off"
DYNAMIC_ARCHIVE_MAGIC = 0xF00BABA8  # a dynamic archive's first four bytes, written last
KEEP = 4  # archives kept (class paths differ with the configured packages)
ATTEMPTS = 3  # exits asked to write an archive before giving up on this key
RETRY_SECONDS = 86400.0  # after a day without an archive, exits are asked again
ABANDONED_SECONDS = 600.0  # an incomplete temporary file this old was left by a killed JVM


def archive_folder(environ: Mapping[str, str]) -> Path | None:
    """Where archives are kept, or None when ``$MEDALLION_JVM_ARCHIVE`` is ``off``."""
    return cache_folder(environ, ARCHIVE_ENV, "jvm")


def java_binary(environ: Mapping[str, str]) -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def _stamp(path: str) -> str:
    try:
        stat = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def archive_key(java: str, spark_jars: Path, class_path: Sequence[str], java_options: str,
                driver_memory: str | None, before: Sequence[str] = ()) -> str:
    """A digest of what an archive is valid for: the JVM binary, its whole class path (``before``
    Spark's jars, Spark's jars, ``class_path`` after them) and the JVM's options.

    The JVM maps an archive only for the class path it was written with, in the same order, and
    silently runs without it otherwise: two JVMs whose class paths differ (the Thrift server puts
    the packages' jars before Spark's) must not share one.
    """
    parts = [_stamp(java), *(_stamp(entry) for entry in before), "spark:",
             *(_stamp(str(jar)) for jar in sorted(spark_jars.glob("*.jar"))), "after:",
             *(_stamp(entry) for entry in class_path), java_options, driver_memory or ""]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _complete(path: Path) -> bool:
    """Whether the JVM finished writing ``path``: it writes the header (the magic) last."""
    try:
        with path.open("rb") as file:
            return int.from_bytes(file.read(4), "little") == DYNAMIC_ARCHIVE_MAGIC
    except OSError:
        return False


def _adopt(folder: Path, key: str) -> Path | None:
    """The key's archive, after renaming a complete temporary one into place if need be."""
    final = folder / f"{key}.jsa"
    if final.exists():
        return final
    for written in sorted(folder.glob(f"{key}.*.tmp")):
        if _complete(written):
            os.replace(written, final)
            log.debug("jvm archive: %s is ready", final)
            _prune(folder, keep=final)
            return final
        try:
            if time.time() - written.stat().st_mtime > ABANDONED_SECONDS:
                written.unlink()
        except OSError:
            pass
    return None


def _prune(folder: Path, keep: Path) -> None:
    """Remove all but the ``KEEP`` most recently used archives."""
    archives = sorted(folder.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [a for a in archives if a != keep][KEEP - 1:]:
        old.unlink(missing_ok=True)
        Path(f"{old}.attempts").unlink(missing_ok=True)


def _attempted(folder: Path, key: str) -> bool:
    """Count one more exit asked to write the key's archive; False once ``ATTEMPTS`` were in
    the last ``RETRY_SECONDS`` (runs killed before their exit write none)."""
    counter = folder / f"{key}.jsa.attempts"
    try:
        fresh = time.time() - counter.stat().st_mtime < RETRY_SECONDS
        done = int(counter.read_text() or "0") if fresh else 0
    except (OSError, ValueError):
        done = 0
    if done >= ATTEMPTS:
        return False
    counter.write_text(str(done + 1))
    return True


@dataclass(frozen=True)
class ArchivePlan:
    """The JVM options for the archive, and where a JVM asked to write one writes it."""

    options: str = ""
    written: Path | None = None
    final: Path | None = None

    def settle(self) -> None:
        """After the JVM exited: put a complete archive in place, remove an incomplete one."""
        if self.written is None or self.final is None:
            return
        try:
            if _complete(self.written):
                os.replace(self.written, self.final)
                _prune(self.final.parent, keep=self.final)
            else:
                self.written.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("jvm archive: could not keep %s (%s)", self.written, exc)


def archive_plan(environ: Mapping[str, str], spark_jars: Path, class_path: Sequence[str],
                 java_options: str, driver_memory: str | None,
                 before: Sequence[str] = ()) -> ArchivePlan:
    """Use the archive for this JVM, or ask the JVM to write one at exit (no options when
    archives are off, the folder cannot be used, or writing one failed ``ATTEMPTS`` times).
    ``class_path`` goes after Spark's jars, ``before`` before them."""
    folder = archive_folder(environ)
    java = java_binary(environ)
    if folder is None or java is None:
        return ArchivePlan()
    key = archive_key(java, spark_jars, class_path, java_options, driver_memory, before)
    final = folder / f"{key}.jsa"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        ready = _adopt(folder, key)
        if ready is not None:
            os.utime(ready)  # the most recently used archives are the ones kept
            return ArchivePlan(f"{_option('SharedArchiveFile', ready)} {QUIET}")
        if not _attempted(folder, key):
            return ArchivePlan()
    except OSError as exc:
        log.debug("jvm archive: %s unusable (%s)", folder, exc)
        return ArchivePlan()
    written = folder / f"{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    return ArchivePlan(f"{_option('ArchiveClassesAtExit', written)} {QUIET}", written, final)


def _option(name: str, path: Path) -> str:
    """``-XX:<name>=<path>``, quoted for Spark's launcher if the path has a space."""
    option = f"-XX:{name}={path}"
    return f'"{option}"' if " " in option else option
