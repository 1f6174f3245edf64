"""The one Spark session factory.

Every job, the CLI and the tests build their session here, so Delta, the state store, the time
zone and the JVM packages are the same everywhere. Library code receives ``spark`` as an argument.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from medallion.config.model import Metastore
from medallion.io.catalog import check_catalog_free, prepare_catalog
from medallion.project import Settings
from medallion.spark.jvm_archive import ArchivePlan, archive_plan
from medallion.spark.lineage import lineage_conf
from medallion.spark.packages import (
    jvm_packages,
    remember_jars,
    resolution_conf,
    resolved_jars,
)
from medallion.spark.s3a import apply_hadoop_conf, s3a_conf

log = logging.getLogger(__name__)

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


# Defaults that make a lakehouse on a small cluster behave; configuration may override any of them.
BASE_CONF = {
    # All timestamps are instants in UTC, whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
    # RocksDB keeps streaming state off the JVM heap. Every commit uploads a snapshot of the
    # store (only its new SST files are copied), so a run loads the last version directly.
    # Changelog checkpointing is off on purpose: it uploads snapshots only from the executors'
    # maintenance thread (every 60 s by default), which an available-now run rarely lives to see,
    # so each run would load the state by replaying every changelog since the query began, a
    # cost that grows with the history (docs/operations.md, "State store").
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
    # A streaming query refuses to start on a checkpoint that does not match its plan.
    "spark.sql.streaming.stateStore.stateSchemaCheck": "true",
    # The partitions of a Delta table's state rebuild (its log replayed: every write checks its
    # transaction id against it). Each task of it generates and loads the code that decodes the
    # log's actions, which costs more than the replay of a table with a few hundred files; one
    # task per rebuild makes first runs and increments of 200 events 15-18% shorter than four.
    # Delta's default, 50, suits tables of many thousands of files on a
    # cluster: the cluster overlays (conf/dev.yaml, conf/prod.yaml) set their own.
    "spark.databricks.delta.snapshotPartitions": "1",
    # Keep table statistics so analysts' filters skip files.
    "spark.databricks.delta.properties.defaults.checkpointInterval": "10",
    # Compiled code kept for reuse. Spark's default of 100 classes is less than one run of the
    # default pipeline generates (about 380 distinct: five gold queries and their MERGEs, Delta's
    # log replays, the gates), so a run evicted and compiled the same code again and again.
    "spark.sql.codegen.cache.maxEntries": "1000",
}


LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


_ROCKSDB = "spark.sql.streaming.stateStore.rocksdb"


_COUNT_ROWS = f"{_ROCKSDB}.trackTotalNumberOfRows"


def state_store_conf(settings: Settings) -> dict[str, str]:
    """RocksDB from ``state_store`` in configuration: memory bounds (per executor, all instances)
    and whether each store counts its rows.

    Counting (Spark's ``numRowsTotal``) makes every put and remove read the key first, to know
    whether it adds or drops a row: about a sixth of a stateful query's time in a large batch
    (docs/operations.md, "State store"). Off by default; the progress then reports no row count.
    """
    return {
        f"{_ROCKSDB}.boundedMemoryUsage": "true",
        f"{_ROCKSDB}.maxMemoryUsageMB": str(settings.state_store.max_memory_mb),
        f"{_ROCKSDB}.writeBufferCacheRatio": str(settings.state_store.write_buffer_ratio),
        _COUNT_ROWS: str(settings.state_store.count_rows).lower(),
    }


def counts_state_rows(settings: Settings) -> bool:
    """Whether the state stores' progress counts their rows: RocksDB with counting on (the
    ``state_store`` section, or ``spark.conf`` over it), or another provider (which always does)."""
    conf = session_conf(settings)
    if "RocksDB" not in conf.get("spark.sql.streaming.stateStore.providerClass", ""):
        return True
    return conf.get(_COUNT_ROWS, "true").strip().lower() == "true"


def derby_dir(settings: Settings) -> str:
    """Folder of the embedded Derby metastore database: ``<lakehouse>/_catalog/metastore_db``."""
    return f"{settings.catalog_dir()}/metastore_db"


def catalog_conf(settings: Settings) -> dict[str, str]:
    """Spark settings of the configured metastore (Hive support for a persistent catalog)."""
    catalog = settings.catalog
    if catalog.metastore is Metastore.IN_MEMORY:
        return {"spark.sql.catalogImplementation": "in-memory"}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if catalog.metastore is Metastore.EMBEDDED:
        # Derby's database lives beside the tables, never in the working directory.
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={derby_dir(settings)};create=true")
    elif catalog.metastore_uris:
        conf["spark.hadoop.hive.metastore.uris"] = catalog.metastore_uris
    return conf


def session_conf(settings: Settings) -> dict[str, str]:
    """Every Spark setting the factory applies (besides master and packages), in one mapping.

    The interactive SQL shell is launched with exactly these, so it sees what the jobs see.
    """
    conf = {
        **resolution_conf(),
        **BASE_CONF,
        **state_store_conf(settings),
        **s3a_conf(settings.s3),
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        # The tasks of a parallel file listing, VACUUM's above all, as wide as the shuffles:
        # Spark's default of 10,000 would make VACUUM of a three-file table run 170,000 tasks
        # (20-30 s on local[2], against 2 s).
        LISTING_PARALLELISM: str(4 * settings.spark.shuffle_partitions),
        # Databases of the session catalog live beside the tables, not in the working directory.
        "spark.sql.warehouse.dir": settings.catalog_dir(),
        **catalog_conf(settings),
        **settings.spark.conf,
        **DELTA_CONF,
    }
    return {**conf, **lineage_conf(settings, configured=conf)}


# Warnings the Hive metastore logs on every Delta table it is given, none of them a fault: Delta
# tables have no Hive SerDe (Spark keeps them in its own format), lookups of `delta`.`<path>`
# names miss, and a fresh Derby database has no version recorded.
_HARMLESS_METASTORE_LOGGERS = (
    "org.apache.hadoop.hive.metastore.ObjectStore",
    "org.apache.spark.sql.hive.HiveExternalCatalog",
    "org.apache.hadoop.hive.conf.HiveConf",
)


def _quiet_metastore_warnings(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.ERROR  # type: ignore[union-attr]
    for name in _HARMLESS_METASTORE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(  # type: ignore[union-attr]
            name, level)


def submitted_conf() -> SparkConf:
    """What spark-submit passed (master, packages, ...) if it launched this Python; else empty.

    Under spark-submit the JVM is already running (its gateway port is in the environment), but
    ``SparkConf()`` reads the JVM's settings only once Python has connected to it: connect first,
    or a configured ``spark.master`` would override the ``--master`` given to spark-submit.
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
    return SparkConf()


