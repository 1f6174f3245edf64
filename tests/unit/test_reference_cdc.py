"""The SCD reference model on histories small enough to work out by hand (the engine's change
flows are compared with it; here it is checked against the rules themselves)."""

from __future__ import annotations

import itertools
import random

from tests.reference_cdc import Change, Export, Version, scd1, scd2, snapshot_changes


def up(key: str, seq: int, **values: object) -> Change:
    return Change((key,), (seq,), False, tuple(sorted(values.items())))


def delete(key: str, seq: int) -> Change:
    return Change((key,), (seq,), True)


def test_scd1_keeps_the_highest_sequence_and_a_delete_removes_the_key() -> None:
    changes = [up("a", 1, segment="s"), up("a", 3, segment="g"), up("a", 2, segment="b"),
               up("b", 1, segment="s"), delete("b", 2), up("c", 5, segment="s"), delete("c", 4)]
    assert scd1(changes) == {("a",): {"segment": "g"}, ("c",): {"segment": "s"}}


def test_scd1_a_late_change_never_overwrites_a_newer_one_nor_revives_a_deleted_key() -> None:
    applied = [up("a", 5, segment="g"), delete("b", 7)]
    late = [up("a", 4, segment="s"), up("b", 6, segment="s")]
    assert scd1(applied + late) == {("a",): {"segment": "g"}}


def test_scd2_versions_close_at_the_next_change_and_a_delete_closes_the_current_one() -> None:
    changes = [up("a", 1, segment="s"), up("a", 4, segment="g"), delete("a", 6),
               up("a", 9, segment="b")]
    assert scd2(changes) == {
        Version(("a",), (("segment", "s"),), (1,), (4,)),
        Version(("a",), (("segment", "g"),), (4,), (6,)),
        Version(("a",), (("segment", "b"),), (9,), None)}


def test_scd2_a_late_change_splits_the_interval_it_falls_in_and_a_redelivery_changes_nothing() -> None:
    history = [up("a", 1, segment="s"), up("a", 10, segment="g")]
    late = up("a", 5, segment="b")
    expected = {Version(("a",), (("segment", "s"),), (1,), (5,)),
                Version(("a",), (("segment", "b"),), (5,), (10,)),
                Version(("a",), (("segment", "g"),), (10,), None)}
    assert scd2([*history, late]) == expected
    assert scd2([*history, late, late, history[0]]) == expected


def test_scd2_with_tracked_columns_other_changes_update_the_version_in_place() -> None:
    changes = [up("a", 1, segment="s", name="Ann"), up("a", 2, segment="s", name="Anne"),
               up("a", 3, segment="g", name="Anne")]
    assert scd2(changes, tracked=["segment"]) == {
        Version(("a",), (("name", "Anne"), ("segment", "s")), (1,), (3,)),
        Version(("a",), (("name", "Anne"), ("segment", "g")), (3,), None)}
    assert len(scd2(changes)) == 3  # every change tracked: three versions


def test_the_tables_do_not_depend_on_the_order_the_changes_arrived_in() -> None:
    rng = random.Random(3)
    changes = [up(k, s, v=rng.randrange(3)) if rng.random() > 0.2 else delete(k, s)
               for k, s in itertools.product("abc", range(8))]
    changes += rng.sample(changes, 6)  # re-deliveries
    once1, once2 = scd1(changes), scd2(changes, tracked=["v"])
    for _ in range(5):
        rng.shuffle(changes)
        assert scd1(changes) == once1 and scd2(changes, tracked=["v"]) == once2


def test_of_conflicting_redeliveries_a_delete_then_the_greater_values_count_a_none_least() -> None:
    assert scd1([up("a", 1, segment="s"), delete("a", 1)]) == {}
    assert scd1([up("a", 1, segment="g", name="Bo"), up("a", 1, segment="s", name="Al")]) == {
        ("a",): {"segment": "g", "name": "Bo"}}  # ranked by name first, the names' order
    assert scd1([up("a", 1, segment=None), up("a", 1, segment="")]) == {("a",): {"segment": ""}}


def test_exports_give_what_each_changes_from_the_one_before_in_order_of_position() -> None:
    exports = [Export(3, {("a",): {"s": "g"}, ("c",): {"s": "b"}}),
               Export(1, {("a",): {"s": "s"}, ("b",): {"s": "s"}}),
               Export(2, {("a",): {"s": "s"}, ("c",): {"s": "b"}})]
    assert sorted(snapshot_changes(exports), key=lambda c: (c.sequence, c.key)) == [
        up("a", 1, s="s"), up("b", 1, s="s"),
        Change(("b",), (2,), True, (("s", "s"),)), up("c", 2, s="b"),
        up("a", 3, s="g")]
    assert scd2(snapshot_changes(exports)) == {
        Version(("a",), (("s", "s"),), (1,), (3,)), Version(("a",), (("s", "g"),), (3,), None),
        Version(("b",), (("s", "s"),), (1,), (2,)), Version(("c",), (("s", "b"),), (2,), None)}


def test_a_refused_row_keeps_its_key_as_it_was_in_that_export() -> None:
    exports = [Export(1, {("a",): {"s": "s"}}),
               Export(2, {}, frozenset({("a",), ("z",)})),  # z: refused, and never held
               Export(3, {("a",): {"s": "s"}}),
               Export(4, {}, frozenset({("b",)}))]
    # a: unchanged through 2 and 3, gone at 4 (its row there was not refused); z: never held.
    assert snapshot_changes(exports) == [up("a", 1, s="s"), Change(("a",), (4,), True, (("s", "s"),))]
