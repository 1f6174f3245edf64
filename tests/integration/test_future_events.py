"""One event stamped years ahead (a device's clock, a typo) must not move gold's watermarks past
all real data: silver quarantines it (``future_timestamp``, more than a day after its ingestion)."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from medallion.samples.generate import write_atomically
from tests.events_tables import SILVER_QUARANTINE

NOW = Trigger.parse("available-now")


def _event(event_id: str, at: str) -> str:
    return json.dumps({"event_id": event_id, "user_id": "u0001", "event_type": "view",
                       "timestamp": at, "amount": None})


def test_an_event_stamped_years_ahead_is_quarantined_and_later_events_still_count(
        spark: SparkSession, settings: Settings) -> None:
    landing = Path(settings.paths.landing)
    write_atomically(landing / "customers" / "customers.csv",
                     ["customer_id,customer_name,segment", "u0001,Ann,smb"])
    write_atomically(landing / "events" / "burst-1.json",
                     [_event(f"a{i}", f"2025-01-27T10:0{i}:00Z") for i in range(5)]
                     + [_event("far", "9999-12-31T00:00:00Z")])
    run_pipeline(spark, settings, RunTarget.ALL, NOW)
    # The next burst, 6 minutes after the last event: well within the 10-minute watermark.
    write_atomically(landing / "events" / "burst-2.json",
                     [_event(f"b{i}", f"2025-01-27T10:10:0{i}Z") for i in range(3)])
    runs = run_pipeline(spark, settings, RunTarget.ALL, NOW)

    quarantine = [(r["event_id"], r["reasons"]) for r in
                  DeltaTable(SILVER_QUARANTINE.path(settings)).to_pyarrow_dataset().to_table()
                  .to_pylist()]
    assert quarantine == [("far", ["future_timestamp"])]
    counts = {(r["window_start"].isoformat(), r["event_count"]) for r in
              DeltaTable(f"{settings.paths.lakehouse}/gold/event_counts_5m").to_pyarrow_dataset()
              .to_table().to_pylist()}
    # The far event must not move the watermark to 9999-12-30T23:50, which would drop the second
    # burst as late: the 10:10 window is there.
    assert counts == {("2025-01-27T10:00:00+00:00", 5), ("2025-01-27T10:10:00+00:00", 3)}
    assert sum(run.late_rows_dropped for run in runs) == 0
