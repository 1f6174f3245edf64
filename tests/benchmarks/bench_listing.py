"""Benchmark: a landing folder's listing, as bronze's checks make it at every run, idle or not.

    python -m tests.benchmarks.bench_listing --files 10000      (make bench-listing)

Lands ``--files`` small files in a local folder and under a prefix of a real S3-compatible server
(S3Proxy on loopback), then lists each ``--repeats`` times, alternating: through Hadoop's
``FileSystem`` in the session's JVM, file by file across the Py4J bridge (how the product listed
both before), and with :func:`medallion.engine.idle.files_under` (Python's ``os.walk`` for a local folder,
boto3's ``list_objects_v2`` for S3). Prints each wall time, the ratio of the best of each, and the
load average. Measured, not asserted: results go to stdout and to
``bench-results/listing-<files>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from medallion.engine.idle import files_under
from medallion.io.hadoopfs import hadoop_path
from medallion.io.s3 import s3_client
from medallion.ops.infra.s3proxy import S3ProxyServer
from medallion.project import Settings, load_settings
from medallion.spark.session import build_session
from tests.s3_support import write_overlay

REPO = Path(__file__).resolve().parents[2]


def _through_hadoop(spark: SparkSession, folder: str) -> int:
    """The files under ``folder`` listed through Hadoop, each status read across the bridge."""
    fs, path = hadoop_path(spark, folder)
    count, files = 0, fs.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        str(status.getPath().toUri()), str(status.getPath().toString())
        int(status.getModificationTime())
        count += 1
    return count


def _by_python(spark: SparkSession, folder: str, settings: Settings) -> int:
    """The files under ``folder`` as bronze's checks list them."""
    return len(files_under(spark, folder, settings.s3) or ())


def _timed(action: Callable[[], int], files: int) -> float:
    started = time.monotonic()
    listed = action()
    seconds = time.monotonic() - started
    if listed != files:
        raise SystemExit(f"listed {listed} files, landed {files}")
    return seconds


def _land(root: Path, count: int) -> None:
    """``count`` one-line files, a folder per hundred (a folder per burst or per day)."""
    for index in range(count):
        target = root / f"day-{index // 100:04d}" / f"burst-{index:06d}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text('{"event_id":"e"}\n', encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="medallion-bench-listing-"))
    server = S3ProxyServer(work / "s3").start()
    os.environ.update(AWS_ACCESS_KEY_ID=server.access_key,
                      AWS_SECRET_ACCESS_KEY=server.secret_key, AWS_REGION="us-east-1")
    for variable in ("AWS_PROFILE", "MEDALLION_LANDING", "MEDALLION_LAKEHOUSE",
                     "MEDALLION_S3_ENDPOINT", "MEDALLION_ENV"):
        os.environ.pop(variable, None)
    try:
        conf = write_overlay(work / "conf", "bench", {
            "paths": {"landing": "s3a://bench-landing/landing",
                      "lakehouse": str(work / "lakehouse")},
            "s3": {"endpoint": server.endpoint, "path_style_access": True,
                   "region": "us-east-1"}})
        settings: Settings = load_settings(env="bench", conf_dir=conf)
        s3_client(settings.s3).create_bucket(Bucket="bench-landing")
        local = work / "landing" / "events"
        _land(local, args.files)
        # S3Proxy's filesystem backend serves the files under its folder as the bucket's objects.
        _land(work / "s3" / "bench-landing" / "landing" / "events", args.files)
        spark = build_session(settings, register_tables=False)
        spark.sparkContext.setLogLevel("ERROR")
        folders = {"local": str(local), "s3": f"{settings.paths.landing}/events"}
        figures: dict[str, Any] = {"files": args.files}
        for kind, folder in folders.items():
            hadoop, python = [], []
            for _ in range(args.repeats):
                hadoop.append(_timed(partial(_through_hadoop, spark, folder), args.files))
                python.append(_timed(partial(_by_python, spark, folder, settings), args.files))
            figures[kind] = {"hadoop_s": hadoop, "files_under_s": python,
                             "ratio": min(hadoop) / min(python)}
            print(f"{kind:>5}, {args.files} files: through Hadoop "
                  f"{', '.join(f'{s:.2f}' for s in hadoop)} s; files_under "
                  f"{', '.join(f'{s:.2f}' for s in python)} s; best against best "
                  f"{figures[kind]['ratio']:.0f}x faster")
        figures["load_average"] = os.getloadavg()
        print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), "
              f"{os.getloadavg()[1]:.1f} (5 min)")
        results = REPO / "bench-results"
        results.mkdir(exist_ok=True)
        (results / f"listing-{args.files}.json").write_text(json.dumps(figures, indent=2))
        spark.stop()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
