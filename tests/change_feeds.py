"""A change feed for the tests: a pipeline of change flows over it (SCD type 1 and 2, and the same
changes as Debezium events), random change histories, and their lines as they land."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from medallion.project import Settings, load_settings
from tests.conf_support import REPO_CONF
from tests.reference_cdc import Change

PIPELINE = """\
description: Customers from a change feed, latest and with history.
sources:
  customer_changes:
    format: json_lines
    path: customer_changes
    bronze:
      table: customer_changes
silver:
  customers:
    input: bronze/customer_changes
    parse: json
    columns: &columns
      id: {type: STRING, trim: true}
      seq: BIGINT
      op: STRING
      name: STRING
      segment: STRING
    changes:
      keys: id
      sequence_by: seq
      delete_when: op = 'd'
  customers_history:
    input: bronze/customer_changes
    parse: json
    columns: *columns
    changes:
      keys: id
      sequence_by: seq
      delete_when: op = 'd'
      scd: 2
      track_history_columns: [segment]
"""


# The same changes as a Debezium connector publishes them: an event per change with the row
# before and after it (a delete's `before` holds only the key, as a table's default replica
# identity gives), the position in the database's log in `source`; some inside the JSON
# converter's envelope with its schema.
DEBEZIUM = """\
  customer_cdc:
    format: json_lines
    path: customer_cdc
    bronze:
      table: customer_cdc
"""
DEBEZIUM_FLOW = """\
  customers_cdc:
    input: bronze/customer_cdc
    parse: debezium
    columns:
      id: STRING
      name: STRING
      segment: STRING
      op: {type: STRING, source: __op}
      lsn: {type: BIGINT, source: __source_lsn}
    changes:
      keys: id
      sequence_by: lsn
      delete_when: op = 'd'
"""
WITH_DEBEZIUM = PIPELINE.replace("\nsilver:\n", "\n" + DEBEZIUM + "silver:\n" + DEBEZIUM_FLOW)

# Orders enriched from a history of customers (SCD type 2, sequenced by a time): with the
# version valid when ordered, and with the current one.
SHOP = """\
description: Orders enriched with the customer's segment when ordered and now.
sources:
  customer_changes: {format: json_lines, path: customer_changes, bronze: {table: customer_changes}}
  orders: {format: json_lines, path: orders, bronze: {table: orders}}
dimensions:
  customer_then: {table: silver/customers_history}
  customer_now: {table: silver/customers_history}
silver:
  orders:
    input: bronze/orders
    parse: json
    columns: {order_id: STRING, customer_id: STRING, ordered_at: TIMESTAMP}
    dedup: {key: order_id}
    enrich:
      customer_then:
        join: {customer_id: id}
        as_of: ordered_at
        columns: {segment_then: segment}
        defaults: {segment_then: unknown}
      customer_now:
        join: {customer_id: id}
        columns: {segment_now: segment}
        defaults: {segment_now: unknown}
  customers_history:
    input: bronze/customer_changes
    parse: json
    columns: {id: STRING, changed_at: TIMESTAMP, op: STRING, segment: STRING}
    changes: {keys: id, sequence_by: changed_at, delete_when: op = 'd', scd: 2}
"""


def history(rng: random.Random, keys: int, count: int) -> list[Change]:
    """Inserts, updates and deletes of ``keys`` keys in random sequence order, one in eight
    re-delivered (some with other values), so that many arrive after a later change."""
    made: list[Change] = []
    for _ in range(count):
        delete = rng.random() < 0.15
        values = () if delete else (("name", rng.choice(["Ann", "Bo", None])),
                                    ("segment", rng.choice(["s", "g", "b"])))
        made.append(Change((f"c{rng.randrange(keys)}",), (rng.randrange(1000),), delete, values))
    for change in rng.sample(made, count // 8):
        if rng.random() < 0.3 and not change.delete:
            change = Change(change.key, change.sequence, False, (("name", "Cy"), ("segment", "s")))
        made.append(change)
    rng.shuffle(made)
    return made


def line(change: Change) -> str:
    row: dict[str, Any] = {"id": change.key[0], "seq": change.sequence[0],
                           "op": "d" if change.delete else "u", **change.row()}
    return json.dumps(row)


def debezium_event(rng: random.Random, change: Change) -> str:
    """A change as a Debezium event: an update's or a snapshot's `after`, a delete's `before`."""
    if change.delete:
        event: dict[str, Any] = {"op": "d", "before": {"id": change.key[0]}, "after": None}
    else:
        op = rng.choice("cur")
        after = {"id": change.key[0], **change.row()}
        event = {"op": op, "before": {"id": change.key[0], "name": "was"} if op == "u" else None,
                 "after": after}
    event.update(source={"connector": "postgresql", "lsn": change.sequence[0], "ts_ms": 1},
                 ts_ms=2)
    if rng.random() < 0.3:
        event = {"schema": {"type": "struct", "optional": False}, "payload": event}
    return json.dumps(event)


def change_settings(root: Path, pipeline: str = PIPELINE, folder: str = "conf",
                    pipeline_name: str = "customers") -> Settings:
    conf = root / folder
    (conf / "pipelines").mkdir(parents=True)
    for name in ("base.yaml", "local.yaml"):
        shutil.copy(REPO_CONF / name, conf / name)
    (conf / "pipelines" / f"{pipeline_name}.yaml").write_text(pipeline, encoding="utf-8")
    return load_settings(env="local", conf_dir=conf, landing=str(root / "landing"),
                         lakehouse=str(root / "lakehouse"))

# Customers as full daily exports (CSV, the export's day in the file's name), kept as SCD type 1
# and 2; a segment outside the known ones is refused (the key read, its values not).
EXPORTS = """\
description: Customers from daily full exports, latest and with history.
sources:
  customer_exports:
    format: csv
    path: customer_exports
    header: [id, name, segment]
    bronze: {table: customer_exports}
silver:
  exported_customers:
    input: bronze/customer_exports
    parse: columns
    columns: &columns
      id: {type: STRING, trim: true}
      name: STRING
      segment: {type: STRING, rules: {known_segment: "segment IN ('s', 'g', 'b')"}}
      exported_on:
        type: DATE
        expr: "regexp_extract(source_file, 'customers_([0-9]{4}-[0-9]{2}-[0-9]{2})[^/]*$', 1)"
    changes: {keys: id, snapshot_by: exported_on}
  exported_customers_history:
    input: bronze/customer_exports
    parse: columns
    columns: *columns
    changes: {keys: id, snapshot_by: exported_on, scd: 2}
"""


def export_lines(rng: random.Random, keys: int) -> list[str]:
    """A full export of up to ``keys`` customers as CSV lines (header first), one row now and
    then refused for its segment or without a key."""
    lines = ["id,name,segment"]
    for k in range(keys):
        if rng.random() < 0.2:
            continue
        segment = rng.choice(["s", "g", "b", "platinum"] if rng.random() < 0.1 else ["s", "g", "b"])
        lines.append(f"c{k},{rng.choice(['Ann', 'Bo'])},{segment}")
    if rng.random() < 0.3:
        lines.append(",Nobody,s")
    return lines
