"""The ``medallion`` command's arguments: every command, its options and their checks."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from medallion import __version__
from medallion.config.durations import parse_instant


def _common(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--env", default=default,
                        help="configuration overlay conf/<env>.yaml (default: $MEDALLION_ENV or local)")
    parser.add_argument("--conf-dir", default=default,
                        help="folder holding base.yaml and the overlays")
    parser.add_argument("--landing", default=default,
                        help="landing zone (overrides configuration and $MEDALLION_LANDING)")
    parser.add_argument("--lakehouse", default=default,
                        help="lakehouse root (overrides configuration and $MEDALLION_LAKEHOUSE)")
    parser.add_argument("-v", "--verbose", action="count", default=default or 0,
                        help="log what each step does (-vv: debugging detail, JVM warnings)")


def _wait_option(parser: argparse.ArgumentParser) -> None:
    from medallion.io.locks import DEFAULT_WAIT_SECONDS

    parser.add_argument(
        "--wait", type=_seconds, default=DEFAULT_WAIT_SECONDS, metavar="SECONDS",
        help="how long to wait for a run of the same layer on this lakehouse to end before "
             f"giving up with exit status 3 (default {DEFAULT_WAIT_SECONDS:.0f}; 0: do not wait)")


def _whole(minimum: int) -> Callable[[str], int]:
    """A count option's type: a whole number, at least ``minimum`` (argparse reports the rest)."""

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is not at least {minimum}")
        return value

    return count


_positive = _whole(1)


def _seconds(text: str) -> float:
    """A ``--wait``: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not 0 or more seconds")
    return value


def _instant(text: str) -> datetime:
    """A date or an ISO 8601 date and time, as an instant in UTC (:func:`parse_instant`)."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _as_of(text: str) -> int | datetime:
    """``--as-of``: a table version (a whole number) or an instant."""
    if text.strip().isdigit():
        return int(text)
    return _instant(text)


