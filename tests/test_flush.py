"""Applying one table's change set (merge/flush.py): the MERGE statement, and the staged way on a branch."""

from __future__ import annotations

import pytest

from tests.lake_helpers import app_row as row
from tests.lake_helpers import backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.iceberg.tables import TargetTable
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.flush import STAGED_MAX_EVENTS, can_stage, merge_sql
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent

AT = Position("t", 0, 0)


def target(keys_required: bool = True) -> TargetTable:
    columns = [TargetColumn("id", "int", "int"), TargetColumn("V", "string", "varchar"),
               TargetColumn("w", "string", "varchar")]
    return TargetTable("app", "a", exists=True, columns=columns, keys=[columns[0]], keys_required=keys_required)


def test_columns_not_always_sent_keep_the_table_value_and_decide_the_way():
    sql = merge_sql("lake", target(), "src", frozenset({"id", "v"}))
    assert "t.`V` = s.`V`" in sql and "t.`w` = CASE WHEN s.`_present_2` THEN s.`w` ELSE t.`w` END" in sql
    assert "t.`id` <=> s.`id`" not in sql and "t.`id` = s.`id`" in sql
    assert can_stage(target(), frozenset({"id", "v", "w"}), 10)
    assert can_stage(target(), None, 10)  # only deletes
    assert not can_stage(target(), frozenset({"id", "v"}), 10)  # w must come from the table
    assert not can_stage(target(keys_required=False), frozenset({"id", "v", "w"}), 10)
    assert not can_stage(target(), frozenset({"id", "v", "w"}), STAGED_MAX_EVENTS + 1)


@pytest.mark.spark
@pytest.mark.parametrize("write_mode", ["merge-on-read", "copy-on-write"])
def test_full_images_are_staged_on_a_branch_and_main_moves_once(spark, tmp_path, write_mode):
    from ticdc_lakehouse.runtime.config import load_settings

    # the fixture's config file; a table of a few rows staged all the same
    (tmp_path / "none.toml").write_text(f'[merge]\nwrite_mode = "{write_mode}"\nstaged_min_rows = 0\n')
    settings = load_settings()
    first = [
        *create_app_table(AT),
        row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
        row(111, INSERT, {"id": "2", "v": "c", "w": "d"}),
        row(112, INSERT, {"id": "3", "v": "e", "w": "f"}),
        ResolvedEvent(200, AT),
    ]
    second = [
        row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}),
        row(211, DELETE, {"id": "2"}),
        row(212, INSERT, {"id": "4", "v": "g", "w": None}),
        row(213, UPDATE, {"id": "4", "v": "g2", "w": "h"}),
        ResolvedEvent(300, AT),
    ]
    archive = tmp_path / "archive"
    backfill_open_protocol_runs(spark, settings, archive, first)
    # a staging branch a crashed run left behind is dropped by the next flush
    spark.sql("ALTER TABLE app.a CREATE BRANCH lakehouse_stage_crashed")
    backfill_open_protocol_runs(spark, settings, archive, second)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "a2", "w": "b2"},
        {"id": 3, "v": "e", "w": "f"},
        {"id": 4, "v": "g2", "w": "h"},
    ]
    assert [r["name"] for r in lake_rows(spark, "SELECT name FROM app.a.refs WHERE type = 'BRANCH'")] == ["main"]
    history = lake_rows(spark, "SELECT s.summary['tidb.resolved-ts'] AS ts FROM app.a.history h "
                               "JOIN app.a.snapshots s ON h.snapshot_id = s.snapshot_id ORDER BY h.made_current_at")
    assert [h["ts"] for h in history[-2:]] == ["200", "300"]  # main moved once, to the run's last snapshot
    last = lake_rows(spark, "SELECT parent_id FROM app.a.snapshots WHERE summary['tidb.resolved-ts'] = '300'")
    staged_delete = lake_rows(spark, "SELECT summary['tidb.resolved-ts'] AS ts, summary['deleted-records'] AS gone, "
                                     "summary['added-position-deletes'] AS marked FROM app.a.snapshots "
                                     f"WHERE snapshot_id = {last[0]['parent_id']}")
    # below it on the branch: the deletes of keys 1 and 2, without a watermark (rows marked, or the table's one
    # unpartitioned file of three rows rewritten without them)
    expected = {"ts": None, "gone": None, "marked": "2"} if write_mode == "merge-on-read" else \
        {"ts": None, "gone": "3", "marked": None}
    assert staged_delete == [expected]


@pytest.mark.spark
def test_a_change_set_of_only_deletes_is_staged_with_its_watermark(spark, tmp_path):
    from ticdc_lakehouse.runtime.config import load_settings

    (tmp_path / "none.toml").write_text("[merge]\nstaged_min_rows = 0\n")  # the fixture's config file
    settings = load_settings()
    first = [*create_app_table(AT), row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
             row(111, INSERT, {"id": "2", "v": "c", "w": "d"}), ResolvedEvent(200, AT)]
    second = [row(210, DELETE, {"id": "1"}), ResolvedEvent(300, AT)]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second)
    assert lake_rows(spark, "SELECT * FROM app.a") == [{"id": 2, "v": "c", "w": "d"}]
    assert [r["name"] for r in lake_rows(spark, "SELECT name FROM app.a.refs WHERE type = 'BRANCH'")] == ["main"]
    head = lake_rows(spark, "SELECT s.summary['tidb.resolved-ts'] AS ts FROM app.a.history h "
                            "JOIN app.a.snapshots s ON h.snapshot_id = s.snapshot_id ORDER BY h.made_current_at")
    # main moved once, to a snapshot carrying the watermark (none was appended: it is an empty marker)
    assert [h["ts"] for h in head[-2:]] == ["200", "300"]


@pytest.mark.spark
def test_a_small_table_takes_one_merge_and_drops_a_stale_staging_branch(spark, settings, tmp_path):
    """A table holding fewer than ``merge.staged_min_rows`` rows (by default) takes a MERGE although its changes
    could be staged: one snapshot on main, with the watermark; a staging branch a crashed run left is dropped all
    the same."""
    assert settings.merge.staged_min_rows > 3
    first = [*create_app_table(AT), row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
             row(111, INSERT, {"id": "2", "v": "c", "w": "d"}), row(112, INSERT, {"id": "3", "v": "e", "w": "f"}),
             ResolvedEvent(200, AT)]
    second = [row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}), row(211, DELETE, {"id": "2"}),
              row(212, INSERT, {"id": "4", "v": "g", "w": "h"}), ResolvedEvent(300, AT)]
    archive = tmp_path / "archive"
    backfill_open_protocol_runs(spark, settings, archive, first)
    spark.sql("ALTER TABLE app.a CREATE BRANCH lakehouse_stage_crashed")
    backfill_open_protocol_runs(spark, settings, archive, second)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "a2", "w": "b2"}, {"id": 3, "v": "e", "w": "f"}, {"id": 4, "v": "g", "w": "h"}]
    assert [r["name"] for r in lake_rows(spark, "SELECT name FROM app.a.refs WHERE type = 'BRANCH'")] == ["main"]
    last = lake_rows(spark, "SELECT parent_id FROM app.a.snapshots WHERE summary['tidb.resolved-ts'] = '300'")
    parent = lake_rows(spark, "SELECT summary['tidb.resolved-ts'] AS ts FROM app.a.snapshots "
                              f"WHERE snapshot_id = {last[0]['parent_id']}")
    assert parent == [{"ts": "200"}]  # one MERGE snapshot on top of the first run's: no staged delete between