DIST_CLASSPATH = "SPARK_DIST_CLASSPATH"


ARCHIVE_WAIT_SECONDS = 120.0


# The driver JVM's logging: Spark's defaults without their start-up banner (a file URI is
# percent-encoded, so no space splits the option string).
JVM_LOGGING_OPTION = ("-Dlog4j2.configurationFile="
                      + Path(__file__).resolve().with_name("log4j2.properties").as_uri())


JVM_LOG_LEVEL = "MEDALLION_JVM_LOG_LEVEL"


QUIET_LEVELS = frozenset({"ERROR", "FATAL", "OFF"})  # no JVM warnings at these session levels


def spark_jars_dir() -> Path:
    """The jars of the Spark installation whose launcher PySpark runs."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def _local_master(settings: Settings, submitted: SparkConf) -> bool:
    """Whether the session's executors run inside the driver's JVM (``local``, ``local[N]``)."""
    master = submitted.get("spark.master") or settings.spark.master or "local[*]"
    return master.startswith("local")


# Lines the driver JVM writes past its logging, left out below -vv: the JVM's own notice when it
# starts with the incubator module Spark 4's launcher adds to every JVM
# (``--add-modules=jdk.incubator.vector``), written before any logging is set up; and the line
# Delta's VACUUM prints to standard output for each table (``medallion maintain``'s table has
# the count in its ``vacuumed`` column).
JVM_NOTICES = re.compile(rb"WARNING: Using incubator modules: jdk\.incubator\.vector|"
                         # Java 25: Spark's --add-opens of a package java.base no longer has
                         rb"WARNING: package sun\.security\.action not in java\.base|"
                         rb"Deleted \d+ files and directories in a total of \d+ directories\.")


def kept_output(pending: bytes, drop: re.Pattern[bytes]) -> tuple[bytes, bytes]:
    """Of the JVM's output read so far, the complete lines to pass on (those ``drop`` does not
    match whole) and the rest of a line still being written."""
    *lines, rest = pending.split(b"\n")
    return b"".join(line + b"\n" for line in lines
                    if not drop.fullmatch(line.rstrip(b"\r"))), rest


def _relay(source: int, target: int, drop: re.Pattern[bytes]) -> None:
    """Pass the JVM's output from ``source`` on to ``target`` until the JVM closes it, without
    the lines ``drop`` matches whole."""
    pending = b""
    try:
        while chunk := os.read(source, 65536):
            out, pending = kept_output(pending + chunk, drop)
            while out:
                out = out[os.write(target, out):]
        if pending:
            os.write(target, pending)
    except OSError:
        pass  # this process's stderr is gone: nothing left to write to
    finally:
        os.close(source)
        os.close(target)


def _launch_jvm(plan: _SessionPlan) -> None:
    """Start the driver's JVM for ``plan`` the way PySpark would, but with its standard output on
    stderr, and the plan's ``class_path`` after Spark's own jars. A JVM asked to write its class
    archive at exit is waited for when this process exits, and the archive put in place.

    A command's standard output is its result (``medallion sql --format json``, a CSV export):
    the JVM must not write there, and Ivy prints ``:: loading settings ::`` to it. The launcher
    puts ``SPARK_DIST_CLASSPATH`` after Spark's jars (``spark.driver.extraClassPath`` would go
    before them, and the AWS SDK bundle's old copy of SLF4J would then silence Spark's logging).

    A ``quiet`` plan (a session whose JVM logs errors only): the JVM's output goes through this
    process, which leaves out the lines no logging setting reaches (:data:`JVM_NOTICES`: its start-up
    notice, Delta's VACUUM line); the rest reaches this process's stderr as it is written.
    """
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(plan.builder._options.items()))  # what getOrCreate would give the launcher
    inherited = os.environ.get(DIST_CLASSPATH)
    if plan.class_path:
        os.environ[DIST_CLASSPATH] = os.pathsep.join([*filter(None, [inherited]),
                                                      *plan.class_path])
    output = sys.stderr.fileno()
    if plan.quiet:
        # Relayed from the start (a JVM resolving packages writes Ivy's report before the
        # gateway is up, more than a pipe holds), to the stderr this process has now, as the
        # JVM would have inherited it.
        source, output = os.pipe()
        threading.Thread(target=_relay, args=(source, os.dup(sys.stderr.fileno()), JVM_NOTICES),
                         name="medallion-jvm-output", daemon=True).start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": output, "stderr": output})
    finally:
        if plan.quiet:
            os.close(output)  # the JVM has its own copy; the relay ends when the JVM exits
        if inherited is None:
            os.environ.pop(DIST_CLASSPATH, None)
        else:
            os.environ[DIST_CLASSPATH] = inherited
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm
    if plan.archive.written is not None:
        atexit.register(_settle_archive, gateway.proc, plan.archive)


def _settle_archive(proc: subprocess.Popen[bytes], archive: ArchivePlan) -> None:
    """At exit: close the JVM's standard input (PySpark's signal to exit), wait while it writes
    its class archive, then put the archive in place. A JVM still writing after
    ``ARCHIVE_WAIT_SECONDS`` is left to finish; the next start takes its archive.

    The context is stopped first, as PySpark's own stop does it: left to the JVM's shutdown, its
    stop would close the accumulators' connection under this process's server (a traceback)."""
    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):  # exiting: the archive matters less than the exit
            context.stop()
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=ARCHIVE_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        return
    archive.settle()


@dataclass
class _SessionPlan:
    """What a session is built from: the builder with its options, and the JVM's launch."""

    builder: SparkSession.Builder
    class_path: list[str]
    archive: ArchivePlan
    packages: list[str]
    known_jars: list[str] | None
    conf: dict[str, str]
    quiet: bool = False  # the JVM's notices left out (a session logging errors only)