def _port(text: str) -> int:
    """A ``--port`` value: 1-65535, or 0 for a free one (argparse reports anything else)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535), nor 0 for a free one")
    return port


class _Commands:
    """The subcommands: each one's ``help`` (a line in ``medallion --help``) is also the
    description its own ``--help`` starts with."""

    def __init__(self, actions: Any) -> None:
        self.actions = actions

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser:
        if "help" in options:
            options.setdefault("description", options["help"][:1].upper() + options["help"][1:] + ".")
        parser: argparse.ArgumentParser = self.actions.add_parser(name, **options)
        return parser


def build_parser() -> argparse.ArgumentParser:
    # The common options work before or after the command; after it they must not reset
    # what was given before it, hence SUPPRESS as their default there.
    common = argparse.ArgumentParser(add_help=False)
    _common(common, argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="medallion",
                                     description="A Medallion lakehouse on Spark and Delta.")
    parser.add_argument("--version", action="version", version=f"medallion {__version__}")
    _common(parser, None)
    commands = _Commands(parser.add_subparsers(dest="command", required=True))

    run = commands.add_parser("run", parents=[common],
                              help="process everything new through a layer (default: all)")
    run.add_argument("layer", nargs="?", default="all",
                     choices=["bronze", "silver", "gold", "publish", "all"],
                     help="the layer's job; all (default): every layer, each from what the one "
                          "before committed")
    run.add_argument("--trigger", help="available-now (default), once, or processing-time=<interval>")
    run.add_argument("--read-from", dest="read_from", choices=["files", "kafka"],
                     help="of a source and its alternatives, the declared active one or the Kafka "
                          "one (sources.read_from)")
    run.add_argument("--bootstrap-servers", help="Kafka brokers host:port[,...]")
    run.add_argument("--pipeline", action="append", metavar="NAME",
                     help="run only this declared pipeline (repeatable; default: every one)")
    run.add_argument("--maintain", action="store_true",
                     help="after the layers, in the same job, OPTIMIZE and VACUUM the tables whose "
                          "maintenance is due (maintenance.every)")
    _wait_option(run)

    produce = commands.add_parser("produce", parents=[common],
                                  help="publish generated sample events to a Kafka topic")
    produce.add_argument("--events", type=_positive, default=5000)
    produce.add_argument("--users", type=_positive, default=200)
    produce.add_argument("--seed", type=int, default=7)
    produce.add_argument("--burst", help="name of this burst (event id prefix)",
                         default=datetime.now(timezone.utc).strftime("burst-%Y%m%dT%H%M%S"))
    produce.add_argument("--start", type=_instant, default="2025-01-27T10:00:00Z",
                         help="event time of the first event")
    produce.add_argument("--topic", help="topic (default: the first topic of the declared Kafka source)")
    produce.add_argument("--bootstrap-servers", help="Kafka brokers host:port[,...]")
    produce.add_argument("--no-customers", action="store_true",
                         help="do not write the customers CSV to the landing zone")

    gen = commands.add_parser("generate", parents=[common], help="write sample data to the landing zone")
    gen.add_argument("--events", type=_positive, default=5000)
    gen.add_argument("--files", type=_positive, default=4)
    gen.add_argument("--users", type=_positive, default=200)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--burst", default=datetime.now(timezone.utc).strftime("burst-%Y%m%dT%H%M%S"),
                     help="name of this burst (file and event id prefix)")
    gen.add_argument("--start", type=_instant, default="2025-01-27T10:00:00Z",
                     help="event time of the first event (ISO 8601; without a zone, UTC)")
    gen.add_argument("--no-customers", action="store_true", help="write events only")

    sql = commands.add_parser(
        "sql", parents=[common],
        help="answer read-only SQL over the lakehouse's tables and views (no JVM by default)")
    sql.add_argument("query", nargs="?",
                     help="the statement, or several separated by ; (or -f FILE; none on a "
                          "terminal: the interactive shell)")
    sql.add_argument("-f", "--file", help="read the statements from a file")
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table",
                     help="table (default), CSV with a header, or JSON Lines")
    sql.add_argument("--limit", type=_whole(0), default=None,
                     help="rows printed at most (0: all; default 1000, all with --output)")
    sql.add_argument("--output", metavar="FILE",
                     help="write the result to FILE instead: Parquet if it ends in .parquet, "
                          "else in --format")
    sql.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb",
                     help="duckdb (default): in-process over the Delta logs, read-only, no lock; "
                          "spark: a Spark session and the catalog (DDL, DESCRIBE HISTORY, "
                          "Spark-only functions)")
    sql.add_argument("--as-of", type=_as_of, metavar="VERSION|TIMESTAMP",
                     help="read every table as of an instant (ISO 8601, UTC without a zone), "
                          "or the one table the query reads at a version")
    sql.add_argument("--shell", action="store_true",
                     help="the interactive shell (with --engine spark: spark-sql)")

    thrift = commands.add_parser("thrift", parents=[common],
                                 help="the Spark Thrift Server (JDBC/ODBC) serving the catalog")
    thrift.add_argument("action", choices=["up", "down", "status", "serve"],
                        help="up: start in the background; serve: run in the foreground")
    thrift.add_argument("--port", type=_port,
                        help="port, 1-65535 (default: thrift.port; 0: a free one)")

    show = commands.add_parser("show", parents=[common], help="print the gold tables")
    show.add_argument("--limit", type=_positive, default=20)

    quality = commands.add_parser("quality", parents=[common],
                                  help="summarise recent data-quality results per table")
    quality.add_argument("--table", help="only this table (layer/name)")
    quality.add_argument("--batches", type=_positive, default=20,
                         help="how many recent checked batches per table (default 20)")
    quality.add_argument("--docs", metavar="DIR",
                         help="also build Great Expectations Data Docs pages into DIR")

    land = commands.add_parser(
        "land", parents=[common],
        help="upload files to the landing zone (multipart, checksums verified)")
    land.add_argument("files", nargs="+", metavar="FILE")
    land.add_argument("--entity", metavar="SOURCE",
                      help="the declared file source the files belong to (default: the one "
                           "source whose glob matches each file's name)")
    land.add_argument("--part-size-mib", type=int, default=16,
                      help="multipart part size; larger files are uploaded in parts (min 5)")

    infra = commands.add_parser("infra", parents=[common],
                                help="plan or apply the buckets of the configured paths")
    infra.add_argument("action", choices=["plan", "apply", "policy"],
                       help="plan: print what apply would change (dry run); apply: change it; "
                            "policy: print the job role's IAM policy")
    infra.add_argument("--allow-unsupported", action="store_true",
                       help="apply: accept calls an S3-compatible server does not implement")
    infra.add_argument("--force", action="store_true",
                       help="apply: make changes the plan marks DOWNGRADE (a KMS key replaced by "
                            "SSE-S3, versioning suspended, an enforcing policy statement dropped)")

    init = commands.add_parser(
        "init", parents=[common],
        help="write conf/pipelines/NAME.yaml from sample files (CSV, JSON Lines, Parquet); "
             "no Spark")
    init.add_argument("name", help="the pipeline's name (also its source, folder and tables)")
    init.add_argument("files", nargs="+", metavar="FILE", help="sample files of one format")

    commands.add_parser(
        "pipelines", add_help=False,
        help="check the pipeline definitions (conf/pipelines) and print their graphs; no Spark")
    plan = commands.add_parser(
        "plan", parents=[common],
        help="what the next run does with each declared table: new, unchanged, carries on, or "
             "needs a full refresh (exit 4); no Spark")
    plan.add_argument("--format", choices=["text", "json"], default="text")
    commands.add_parser("status", parents=[common],
                        help="per table: last version and commit, rows, processing lag, data age, "
                             "state, last run")

    maintain = commands.add_parser("maintain", parents=[common],
                                   help="OPTIMIZE (Z-ordered or clustered as declared) and VACUUM the "
                                        "tables; delete old state versions of the stateful queries")
    maintain.add_argument("--table", action="append", dest="tables",
                          help="only this table (layer/name); repeatable (default: every table)")
    maintain.add_argument("--retain-hours", type=int,
                          help="VACUUM retention in hours (default: maintenance.vacuum_retention)")
    maintain.add_argument("--allow-short-retention", action="store_true",
                          help="allow a VACUUM retention under 7 days (only with no query running)")
    maintain.add_argument("--no-optimize", action="store_true", help="VACUUM only")
    maintain.add_argument("--no-vacuum", action="store_true",
                          help="OPTIMIZE only (no VACUUM, old state kept)")
    _wait_option(maintain)

    report = commands.add_parser("report", parents=[common],
                                 help="write a self-contained HTML page of the monitoring charts")
    report.add_argument("--output", default="report.html", help="where to write it")

    backfill = commands.add_parser(
        "backfill", parents=[common],
        help="reprocess a range (gold from silver, bronze/events from landing) or rebuild a table")
    backfill.add_argument("table", help="layer/table, or gold for every gold table")
    backfill.add_argument("--from", dest="start", type=_instant,
                          help="start of the range (a date or an ISO 8601 instant; without a zone, UTC)")
    backfill.add_argument("--to", dest="end", type=_instant, help="end of the range, excluded")
    backfill.add_argument("--full-refresh", action="store_true",
                          help="delete the table and everything downstream of it, then rebuild them")
    backfill.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    backfill.add_argument("--yes", action="store_true", help="do not ask before a full refresh")
    _wait_option(backfill)

    submit = commands.add_parser("submit-cmd", parents=[common],
                                 help="print the spark-submit command line of a job")
    submit.add_argument("job", choices=["bronze", "silver", "gold", "all", "maintain"])
    submit.add_argument("--master", help="master URL (default: spark.master from configuration)")
    submit.add_argument("--wheel", help="ship this wheel (make wheel) with --py-files")
    submit.add_argument("--jobs-dir", help="folder of the entry points (default: this checkout's jobs/)")
    submit.add_argument("--spark-submit", help="spark-submit to call (default: the one beside Python)")
    submit.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting; repeatable")
    submit.add_argument("--trigger", help="passed on to the job")
    submit.add_argument("--pipeline", action="append", metavar="NAME",
                        help="the job runs only this declared pipeline (repeatable; default: "
                             "every one)")
    submit.add_argument("--maintain", action="store_true",
                        help="the all job maintains the tables that are due after its layers")
    submit.add_argument("--per-pipeline", action="store_true",
                        help="one command per declared pipeline (or per --pipeline named), each "
                             "running that pipeline alone; json: an object of them by pipeline")
    submit.add_argument("--format", choices=["shell", "json"], default="shell",
                        help="shell (default): one command line; json: its parts, for a scheduler")
    return parser


def pipelines_arguments(arguments: list[str]) -> list[str] | None:
    """When the command is ``pipelines``, its own arguments: those after it, after the common
    options given before it that it takes too (``--env``, ``--conf-dir``: ``medallion --conf-dir
    mine pipelines`` checks ``mine``). None for any other command."""
    if arguments[:1] == ["pipelines"]:
        return arguments[1:]
    if "pipelines" not in arguments:
        return None
    before, rest = build_parser().parse_known_args(arguments)
    if before.command != "pipelines":
        return None
    common = [*(("--env", before.env) if before.env else ()),
              *(("--conf-dir", before.conf_dir) if before.conf_dir else ())]
    return [*common, *rest]
