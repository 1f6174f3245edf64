"""Reading Delta tables without Spark: delta-rs (``deltalake``) and pyarrow, at the edge.

The read-only commands (``status``, ``show``, ``quality``, ``report``) read a few Delta logs and a
few columns; a JVM and the catalog cost them tens of seconds, delta-rs a fraction of one. This
module is the only place they touch storage: it opens a table (local path, or ``s3a://`` mapped to
delta-rs's ``s3://`` with options from the ``s3`` settings), reads its log's facts (version, last
commit, files, rows and a column's newest value from the per-file statistics), and reads columns
into pyarrow. What the commands do with that is pure and lives with them.

A table a column of which was widened in place (Delta's type widening, which the engine uses for a
declaration that widens a column) has the reader feature ``typeWidening``, which delta-rs's own
scan does not read yet. Its pyarrow dataset does, and is what reads such a table here
(:func:`read_widened_tables`): the dataset takes the table's current schema, and pyarrow casts
each file's older, narrower types to it (INT to BIGINT, a DECIMAL to a wider one, ...) as the
feature asks of a reader; a cast it cannot make fails, it never changes a value.

Credentials for S3 come from the standard AWS provider chain (environment, shared profile, SSO,
web identity, container or instance role) as botocore resolves it, the same chain boto3 and the
JVM's SDK use; they are handed to delta-rs in memory and never logged or printed. Failures become
:class:`DeltaReadError`, one line, with no credential in it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from medallion.config.model import S3Settings
from medallion.io.s3 import is_s3, parse_s3
from medallion.project import Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger(__name__)


TYPE_WIDENING = "typeWidening"
DELETION_VECTORS = "deletionVectors"


def read_widened_tables() -> None:
    """Let delta-rs's pyarrow datasets read tables with the ``typeWidening`` reader feature (see
    the module's docstring): delta-rs checks a table's reader features against this set before
    it builds a dataset, and itself adds to it the features it reads that way."""
    from deltalake import table

    table.SUPPORTED_READER_FEATURES.add(TYPE_WIDENING)


def widened(table: DeltaTable) -> bool:
    """Whether a column of the table was widened in place (its reader features say so)."""
    return TYPE_WIDENING in (table.protocol().reader_features or ())


def has_deletion_vectors(table: DeltaTable) -> bool:
    """Whether the table may hold deletion vectors (its reader features say so): a pyarrow
    dataset of it would keep the rows they mark."""
    return DELETION_VECTORS in (table.protocol().reader_features or ())


class DeltaReadError(Exception):
    """A table delta-rs cannot read (its protocol, its storage): one line, no secret in it."""


@dataclass(frozen=True)
class DeltaLocation:
    """Where delta-rs finds a table: its URI and storage options (credentials kept out of repr)."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)


def storage_options(s3: S3Settings) -> dict[str, str]:
    """delta-rs (object_store) options for the configured S3 endpoint, region and addressing.

    Mirrors what the Spark side sets for S3A: the endpoint (``http://`` allowed when configured so,
    as S3A turns TLS off for one), ``us-east-1`` when an S3-compatible endpoint names no region,
    path-style or virtual-hosted requests. No credential: :func:`aws_credentials` adds those.
    """
    options = {"AWS_REGION": s3.region or "us-east-1"}
    if s3.endpoint:
        options["AWS_ENDPOINT_URL"] = s3.endpoint
        if s3.endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if s3.path_style_access else "true"
    return options


def aws_credentials() -> dict[str, str]:
    """Credentials from the AWS provider chain as botocore resolves it; empty when there are none.

    delta-rs alone reads only the environment and the instance role, not profiles, SSO or web
    identity: botocore's chain is the one every other part of the product uses.
    """
    import botocore.session

    credentials = botocore.session.Session().get_credentials()
    if credentials is None:
        return {}
    frozen = credentials.get_frozen_credentials()
    found = {"AWS_ACCESS_KEY_ID": frozen.access_key, "AWS_SECRET_ACCESS_KEY": frozen.secret_key}
    if frozen.token:
        found["AWS_SESSION_TOKEN"] = frozen.token
    return found


def delta_location(path: str, s3: S3Settings, credentials: Mapping[str, str] | None = None
                   ) -> DeltaLocation:
    """The delta-rs URI and options of a table path: ``s3a://b/p`` becomes ``s3://b/p``.

    A virtual-hosted request to a configured endpoint needs the bucket in the endpoint's host
    (object_store's rule), so it is put there.
    """
    if not is_s3(path):
        return DeltaLocation(path[len("file:"):] if path.startswith("file:") else path)
    where = parse_s3(path)
    options = storage_options(s3)
    if s3.endpoint and not s3.path_style_access:
        scheme, _, host = s3.endpoint.partition("://")
        options["AWS_ENDPOINT_URL"] = f"{scheme}://{where.bucket}.{host}"
    options.update(credentials or {})
    return DeltaLocation(f"s3://{where.bucket}/{where.prefix}".rstrip("/"), options)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# How delta-rs (its kernel) says a table needs a reader it does not have.
