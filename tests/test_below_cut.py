"""Rows that arrive below a committed cut (issue 20.2): a replay is skipped, a late change is kept and shown."""

from __future__ import annotations

import pytest

from tests.lake_helpers import backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.merge.below_cut import thresholds
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent, RowChange

AT = Position("t", 0, 0)
FULL = {"id": "int", "v": "varchar", "w": "varchar"}


def row(ts, op, values, before=None):
    after = None if op == DELETE else values
    if op in (DELETE, UPDATE):
        before = before or {"id": values["id"]}
    return RowChange("app", "a", ts, op, after, before, ("id",), FULL, AT)


def test_no_table_reaching_below_the_cut_needs_no_spark_job():
    assert thresholds(200, {("app", "a"): 200}, {("app", "a"): 201}) == {}
    assert thresholds(0, {("app", "a"): 0}, {("app", "a"): 5}) == {}  # no cut committed yet
    # a halted table (watermark below the cut) applies its later rows when resumed: its bound is the watermark
    assert thresholds(200, {("app", "a"): 150, ("app", "b"): 200}, {("app", "a"): 160, ("app", "b"): 160}) == {
        ("app", "b"): 200}


@pytest.mark.spark
def test_late_rows_below_the_cut_are_kept_with_a_verdict_and_counted(spark, settings, tmp_path):
    from ticdc_lakehouse.commands.status import collect_status, render_status

    first = [
        *create_app_table(AT),
        row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
        row(111, INSERT, {"id": "2", "v": "c", "w": "d"}),
        row(120, UPDATE, {"id": "2", "v": "c2", "w": "d"}),
        row(130, INSERT, {"id": "9", "v": "x", "w": "y"}),
        row(131, DELETE, {"id": "9"}),
        ResolvedEvent(200, AT),
    ]
    second = [
        row(150, UPDATE, {"id": "1", "v": "late", "w": "b"}),  # late: the lake never had it
        row(160, INSERT, {"id": "3", "v": "new", "w": "row"}),  # late insert
        row(120, UPDATE, {"id": "2", "v": "c2", "w": "d"}),  # TiCDC replaying what was applied
        row(131, DELETE, {"id": "9"}),  # a replayed delete
        row(210, INSERT, {"id": "4", "v": "e", "w": "f"}),  # above the cut: applied as usual
        ResolvedEvent(300, AT),
    ]
    reports = backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second)
    assert reports[0]["merge"]["below_cut"]["late"] == 0
    below = reports[1]["merge"]["below_cut"]
    assert (below["late"], below["replay"], below["tables"]) == (2, 2, ["app.a"])
    # nothing below the cut was applied: the lake is what the promise gave
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "a", "w": "b"}, {"id": 2, "v": "c2", "w": "d"}, {"id": 4, "v": "e", "w": "f"}]
    kept = lake_rows(spark, "SELECT topic, partition, offset, commit_ts, cut_ts, schema_name, table_name, op, "
                            "verdict, row_after FROM _lakehouse.below_cut ORDER BY offset")
    assert [(k["commit_ts"], k["op"], k["verdict"]) for k in kept] == [
        (150, "U", "late"), (160, "I", "late"), (120, "U", "replay"), (131, "D", "replay")]
    assert all(k["topic"] == "t" and k["partition"] == 0 and k["cut_ts"] == 200 for k in kept)
    assert [k["offset"] for k in kept] == [8, 9, 10, 11]  # after the first run's 8 messages
    assert '"v":"late"' in kept[0]["row_after"]
    text = render_status(collect_status(settings, kafka=False, spark=spark))
    assert "LATE ROWS: 2 row change(s) arrived below the applied cut (late)" in text
    # rerunning over the same landed data records nothing twice
    reports = backfill_open_protocol_runs(spark, settings, tmp_path / "archive", [])
    assert lake_rows(spark, "SELECT count(*) AS n FROM _lakehouse.below_cut") == [{"n": 4}]
