"""Small tables that hold rows are rewritten whole by the run's write jobs (merge/batch_rewrite.py,
merge/table_commit.py): the same rows, counts and row lineage as a MERGE per table, one overwrite per table, no
delete file left, crash-safe."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.lake_helpers import (
    assert_lake_equals_upstream,
    backfill_open_protocol_runs,
    lake_rows,
    record_write_frames,
)
from ticdc_lakehouse.core.model import INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange
from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


def _runs(seed: int, directory: Path, tables: Optional[int] = None, partial_updates: bool = False
          ) -> tuple[Workload, list[tuple[Path, int]]]:
    """The sample tables (and copies of them with a column of their own each, up to ``tables``), then three runs'
    worth of changes (inserts, updates and deletes; ``partial_updates``: see ``Workload``): for each run the
    archive as it stood then (a copy: the log only grows) and its cut."""
    workload = Workload(seed=seed, partitions=3, partial_updates=partial_updates)
    if tables is None:
        workload.create_sample_tables()
    else:
        workload.create_sample_tables(tables, distinct=True)
    archive = directory / "archive"
    runs = []
    for run in range(3):
        for i in range(30):
            workload.transaction(4)
            if i % 10 == 9:
                workload.resolve()
        workload.resolve(final=True)
        write_to_archive(workload, archive, "ticdc", "open")
        shutil.copytree(archive, directory / f"archive{run}")
        runs.append((directory / f"archive{run}", workload.global_resolved_ts()))
    return workload, runs


def _backfill(spark, home: Path, catalog: str, archive: Path, **merge: object):
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    env = {"LAKEHOUSE_HOME": str(home), "LAKEHOUSE__CATALOG__NAME": catalog}
    env.update({f"LAKEHOUSE__MERGE__{key.upper()}": str(value) for key, value in merge.items()})
    settings = load_settings(env=env)
    use_catalog(spark, settings)
    return backfill(settings, archive, protocol="open", spark=spark)


def _lineage(spark, name: str) -> dict[int, tuple]:
    """Row id -> (the row, its last-updated sequence number)."""
    frame = spark.sql(f"SELECT *, _row_id AS `_id`, _last_updated_sequence_number AS `_seq` FROM {name}")
    return {row["_id"]: (tuple(row)[:-2], row["_seq"]) for row in frame.collect()}


def _snapshot_at(spark, name: str, watermark: int) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {name}.snapshots WHERE summary['tidb.resolved-ts'] = '{watermark}' "
                     "ORDER BY committed_at DESC LIMIT 1").collect()[0][0]


def test_small_tables_are_rewritten_whole_with_the_merge_paths_rows_counts_and_lineage(spark_session, tmp_path,
                                                                                      monkeypatch):
    """Six tables, no two of the same columns, two of each key type: each pair is rewritten by one frame of slots
    (``column_slots``), and every table ends as the MERGE path leaves it."""
    from ticdc_lakehouse.merge.batch_rewrite import WRITTEN

    workload, runs = _runs(31, tmp_path, tables=6)
    cut = runs[-1][1]
    reports: dict[str, list] = {}
    recorded = record_write_frames(monkeypatch)
    for way, catalog, limit in (("rewrite", "rw_a", 20_000), ("merge", "rw_m", 0)):
        # run 1: every table new (appended); run 2: MERGEs (deletion vectors); run 3: rewritten, or MERGEd
        reports[way] = [_backfill(spark_session, tmp_path / way, catalog, archive, rewrite_max_rows=rewrite)
                        for (archive, _), rewrite in zip(runs, (0, 0, limit))]
    assert_lake_equals_upstream(spark_session, workload, cut)  # the default catalog: the last one used
    frames = [(len(f.layouts), f.slots is not None, WRITTEN in f.rows.columns) for f in recorded]
    assert sorted(frames) == [(2, True, False)] * 6 + [(2, True, True)] * 3  # appended twice, rewritten once
    for name in workload.expected_json(cut):
        table = name.split(".", 1)[1]
        rewritten, merged = f"rw_a.{name}", f"rw_m.{name}"
        assert spark_session.table(rewritten).schema == spark_session.table(merged).schema, name
        order = ", ".join(f"`{c}`" for c in workload.state_at(cut)[table].primary_key)
        assert lake_rows(spark_session, f"SELECT * FROM {rewritten} ORDER BY {order}") == lake_rows(
            spark_session, f"SELECT * FROM {merged} ORDER BY {order}"), name
        last = lake_rows(spark_session, f"SELECT operation, summary['tidb.resolved-ts'] AS ts FROM "
                                        f"{rewritten}.snapshots ORDER BY committed_at DESC LIMIT 1")
        assert last == [{"operation": "overwrite", "ts": str(cut)}], name
        # the deletion vectors of run 2 went with the files they deleted from
        assert lake_rows(spark_session, f"SELECT count(*) AS n FROM {merged}.delete_files")[0]["n"] > 0, name
        assert lake_rows(spark_session, f"SELECT count(*) AS n FROM {rewritten}.delete_files")[0]["n"] == 0, name
        # every row the table held before keeps its row id; untouched rows keep their sequence number too
        before = _lineage(spark_session, f"{merged} VERSION AS OF {_snapshot_at(spark_session, merged, runs[1][1])}")
        after_merge, after_rewrite = _lineage(spark_session, merged), _lineage(spark_session, rewritten)
        kept = {row_id: entry for row_id, entry in after_merge.items() if row_id in before}
        assert kept and {row_id: after_rewrite.get(row_id) for row_id in kept} == kept, name
        # the run's report counts what lineage says changed: rows written (new, or a new sequence number), rows
        # removed (gone, or rewritten by an update)
        truth = (sum(1 for row_id, entry in after_merge.items() if before.get(row_id, (0, None))[1] != entry[1]),
                 sum(1 for row_id, entry in before.items() if after_merge.get(row_id, (0, None))[1] != entry[1]))
        for way, done in reports.items():
            counts = done[2]["merge"]["tables"][name]
            assert (counts["written"], counts["removed"]) == truth, (way, name)


def test_a_rewrite_applies_deletes_inserts_and_partial_updates_as_the_merge_statement_does(spark, settings):
    """Updates that carried only some columns (``only-output-updated-columns``, Simple, Debezium) keep the table's
    value of the others: the join of ``rewritten_rows`` and ``flush.merge_sql`` give the same table."""
    from ticdc_lakehouse.iceberg.columns import TargetColumn
    from ticdc_lakehouse.iceberg.tables import TargetTable
    from ticdc_lakehouse.merge.batch_rewrite import DROPPED, REMOVED, WRITTEN, LakeTable, lake_rows_sql
    from ticdc_lakehouse.merge.batch_rewrite import rewritten_rows
    from ticdc_lakehouse.merge.flush import merge_sql
    from ticdc_lakehouse.merge.table_events import TABLE_INDEX

    columns = [TargetColumn("id", "int", "int", True), TargetColumn("a", "string", "varchar(9)"),
               TargetColumn("b", "string", "varchar(9)"), TargetColumn("c", "int", "int")]
    target = TargetTable("app", "merged", columns, [columns[0]], 0, True, True)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS app")
    for name in ("merged", "lake"):
        spark.sql(f"CREATE TABLE app.{name} (id int NOT NULL, a string, b string, c int) USING iceberg "
                  "TBLPROPERTIES ('format-version' = '3', 'write.merge.mode' = 'merge-on-read')")
        spark.sql(f"INSERT INTO app.{name} VALUES (1, 'a1', 'b1', 1), (2, 'a2', 'b2', 2), (3, 'a3', 'b3', 3)")
    # b went with every change; a and c did not (their _present_ flags say where they did)
    changes = spark.createDataFrame([
        ("U", 10, 1, "A1", "B1", None, True, False),  # a sent, c not: c keeps 1
        ("D", 11, 2, None, None, None, False, False),
        ("I", 12, 4, None, "b4", 40, False, True),  # a never sent for the new key: NULL, as the MERGE inserts
        ("D", 13, 5, None, None, None, False, False),  # a key the table never had
    ], "_op string, _commit_ts bigint, id int, a string, b string, c int, _present_1 boolean, _present_3 boolean")
    changes.createOrReplaceTempView("partial_changes")
    spark.sql(merge_sql(settings.catalog_name, target, "partial_changes", frozenset({"b"})))
    snapshot = spark.sql("SELECT snapshot_id FROM app.lake.snapshots").first()[0]
    lake = spark.sql(lake_rows_sql([LakeTable(settings.catalog_name, "app", "lake", snapshot,
                                              tuple(c.name for c in columns))], columns))
    rows = rewritten_rows(lake,
                          changes.withColumn(TABLE_INDEX, changes["id"] * 0), columns, [columns[0]], [1, 3])
    kept = rows.filter(~rows[DROPPED]).select("id", "a", "b", "c").orderBy("id").collect()
    assert [tuple(r) for r in kept] == [tuple(r) for r in spark.sql("SELECT * FROM app.merged ORDER BY id").collect()]
    assert [tuple(r) for r in kept] == [(1, "A1", "B1", 1), (3, "a3", "b3", 3), (4, None, "b4", 40)]
    totals = rows.groupBy().sum(WRITTEN, REMOVED).collect()[0]
    assert tuple(totals) == (2, 2)  # written: the update and the insert; removed: the updated and deleted rows


def test_a_crash_between_the_rewrite_and_its_commits_reruns_to_the_same_tables(spark_session, tmp_path):
    workload, runs = _runs(37, tmp_path)
    home = tmp_path / "home"
    _backfill(spark_session, home, "rw_crash", runs[0][0])
    before = set((home / "warehouse").rglob("*-lakehouse.parquet"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(home), LAKEHOUSE__CATALOG__NAME="rw_crash",
               LAKEHOUSE_FAULT_POINT="merge.before_append_commits")
    killed = subprocess.run(
        [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive", str(runs[1][0]),
         "--protocol", "open"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert killed.returncode == -9, killed.stderr[-2000:]
    written = set((home / "warehouse").rglob("*-lakehouse.parquet")) - before
    assert written, "the job rewrote the tables' files before the crash"
    _backfill(spark_session, home, "rw_crash", runs[1][0])
    assert_lake_equals_upstream(spark_session, workload, runs[1][1])
    for name in workload.expected_json(runs[1][1]):
        operations = [r["operation"] for r in lake_rows(
            spark_session, f"SELECT operation FROM rw_crash.{name}.snapshots ORDER BY committed_at")]
        assert operations == ["append", "overwrite"], name
        referenced = {r[0] for r in spark_session.sql(f"SELECT file_path FROM rw_crash.{name}.files").collect()}
        assert not referenced & {f"file:{p}" for p in written} and not referenced & {str(p) for p in written}


def test_tables_of_different_columns_whose_updates_carry_some_columns_are_rewritten_to_the_upstream_rows(
        spark_session, tmp_path, monkeypatch):
    """Updates that carry only the key and the changed columns, in six tables of different columns: each run's
    frames of slots carry each table's earlier values of what an update did not send, appended and rewritten."""
    workload, runs = _runs(37, tmp_path, tables=6, partial_updates=True)
    recorded = record_write_frames(monkeypatch)
    for archive, cut in runs:
        _backfill(spark_session, tmp_path / "home", "rw_p", archive)
        assert_lake_equals_upstream(spark_session, workload, cut)
    slotted = [f.slots is not None for f in recorded]
    assert slotted.count(True) == 9, slotted  # three frames a run


