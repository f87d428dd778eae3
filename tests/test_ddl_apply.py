"""Upstream DDL as Iceberg operations, end to end through the merge: every statement kind the merge supports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lake_helpers import backfill_open_protocol_runs, lake_rows
from ticdc_lakehouse.sim.archive_writer import write_archive
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange
from ticdc_lakehouse.commands.pipeline import backfill

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]
P0 = Position("t", 0, 0)


def ddl(ts, table, query, kind):
    return DDLEvent("app", table, ts, query, kind, P0)


def row(ts, table, op, values, types):
    after = None if op == DELETE else values
    before = {"id": values["id"]} if op == DELETE else None
    return RowChange("app", table, ts, op, after, before, ("id",), types, P0)


A = {"id": "int", "v": "varchar"}


def test_table_and_column_ddl_become_iceberg_operations(spark, settings, tmp_path):
    b = {"id": "int", "v": "varchar", "n": "int", "tag": "varchar"}
    events = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        ddl(102, "gone", "CREATE TABLE app.gone (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(110, "a", INSERT, {"id": "1", "v": "x"}, A),
        row(110, "a", INSERT, {"id": "2", "v": "y"}, A),
        row(111, "gone", INSERT, {"id": "1", "v": "z"}, A),
        # several clauses in one statement: one atomic change; NOT NULL DEFAULT fills existing rows
        ddl(120, "a", "ALTER TABLE app.a ADD COLUMN n int NOT NULL DEFAULT 7, ADD COLUMN tag varchar(5)",
            "ADD_COLUMN"),
        row(130, "a", UPDATE, {"id": "2", "v": "y2", "n": "8", "tag": "t"}, b),
        ddl(140, "a", "RENAME TABLE app.a TO app.b", "RENAME_TABLE"),
        row(150, "b", INSERT, {"id": "3", "v": "w", "n": "9", "tag": None}, b),
        ddl(160, "c", "CREATE TABLE app.c LIKE app.b", "CREATE_TABLE"),
        row(161, "c", INSERT, {"id": "5", "v": "c", "n": "1", "tag": "k"}, b),
        ddl(162, "c", "TRUNCATE TABLE app.c", "TRUNCATE_TABLE"),
        row(163, "c", INSERT, {"id": "6", "v": "after", "n": "2", "tag": None}, b),
        ddl(170, "gone", "DROP TABLE app.gone", "DROP_TABLE"),
        ddl(180, "b", "ALTER TABLE app.b ADD INDEX idx_v (v)", "ADD_INDEX"),
        ResolvedEvent(200, P0),
    ]
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert report["halted"] == []
    tables = sorted(r["tableName"] for r in lake_rows(spark, "SHOW TABLES IN app"))
    assert tables == ["b", "c"]
    assert lake_rows(spark, "SELECT * FROM app.b ORDER BY id") == [
        {"id": 1, "v": "x", "n": 7, "tag": None},
        {"id": 2, "v": "y2", "n": 8, "tag": "t"},
        {"id": 3, "v": "w", "n": 9, "tag": None},
    ]
    assert lake_rows(spark, "SELECT id, v FROM app.c") == [{"id": 6, "v": "after"}]
    summaries = lake_rows(spark, "SELECT summary['tidb.ddl'] AS ddl FROM app.b.snapshots ORDER BY committed_at")
    assert any(s["ddl"] and "ADD INDEX" in s["ddl"] for s in summaries), "metadata-only DDL is recorded"
    # a rerun re-reads nothing new and changes nothing (the multi-clause ALTER is not applied twice)
    again = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert again["ddls_applied"] == [] and again["halted"] == []
    assert len(lake_rows(spark, "SELECT * FROM app.b")) == 3


def test_a_new_table_commits_with_its_first_rows_and_an_empty_one_at_its_create_ts(spark, settings, tmp_path):
    """A table created in a run is committed with its first rows: one catalog commit, one snapshot at the cut. A
    table created with no rows in the run still exists afterwards, empty, at its CREATE's ts."""
    events = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        ddl(102, "empty", "CREATE TABLE app.empty (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(110, "a", INSERT, {"id": "1", "v": "x"}, A),
        ResolvedEvent(200, P0),
    ]
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
    backfill(settings, archive, protocol="open", spark=spark)
    assert lake_rows(spark, "SELECT * FROM app.a") == [{"id": 1, "v": "x"}]
    history = "SELECT operation, summary['tidb.resolved-ts'] AS ts, summary['tidb.ddl'] AS ddl FROM {}.snapshots"
    assert lake_rows(spark, history.format("app.a")) == [{"operation": "append", "ts": "200", "ddl": None}]
    created = "SELECT latest_snapshot_id FROM app.a.metadata_log_entries ORDER BY timestamp LIMIT 1"
    assert lake_rows(spark, created)[0]["latest_snapshot_id"] == lake_rows(
        spark, "SELECT snapshot_id FROM app.a.snapshots")[0]["snapshot_id"]  # its first commit holds the rows
    assert lake_rows(spark, "SELECT * FROM app.empty") == []
    assert lake_rows(spark, history.format("app.empty")) == [
        {"operation": "append", "ts": "102", "ddl": "CREATE TABLE app.empty (id int PRIMARY KEY, v varchar(10))"}]


