"""Streaming readers of the landing zone (Structured Streaming file source), one per source format.

What a declared file source (``sources.<name>`` of ``conf/pipelines/<name>.yaml``) reads becomes
its bronze rows unchanged: JSON Lines as text (a broken line is kept exactly as it arrived;
parsing is silver's job), CSV as text columns with the lines the reader could not split in
``_corrupt_record``, Parquet in its declared schema. Each row carries its file (``source_file``).
"""

from __future__ import annotations

import csv
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NumericType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from medallion.pipeline.kinds import CORRUPT_RECORD, SOURCE_FILE, SourceFormat
from medallion.pipeline.model import SourceSpec
from medallion.pipeline.types import SqlType

# The file source's ``maxFileAge``: how much older than the newest file it has read a new file may
# be and still be read. A thousand years: no file is too old (the source's log keeps every file's
# path anyway, so nothing is read twice).
MAX_FILE_AGE = "365000d"

def read_landing(spark: SparkSession, source: SourceSpec, folder: str,
                 max_files_per_trigger: int) -> DataFrame:
    """The records of the source's files under ``folder`` not read yet by the query, with their
    file."""
    reader = (spark.readStream.option("pathGlobFilter", source.file_glob)
              # In folders under it too (a folder per day, say), but those Spark skips
              # (``_temporary``, ``.staging``); names of the ``key=value`` kind are not columns.
              .option("recursiveFileLookup", "true")
              .option("maxFilesPerTrigger", max_files_per_trigger)
              # Every file not read yet, however old its modification time: Spark's default
              # (7 days before the newest file read) skips, without a word, a file moved in with
              # its time kept (mv, cp -p, rsync -a, tar x), as an export of last month is.
              .option("maxFileAge", MAX_FILE_AGE)
              .options(**source.options))
    if source.format is SourceFormat.JSON_LINES:
        return (reader.format("text").load(folder)
                .select(F.col("value").alias("raw"), F.col("_metadata.file_path").alias(SOURCE_FILE)))
    if source.format is SourceFormat.CSV:
        schema = ", ".join([*(f"`{name}` STRING" for name in source.header),
                            f"{CORRUPT_RECORD} STRING"])
        rows = (reader.format("csv").schema(schema)
                .option("header", "true")
                .option("mode", "PERMISSIVE")
                .option("columnNameOfCorruptRecord", CORRUPT_RECORD)
                .load(folder))
    elif source.format is SourceFormat.PARQUET:
        schema = ", ".join(field.ddl() for field in source.schema)
        rows = reader.format("parquet").schema(schema).load(folder)
    else:
        raise ValueError(f"source {source.name} is {source.format.value}, not a landing-file format")
    return rows.withColumn(SOURCE_FILE, F.col("_metadata.file_path"))


def _reader_options(source: SourceSpec) -> dict[str, str]:
    """The source's reader options by lower-case name: Spark's readers ignore the case."""
    return {key.lower(): value for key, value in source.options.items()}


def csv_charset(source: SourceSpec) -> str:
    """The charset the source's CSV reader decodes with (``encoding`` or ``charset``)."""
    options = _reader_options(source)
    return options.get("encoding", options.get("charset", "UTF-8"))


def csv_header(line: str, source: SourceSpec) -> list[str]:
    """The column names a CSV file's first line gives, split as the source's reader splits it
    (its ``sep``/``delimiter`` and ``quote`` options; a byte-order mark dropped)."""
    options = _reader_options(source)
    sep = options.get("sep", options.get("delimiter", ","))
    quote = options.get("quote", '"')
    line = line.removeprefix("\ufeff")
    if len(sep) == 1 and len(quote) == 1:
        names = next(csv.reader([line], delimiter=sep, quotechar=quote), [])
    else:
        names = line.split(sep)
    return [name.strip() for name in names]


def header_differs(found: list[str], source: SourceSpec) -> bool:
    """Whether a file's header is not the source's declared one (names compared as Spark does
    without case sensitivity): its columns would be read, by position, into other fields."""
    return [name.lower() for name in found] != [name.lower() for name in source.header]


def shown_header(found: list[str], limit: int = 120) -> str:
    """A file's header as a message quotes it: unprintable characters replaced and cut short,
    since the "first line" of a file that is not CSV text (a binary one, misnamed) can be
    anything, of any length."""
    text = "".join(c if c.isprintable() else "\ufffd" for c in ",".join(found))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# Kinds of values whose Parquet encodings Spark's reader never converts one into another: a
# file's column of another kind than the declared one fails the query that reads it.
_KINDS: tuple[tuple[type[DataType] | tuple[type[DataType], ...], str], ...] = (
    ((StringType, BinaryType), "text"), (NumericType, "number"), (BooleanType, "boolean"),
    ((DateType, TimestampType, TimestampNTZType), "date or time"), (StructType, "struct"),
    (ArrayType, "array"), (MapType, "map"))
_INT32 = (ByteType, ShortType, IntegerType)  # the integers Parquet keeps as INT32
_INTEGRAL = (*_INT32, LongType)


def _kind(data_type: DataType) -> str:
    return next((kind for types, kind in _KINDS if isinstance(data_type, types)),
                data_type.simpleString())


def _integer_digits(of: DecimalType) -> int:
    return of.precision - of.scale


