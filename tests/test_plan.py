"""Pure planning: global resolved ts, DDL order and dedup, restart offsets (TiCDC consumer rules)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SHARED
from ticdc_lakehouse.merge.plan import (
    DDLRecord,
    global_resolved_ts,
    latest_bootstraps,
    merge_resolved,
    order_ddls,
    plan_run,
    restart_offsets,
)

SCENARIOS = json.loads((SHARED / "ticdc-vectors/consumer/tiflow_writer_test_scenarios.json").read_text())["scenarios"]


def _scenario(name: str) -> dict:
    return next(s for s in SCENARIOS if s["test"] == name)


def _ddl(step: dict) -> DDLRecord:
    return DDLRecord(
        commit_ts=step["CommitTs"], schema="test", table="", query=step["Query"], ddl_type="", topic="t",
        partition=0, offset=step["offset"], seq=step.get("Seq", 0),
    )


def test_a_partition_without_resolved_events_holds_the_global_ts_at_zero():
    partitions = [("t", 0), ("t", 1), ("t", 2)]
    assert global_resolved_ts(partitions, {("t", 0): 50, ("t", 1): 70}) == 0
    assert global_resolved_ts(partitions, {("t", 0): 50, ("t", 1): 70, ("t", 2): 60}) == 50


def test_resolved_ts_falling_back_from_a_newer_offset_is_ignored():
    steps = _scenario("TestUpdateWatermarkIgnoresFallbackFromNewerOffset")["steps"]
    resolved: dict = {}
    for step in steps:
        resolved = merge_resolved(resolved, {("t", step["partition"]): step["ts"]})
    assert resolved == {("t", 1): 120}


def test_broadcast_and_replayed_ddl_is_applied_once():
    steps = _scenario("TestAppendDDLIgnoresEquivalentReplay")["steps"]
    ordered = order_ddls([_ddl(s) for s in steps], upto_ts=1000)
    assert len(ordered) == 1 and ordered[0].offset == 1


def test_distinct_ddls_sharing_a_commit_ts_are_all_kept_in_order():
    steps = _scenario("TestAppendDDLKeepsDifferentDDLsWithSameCommitTsWithoutSeq")["steps"]
    ordered = order_ddls([_ddl(s) for s in steps], upto_ts=1000)
    assert [d.query for d in ordered] == [s["Query"] for s in steps]


def test_replayed_split_ddl_sequence_is_kept_once_each():
    steps = _scenario("TestAppendDDLIgnoresReplayedSplitDDLSequence")["steps"]
    ordered = order_ddls([_ddl(s) for s in steps], upto_ts=1000)
    assert [d.query for d in ordered] == ["rename table test.t1 to test.t2", "rename table test.t3 to test.t4"]


def test_ddl_above_the_cut_waits():
    ddls = [
        DDLRecord(100, "s", "a", "q1", "ADD_COLUMN", "t", 0, 1),
        DDLRecord(300, "s", "a", "q2", "ADD_COLUMN", "t", 0, 5),
    ]
    plan = plan_run([("t", 0)], {("t", 0): 200}, ddls)
    assert plan.resolved_ts == 200
    assert [d.query for d in plan.ddls] == ["q1"]
    assert plan_run([("t", 0)], {("t", 0): 200}, ddls, stop_ts=99).ddls == []


def test_safe_bound_stops_below_a_halted_ddl():
    plan = plan_run([("t", 0)], {("t", 0): 500}, [])
    assert plan.safe_bound({("s", "a"): 300}) == 299
    assert plan.safe_bound({}) == 500


def test_restart_at_first_unapplied_event_not_at_a_resolved_event():
    # docs example: a resolved event (ts 13) follows rows with a greater ts (offsets 9..12): they must be re-read
    previous = {("t", 0): 0}
    assert restart_offsets(previous, {("t", 0): 14}, {("t", 0): 9}) == {("t", 0): 9}
    assert restart_offsets(previous, {("t", 0): 14}, {}) == {("t", 0): 14}
    # never backwards
    assert restart_offsets({("t", 0): 20}, {("t", 0): 25}, {("t", 0): 10}) == {("t", 0): 20}


def test_newest_bootstrap_per_table():
    records = [
        DDLRecord(0, "s", "a", "", "CREATE_TABLE", "t", 0, 1, table_schema="{}", is_bootstrap=True),
        DDLRecord(0, "s", "A", "", "CREATE_TABLE", "t", 0, 9, table_schema="{}", is_bootstrap=True),
        DDLRecord(0, "s", "b", "", "CREATE_TABLE", "t", 1, 2, table_schema="{}", is_bootstrap=True),
    ]
    chosen = sorted((r.table.lower(), r.offset) for r in latest_bootstraps(records))
    assert chosen == [("a", 9), ("b", 2)]


@given(st.dictionaries(st.integers(0, 5), st.lists(st.integers(0, 10**6), min_size=1), min_size=1))
def test_global_resolved_ts_is_the_minimum_of_forward_only_maxima(sequences):
    resolved: dict = {}
    for partition, values in sequences.items():
        for value in values:
            resolved = merge_resolved(resolved, {("t", partition): value})
    partitions = [("t", p) for p in sequences]
    assert global_resolved_ts(partitions, resolved) == min(max(v) for v in sequences.values())


def test_a_partition_is_held_at_its_first_undecodable_message_the_operator_did_not_skip():
    from ticdc_lakehouse.merge.plan import first_holds

    a, b = ("t", 0), ("t", 1)
    failures = [(a, 40), (a, 12), (b, 7), (b, 30)]
    assert first_holds(failures) == {a: 12, b: 7}
    assert first_holds(failures, skipped=[(a, 12), (b, 7), (b, 30)]) == {a: 40}
    assert first_holds([], skipped=[(a, 1)]) == {}


def test_a_held_partition_counts_only_resolved_events_before_its_hold_and_is_read_again_from_it():
    from ticdc_lakehouse.merge.plan import global_resolved_ts, resolved_before_holds, unapplied_with_holds

    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    seen = {a: 500, b: 480, c: 490}
    held = resolved_before_holds(seen, before_hold={a: 300}, holds={a: 17, c: 5})
    assert held == {a: 300, b: 480}  # c: no resolved event before its hold, so this run moves nothing of it
    assert global_resolved_ts([a, b, c], merge_resolved({c: 200}, held)) == 200
    assert unapplied_with_holds({a: 20, b: 9}, {a: 17, c: 5}) == {a: 17, b: 9, c: 5}
    assert unapplied_with_holds({a: 3}, {a: 17}) == {a: 3}