def test_drop_database_drops_its_tables(spark, settings, tmp_path):
    events = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(110, "a", INSERT, {"id": "1", "v": "x"}, A),
        ddl(120, "", "DROP DATABASE app", "DROP_SCHEMA"),
        ResolvedEvent(130, P0),
    ]
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
    backfill(settings, archive, protocol="open", spark=spark)
    assert "app" not in [r[0] for r in spark.sql("SHOW NAMESPACES").collect()]


def test_adding_a_nullable_column_needs_no_merge_before_it(spark, settings, tmp_path):
    """ADD COLUMN without a value for existing rows, and metadata-only DDL, are applied ahead of the rows below them:
    one MERGE for the whole run instead of one per barrier; the DDL's snapshot keeps the old watermark."""
    with_note = {**A, "note": "varchar"}
    events = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(110, "a", INSERT, {"id": "1", "v": "x"}, A),
        row(111, "a", INSERT, {"id": "2", "v": "y"}, A),
        row(112, "a", INSERT, {"id": "4", "v": "gone"}, A),
        ddl(120, "a", "ALTER TABLE app.a ADD COLUMN note varchar(5) NULL, ADD INDEX idx_v (v)", "ADD_COLUMN"),
        row(130, "a", UPDATE, {"id": "2", "v": "y2", "note": "n"}, with_note),
        row(131, "a", INSERT, {"id": "3", "v": "z", "note": None}, with_note),
        row(132, "a", DELETE, {"id": "4"}, with_note),
        ddl(140, "a", "ALTER TABLE app.a ALTER COLUMN note SET DEFAULT 'd'", "SET_DEFAULT_VALUE"),
        row(150, "a", UPDATE, {"id": "1", "v": "x2", "note": "m"}, with_note),
        ResolvedEvent(200, P0),
    ]
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert report["halted"] == [] and len(report["ddls_applied"]) == 4
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "x2", "note": "m"},
        {"id": 2, "v": "y2", "note": "n"},
        {"id": 3, "v": "z", "note": None},
    ]
    snapshots = lake_rows(spark, "SELECT summary['tidb.resolved-ts'] AS ts, summary['tidb.ddl-ts'] AS ddl_ts, "
                                 "summary['added-records'] AS added FROM app.a.snapshots ORDER BY committed_at")
    assert [(s["ts"], s["ddl_ts"]) for s in snapshots if s["ddl_ts"]] == [("101", "120"), ("101", "140")]
    assert [s["ts"] for s in snapshots if s["added"]] == ["200"]  # one MERGE: no barrier at 120 or 140
    again = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert again["ddls_applied"] == [] and len(lake_rows(spark, "SELECT * FROM app.a")) == 3


def _carried_ddl_runs():
    """Two runs: a table with rows, then widen, rename and drop its columns, a TRUNCATE of another table, and a
    column dropped and added again (see the test below)."""
    b = {"id": "int", "v": "varchar", "n": "int", "old": "varchar"}
    first = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10), n int, old varchar(5))",
            "CREATE_TABLE"),
        ddl(102, "t", "CREATE TABLE app.t (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(103, "a", INSERT, {"id": "1", "v": "x", "n": "1", "old": "o1"}, b),
        row(104, "t", INSERT, {"id": "1", "v": "before"}, A),
        ResolvedEvent(105, P0),
    ]
    renamed = {"id": "int", "v": "varchar", "n": "bigint", "new": "varchar"}
    dropped = {"id": "int", "n": "bigint", "new": "varchar"}
    second = [
        row(110, "a", INSERT, {"id": "2", "v": "y", "n": "2", "old": "o2"}, b),
        row(111, "a", UPDATE, {"id": "1", "v": "x1", "n": "11", "old": "o11"}, b),
        ddl(120, "a", "ALTER TABLE app.a MODIFY COLUMN n bigint", "MODIFY_COLUMN"),
        row(121, "a", INSERT, {"id": "3", "v": "z", "n": "4294967296", "old": "o3"},
            {"id": "int", "v": "varchar", "n": "bigint", "old": "varchar"}),
        ddl(130, "a", "ALTER TABLE app.a RENAME COLUMN old TO new", "RENAME_COLUMN"),
        row(131, "a", UPDATE, {"id": "2", "v": "y2", "n": "2", "new": "n2"}, renamed),
        ddl(140, "a", "ALTER TABLE app.a DROP COLUMN v", "DROP_COLUMN"),
        row(141, "a", INSERT, {"id": "4", "n": "5", "new": "n4"}, dropped),
        row(150, "t", INSERT, {"id": "2", "v": "gone"}, A),
        ddl(151, "t", "TRUNCATE TABLE app.t", "TRUNCATE_TABLE"),
        row(152, "t", INSERT, {"id": "3", "v": "after"}, A),
        row(160, "t", UPDATE, {"id": "3", "v": "kept"}, A),
        ddl(161, "t", "ALTER TABLE app.t DROP COLUMN v", "DROP_COLUMN"),
        ddl(162, "t", "ALTER TABLE app.t ADD COLUMN v varchar(10) NULL", "ADD_COLUMN"),
        ResolvedEvent(200, P0),
    ]
    return first, second