def _session_plan(settings: Settings, extra_conf: dict[str, str] | None,
                  resolve_packages: bool) -> _SessionPlan:
    """The builder and the JVM's launch for ``build_session`` (no JVM is started here)."""
    builder = SparkSession.builder
    submitted = submitted_conf()
    if not submitted.contains("spark.app.name"):
        builder = builder.appName(settings.spark.app_name)
    if settings.spark.master and not submitted.contains("spark.master"):
        builder = builder.master(settings.spark.master)
    packages = jvm_packages(settings)
    known_jars = None if resolve_packages else resolved_jars(packages)
    class_path: list[str] = []
    archive = ArchivePlan()
    conf = {**session_conf(settings), **(extra_conf or {})}
    if submitted.contains("spark.jars.packages") or submitted.contains("spark.jars"):
        packages = []  # spark-submit resolved what it was given
    elif known_jars and SparkContext._gateway is None and _local_master(settings, submitted):
        # On the class path of the JVM about to start, not in spark.jars: a local executor copies
        # every spark.jars file into its temporary folder at each start (800 MB with the AWS SDK
        # bundle), which costs seconds and, when a run is killed, stays behind in /tmp.
        class_path = known_jars
    elif known_jars:
        builder = builder.config("spark.jars", ",".join(known_jars))
    else:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    if known_jars:  # nothing to resolve: Ivy need not load its settings (and say so on stdout)
        for key in resolution_conf():
            conf.pop(key, None)
    if SparkContext._gateway is None and not submitted.contains("spark.driver.extraJavaOptions"):
        options = " ".join(filter(None, [JVM_LOGGING_OPTION,
                                         conf.get("spark.driver.extraJavaOptions")]))
        if known_jars or not packages:  # a JVM that runs Ivy (set-up) is not the one runs start
            # The JVM's whole class path, as the launcher will build it (_launch_jvm).
            before = [entry for entry in conf.get("spark.driver.extraClassPath", "").split(
                os.pathsep) if entry]
            after = [*(entry for entry in os.environ.get(DIST_CLASSPATH, "").split(os.pathsep)
                       if entry), *class_path]
            archive = archive_plan(os.environ, spark_jars_dir(), after, options,
                                   conf.get("spark.driver.memory"), before)
        conf["spark.driver.extraJavaOptions"] = " ".join(filter(None, [options, archive.options]))
    # Read by log4j2.properties when the JVM starts: Spark's start-up notes at the session's level.
    os.environ[JVM_LOG_LEVEL] = settings.spark.log_level
    if not (submitted.contains("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")):
        # Python workers run this interpreter (the venv's, with the package's dependencies), not
        # whatever ``python3`` the PATH finds first, which may be another version. PySpark reads
        # the variable when the context starts (spark-submit sets it from its own settings).
        os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in conf.items():
        if not submitted.contains(key):  # a --conf given to spark-submit wins
            builder = builder.config(key, value)
    quiet = settings.spark.log_level.upper() in QUIET_LEVELS
    return _SessionPlan(builder, class_path, archive, packages, known_jars, conf, quiet)