_UNSUPPORTED = re.compile(r"Unsupported|not supported|reader version|readerFeatures", re.I)


def one_line(exc: BaseException) -> str:
    """delta-rs's error text (several indented lines with colour codes) as one redacted line."""
    from medallion.redact import redact_text

    parts = [part.strip(" \u21b3") for part in _ANSI.sub("", str(exc)).splitlines()]
    return redact_text(": ".join(part for part in parts if part)) or type(exc).__name__


class DeltaReader:
    """Opens the tables of one lakehouse through delta-rs (credentials resolved once, if S3)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._credentials: dict[str, str] | None = None

    def location(self, path: str) -> DeltaLocation:
        """Where delta-rs finds ``path``."""
        if is_s3(path) and self._credentials is None:
            self._credentials = aws_credentials()
        return delta_location(path, self.settings.s3, self._credentials)

    def open(self, path: str, name: str | None = None) -> DeltaTable | None:
        """The table at ``path``, or None when there is none; :class:`DeltaReadError` if unreadable."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaProtocolError, TableNotFoundError

        read_widened_tables()
        where = self.location(path)
        label = name or path
        options = dict(where.options)
        try:
            table = DeltaTable(where.uri, storage_options=options)
            log.info("%s: version %d, read with delta-rs from %s", label, table.version(), where.uri)
            return table
        except TableNotFoundError:
            log.info("%s: no Delta table at %s", label, where.uri)
            return None
        except Exception as exc:  # noqa: BLE001 - storage errors of every kind: one line
            if isinstance(exc, DeltaProtocolError) or _UNSUPPORTED.search(str(exc)):
                raise DeltaReadError(
                    f"{label}: delta-rs cannot read this table's protocol or features "
                    f"({one_line(exc)}); `medallion sql --engine spark` reads it through Spark") from None
            error = exc
        if not is_s3(path):  # a file where the table should be: no table, as Spark's isDeltaTable
            try:
                if not DeltaTable.is_deltatable(where.uri, storage_options=options):
                    return None
            except Exception:  # noqa: BLE001, S110 - the first error says more
                pass
        raise DeltaReadError(f"{label}: cannot read the Delta log: {one_line(error)}") from None


@dataclass(frozen=True)
class TableFacts:
    """What a table's Delta log says: version, last commit, files, rows, a column's newest value."""

    version: int
    committed_at: datetime | None
    files: int
    size_bytes: int
    rows: int
    newest: datetime | None = None


