"""The ``medallion`` command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from medallion.config import ConfigError, Settings, load_settings

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
    parser.add_argument("-v", "--verbose", action="store_true", default=default or False,
                        help="log at DEBUG level")


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
    run.add_argument("layer", choices=["bronze", "silver", "gold", "all"])
    run.add_argument("--trigger", help="available-now (default), once, or processing-time=<interval>")

    gen = commands.add_parser("generate", parents=[common], help="write sample data to the landing zone")
    gen.add_argument("--events", type=int, default=5000)
    gen.add_argument("--files", type=int, default=4)
    gen.add_argument("--users", type=int, default=200)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--burst", default=datetime.now(timezone.utc).strftime("burst-%Y%m%dT%H%M%S"),
                     help="name of this burst (file and event id prefix)")
    gen.add_argument("--start", default="2025-01-27T10:00:00Z", help="event time of the first event")
    gen.add_argument("--no-customers", action="store_true", help="write events only")

    sql = commands.add_parser("sql", parents=[common], help="run a SQL query against the catalog")
    sql.add_argument("query")
    sql.add_argument("--limit", type=int, default=50)

    show = commands.add_parser("show", parents=[common], help="print the gold tables")
    show.add_argument("--limit", type=int, default=20)

    commands.add_parser("status", parents=[common],
                        help="per table: last version and commit, rows, lag, state, last run")

    maintain = commands.add_parser("maintain", parents=[common],
                                   help="OPTIMIZE (Z-ORDER from configuration) and VACUUM the tables")
    maintain.add_argument("--table", action="append", dest="tables",
                          help="only this table (layer/name); repeatable (default: every table)")
    maintain.add_argument("--retain-hours", type=int,
                          help="VACUUM retention in hours (default: maintenance.vacuum_retention)")
    maintain.add_argument("--allow-short-retention", action="store_true",
                          help="allow a VACUUM retention under 7 days (only with no query running)")
    maintain.add_argument("--no-optimize", action="store_true", help="VACUUM only")
    maintain.add_argument("--no-vacuum", action="store_true", help="OPTIMIZE only")

    report = commands.add_parser("report", parents=[common],
                                 help="write a self-contained HTML page of the monitoring charts")
    report.add_argument("--output", default="report.html", help="where to write it")

    backfill = commands.add_parser(
        "backfill", parents=[common],
        help="reprocess a range (gold from silver, bronze/events from landing) or rebuild a table")
    backfill.add_argument("table", help="layer/table, or gold for every gold table")
    backfill.add_argument("--from", dest="start", help="start of the range (date or ISO instant, UTC)")
    backfill.add_argument("--to", dest="end", help="end of the range, excluded")
    backfill.add_argument("--full-refresh", action="store_true",
                          help="delete the table and everything downstream of it, then rebuild them")
    backfill.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    backfill.add_argument("--yes", action="store_true", help="do not ask before a full refresh")

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
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(env=args.env, conf_dir=args.conf_dir, landing=args.landing,
                         lakehouse=args.lakehouse, trigger=getattr(args, "trigger", None))


def _generate(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.generate import GenerateSpec, generate_landing

    start = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
    spec = GenerateSpec(events=args.events, files=args.files, users=args.users, seed=args.seed,
                        burst=args.burst, start=start)
    written = generate_landing(settings.paths.landing, spec, with_customers=not args.no_customers)
    print(f"wrote {args.events} events in {len(written)} files under {settings.paths.landing}")
    return 0


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.pipeline import Layer, run_pipeline
    from medallion.spark import build_session
    from medallion.summary import format_summary

    spark = build_session(settings)
    runs = run_pipeline(spark, settings, Layer(args.layer), settings.streaming.trigger)
    print(format_summary(runs))
    return 0


def _sql(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.spark import build_session

    spark = build_session(settings)
    spark.sql(args.query).show(args.limit, truncate=False)
    return 0


def _show(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.spark import build_session
    from medallion.tables import ALL_TABLES

    spark = build_session(settings)
    for spec in ALL_TABLES:
        if spec.layer != "gold":
            continue
        order = ", ".join(spec.schema.fieldNames()[:3])
        print(f"== {spec.qualified_name}")
        spark.sql(f"SELECT * FROM {spec.qualified_name} ORDER BY {order}").show(
            args.limit, truncate=False)
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.spark import build_session
    from medallion.status import collect_status, format_status

    spark = build_session(settings)
    statuses = collect_status(spark, settings)
    print(format_status(statuses))
    return 1 if any(s.last_run_succeeded is False for s in statuses) else 0


def _maintain(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.maintenance import RetentionError, check_retention, format_maintenance, maintain
    from medallion.spark import build_session

    hours = args.retain_hours
    try:  # refused before Spark starts
        check_retention(settings.maintenance.vacuum_retention_hours if hours is None else hours,
                        args.allow_short_retention or args.no_vacuum)
    except RetentionError as exc:
        print(f"medallion: refused: {exc}", file=sys.stderr)
        return 2
    spark = build_session(settings)
    results = maintain(spark, settings, args.tables, hours, args.allow_short_retention,
                       optimize=not args.no_optimize, vacuum=not args.no_vacuum)
    print(format_maintenance(results))
    return 0


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.report import write_report
    from medallion.spark import build_session

    spark = build_session(settings)
    print(f"wrote {write_report(spark, settings, args.output)}")
    return 0


def _backfill(args: argparse.Namespace, settings: Settings) -> int:
    from medallion import backfill as bf
    from medallion.config import Trigger
    from medallion.pipeline import Layer, run_pipeline
    from medallion.spark import build_session
    from medallion.summary import format_summary

    try:  # the range is checked before Spark starts
        start = bf.parse_instant(args.start, "--from") if args.start else None
        end = bf.parse_instant(args.end, "--to") if args.end else None
        if not args.full_refresh and (start is None or end is None):
            raise bf.BackfillError("a range backfill needs --from and --to (or --full-refresh)")
    except bf.BackfillError as exc:
        print(f"medallion: {exc}", file=sys.stderr)
        return 2
    spark = build_session(settings)
    try:
        plan = bf.plan_backfill(spark, settings, args.table, start, end, args.full_refresh)
    except bf.BackfillError as exc:
        print(f"medallion: {exc}", file=sys.stderr)
        return 2
    print(plan.describe())
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
    from medallion.submit import format_command, submit_argv, submit_env

    extra = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"medallion: --conf {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        extra[key] = value
    argv = submit_argv(settings, args.job, master=args.master, wheel=args.wheel,
                       jobs_dir=args.jobs_dir, spark_submit=args.spark_submit, extra_conf=extra,
                       trigger=args.trigger)
    print(format_command(argv, submit_env()))
    return 0


COMMANDS = {"run": _run, "generate": _generate, "sql": _sql, "show": _show, "status": _status,
            "maintain": _maintain, "submit-cmd": _submit_cmd, "backfill": _backfill,
            "report": _report}


def configure_logging(verbose: bool) -> None:
    """Log lines to stderr, once, in the entry point."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; return the exit status."""
    from medallion.sinks.delta import CheckpointError
    from medallion.streaming import JobError

    args = _parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        settings = _settings(args)  # before Spark starts: bad configuration fails fast
    except ConfigError as exc:
        print(f"medallion: {exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](args, settings)
    except (JobError, CheckpointError) as exc:
        print(f"medallion: failed: {exc}", file=sys.stderr)
        return 1


def entry_point() -> None:
    """Console script ``medallion``."""
    sys.exit(main())