@dataclass
class _JvmAhead:
    """A driver JVM started in the background for the session the command builds next."""

    settings: Settings
    plan: _SessionPlan
    thread: threading.Thread | None = None
    error: BaseException | None = None
    session: SparkSession | None = None  # its context, made ahead too

    def launch(self) -> None:
        try:
            _launch_jvm(self.plan)
            # The context as well (about 1.2 s more, mostly the JVM's): it reads no table and
            # does not touch the catalog, which the session's build checks and prepares.
            self.session = self.plan.builder.getOrCreate()
        except BaseException as exc:  # noqa: BLE001 - raised where the session is built
            self.error = exc


_AHEAD: list[_JvmAhead] = []  # at most one


def start_jvm_ahead(settings: Settings) -> None:
    """Start the driver's JVM in the background, for ``build_session(settings)`` to use.

    What a command checks before Spark starts (the gates' expectations, through Great
    Expectations' 2-second import) then overlaps the session's start: the JVM, then the Spark
    context. :func:`stop_jvm_ahead` stops both when no session took them (a refused
    configuration). Nothing is started when a JVM already runs.
    """
    if SparkContext._gateway is not None or _AHEAD:
        return
    ahead = _JvmAhead(settings, _session_plan(settings, None, resolve_packages=False))
    ahead.thread = threading.Thread(target=ahead.launch, name="medallion-jvm-start", daemon=True)
    ahead.thread.start()
    _AHEAD.append(ahead)


