"""Process locks on a lakehouse: one writer at a time, one process in an embedded catalog.

Two runs of the same job on one lakehouse would share checkpoints (Spark's offset log refuses
the second writer with a stack trace) and, with the embedded Derby metastore, one database that
a single process may open. A run takes these locks *before* it starts Spark, so a second run
waits for the first (up to a bound) or stops at once with one line naming the holder, instead
of failing deep inside the JVM.

Locks are ``flock`` on files under the lakehouse: they are released by the kernel when the
process ends, however it ends (SIGKILL included), so a crash never leaves a stale lock. They
work for a lakehouse on a local or shared POSIX file system; on S3 the scheduler keeps one run
per job (``infra/scheduling/run-job.sh`` holds a lock per job and options).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

DEFAULT_WAIT_SECONDS = 90.0
_HELD: dict[str, IO[str]] = {}  # lock path -> open file; kept for the life of the process


class LakehouseBusyError(RuntimeError):
    """Another process holds the lakehouse (exit status 3 of the command line)."""


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
            raise
        return False
    return True


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']}, `{info['command']}`, since {info['since']}"
    except (OSError, ValueError, KeyError):
        return "another process"


def hold(path: str | Path, what: str, wait_seconds: float = DEFAULT_WAIT_SECONDS,
         advice: str = "") -> None:
    """Hold an exclusive lock on ``path`` until this process ends, waiting up to ``wait_seconds``.

    ``what`` names what the lock protects, for the messages. A lock this process already holds
    is not taken again. Raises :class:`LakehouseBusyError` naming the holder when time runs out.
    """
    lock_path = Path(path)
    key = str(lock_path.resolve())
    if key in _HELD:
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the process ends
    # kept across exec (``medallion sql --shell`` becomes spark-sql and must keep the lock)
    os.set_inheritable(handle.fileno(), True)
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    waited = False
    while not _try_lock(handle):
        if time.monotonic() >= deadline:
            holder = _holder(lock_path)
            handle.close()
            raise LakehouseBusyError(
                f"{what} is in use by {holder}; this command did not start"
                + (f" ({advice})" if advice else ""))
        if not waited:
            log.warning("waiting up to %.0f s for %s (held by %s)", wait_seconds, what,
                     _holder(lock_path))
            waited = True
        time.sleep(0.5)
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({
        "pid": os.getpid(),
        "command": " ".join(["medallion", *sys.argv[1:]])[:200],
        "since": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }))
    handle.flush()
    _HELD[key] = handle


def is_local(path: str) -> bool:
    """Whether ``path`` is on a local (or mounted) file system, where ``flock`` works."""
    return "://" not in path or path.startswith("file:")


def local_path(path: str) -> Path:
    """``path`` without a ``file:`` scheme."""
    return Path(path.removeprefix("file://").removeprefix("file:"))


WRITERS = ("bronze", "silver", "gold", "publish")


def hold_writers(lakehouse: str, layers: tuple[str, ...] = WRITERS,
                 wait_seconds: float = DEFAULT_WAIT_SECONDS) -> None:
    """One writer per layer of a local lakehouse: jobs of different layers may run side by side,
    two of the same layer may not. ``run all``, backfills and maintenance take every layer, in
    one order, so two commands never wait on each other in a cycle."""
    if not is_local(lakehouse):
        return
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    for layer in sorted(layers, key=WRITERS.index):
        hold(local_path(lakehouse) / "_locks" / f"{layer}.lock",
             f"the {layer} layer of {lakehouse}", max(deadline - time.monotonic(), 0.0),
             "one run per layer at a time; retry when it ends, or give --wait SECONDS")


def release_all() -> None:
    """Release every lock this process holds (a command called in-process has ended)."""
    while _HELD:
        _, handle = _HELD.popitem()
        try:
            fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()
