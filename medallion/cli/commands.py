"""The ``medallion`` commands, each ``(args, settings) -> exit status``: load what it needs,
call the library, print what its user needs."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any, TextIO

from medallion.config.model import Metastore
from medallion.errors import ConfigError
from medallion.project import Settings


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
    from medallion.engine.runner import RunIncomplete, RunTarget, run_pipeline
    from medallion.io.locks import WRITERS, hold_writers
    from medallion.spark.session import build_session

    if args.maintain:  # refused before Spark starts
        from medallion.ops.maintenance import maintain_problem

        problem = maintain_problem(args.layer, settings)
        if problem:
            print(f"medallion: run --maintain: {problem}", file=sys.stderr)
            return 2
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
        runs = run_pipeline(spark, settings, RunTarget(args.layer), settings.streaming.trigger,
                            on_batch=None if args.verbose else live_display())
    except RunIncomplete as exc:  # every table but the refused ones ran: say what they did
        incomplete, runs = exc, exc.runs
    if persistent:  # prepared at the session's start: what the run created keeps it prepared
        record_run_creations(spark, settings)
    print(format_summary(runs))
    if incomplete is not None:
        raise incomplete
    if args.maintain:  # same driver, same locks: no other writer while it rewrites files
        from datetime import datetime, timezone

        from medallion.ops.maintenance import format_maintenance, maintain, tables_due

        due = tables_due(spark, settings, datetime.now(timezone.utc))
        if due:
            print(format_maintenance(maintain(spark, settings, due)))
        else:
            print("maintenance: no table due (maintenance.every)")
    return 0


def _sql(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.pipeline.sql import split_statements

    if args.file:
        with open(args.file, encoding="utf-8") as handle:
            script = handle.read()
    elif args.query:
        script = args.query
    elif args.shell or sys.stdin.isatty():
        if args.engine == "spark":
            from medallion.serving.query import spark_sql_shell

            return spark_sql_shell(settings)
        from medallion.serving.shell import run_shell

        return run_shell(settings, args.as_of)
    else:
        print("medallion sql: give a statement, -f FILE, or --shell", file=sys.stderr)
        return 2
    statements = split_statements(script)  # run in order, as spark-sql -e and -f do
    if not statements:
        print(f"medallion sql: no statement in {args.file or 'the query'}", file=sys.stderr)
        return 2
    if args.output and args.output.endswith(".parquet") and args.engine == "spark":
        print("medallion sql: --output FILE.parquet is written by the fast path; drop "
              "--engine spark", file=sys.stderr)
        return 2
    if args.as_of is not None and args.engine == "spark":
        print("medallion sql: --as-of is the fast path's; with --engine spark write "
              "VERSION AS OF or TIMESTAMP AS OF after the table", file=sys.stderr)
        return 2
    limit = args.limit if args.limit is not None else 0 if args.output else 1000
    run = _spark_statements if args.engine == "spark" else _fast_statements
    if args.output and not args.output.endswith(".parquet"):
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            return run(statements, settings, args, limit, out)
    return run(statements, settings, args, limit, sys.stdout)


def _which(number: int, count: int) -> str:
    return "the query" if count == 1 else \
        f"statement {number} of {count} (those before it were run)"


def _fast_statements(statements: list[str], settings: Settings, args: argparse.Namespace,
                     limit: int, out: TextIO) -> int:
    from medallion.errors import JobError
    from medallion.serving.lakehouse import Lakehouse, QueryError, load_without_pandas
    from medallion.serving.output import python_rows, write_parquet, write_rows
    from medallion.serving.translate import Refused

    load_without_pandas()
    house = Lakehouse(settings, args.as_of)
    for number, statement in enumerate(statements, 1):
        try:
            result = house.query(statement, limit)
        except (Refused, QueryError) as exc:
            raise JobError(_which(number, len(statements)), str(exc)) from None
        if args.output and args.output.endswith(".parquet"):
            write_parquet(result.table, args.output)
        else:
            write_rows(result.table.column_names, python_rows(result.table), args.format, out,
                       result.more)
    return 0


def _spark_statements(statements: list[str], settings: Settings, args: argparse.Namespace,
                      limit: int, out: TextIO) -> int:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from medallion.errors import JobError
    from medallion.io.failures import describe_failure
    from medallion.serving.query import print_result
    from medallion.spark.session import build_session

    spark = build_session(settings)
    for number, statement in enumerate(statements, 1):
        try:
            print_result(spark.sql(statement), args.format, limit, out)
        except (Py4JError, PySparkException) as exc:  # one Spark refuses: its reason, once
            raise JobError(_which(number, len(statements)), describe_failure(exc)) from exc
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
    from medallion.io.deltaread import DeltaReadError
    from medallion.io.tables import lakehouse_tables
    from medallion.serving.lakehouse import Lakehouse, NotCreated, QueryError, load_without_pandas
    from medallion.serving.output import python_rows, write_rows
    from medallion.serving.translate import Refused

    load_without_pandas()
    house = Lakehouse(settings)  # the fast path: no JVM, no catalog lock
    unreadable = 0
    for spec in lakehouse_tables(settings):
        if spec.layer != "gold":
            continue
        print(f"== {spec.qualified_name}")
        order = ", ".join(str(i) for i in range(1, min(3, len(spec.column_names)) + 1))
        try:
            result = house.query(f"SELECT * FROM {spec.qualified_name} ORDER BY {order}",
                                 args.limit)
        except NotCreated:
            print(f"(not created: {spec.path(settings)} is not a Delta table yet)")
            continue
        except (QueryError, DeltaReadError, Refused) as exc:  # said; the other tables go on
            reason = str(exc) if str(exc).startswith(spec.key) else f"{spec.key}: {exc}"
            print(f"medallion: failed: {reason}", file=sys.stderr)
            unreadable += 1
            continue
        write_rows(result.table.column_names, python_rows(result.table), "table", sys.stdout,
                   result.more)
    return 1 if unreadable else 0


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


def _plan(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.ops.plan import EXIT_NEEDS_REFRESH, Verdict, collect_plan, format_plan, plan_json

    plans = collect_plan(settings)  # delta-rs and the checkpoints' files: no Spark
    print(plan_json(plans) if args.format == "json" else format_plan(plans))
    return EXIT_NEEDS_REFRESH if any(p.verdict is Verdict.NEEDS_REFRESH for p in plans) else 0


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
    from medallion.ops.status import collect_status, format_status, needs_attention

    statuses = collect_status(settings)  # delta-rs: no Spark
    print(format_status(statuses))
    return 1 if needs_attention(statuses) else 0


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

    hold_writers(settings.paths.lakehouse, wait_seconds=args.wait)  # they rewrite what runs write
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
    from medallion.engine.runner import RunTarget, run_pipeline
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
            runs += run_pipeline(spark, settings, RunTarget(layer), once)
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
    from medallion.ops.submit import format_command, pipeline_commands, submit_command, submit_env

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
    if args.maintain:
        from medallion.ops.maintenance import maintain_problem

        problem = maintain_problem(args.job, settings)
        if problem:
            print(f"medallion: submit-cmd --maintain: {problem}", file=sys.stderr)
            return 2
    options: dict[str, Any] = {
        "master": args.master, "wheel": args.wheel, "jobs_dir": args.jobs_dir,
        "spark_submit": args.spark_submit, "extra_conf": extra, "trigger": args.trigger,
        "maintain": args.maintain}
    env = submit_env()
    if args.per_pipeline:
        commands = pipeline_commands(settings, args.job, **options)
        if args.format == "json":
            print(json.dumps({name: c.as_dict(env) for name, c in commands.items()}, indent=1))
        else:
            print("\n".join(format_command(c.argv(), env) for c in commands.values()))
        return 0
    command = submit_command(settings, args.job, pipelines=args.pipeline or (), **options)
    print(command.as_json(env) if args.format == "json" else format_command(command.argv(), env))
    return 0


COMMANDS = {"run": _run, "produce": _produce, "generate": _generate, "sql": _sql, "show": _show,
            "quality": _quality, "plan": _plan, "thrift": _thrift, "land": _land, "infra": _infra,
            "status": _status, "maintain": _maintain, "submit-cmd": _submit_cmd,
            "backfill": _backfill, "report": _report}