CARRIED_ROWS = [
    {"id": 1, "n": 11, "new": "o11"},
    {"id": 2, "n": 2, "new": "n2"},
    {"id": 3, "n": 4294967296, "new": "o3"},
    {"id": 4, "n": 5, "new": "n4"},
]


def test_column_ddl_and_truncate_carry_the_rows_below_them(spark, settings, tmp_path):
    """A second run over a table that holds rows: widen, rename and drop a column, truncate, then a column
    dropped and added again. The rows below the first four are carried into the schema after them (one write at
    the cut, no barrier); the re-added column keeps its barrier, so the dropped values do not come back."""
    first, second = _carried_ddl_runs()
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in first]})
    backfill(settings, archive, protocol="open", spark=spark)
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in first + second]})
    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert report["halted"] == [] and len([d for d in report["ddls_applied"] if "DATABASE" not in d]) == 6
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == CARRIED_ROWS
    assert lake_rows(spark, "SELECT * FROM app.t ORDER BY id") == [{"id": 3, "v": None}]
    written = lake_rows(spark, "SELECT summary['tidb.resolved-ts'] AS ts FROM app.a.snapshots "
                               "WHERE summary['added-records'] IS NOT NULL ORDER BY committed_at")
    assert [s["ts"] for s in written] == ["105", "200"]  # the first run, then one write at the cut: no barrier
    again = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert [d for d in again["ddls_applied"] if "DATABASE" not in d] == []
    assert len(lake_rows(spark, "SELECT * FROM app.a")) == 4


def test_a_crash_after_a_column_ddl_applied_ahead_of_its_rows_reruns_to_the_same_table(spark, settings, tmp_path):
    """SIGKILL right after the RENAME COLUMN is applied ahead of the rows below it (which carry the old name), in
    one run holding both runs' events; the rerun reads those rows under the new name all the same."""
    first, second = _carried_ddl_runs()
    encoder = OpenProtocolEncoder()
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in first + second]})
    # this test's deployment (its LAKEHOUSE_* variables); DDL hits: CREATE DATABASE, the two CREATE TABLEs,
    # MODIFY, then the RENAME COLUMN
    env = dict(os.environ, LAKEHOUSE_FAULT_POINT="merge.after_ddl", LAKEHOUSE_FAULT_HIT="5")
    killed = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive",
                             str(archive), "--protocol", "open"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert killed.returncode == -9, killed.stderr[-2000:]
    renamed = lake_rows(spark, "SELECT * FROM app.a.snapshots ORDER BY committed_at")
    assert renamed[-1]["summary"].get("tidb.ddl", "").startswith("ALTER TABLE app.a RENAME COLUMN")
    backfill(settings, archive, protocol="open", spark=spark)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == CARRIED_ROWS


def test_an_update_that_changes_the_key_moves_the_row_in_new_and_existing_tables(spark, settings, tmp_path):
    """TiCDC splits a key-changing update into a delete and an insert by default, and the merge then skips its own
    split step (``changes.key_changes_possible``); an unsplit one (older TiCDC, other settings) still moves its
    row: the old key goes, in a table created in the run and in one holding rows, while a table none of whose
    updates changed its key keeps every row."""
    def update(ts, table, old, new):
        return RowChange("app", table, ts, UPDATE, new, old, ("id",), A, P0)

    first = [
        ddl(100, "", "CREATE DATABASE app", "CREATE_SCHEMA"),
        ddl(101, "a", "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        ddl(102, "b", "CREATE TABLE app.b (id int PRIMARY KEY, v varchar(10))", "CREATE_TABLE"),
        row(110, "a", INSERT, {"id": "1", "v": "x"}, A),
        row(110, "a", INSERT, {"id": "2", "v": "y"}, A),
        row(110, "b", INSERT, {"id": "1", "v": "x"}, A),
        update(120, "a", {"id": "1", "v": "x"}, {"id": "5", "v": "x"}),
        update(120, "b", {"id": "1", "v": "x"}, {"id": "1", "v": "x2"}),
        ResolvedEvent(200, P0),
    ]
    archive = tmp_path / "archive"
    backfill_open_protocol_runs(spark, settings, archive, first)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [{"id": 2, "v": "y"}, {"id": 5, "v": "x"}]
    assert lake_rows(spark, "SELECT * FROM app.b ORDER BY id") == [{"id": 1, "v": "x2"}]

    later = [update(210, "a", {"id": "2", "v": "y"}, {"id": "7", "v": "y"}), ResolvedEvent(300, P0)]
    backfill_open_protocol_runs(spark, settings, archive, later)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [{"id": 5, "v": "x"}, {"id": 7, "v": "y"}]