def test_the_row_lineage_fields_are_written_under_icebergs_own_names_and_ids(spark_session):
    from ticdc_lakehouse.merge.batch_rewrite import LINEAGE_FIELD_IDS

    columns = spark_session._jvm.org.apache.iceberg.MetadataColumns
    fields = (columns.ROW_ID, columns.LAST_UPDATED_SEQUENCE_NUMBER)
    assert LINEAGE_FIELD_IDS == {str(field.name()): int(field.fieldId()) for field in fields}


def test_a_value_a_small_table_cannot_store_is_a_dead_letter_and_the_rest_of_the_run_applies(spark, settings,
                                                                                              tmp_path):
    """In a steady-state run the rewrite's job fails on the value before any commit, naming its table: that table
    takes its own flush, which sets the bad event aside (topic, partition, offset, reason) and applies the others,
    and the other tables are rewritten by the write jobs again (not a flush each)."""
    at = Position("t", 0, 0)
    types = {"id": "int", "amount": "decimal(5,2)"}

    def row(table, ts, op, values, before=None):
        return RowChange("app", table, ts, op, values, before, ("id",), types, at)

    first = [DDLEvent("app", "", 100, "CREATE DATABASE app", "CREATE_SCHEMA", at)]
    first += [DDLEvent("app", t, 101 + i, f"CREATE TABLE app.{t} (id INT PRIMARY KEY, amount DECIMAL(5,2))",
                       "CREATE_TABLE", at) for i, t in enumerate(("a", "b"))]
    first += [row(t, 110 + i, INSERT, {"id": str(i), "amount": "1.00"}) for t in ("a", "b") for i in range(3)]
    second = [row("a", 210, UPDATE, {"id": "0", "amount": "12345.67"}, {"id": "0", "amount": "1.00"}),  # too wide
              row("a", 211, UPDATE, {"id": "1", "amount": "2.00"}, {"id": "1", "amount": "1.00"}),
              row("b", 212, UPDATE, {"id": "2", "amount": "3.00"}, {"id": "2", "amount": "1.00"}),
              ResolvedEvent(300, at)]
    first.append(ResolvedEvent(200, at))
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second)
    assert lake_rows(spark, "SELECT id, CAST(amount AS STRING) AS amount FROM app.a ORDER BY id") == [
        {"id": 0, "amount": "1.00"}, {"id": 1, "amount": "2.00"}, {"id": 2, "amount": "1.00"}]
    assert lake_rows(spark, "SELECT id, CAST(amount AS STRING) AS amount FROM app.b ORDER BY id") == [
        {"id": 0, "amount": "1.00"}, {"id": 1, "amount": "1.00"}, {"id": 2, "amount": "3.00"}]
    dead = lake_rows(spark, "SELECT topic, partition, offset, error FROM _lakehouse.dead_letters")
    assert [(d["topic"], d["partition"], d["offset"]) for d in dead] == [("t", 0, len(first))]  # its offset
    assert "12345.67" in dead[0]["error"] and "decimal(5,2)" in dead[0]["error"]
    # b was rewritten whole (its file replaced, no deletion vector), a merged on its own (a deletion vector)
    last = ("SELECT summary['deleted-data-files'] AS replaced, summary['added-delete-files'] AS dvs "
            "FROM app.{}.snapshots ORDER BY committed_at DESC LIMIT 1")
    assert lake_rows(spark, last.format("b")) == [{"replaced": "1", "dvs": None}]
    assert lake_rows(spark, last.format("a"))[0]["dvs"] == "1"
