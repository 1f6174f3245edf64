"""The OpenLineage Spark listener, when ``lineage`` is on: its jar and its Spark settings.

Every session the project starts (``medallion run``, backfill, maintain, the SQL shell, the
Thrift server, and the jobs under the command ``submit-cmd`` prints) takes the same settings, so
a job emits the same events wherever it runs. Off (the default), nothing here reaches a session:
no package (nothing downloaded), no listener, no ``spark.openlineage.*`` setting.

The listener reads its settings once, when the Spark context starts, so they cannot differ per
table: the application's job is named after the pipelines the session runs, and each write's
job after the listener's own rule (``<application>.<plan node>.<layer>_<table>`` for an append;
a Delta MERGE's job carries no table name). The listener does not use the streaming queries'
names. Which inputs and outputs the events name, layer by
layer, is in docs/operations.md ("Lineage").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from medallion.config.jvm import openlineage_listener
from medallion.config.model import LineageTransport
from medallion.project import Settings

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
EXTRA_LISTENERS = "spark.extraListeners"


def lineage_packages(settings: Settings) -> tuple[str, ...]:
    """The listener's jar when lineage is on; else nothing."""
    return (openlineage_listener(),) if settings.lineage.enabled else ()


def application_name(settings: Settings, pipelines: Sequence[str] = ()) -> str:
    """The name of the application's job in the events: ``<spark.app_name>_<pipeline>``, each
    pipeline the session runs after the other (``pipelines``: those a command is narrowed to,
    when ``settings`` are not narrowed yet). The listener writes names in snake case, so this
    one is given as it will read."""
    names = list(pipelines) or [pipeline.name for pipeline in settings.pipelines]
    return "_".join([settings.spark.app_name, *names])


def lineage_conf(settings: Settings, pipelines: Sequence[str] = (),
                 configured: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings that add the listener (none when lineage is off).

    ``configured``: the session's other settings; a listener they already name in
    ``spark.extraListeners`` is kept beside this one.
    """
    lineage = settings.lineage
    if not lineage.enabled:
        return {}
    listeners = [name.strip() for name in (configured or {}).get(EXTRA_LISTENERS, "").split(",")
                 if name.strip() and name.strip() != LISTENER]
    conf = {
        EXTRA_LISTENERS: ",".join([*listeners, LISTENER]),
        "spark.openlineage.namespace": lineage.namespace,
        "spark.openlineage.appName": application_name(settings, pipelines),
        "spark.openlineage.transport.type": lineage.transport.value,
    }
    if lineage.transport is LineageTransport.FILE:
        assert lineage.path is not None  # checked when the settings were read
        conf["spark.openlineage.transport.location"] = lineage.path
    else:
        assert lineage.url is not None
        conf["spark.openlineage.transport.url"] = lineage.url
    return conf