def _utc_millis(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(int(value) / 1000, timezone.utc)


def _as_utc(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(
            timezone.utc)
    return value


def arrow_table(stream: Any) -> pa.Table:
    """A pyarrow table of anything with an Arrow C stream (delta-rs hands out arro3 objects).

    Not ``pa.table(...)``: that imports pandas to check for a DataFrame, half a second.
    """
    import pyarrow as pa

    table = pa.RecordBatchReader.from_stream(stream).read_all()
    # delta-rs's engine hands out string and binary views, also inside structs, arrays and maps,
    # which pyarrow cannot sort nor take rows of yet.
    for i, f in enumerate(table.schema):
        plain = _without_views(f.type)
        if plain != f.type:
            table = table.set_column(i, f.with_type(plain), table.column(i).cast(plain))
    return table


def _without_views(of: pa.DataType) -> pa.DataType:
    """``of`` with each string or binary view in it, at any depth, a plain string or binary."""
    import pyarrow as pa

    if of == pa.string_view():
        return pa.string()
    if of == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(of):
        return pa.struct([of.field(i).with_type(_without_views(of.field(i).type))
                          for i in range(of.num_fields)])
    if pa.types.is_map(of):
        return pa.map_(_without_views(of.key_type), of.item_field.with_type(
            _without_views(of.item_type)))
    if pa.types.is_list(of) or pa.types.is_large_list(of):
        item = of.value_field.with_type(_without_views(of.value_type))
        return pa.list_(item) if pa.types.is_list(of) else pa.large_list(item)
    return of


def to_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows as dicts; timestamps as UTC ``datetime``s, naive ones taken as UTC.

    Zoned timestamps are converted by hand: pyarrow would import pandas to convert them.
    """
    import pyarrow as pa

    zoned = [i for i, f in enumerate(table.schema)
             if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    for i in zoned:
        unit = table.schema.field(i).type.unit
        table = table.set_column(i, table.schema.field(i).name,
                                 table.column(i).cast(pa.timestamp(unit)))
    stamps = {f.name for f in table.schema if pa.types.is_timestamp(f.type)}
    rows = table.to_pylist()
    if stamps:
        for row in rows:
            for name in stamps:
                row[name] = _as_utc(row[name])
    return rows


def column_max(values: Any) -> Any:
    """The greatest value of an Arrow column (None if it has none), timestamps in UTC."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(values.type) and values.type.tz is not None:
        values = values.cast(pa.timestamp(values.type.unit))  # as_py of a zoned one: pandas
    return _as_utc(pc.max(values).as_py())


def table_facts(table: DeltaTable, newest_column: str | None = None, name: str = "") -> TableFacts:
    """Version, last commit time, file count and size, rows, and ``newest_column``'s maximum.

    Rows and the maximum come from the log's per-file statistics where every file has them and
    no deletion vector marks rows (no data file is opened); otherwise the table's files are
    scanned for them. Delta's statistics
    keep timestamps to the millisecond, so a maximum read from them may be up to 1 ms early.
    """
    import pyarrow.compute as pc

    try:
        commit = table.history(1)
        actions = arrow_table(table.get_add_actions(flatten=True))
        version = table.version()
    except Exception as exc:  # noqa: BLE001
        raise DeltaReadError(f"{name}: cannot read the Delta log: {one_line(exc)}") from None
    committed_at = _utc_millis(commit[0].get("timestamp")) if commit else None
    files = actions.num_rows
    size = int(pc.sum(actions["size_bytes"]).as_py() or 0) if files else 0
    rows: int | None = 0
    # A file's statistics count the rows a deletion vector marks, and delta-rs does not give
    # how many it marks: such a table's rows and newest value are scanned.
    marked = files and has_deletion_vectors(table)
    if files:
        counts = actions["num_records"] if "num_records" in actions.column_names else None
        rows = None if counts is None or counts.null_count or marked else int(pc.sum(counts).as_py() or 0)
    newest = None
    if newest_column and files:
        newest = _UNKNOWN if marked else _newest_from_stats(actions, newest_column)
    if rows is None or newest is _UNKNOWN:
        scanned = read_columns(table, [newest_column] if newest_column else [], name=name)
        rows = scanned.num_rows
        if newest_column:
            newest = column_max(scanned[newest_column])
    return TableFacts(version=version, committed_at=committed_at, files=files, size_bytes=size,
                      rows=rows, newest=None if newest is _UNKNOWN else _as_utc(newest))


_UNKNOWN: Any = object()


def _newest_from_stats(actions: pa.Table, column: str) -> Any:
    """The column's maximum over the files' statistics, or ``_UNKNOWN`` if a file lacks one.

    A file whose every value is null has no maximum, and needs none.
    """
    maxima, nulls = f"max.{column}", f"null_count.{column}"
    if maxima not in actions.column_names or "num_records" not in actions.column_names:
        return _UNKNOWN
    best = None
    columns = [maxima, "num_records"] + ([nulls] if nulls in actions.column_names else [])
    for row in to_rows(actions.select(columns)):
        value = row[maxima]
        if value is None:
            if row.get(nulls) is not None and row[nulls] == row["num_records"]:
                continue
            return _UNKNOWN
        best = value if best is None or value > best else best
    return best


def read_columns(table: DeltaTable, columns: Sequence[str], name: str = "",
                 predicate: str | None = None) -> pa.Table:
    """The named columns of the table's current version (an empty list: no column, every row).

    Read by delta-rs's own engine, which applies deletion vectors and column mapping; rows in no
    particular order. ``predicate`` (DataFusion SQL) keeps only the rows matching it. A table with
    a widened column is read as a pyarrow dataset, which casts the older files' types (no
    predicate then), unless it has deletion vectors, which a dataset would not apply.
    """
    try:
        if widened(table) and predicate is None and not has_deletion_vectors(table):
            return table.to_pyarrow_dataset().to_table(columns=list(columns))
        return arrow_table(table.scan(columns=list(columns), predicate=predicate))
    except Exception as exc:  # noqa: BLE001 - delta-rs and pyarrow raise many kinds
        raise DeltaReadError(f"{name}: cannot read the table's files: {one_line(exc)}") from None


def read_rows(table: DeltaTable, columns: Sequence[str], name: str = "",
              predicate: str | None = None) -> list[dict[str, Any]]:
    """The named columns as Python rows, timestamps as UTC ``datetime``s."""
    return to_rows(read_columns(table, columns, name, predicate))


def sorted_head(table: DeltaTable, columns: Sequence[str], order: Sequence[str], limit: int,
                name: str = "") -> tuple[list[dict[str, Any]], bool]:
    """The first ``limit`` rows ordered by ``order`` (ascending, nulls first, as Spark's ORDER BY;
    a struct, array or map among them, which Arrow cannot sort by, is passed over), and whether
    there were more."""
    from pyarrow.types import is_nested

    scanned = read_columns(table, columns, name)
    sortable = [c for c in order if not is_nested(scanned.schema.field(c).type)]
    ordered = scanned.sort_by([(c, "ascending", "at_start") for c in sortable])
    limit = max(limit, 0)
    return to_rows(ordered.slice(0, limit)), scanned.num_rows > limit
