"""The driver JVM's output as a quiet session passes it on: everything but its start-up notice and
Delta's VACUUM line."""

from __future__ import annotations

import os
import threading

from medallion.spark.session import JVM_NOTICES, _relay, kept_output

NOTICE = b"WARNING: Using incubator modules: jdk.incubator.vector"


def test_complete_lines_pass_except_the_notice_and_a_line_still_written_waits() -> None:
    out, rest = kept_output(NOTICE + b"\nERROR Executor: boom\r\n" + NOTICE + b"\r\n"
                            + b"\tat Foo\nWARN par", JVM_NOTICES)
    assert out == b"ERROR Executor: boom\r\n\tat Foo\n"
    assert rest == b"WARN par"


def test_a_line_that_only_starts_like_a_notice_passes() -> None:
    out, rest = kept_output(NOTICE + b", jdk.incubator.foreign\n"
                            + b"Deleted 3 files and directories in a total of 1 directories.\n"
                            + b"Deleted 3 files and directories in a total of 1 directories. Why\n",
                            JVM_NOTICES)
    assert out == (NOTICE + b", jdk.incubator.foreign\n"
                   + b"Deleted 3 files and directories in a total of 1 directories. Why\n")
    assert rest == b""


def test_java_25s_warning_on_sparks_module_options_is_dropped() -> None:
    out, rest = kept_output(b"WARNING: package sun.security.action not in java.base\n"
                            b"WARNING: package sun.misc not in java.base, in a future JDK\n",
                            JVM_NOTICES)
    assert out == b"WARNING: package sun.misc not in java.base, in a future JDK\n" and rest == b""


def test_the_relay_drops_a_notice_split_across_reads_and_keeps_the_unfinished_last_line() -> None:
    jvm_read, jvm_write = os.pipe()
    ours_read, ours_write = os.pipe()
    relay = threading.Thread(target=_relay, args=(jvm_read, ours_write, JVM_NOTICES))
    relay.start()
    for part in (NOTICE[:20], NOTICE[20:] + b"\n", b"26/11/26 ERROR one\n", b"no newline at exit"):
        os.write(jvm_write, part)
    os.close(jvm_write)  # the JVM exits
    relay.join(timeout=10)
    assert not relay.is_alive()
    received = b""
    while chunk := os.read(ours_read, 65536):
        received += chunk
    os.close(ours_read)
    assert received == b"26/11/26 ERROR one\nno newline at exit"
