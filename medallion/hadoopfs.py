"""Small file operations on any file system Hadoop knows (local, ``s3a://``, ...), through the
running session's JVM: checkpoints, Delta logs and markers live where the lakehouse lives."""

from __future__ import annotations

import json
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The Hadoop ``FileSystem`` holding ``path``, and ``path`` as a Hadoop ``Path``."""
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return target.getFileSystem(conf), target


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
