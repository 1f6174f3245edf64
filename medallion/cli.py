"""The ``medallion`` command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from medallion.config import ConfigError, Settings, load_settings

log = logging.getLogger("medallion")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", help="configuration overlay conf/<env>.yaml (default: $MEDALLION_ENV or local)")
    parser.add_argument("--conf-dir", help="folder holding base.yaml and the overlays")
    parser.add_argument("--landing", help="landing zone (overrides configuration and $MEDALLION_LANDING)")
    parser.add_argument("--lakehouse", help="lakehouse root (overrides configuration and $MEDALLION_LAKEHOUSE)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _common(common)
    parser = argparse.ArgumentParser(prog="medallion", description=__doc__, parents=[common])
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

    land = commands.add_parser(
        "land", parents=[common],
        help="upload files to the landing zone (multipart, checksums verified)")
    land.add_argument("files", nargs="+", metavar="FILE")
    land.add_argument("--entity", choices=["events", "customers"],
                      help="landing folder (default: .json -> events, .csv -> customers)")
    land.add_argument("--part-size-mib", type=int, default=16,
                      help="multipart part size; larger files are uploaded in parts (min 5)")

    infra = commands.add_parser("infra", parents=[common],
                                help="plan or apply the buckets of the configured paths")
    infra.add_argument("action", choices=["plan", "apply", "policy"],
                       help="plan: print what apply would change (dry run); apply: change it; "
                            "policy: print the job role's IAM policy")
    infra.add_argument("--allow-unsupported", action="store_true",
                       help="apply: accept calls an S3-compatible server does not implement")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(env=args.env, conf_dir=args.conf_dir, landing=args.landing,
                         lakehouse=args.lakehouse, trigger=getattr(args, "trigger", None))


def _generate(args: argparse.Namespace, settings: Settings) -> int:
    from medallion.generate import GenerateSpec, generate_landing

    start = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
    spec = GenerateSpec(events=args.events, files=args.files, users=args.users, seed=args.seed,
                        burst=args.burst, start=start)
    from medallion.s3 import is_s3

    if is_s3(settings.paths.landing):
        # Object storage: write the files locally, then land them (verified uploads).
        import tempfile
        from pathlib import Path

        from medallion.landing import land_files

        with tempfile.TemporaryDirectory() as staging:
            files = generate_landing(staging, spec, with_customers=not args.no_customers)
            events = [f for f in files if f.parent.name == "events"]
            land_files(settings, events, entity="events")
            land_files(settings, [f for f in files if f not in events], entity="customers")
            written: list[Path] = files
    else:
        written = generate_landing(settings.paths.landing, spec,
                                   with_customers=not args.no_customers)
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


def _land(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from botocore.exceptions import BotoCoreError, ClientError

    from medallion.landing import MIB, LandingError, land_files

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

    from medallion.infra.policy import job_policy
    from medallion.infra.provision import ProvisionError, apply, format_plan, plan
    from medallion.s3 import s3_client

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
    result = apply(client, settings, planned, allow_unsupported=args.allow_unsupported)
    print(f"applied {len(result.applied)} change(s)")
    for change in result.unsupported:
        print(f"  not implemented by the server: {change}")
    return 0


COMMANDS = {"run": _run, "generate": _generate, "sql": _sql, "show": _show, "land": _land,
            "infra": _infra}


def configure_logging(verbose: bool) -> None:
    """Log lines to stderr, once, in the entry point."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; return the exit status."""
    from medallion.infra.provision import ProvisionError
    from medallion.landing import LandingError
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
    except (JobError, CheckpointError, LandingError, ProvisionError) as exc:
        print(f"medallion: failed: {exc}", file=sys.stderr)
        return 1


def entry_point() -> None:
    """Console script ``medallion``."""
    sys.exit(main())
