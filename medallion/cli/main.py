"""The ``medallion`` command."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from types import FrameType

from medallion.config.durations import parse_instant
from medallion.config.model import Metastore
from medallion.errors import ConfigError
from medallion.project import Settings, load_settings

log = logging.getLogger("medallion")


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


def _port(text: str) -> int:
    """A ``--port`` value: 1-65535, or 0 for a free one (argparse reports anything else)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535), nor 0 for a free one")
    return port


def _parser() -> argparse.ArgumentParser:
    # The common options work before or after the command; after it they must not reset
    # what was given before it, hence SUPPRESS as their default there.
    common = argparse.ArgumentParser(add_help=False)
    _common(common, argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="medallion",
                                     description="A Medallion lakehouse on Spark and Delta.")
    _common(parser, None)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", parents=[common], help="process everything new through a layer")
    run.add_argument("layer", choices=["bronze", "silver", "gold", "publish", "all"])
    run.add_argument("--trigger", help="available-now (default), once, or processing-time=<interval>")
    run.add_argument("--read-from", dest="read_from", choices=["files", "kafka"],
                     help="of a source and its alternatives, the declared active one or the Kafka "
                          "one (sources.read_from)")
    run.add_argument("--bootstrap-servers", help="Kafka brokers host:port[,...]")
    run.add_argument("--pipeline", action="append", metavar="NAME",
                     help="run only this declared pipeline (repeatable; default: every one)")
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

    sql = commands.add_parser("sql", parents=[common], help="run a SQL query against the catalog")
    sql.add_argument("query", nargs="?",
                     help="the statement, or several separated by ; (or -f FILE, or --shell)")
    sql.add_argument("-f", "--file", help="read the statements from a file")
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table",
                     help="table (default), CSV with a header, or JSON Lines")
    sql.add_argument("--limit", type=_whole(0), default=1000, help="rows printed at most (0: all)")
    sql.add_argument("--shell", action="store_true",
                     help="open the interactive spark-sql shell with the project's settings")

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

    commands.add_parser(
        "pipelines", add_help=False,
        help="check the pipeline definitions (conf/pipelines) and print their graphs; no Spark")
    commands.add_parser("status", parents=[common],
                        help="per table: last version and commit, rows, lag, state, last run")

    maintain = commands.add_parser("maintain", parents=[common],
                                   help="OPTIMIZE (Z-ORDER from configuration) and VACUUM the tables; "
                                        "delete old state versions of the stateful queries")
    maintain.add_argument("--table", action="append", dest="tables",
                          help="only this table (layer/name); repeatable (default: every table)")
    maintain.add_argument("--retain-hours", type=int,
                          help="VACUUM retention in hours (default: maintenance.vacuum_retention)")
    maintain.add_argument("--allow-short-retention", action="store_true",
                          help="allow a VACUUM retention under 7 days (only with no query running)")
    maintain.add_argument("--no-optimize", action="store_true", help="VACUUM only")
    maintain.add_argument("--no-vacuum", action="store_true",
                          help="OPTIMIZE only (no VACUUM, old state kept)")

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
    submit.add_argument("job", choices=["bronze", "silver", "gold", "all"])
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
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(env=args.env, conf_dir=args.conf_dir, landing=args.landing,
                         lakehouse=args.lakehouse, trigger=getattr(args, "trigger", None),
                         read_from=getattr(args, "read_from", None),
                         kafka_bootstrap=getattr(args, "bootstrap_servers", None))


