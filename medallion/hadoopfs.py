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


def delete_path(spark: SparkSession, path: str) -> bool:
    """Delete a folder and all under it (or a file); whether it existed."""
    fs, target = hadoop_path(spark, path)
    return bool(fs.delete(target, True))


def first_line(spark: SparkSession, path: str, charset: str = "UTF-8") -> str | None:
    """The first line of a text file, decompressed as Spark's readers would by its extension
    (``.gz``, ``.bz2``, ...); ``None`` for an empty file. Only that line is read."""
    fs, target = hadoop_path(spark, path)
    jvm = spark.sparkContext._jvm
    codec = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(  # type: ignore[union-attr]
        spark.sparkContext._jsc.hadoopConfiguration()).getCodec(target)
    stream = fs.open(target)
    try:
        source = codec.createInputStream(stream) if codec is not None else stream
        io = jvm.java.io  # type: ignore[union-attr]
        line = io.BufferedReader(io.InputStreamReader(source, charset)).readLine()
        return None if line is None else str(line)
    finally:
        stream.close()


def parquet_schema(spark: SparkSession, path: str) -> StructType:
    """The columns of a Parquet file as Spark's reader sees them, from its footer alone (on S3:
    two ranged GETs). Raises ``ValueError``, with the reader's reason, for a file whose footer
    cannot be read: not Parquet, or cut short."""
    jvm = spark.sparkContext._jvm
    parquet = jvm.org.apache.parquet.hadoop  # type: ignore[union-attr]
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    try:
        reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(
            jvm.org.apache.hadoop.fs.Path(path), conf))  # type: ignore[union-attr]
        try:
            footer = reader.getFooter().getFileMetaData().getSchema()
        finally:
            reader.close()
    except Py4JJavaError as exc:
        raise ValueError(str(exc.java_exception.getMessage())) from exc
    converter = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter(  # type: ignore[union-attr]
        spark._jsparkSession.sessionState().conf())
    return StructType.fromJson(json.loads(converter.convert(footer).json()))
