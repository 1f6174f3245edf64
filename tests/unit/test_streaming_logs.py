"""Reading Spark's streaming log files (offsets, commits, a file source's log) and what a Delta
source's end offset says it has read. The texts are as Spark 4.0.5 wrote them."""

from __future__ import annotations

import pytest

from medallion.io.checkpoints import leftovers, log_entries
from medallion.io.sources.delta import between_versions, version_read

# offsets/0 of a silver query (its metadata's conf shortened)
OFFSETS = (
    'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795881480963,'
    '"conf":{"spark.sql.shuffle.partitions":"2"}}\n'
    '{"sourceVersion":1,"reservoirId":"ba321527-63c1-46f5-b59d-3e3320e79b48",'
    '"reservoirVersion":2,"index":-1,"isStartingVersion":false}')
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'
FILE_SOURCE_LOG = (
    'v1\n{"path":"file:///tmp/landing/events/h-0000.json","timestamp":1795850132263,"batchId":0}\n'
    '{"path":"file:///tmp/landing/events/h-0001.json","timestamp":1795850132775,"batchId":0}')


def test_the_entries_after_the_version_line() -> None:
    metadata, offset = log_entries(OFFSETS, minimum=2)
    assert metadata["batchTimestampMs"] == 1795881480963
    assert offset["reservoirVersion"] == 2
    assert log_entries(COMMIT, minimum=1) == [{"nextBatchWatermarkMs": 0}]
    assert [entry["path"][-11:] for entry in log_entries(FILE_SOURCE_LOG)] == [
        "h-0000.json", "h-0001.json"]
    assert log_entries("v1") == []  # a compacted file source log with nothing in it


def test_a_source_without_an_offset_is_none() -> None:
    assert log_entries('v1\n{"batchWatermarkMs":0}\n-\n{"logOffset":3}') == [
        {"batchWatermarkMs": 0}, None, {"logOffset": 3}]


@pytest.mark.parametrize("text", [
    OFFSETS[:-20],  # cut inside a line
    OFFSETS.rsplit("\n", 1)[0] + "\n",  # cut at a line's end: Spark never writes a blank line
    "{" + OFFSETS[2:],  # no version line
    "",
])
def test_a_damaged_file_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        log_entries(text, minimum=2)


def test_fewer_entries_than_a_batch_needs_are_refused() -> None:
    with pytest.raises(ValueError, match="expected at least 2"):
        log_entries(COMMIT, minimum=2)


def test_the_version_an_end_offset_has_read() -> None:
    # index -1 stands before its version: everything of the versions before it was read
    assert version_read({"reservoirVersion": 5, "index": -1, "isStartingVersion": False}) == 4
    assert version_read({"reservoirVersion": 0, "index": -1, "isStartingVersion": False}) == -1
    # inside a version (a rate-limited batch), or the first snapshot at that version
    assert version_read({"reservoirVersion": 5, "index": 3, "isStartingVersion": False}) == 5
    assert version_read({"reservoirVersion": 2, "index": 7, "isStartingVersion": True}) == 2


def test_an_offset_between_versions() -> None:
    assert between_versions({"reservoirVersion": 5, "index": -1, "isStartingVersion": False})
    assert not between_versions({"reservoirVersion": 5, "index": 3, "isStartingVersion": False})
    assert not between_versions({"reservoirVersion": 5, "index": -1, "isStartingVersion": True})


def test_leftovers_are_unfinished_writes_and_checksums_of_files_that_are_gone() -> None:
    unfinished = ".0.5f0c8a52-8a0e-4a56-a5bf-0e4a3e1b7d2c.tmp"
    in_a_task = ".3.5f0c8a52-8a0e-4a56-a5bf-0e4a3e1b7d2c.TID12.tmp"
    names = {"0", ".0.crc", "1", ".1.crc", unfinished, f".{unfinished}.crc", in_a_task,
             ".2.crc"}  # commits/2 deleted by hand
    assert leftovers(names) == sorted([unfinished, f".{unfinished}.crc", in_a_task, ".2.crc"])
    assert leftovers({"0", ".0.crc", "1", ".1.crc"}) == []
    # Only Spark's own temporary names: anything else in the folder is not the engine's to delete.
    assert leftovers({"0", ".0.tmp", "notes.tmp", ".0.not-a-uuid.tmp"}) == []