def _generate(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.samples.generate import GenerateSpec, generate_landing

    spec = GenerateSpec(events=args.events, files=args.files, users=args.users, seed=args.seed,
                        burst=args.burst, start=args.start)
    from medallion.io.s3 import is_s3

    if is_s3(settings.paths.landing):
        # Object storage: write the files locally, then land them (verified uploads).
        import tempfile
        from pathlib import Path

        from medallion.ops.landing import land_files

        with tempfile.TemporaryDirectory() as staging:
            files = generate_landing(staging, spec, with_customers=not args.no_customers)
            events = [f for f in files if f.suffix == ".json"]
            land_files(settings, events, entity="events")
            land_files(settings, [f for f in files if f not in events], entity="customers")
            written: list[Path] = files
    else:
        written = generate_landing(settings.paths.landing, spec,
                                   with_customers=not args.no_customers,
                                   folders={name: settings.source_folder(declared) for name, declared
                                            in settings.file_sources().items()})
    event_files = sum(1 for path in written if path.suffix == ".json")
    print(f"wrote {args.events} events in {event_files} files under {settings.paths.landing}")
    return 0


def _produce(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.samples.generate import GenerateSpec, generate_customer_rows, write_atomically
    from medallion.samples.produce import produce_events

    spec = GenerateSpec(events=args.events, users=args.users, seed=args.seed, burst=args.burst,
                        start=args.start)
    declared = settings.kafka_sources()
    if not args.topic and not declared:
        print("no pipeline declares a Kafka source: name the topic with --topic", file=sys.stderr)
        return 2
    topic = args.topic or declared[0].topics[0]
    sent = produce_events(settings.kafka, topic, spec)
    print(f"published {sent} events to topic {topic} at {settings.kafka.bootstrap_servers}")
    if not args.no_customers:
        from pathlib import Path

        # The sample events' dimension: the declared `customers` source's folder, if there is one.
        customers = settings.file_sources().get("customers")
        folder = settings.source_folder(customers) if customers is not None else "customers"
        path = Path(settings.paths.landing) / folder / "customers-sample.csv"
        write_atomically(path, list(generate_customer_rows(spec)))
        print(f"wrote the customers dimension to {path}")
    return 0


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.cli.summary import format_summary
    from medallion.engine.runner import Layer, RunIncomplete, run_pipeline
    from medallion.io.locks import WRITERS, hold_writers
    from medallion.spark.session import build_session

    layers = WRITERS if args.layer == "all" else (args.layer,)
    hold_writers(settings.paths.lakehouse, layers, args.wait)  # before Spark starts
    from medallion.io.catalog import record_run_creations

    # An in-memory catalog ends with this process, where nothing queries it: no registration.
    persistent = settings.catalog.metastore is not Metastore.IN_MEMORY
    # The embedded metastore is not asked which names it holds (booting it is 1.5 s of a run
    # with nothing new): the sessions that query it ask. A shared one is, for its other clients.
    spark = build_session(settings, register_tables=persistent,
                          list_catalog=settings.catalog.metastore is not Metastore.EMBEDDED)
    from medallion.engine.live import live_display

    # On a terminal, a line per table as its batches commit (not beside -v's log lines).
    incomplete = None
    try:
        runs = run_pipeline(spark, settings, Layer(args.layer), settings.streaming.trigger,
                            on_batch=None if args.verbose else live_display())
    except RunIncomplete as exc:  # every table but the refused ones ran: say what they did
        incomplete, runs = exc, exc.runs
    if persistent:  # prepared at the session's start: what the run created keeps it prepared
        record_run_creations(spark, settings)
    print(format_summary(runs))
    if incomplete is not None:
        raise incomplete
    return 0


def _sql(args: argparse.Namespace, settings: Settings) -> int:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from medallion.errors import JobError
    from medallion.io.failures import describe_failure
    from medallion.pipeline.sql import split_statements
    from medallion.serving.query import print_result, spark_sql_shell
    from medallion.spark.session import build_session

    if args.shell:
        return spark_sql_shell(settings)
    if args.file:
        with open(args.file, encoding="utf-8") as handle:
            script = handle.read()
    elif args.query:
        script = args.query
    else:
        print("medallion sql: give a statement, -f FILE, or --shell", file=sys.stderr)
        return 2
    statements = split_statements(script)  # run in order, as spark-sql -e and -f do
    if not statements:
        print(f"medallion sql: no statement in {args.file or 'the query'}", file=sys.stderr)
        return 2
    spark = build_session(settings)
    for number, statement in enumerate(statements, 1):
        try:
            print_result(spark.sql(statement), args.format, args.limit, sys.stdout)
        except (Py4JError, PySparkException) as exc:  # one Spark refuses: its reason, once
            which = "the query" if len(statements) == 1 else \
                f"statement {number} of {len(statements)} (those before it were run)"
            raise JobError(which, describe_failure(exc)) from exc
    return 0


def _thrift(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.serving import thrift

    if args.action == "serve":
        return thrift.serve(settings, args.port)
    if args.action == "up":
        if args.port is not None:
            settings = replace(settings, thrift=replace(settings.thrift, port=args.port))
        server = thrift.start(settings)
        print(f"thrift server (pid {server.pid}) at {server.jdbc_url}; log {server.log_file}")
        return 0
    if args.action == "down":
        stopped = thrift.stop(settings)
        print(f"stopped thrift server pid {stopped.pid}" if stopped else "no thrift server running")
        return 0
    running = thrift.read_state(settings)
    print(f"running (pid {running.pid}) at {running.jdbc_url}" if running else "not running")
    return 0 if running else 3


def _show(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.io.deltaread import DeltaReader, sorted_head
    from medallion.io.tables import lakehouse_tables
    from medallion.serving.grid import show_string

    house = DeltaReader(settings)  # delta-rs: no Spark
    for spec in lakehouse_tables(settings):
        if spec.layer != "gold":
            continue
        print(f"== {spec.qualified_name}")
        table = house.open(spec.path(settings), spec.key)
        if table is None:
            print(f"(not created: {spec.path(settings)} is not a Delta table yet)")
            continue
        columns = spec.column_names
        rows, more = sorted_head(table, columns, columns[:3], args.limit, spec.key)
        print(show_string(columns, [[row[c] for c in columns] for row in rows], more))
    return 0


def _quality(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.io.tables import QUALITY_RESULTS
    from medallion.quality.summary import (
        DOCS_COLUMNS,
        build_data_docs,
        format_summary,
        group_checks,
        read_results,
        summarise,
    )

    table = args.table
    if table is not None:
        try:
            table = settings.declared_table(table)[1].key  # layer.name is layer/name too
        except KeyError:
            declared = ", ".join(sorted(t.key for p in settings.pipelines for t in p.tables()))
            print(f"medallion: quality: --table {table!r}: no pipeline declares this table "
                  f"(declared: {declared})", file=sys.stderr)
            return 2
    rows = read_results(settings, table=table)  # delta-rs: no Spark
    if rows is None:
        print(f"no quality results yet ({QUALITY_RESULTS.path(settings)} does not exist)")
        return 0
    print(format_summary(summarise(rows, batches=args.batches)))
    if args.docs:
        checks = group_checks(read_results(settings, DOCS_COLUMNS, table) or [],
                              batches=args.batches)
        written = build_data_docs(checks, args.docs)
        print(f"Data Docs: {len(written) - 1} validation pages, index at {written[-1]}")
    return 0


def _land(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from botocore.exceptions import BotoCoreError, ClientError

    from medallion.ops.landing import MIB, LandingError, land_files

    try:
        landed = land_files(settings, [Path(f) for f in args.files], entity=args.entity,
                            part_size=args.part_size_mib * MIB)
    except (BotoCoreError, ClientError) as exc:
        raise LandingError(f"upload to {settings.paths.landing} failed: {exc}") from exc
    for each in landed:
        state = "already there" if each.skipped else f"uploaded in {each.parts} part(s)"
        print(f"{each.source} -> {each.target}: {each.size} bytes, {state}, sha256 {each.checksum}")
    return 0


def _infra(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from botocore.exceptions import BotoCoreError

    from medallion.io.s3 import s3_client
    from medallion.ops.infra.policy import job_policy
    from medallion.ops.infra.provision import ProvisionError, apply, format_plan, plan

    if args.action == "policy":
        print(json.dumps(job_policy(settings), indent=2))
        return 0
    client = s3_client(settings.s3)
    try:
        planned = plan(client, settings)
    except BotoCoreError as exc:  # no route, no credentials: say so without a traceback
        raise ProvisionError(f"cannot read the buckets' state: {exc}") from exc
    print(f"environment {settings.env}, endpoint {settings.s3.endpoint or 'AWS'}")
    print(format_plan(planned))
    if args.action == "plan":
        print("job role policy (medallion infra policy prints it alone):")
        print(json.dumps(job_policy(settings), indent=2))
        return 0
    result = apply(client, settings, planned, allow_unsupported=args.allow_unsupported,
                   force=args.force)
    print(f"applied {len(result.applied)} change(s)")
    for change in result.unsupported:
        print(f"  not implemented by the server: {change}")
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.ops.status import collect_status, format_status

    statuses = collect_status(settings)  # delta-rs: no Spark
    print(format_status(statuses))
    return 1 if any(s.last_run_succeeded is False for s in statuses) else 0


def _maintain(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.ops.maintenance import (
        RetentionError,
        UnknownTableError,
        check_retention,
        format_maintenance,
        maintain,
        maintained_tables,
    )
    from medallion.spark.session import build_session

    hours = args.retain_hours
    try:  # refused before Spark starts
        maintained_tables(settings, args.tables)
        check_retention(settings.maintenance.vacuum_retention_hours if hours is None else hours,
                        args.allow_short_retention or args.no_vacuum)
    except UnknownTableError as exc:
        print(f"medallion: maintain: {exc}", file=sys.stderr)
        return 2
    except RetentionError as exc:
        print(f"medallion: refused: {exc}", file=sys.stderr)
        return 2
    from medallion.io.locks import hold_writers

    hold_writers(settings.paths.lakehouse)  # OPTIMIZE and VACUUM rewrite what runs write
    spark = build_session(settings)
    results = maintain(spark, settings, args.tables, hours, args.allow_short_retention,
                       optimize=not args.no_optimize, vacuum=not args.no_vacuum)
    print(format_maintenance(results))
    return 0


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.ops.report import write_report

    print(f"wrote {write_report(settings, args.output)}")  # delta-rs: no Spark
    return 0


def _backfill(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.cli.summary import format_summary
    from medallion.config.model import Trigger
    from medallion.engine.runner import Layer, run_pipeline
    from medallion.io.hadoopfs import path_exists
    from medallion.ops import backfill as bf
    from medallion.spark.session import build_session

    start, end = args.start, args.end  # parsed by argparse, before Spark starts
    if not args.full_refresh and (start is None or end is None):
        print("medallion: a range backfill needs --from and --to (or --full-refresh)", file=sys.stderr)
        return 2
    from medallion.io.locks import hold_writers

    if not args.dry_run:
        hold_writers(settings.paths.lakehouse, wait_seconds=args.wait)
    spark = build_session(settings)
    try:
        plan = bf.plan_backfill(spark, settings, args.table, start, end, args.full_refresh)
    except bf.BackfillError as exc:
        print(f"medallion: {exc}", file=sys.stderr)
        return 2
    print(plan.describe(absent={spec.key for spec in plan.rewrites if not path_exists(
        spark, f"{spec.path(settings)}/_delta_log")}))
    if args.dry_run:
        print("dry run: nothing changed")
        return 0
    once = Trigger()  # available-now: everything there is, in bounded micro-batches

    def run(layers: list[str]) -> list:
        runs = []
        for layer in layers:
            runs += run_pipeline(spark, settings, Layer(layer), once)
        return runs

    if args.full_refresh:
        if not args.yes:
            if not sys.stdin.isatty():
                print("medallion: a full refresh deletes data: confirm with --yes", file=sys.stderr)
                return 2
            answer = input(f"type {plan.target} to delete and rebuild the tables above: ")
            if answer.strip() != plan.target:
                print("medallion: not confirmed; nothing changed", file=sys.stderr)
                return 2
        print(format_summary(bf.full_refresh(spark, settings, plan, run)))
    elif plan.files:
        runs = bf.reingest_bronze(spark, settings, plan)
        print(format_summary([*runs, *run(["silver", "gold"])]))
    else:
        for table, rows in bf.backfill_gold(spark, settings, plan).items():
            print(f"{table}: {rows} rows recomputed from silver")
    return 0


def _submit_cmd(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.config.load import check_spark_setting
    from medallion.ops.submit import format_command, submit_argv, submit_env

    extra = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"medallion: --conf {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        try:  # the command line would carry it into cron logs and ps: refused like spark.conf
            check_spark_setting(key, value, key, "--conf")
        except ConfigError as exc:
            print(f"medallion: {exc}", file=sys.stderr)
            return 2
        extra[key] = value
    argv = submit_argv(settings, args.job, master=args.master, wheel=args.wheel,
                       jobs_dir=args.jobs_dir, spark_submit=args.spark_submit, extra_conf=extra,
                       trigger=args.trigger, pipelines=args.pipeline or ())
    print(format_command(argv, submit_env()))
    return 0


COMMANDS = {"run": _run, "produce": _produce, "generate": _generate, "sql": _sql, "show": _show,
            "quality": _quality, "thrift": _thrift, "land": _land, "infra": _infra,
            "status": _status, "maintain": _maintain, "submit-cmd": _submit_cmd,
            "backfill": _backfill, "report": _report}


# log4j's levels, the most verbose first
_JVM_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


def _jvm_log_level(configured: str, verbose: int) -> str:
    """What the JVM logs to the terminal: its errors with ``-v`` (the stack traces of a failed
    batch), its warnings with ``-vv`` (``spark.log_level``). Without ``-v``, only what is fatal:
    a failure is reported once, in medallion's own line, with its cause."""
    quietest = "FATAL" if verbose == 0 else "ERROR"
    return max(configured, quietest, key=_JVM_LEVELS.index)


def configure_logging(verbose: int) -> None:
    """Log lines to stderr, once, in the entry point; every line redacted of secrets.

    A command prints what its user needs (a run: the summary table) and warnings; ``-v`` adds
    what each step does and every micro-batch's progress line, ``-vv`` debugging detail.
    """
    from medallion.redact import install_log_redaction

    install_log_redaction()
    logging.basicConfig(
        level=(logging.WARNING, logging.INFO)[verbose] if verbose < 2 else logging.DEBUG,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # py4j logs a batch function's failure with its traceback, as the JVM does: for -v
    logging.getLogger("py4j").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    # Great Expectations logs each parsed suite parameter at INFO; job logs keep its warnings.
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


def _pipelines_arguments(arguments: list[str]) -> list[str] | None:
    """When the command is ``pipelines``, its own arguments: those after it, after the common
    options given before it that it takes too (``--env``, ``--conf-dir``: ``medallion --conf-dir
    mine pipelines`` checks ``mine``). None for any other command."""
    if arguments[:1] == ["pipelines"]:
        return arguments[1:]
    if "pipelines" not in arguments:
        return None
    before, rest = _parser().parse_known_args(arguments)
    if before.command != "pipelines":
        return None
    common = [*(("--env", before.env) if before.env else ()),
              *(("--conf-dir", before.conf_dir) if before.conf_dir else ())]
    return [*common, *rest]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; return the exit status."""
    from medallion.errors import JobError
    from medallion.io.deltaread import DeltaReadError
    from medallion.io.locks import LakehouseBusyError, release_all
    from medallion.ops.infra.provision import ProvisionError
    from medallion.ops.landing import LandingError
    from medallion.samples.produce import ProduceError
    from medallion.serving.thrift import ThriftError

    arguments = list(sys.argv[1:] if argv is None else argv)
    pipelines = _pipelines_arguments(arguments)
    if pipelines is not None:  # a dry run of the definitions: no settings, no Spark
        from medallion.cli.pipelines import main as pipelines_main

        return pipelines_main(pipelines)
    args = _parser().parse_args(arguments)
    configure_logging(args.verbose)
    gated = args.command in ("run", "backfill")  # both run the gates
    try:
        settings = _settings(args)  # before Spark starts: bad configuration fails fast
        if getattr(args, "pipeline", None):
            settings = settings.only(args.pipeline)
        if args.verbose < 2:
            settings = replace(settings, spark=replace(settings.spark, log_level=_jvm_log_level(
                settings.spark.log_level, args.verbose)))
        if gated:
            from medallion.quality.spec import check_expectations
            from medallion.spark.session import start_jvm_ahead

            # Checking the gates' arguments loads Great Expectations (about 2 s): the JVM starts
            # meanwhile. No Spark context exists until the command builds its session; a command
            # refused before then (here, or in the command itself) stops the JVM.
            start_jvm_ahead(settings)
            check_expectations(settings)
    except ConfigError as exc:
        print(f"medallion: {exc}", file=sys.stderr)
        if gated:
            _stop_jvm_ahead()
        return 2
    try:
        return COMMANDS[args.command](args, settings)
    except LakehouseBusyError as exc:  # the embedded catalog's, too: nothing was done
        print(f"medallion: busy: {exc}", file=sys.stderr)
        return 3
    except (JobError, ThriftError, ProduceError, LandingError, ProvisionError,
            DeltaReadError) as exc:
        print(f"medallion: failed: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if type(exc).__module__.partition(".")[0] not in ("py4j", "pyspark"):
            raise
        # Spark refused what no command wraps (its session's start: a setting it cannot take):
        # one line with the JVM's root cause; the traceback with -v.
        from medallion.io.failures import describe_failure

        if args.verbose:
            logging.getLogger(__name__).exception("medallion %s", args.command)
        print(f"medallion: failed: {args.command}: {describe_failure(exc)}", file=sys.stderr)
        return 1
    finally:
        if gated:
            _stop_jvm_ahead()  # started for a session that the command did not build
        release_all()  # a process exit releases them too; this is for in-process callers


def _stop_jvm_ahead() -> None:
    from medallion.spark.session import stop_jvm_ahead

    stop_jvm_ahead()


INTERRUPTED = 130  # the shell's status for a command ended by Ctrl-C (128 + SIGINT)


class Stopped(KeyboardInterrupt):
    """A command without a driver JVM stopped by a signal: unwound, then its status 128 + it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupted(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C or SIGTERM. A service (a processing-time run) is asked to stop once its batches
    under way have committed, and ends as a run does (its outcomes recorded, its summary
    printed); the same signal again stops it at once.

    Anything else with a driver JVM stops at once, the JVM with the command, as a kill would
    (every run recovers from one: what was committed stays, the rest is done again by the next
    run). Unwinding there would raise inside whatever py4j call is waiting, while the JVM, which
    received the signal too when on a terminal, shuts down under it. Without one: unwind, so what
    the command cleans up on the way out is cleaned (``land`` aborts its multipart upload)."""
    name = signal.Signals(signum).name
    streaming = sys.modules.get("medallion.engine.streaming")
    if streaming is not None and streaming.ask_service_to_stop(name):
        os.write(2, f"medallion: {name}: the service stops once its batches under way have "
                    f"committed ({name} again stops it at once)\n".encode())
        return
    spark = sys.modules.get("medallion.spark.session")
    if spark is None or not spark.jvm_started():
        raise Stopped(signum)
    spark.kill_jvm()
    os.write(2, f"medallion: {'interrupted' if signum == signal.SIGINT else name}; what was "
                f"committed stays, and the next run carries on from there\n".encode())
    os._exit(128 + signum)


def entry_point() -> None:
    """Console script ``medallion``."""
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        status = main()
    except Stopped as stopped:
        print(f"medallion: {'interrupted' if stopped.signum == signal.SIGINT else stopped}",
              file=sys.stderr)
        status = 128 + stopped.signum
    except KeyboardInterrupt:
        print("medallion: interrupted", file=sys.stderr)
        status = INTERRUPTED
    # An exiting interpreter collects every object still alive, one by one: about 0.5 s once
    # Great Expectations, pandas and PySpark are loaded. The process is ending and the system frees
    # its memory, so they are left out of that collection (output is flushed as before).
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    entry_point()
