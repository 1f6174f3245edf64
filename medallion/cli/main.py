"""The ``medallion`` command's entry point: parse, load the project, call the command, exit with
a status; logging configured once, and what a signal does."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType

from medallion.cli.commands import COMMANDS
from medallion.cli.parser import build_parser, pipelines_arguments
from medallion.errors import ConfigError
from medallion.project import Settings, load_settings

log = logging.getLogger("medallion")


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(env=args.env, conf_dir=args.conf_dir, landing=args.landing,
                         lakehouse=args.lakehouse, trigger=getattr(args, "trigger", None),
                         read_from=getattr(args, "read_from", None),
                         kafka_bootstrap=getattr(args, "bootstrap_servers", None))


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
    pipelines = pipelines_arguments(arguments)
    if pipelines is not None:  # a dry run of the definitions: no settings, no Spark
        from medallion.cli.pipelines import main as pipelines_main

        return pipelines_main(pipelines)
    args = build_parser().parse_args(arguments)
    configure_logging(args.verbose)
    if args.command == "init":  # writes a declaration: no settings to load, no Spark
        from medallion.cli.init import main as init_main

        return init_main(args)
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