def _take_jvm_ahead() -> _JvmAhead | None:
    """The JVM started ahead, once its start has finished; it is no longer held for later."""
    if not _AHEAD:
        return None
    ahead = _AHEAD.pop()
    if ahead.thread is not None:
        ahead.thread.join()
    return ahead


def stop_jvm_ahead() -> None:
    """Stop a JVM started ahead that no session took: no process of it is left behind."""
    _stop(_take_jvm_ahead())


def _stop(ahead: _JvmAhead | None) -> None:
    gateway = SparkContext._gateway
    if ahead is None or gateway is None:
        return  # nothing started
    if ahead.session is not None:
        with contextlib.suppress(Exception):  # made ahead, and nothing ran on it
            ahead.session.stop()
    if SparkContext._active_spark_context is not None:
        return  # a session runs on it
    SparkContext._gateway = None
    SparkContext._jvm = None
    proc = gateway.proc
    with contextlib.suppress(Exception):
        gateway.close()
    if proc is None:
        return  # a JVM this process did not launch (spark-submit's): not this process's to stop
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()  # PySpark's signal to the JVM to exit
    try:
        proc.wait(timeout=ARCHIVE_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _interrupts_kept() -> Iterator[None]:
    """Keep the process's Ctrl-C handler across a Spark context's creation, which replaces it with
    PySpark's when made on the main thread (cancel the jobs, then raise KeyboardInterrupt inside
    whatever py4j call is waiting: a traceback, and a run that carried on)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, kept)


def jvm_started() -> bool:
    """Whether this process has a driver JVM, or is starting one."""
    return SparkContext._gateway is not None or bool(_AHEAD)


def kill_jvm() -> None:
    """Kill the driver JVM this process launched, at once (an interrupted command): as a kill of
    the whole command would, which a run recovers from like any other."""
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None:
        with contextlib.suppress(OSError):
            proc.kill()


def leave_termination_to_the_driver(spark: SparkSession) -> None:
    """Make the driver JVM this process launched ignore SIGTERM, so that a service stopped by it
    stops through this process (its batches under way committed, its outcomes recorded) even
    when the signal reaches every process of the group or cgroup (a scheduler's stop, ``kill``
    of the process group); the JVM would otherwise shut its Spark context down under the running
    queries. It still exits with this process, whose end closes its standard input. A JVM this
    process did not launch (spark-submit's) is left as it is: its signals are its launcher's."""
    gateway = SparkContext._gateway
    if gateway is None or getattr(gateway, "proc", None) is None:
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)


# PySpark's loggers of errors that carry a query context: each writes the error, with its JVM
# stack trace, as one JSON line to stderr when the exception is made, caught or not.
_QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _quiet_query_context_loggers() -> None:
    """Keep PySpark's query-context error lines for ``-vv``: a failure reaches the user once,
    in medallion's own words, and an error the engine expects and handles (a view waiting for
    its table) is not one."""
    from pyspark.logger import PySparkLogger

    debugging = log.isEnabledFor(logging.DEBUG)
    for name in _QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.ERROR if debugging else logging.CRITICAL)


def build_session(settings: Settings, register_tables: bool = True,
                  extra_conf: dict[str, str] | None = None,
                  resolve_packages: bool = False, list_catalog: bool = True) -> SparkSession:
    """Build (or return the running) Spark session configured for the lakehouse.

    The catalog is Hive's metastore (embedded Derby under ``<lakehouse>/_catalog`` by default), so
    tables, views and comments survive between runs. With ``register_tables`` the lakehouse's
    existing tables are (re-)registered as ``<layer>.<table>`` and the configured views created;
    ``list_catalog`` False skips asking the metastore which names it holds when nothing else
    changed (see :func:`~medallion.io.catalog.prepare_catalog`).
    ``extra_conf`` adds settings for this session only (the Thrift server's port, for one).
    JVM packages resolved at an earlier start are used as local jars unless ``resolve_packages``
    (set-up resolves them afresh).
    """
    if settings.catalog.metastore is Metastore.EMBEDDED:
        Path(settings.catalog_dir()).mkdir(parents=True, exist_ok=True)
        check_catalog_free(derby_dir(settings))  # a clear message instead of Derby's stack trace
    ahead = _take_jvm_ahead()  # started while the command checked its configuration
    made_ahead: SparkSession | None = None
    if ahead is not None and ahead.settings == settings and not (extra_conf or resolve_packages):
        if ahead.error is not None:
            _stop(ahead)
            raise ahead.error
        plan = ahead.plan
        made_ahead = ahead.session
    else:
        _stop(ahead)  # none, or started for another session than this one
        plan = _session_plan(settings, extra_conf, resolve_packages)
    builder, packages, known_jars, conf = plan.builder, plan.packages, plan.known_jars, plan.conf
    fresh = made_ahead is not None or SparkContext._active_spark_context is None
    if made_ahead is not None:
        # Taken as it is: the builder again would only warn that its options are already set.
        spark = made_ahead
    else:
        if SparkContext._gateway is None:
            _launch_jvm(plan)
        with _interrupts_kept():
            spark = builder.getOrCreate()
    if fresh and packages and not known_jars:
        remember_jars(packages, spark)
    apply_hadoop_conf(spark, conf)  # a session that already ran gets this lakehouse's S3 settings
    spark.sparkContext.setLogLevel(settings.spark.log_level)
    _quiet_query_context_loggers()
    if settings.catalog.metastore is Metastore.EMBEDDED:
        # Derby reads this when it boots, at the first catalog access (not yet made): keep its
        # log beside its database instead of in the working directory.
        spark.sparkContext._jvm.java.lang.System.setProperty(  # type: ignore[union-attr]
            "derby.stream.error.file", f"{settings.catalog_dir()}/derby.log")
    if settings.catalog.metastore is not Metastore.IN_MEMORY and settings.spark.log_level in (
            "WARN", "ERROR", "FATAL", "OFF"):
        _quiet_metastore_warnings(spark)
    log.info("spark %s session ready (master %s, catalog %s)", spark.version,
             spark.sparkContext.master, settings.catalog.metastore.value)
    if register_tables:
        prepare_catalog(spark, settings, list_names=list_catalog)
    return spark