def _number_reads_as(found: DataType, declared: DataType) -> bool:
    """Whether Spark's Parquet reader (its vectorized one, the default) reads a file's number
    column of type ``found`` as ``declared``: it widens (an INT32 to any integer, DOUBLE or a
    DECIMAL with 10 integer digits; an INT64 to a DECIMAL with 20; a FLOAT to DOUBLE; a DECIMAL
    to one with as many integer digits and as many decimals or more), and never narrows a BIGINT
    to INT, a DOUBLE to FLOAT, or a number to a DECIMAL too small for it."""
    if found == declared:
        return True
    if isinstance(found, _INT32):
        return isinstance(declared, (*_INTEGRAL, DoubleType)) or (
            isinstance(declared, DecimalType) and _integer_digits(declared) >= 10)
    if isinstance(found, LongType):
        return isinstance(declared, DecimalType) and _integer_digits(declared) >= 20
    if isinstance(found, FloatType):
        return isinstance(declared, DoubleType)
    if isinstance(found, DecimalType) and isinstance(declared, DecimalType):
        return (declared.scale >= found.scale
                and _integer_digits(declared) >= _integer_digits(found))
    return False


def _misfit(found: DataType, declared: DataType, name: str) -> str | None:
    """Why Spark's Parquet reader cannot read a file's column ``name`` of type ``found`` as
    ``declared`` (the innermost field that does not fit, by its dotted name), or None."""
    said = f"{name} is {found.simpleString().upper()}, declared {declared.simpleString().upper()}"
    if _kind(found) != _kind(declared):
        return said
    if isinstance(found, StructType) and isinstance(declared, StructType):
        fields = {field.name.lower(): field for field in found.fields}
        for field in declared.fields:  # a field the file lacks is read as null
            there = fields.get(field.name.lower())
            why = there and _misfit(there.dataType, field.dataType, f"{name}.{there.name}")
            if why:
                return why
        return None
    if isinstance(found, ArrayType) and isinstance(declared, ArrayType):
        return _misfit(found.elementType, declared.elementType, f"{name}[]")
    if isinstance(found, MapType) and isinstance(declared, MapType):
        return (_misfit(found.keyType, declared.keyType, f"{name} key")
                or _misfit(found.valueType, declared.valueType, f"{name} value"))
    if _kind(found) == "number" and not _number_reads_as(found, declared):
        return said
    if isinstance(found, DateType) and isinstance(declared, TimestampType):
        return said  # a DATE is read as TIMESTAMP_NTZ, not as an instant
    if isinstance(declared, DateType) and not isinstance(found, DateType):
        return said  # a time is not read as a DATE
    return None


_SIMPLE: dict[str, DataType] = {
    "STRING": StringType(), "BOOLEAN": BooleanType(), "TINYINT": ByteType(),
    "SMALLINT": ShortType(), "INT": IntegerType(), "BIGINT": LongType(), "FLOAT": FloatType(),
    "DOUBLE": DoubleType(), "DATE": DateType(), "TIMESTAMP": TimestampType(),
    "TIMESTAMP_NTZ": TimestampNTZType(), "BINARY": BinaryType(), "VARIANT": VariantType()}


def spark_type(sql: SqlType) -> DataType:
    """The Spark type a declared type names, built without a JVM (``medallion land`` has none)."""
    if sql.name == "DECIMAL":
        assert sql.precision is not None and sql.scale is not None
        return DecimalType(sql.precision, sql.scale)
    if sql.name == "ARRAY":
        return ArrayType(spark_type(sql.args[0]))
    if sql.name == "MAP":
        return MapType(spark_type(sql.args[0]), spark_type(sql.args[1]))
    if sql.name == "STRUCT":
        return StructType([StructField(name, spark_type(of))
                           for name, of in zip(sql.fields, sql.args, strict=True)])
    return _SIMPLE[sql.name]


def arrow_columns(schema: Any) -> tuple[StructType, frozenset[str]]:
    """A Parquet file's columns as Spark types, from the Arrow schema (``pyarrow.Schema``)
    pyarrow reads from its footer, converted as PySpark converts Arrow types; and the lower-case
    names of the columns it has no Spark type for (unsigned integers, ``TIME``), which are left to
    the run's own check (:func:`parquet_misfits` over Spark's reading of the footer)."""
    from pyspark.sql.pandas.types import from_arrow_type

    fields, unknown = [], set()
    for column in schema:
        try:
            fields.append(StructField(column.name, from_arrow_type(column.type)))
        except TypeError:
            unknown.add(column.name.lower())
    return StructType(fields), frozenset(unknown)


def declared_schema(source: SourceSpec) -> StructType:
    """The columns a Parquet source declares (``sources.<name>.schema``), as Spark types."""
    return StructType([StructField(field.name, spark_type(field.type)) for field in source.schema])


def parquet_misfits(found: StructType, declared: StructType) -> tuple[list[str], list[str]]:
    """How a Parquet file's columns (``found``) fit a source's declared ones, names compared as
    Spark's reader compares them, without case: the declared columns the file lacks (read as
    null), and a description of each column the reader cannot read as declared (another kind of
    value, or a number or time it does not convert; see :func:`_number_reads_as`)."""
    columns = {column.name.lower(): column for column in found.fields}
    missing, unreadable = [], []
    for column in declared.fields:
        there = columns.get(column.name.lower())
        if there is None:
            missing.append(column.name)
        elif why := _misfit(there.dataType, column.dataType, there.name):
            unreadable.append(why)
    return missing, unreadable
