"""Small file operations on any file system Hadoop knows (local, ``s3a://``, ...), through the
running session's JVM: checkpoints, Delta logs and markers live where the lakehouse lives."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

from py4j.protocol import Py4JJavaError
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType


class _Looked:
    """What is looked up once per Spark context: Hadoop's ``Path`` class (each lookup of a class
    by name crosses the Py4J bridge once per part of the name) and whether a path without a scheme
    is a local file (``fs.defaultFS``; not on a cluster whose default is HDFS)."""

    def __init__(self, context: SparkContext) -> None:
        self.context = context
        self.path_class = context._jvm.org.apache.hadoop.fs.Path  # type: ignore[union-attr]
        default = str(context._jsc.hadoopConfiguration().get("fs.defaultFS", "file:///"))
        self.default_is_local = urlparse(default).scheme in ("", "file")


_looked: list[_Looked] = []


def _looked_up(spark: SparkSession) -> _Looked:
    context = spark.sparkContext
    if not _looked or _looked[0].context is not context:
        _looked[:] = [_Looked(context)]
    return _looked[0]


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The Hadoop ``FileSystem`` holding ``path``, and ``path`` as a Hadoop ``Path``."""
    target = _looked_up(spark).path_class(path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return target.getFileSystem(conf), target


def local_path(spark: SparkSession, path: str) -> str | None:
    """``path`` on this machine's file system when Hadoop would read it there (``file:`` or no
    scheme on a local default file system); None when it is elsewhere (S3, HDFS). As Hadoop's
    ``Path`` reads the string: a scheme is what comes before a colon ahead of the first slash, and
    nothing is unescaped ("%20" is three characters of a name)."""
    colon, slash = path.find(":"), path.find("/")
    scheme = path[:colon] if colon > 0 and (slash < 0 or colon < slash) else ""
    if not scheme:
        return path if _looked_up(spark).default_is_local else None
    if scheme.lower() != "file":
        return None
    rest = path[colon + 1:]
    if rest.startswith("//"):  # file://authority/path: the authority names no other machine here
        rest = rest[2:]
        rest = rest[rest.find("/"):] if "/" in rest else "/"
    return rest


def is_checksum_file(name: str) -> bool:
    """Hadoop's checksum of the file beside it (``.<name>.crc``), which its listings hide."""
    return name.startswith(".") and name.endswith(".crc")


def folder_names(spark: SparkSession, folder: str) -> list[str]:
    """The names in ``folder`` (none when it does not exist), as Hadoop lists them. A local folder
    is listed by Python: through the bridge each name costs two calls, and a run with nothing new
    lists some forty checkpoint and log folders (1,377 calls of an idle run's 4,888)."""
    local = local_path(spark, folder)
    if local is None:
        fs, path = hadoop_path(spark, folder)
        if not fs.exists(path):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]
    try:
        return [name for name in os.listdir(local) if not is_checksum_file(name)]
    except FileNotFoundError:
        return []
    except NotADirectoryError:  # Hadoop lists a file as itself
        return [os.path.basename(local)]


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` exists."""
    fs, target = hadoop_path(spark, path)
    return bool(fs.exists(target))


def read_text(spark: SparkSession, path: str) -> str:
    """The content of a small UTF-8 text file."""
    fs, target = hadoop_path(spark, path)
    stream = fs.open(target)
    try:
        io = spark.sparkContext._jvm.java.io  # type: ignore[union-attr]
        reader = io.BufferedReader(io.InputStreamReader(stream, "UTF-8"))
        lines = []
        line = reader.readLine()
        while line is not None:
            lines.append(line)
            line = reader.readLine()
        return "\n".join(lines)
    finally:
        stream.close()


def write_text(spark: SparkSession, path: str, text: str, *, replace: bool = True) -> None:
    """Write a small UTF-8 text file; with ``replace`` False, one that exists is an error."""
    fs, target = hadoop_path(spark, path)
    stream = fs.create(target, replace)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def make_folder(spark: SparkSession, path: str) -> None:
    """Make a folder and those above it (on S3, the marker object Hadoop takes for a folder)."""
    fs, target = hadoop_path(spark, path)
    fs.mkdirs(target)


def rename_path(spark: SparkSession, source: str, target: str) -> bool:
    """Move a folder or file to ``target`` (which must not exist); whether it was moved."""
    fs, origin = hadoop_path(spark, source)
    _, destination = hadoop_path(spark, target)
    return bool(fs.rename(origin, destination))


def delete_path(spark: SparkSession, path: str) -> bool:
    """Delete a folder and all under it (or a file); whether it existed."""
    fs, target = hadoop_path(spark, path)
    return bool(fs.delete(target, True))


class FileHeads:
    """Reads the first line, or the Parquet footer, of files under one folder: what bronze checks
    of each new landing file before reading it. The JVM's classes are looked up once: each lookup
    across the Py4J bridge costs a call per part of the class's name, which made 1,000 footers
    take 16 s. Safe to use from several threads (each talks to the JVM on its own connection)."""

    def __init__(self, spark: SparkSession, folder: str) -> None:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._conf = conf
        self._path = jvm.org.apache.hadoop.fs.Path  # type: ignore[union-attr]
        self._fs = self._path(folder).getFileSystem(conf)
        self._codecs = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(  # type: ignore[union-attr]
            conf)
        self._reader = jvm.java.io.InputStreamReader  # type: ignore[union-attr]
        self._lines = jvm.java.io.BufferedReader  # type: ignore[union-attr]
        self._footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter  # type: ignore[union-attr]
        parquet = jvm.org.apache.spark.sql.execution.datasources.parquet  # type: ignore[union-attr]
        self._to_spark = parquet.ParquetToSparkSchemaConverter(
            spark._jsparkSession.sessionState().conf())

    def first_line(self, path: str, charset: str = "UTF-8") -> str | None:
        """The first line of a text file, decompressed as Spark's readers would by its
        extension (``.gz``, ``.bz2``, ...); ``None`` for an empty file. Only that line is
        read."""
        target = self._path(path)
        codec = self._codecs.getCodec(target)
        stream = self._fs.open(target)
        try:
            source = codec.createInputStream(stream) if codec is not None else stream
            line = self._lines(self._reader(source, charset)).readLine()
            return None if line is None else str(line)
        finally:
            stream.close()

    def parquet_schema(self, path: str) -> StructType:
        """The columns of a Parquet file as Spark's reader sees them, from its footer alone (on
        S3: two ranged GETs). Raises ``ValueError``, with the reader's reason, for a file whose
        footer cannot be read: not Parquet, or cut short."""
        try:
            footer = self._footer(self._conf, self._path(path))
        except Py4JJavaError as exc:
            raise ValueError(str(exc.java_exception.getMessage())) from exc
        schema = self._to_spark.convert(footer.getFileMetaData().getSchema()).json()
        return StructType.fromJson(json.loads(schema))
