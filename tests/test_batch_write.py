"""Tables new to the lake are written by one Spark job and committed one snapshot each (merge/batch_write.py,
merge/table_commit.py): the same rows and types as the MERGE path, one commit per table, crash-safe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.lake_helpers import (
    assert_lake_equals_upstream,
    backfill_open_protocol_runs,
    create_app_table,
    lake_rows,
    record_write_frames,
)
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent, RowChange
from ticdc_lakehouse.decode.protocols import ENCODABLE
from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]
AT = Position("t", 0, 0)


def _workload(seed: int = 5, tables: Optional[int] = None, distinct: bool = False) -> Workload:
    """The sample tables (decimals, unsigned bigint, datetimes, enums, sets, JSON, blobs) created in the stream,
    and changes of every kind: every table is new to the lake in the run. ``tables``, ``distinct``: see
    ``Workload.create_sample_tables`` (default: the sample tables alone)."""
    workload = Workload(seed=seed, partitions=3)
    if tables is None:
        workload.create_sample_tables()
    else:
        workload.create_sample_tables(tables, distinct)
    workload.resolve(final=True)
    for i in range(40):
        workload.transaction(4)
        if i % 5 == 4:
            workload.resolve()
    workload.resolve(final=True)
    return workload


def _backfill(spark, home: Path, catalog: str, archive: Path, bucketed: bool = True, protocol: str = "open"):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    # bucketed: every table bucketed however few its rows (the writers' buckets are what most tests here check);
    # else the default bound, below which a table is unpartitioned
    env = {"LAKEHOUSE_HOME": str(home), "LAKEHOUSE__CATALOG__NAME": catalog}
    if bucketed:
        env["LAKEHOUSE__MERGE__BUCKET_MIN_ROWS"] = "0"
    settings = load_settings(env=env)
    use_catalog(spark, settings)
    return backfill(settings, archive, protocol=protocol, spark=spark)


def _snapshot_ops(spark, name: str) -> list[tuple[str, str]]:
    return [(r["operation"], r["ts"]) for r in spark.sql(
        f"SELECT operation, summary['tidb.resolved-ts'] AS ts FROM {name}.snapshots ORDER BY committed_at").collect()]


def test_new_tables_take_one_write_job_and_equal_the_merge_path(spark_session, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from ticdc_lakehouse.merge import batch_flush, flush, table_commit

    workload = _workload()
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()

    report = _backfill(spark_session, tmp_path / "appended", "batch_a", archive)
    assert_lake_equals_upstream(spark_session, workload, cut)
    appended = {name: spark_session.table(f"batch_a.{name}") for name in workload.expected_json(cut)}
    for name in appended:
        # created with its rows: one append carrying the watermark, in one catalog commit (no empty snapshot at
        # the CREATE's ts, no branch, MERGE or marker commit)
        assert _snapshot_ops(spark_session, f"batch_a.{name}") == [("append", str(cut))], name
        first = spark_session.sql(f"SELECT latest_snapshot_id FROM batch_a.{name}.metadata_log_entries "
                                  "ORDER BY timestamp LIMIT 1").collect()[0][0]
        assert first == spark_session.sql(f"SELECT snapshot_id FROM batch_a.{name}.snapshots").collect()[0][0]
    assert report["merge"]["tables"], "the report counts the rows written"

    with monkeypatch.context() as patched:  # the same archive the MERGE way
        for module in (table_commit, flush):
            patched.setattr(module, "plan_append", lambda ji, change: None)
        patched.setattr(batch_flush, "plan_write", lambda ji, change, rewrite_max_rows: None)
        _backfill(spark_session, tmp_path / "merged", "batch_m", archive)
    for name, frame in appended.items():
        merged = spark_session.table(f"batch_m.{name}")
        assert frame.schema == merged.schema, name
        key = [frame.columns[0]] + ([frame.columns[1]] if name.endswith("order_items") else [])
        assert frame.orderBy(*key).collect() == merged.orderBy(*key).collect(), name
        assert report["merge"]["tables"][name]["written"] == merged.count()
        # rows sit in the buckets Iceberg's own writer puts them in (a wrong bucket hides a row from key lookups)
        buckets = "SELECT partition, sum(record_count) AS n FROM {}.files GROUP BY partition ORDER BY partition"
        assert lake_rows(spark_session, buckets.format(f"batch_a.{name}")) == \
            lake_rows(spark_session, buckets.format(f"batch_m.{name}")), name

    # the files as any Iceberg reader sees them: pyiceberg reads the same values and types
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("batch_a", uri=f"sqlite:///{tmp_path / 'appended' / 'catalog.db'}",
                         warehouse=str(tmp_path / "appended" / "warehouse"))
    for name in appended:
        table = catalog.load_table(name)
        read = table.scan().to_arrow()
        merged_files = [t.file.file_path for t in catalog.load_table(name).scan().plan_files()]
        assert merged_files and all(path.endswith("-lakehouse.parquet") for path in merged_files)
        reference = spark_session.table(f"batch_m.{name}").toArrow()
        order = [(c, "ascending") for c in reference.column_names[:2]]
        assert read.sort_by(order).to_pylist() == reference.sort_by(order).to_pylist(), name
        footer = pq.ParquetFile(merged_files[0].removeprefix("file:")).schema_arrow
        assert all(f.metadata and b"PARQUET:field_id" in f.metadata for f in footer), name


def row(ts, op, image, table="a"):
    before = image if op == DELETE else None
    after = None if op == DELETE else image
    return RowChange("app", table, ts, op, after, before, ("id",), {"id": "int", "v": "varchar(9)", "w": "varchar(9)"},
                     AT)


def test_a_table_with_rows_updates_and_deletes_after_its_first_append(spark, settings, tmp_path):
    first = [*create_app_table(AT), row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
             row(111, INSERT, {"id": "2", "v": "c", "w": "d"}), row(112, INSERT, {"id": "3", "v": "x", "w": "y"}),
             row(113, DELETE, {"id": "3"}), ResolvedEvent(200, AT)]
    second = [row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}), row(211, DELETE, {"id": "2"}),
              row(212, INSERT, {"id": "3", "v": "e", "w": None}), ResolvedEvent(300, AT)]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "a", "w": "b"}, {"id": 2, "v": "c", "w": "d"}]
    assert _snapshot_ops(spark, "app.a") == [("append", "200")]  # created by the run that writes its rows
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", second)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "a2", "w": "b2"}, {"id": 3, "v": "e", "w": None}]
    assert lake_rows(spark, "SELECT * FROM app.a VERSION AS OF "
                            f"{spark.sql('SELECT snapshot_id FROM app.a.snapshots ORDER BY committed_at').collect()[0][0]}"
                            " ORDER BY id") == [{"id": 1, "v": "a", "w": "b"}, {"id": 2, "v": "c", "w": "d"}]


def test_a_crash_between_the_write_job_and_the_commits_reruns_to_the_same_tables(spark_session, tmp_path):
    workload = _workload(seed=9)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(home), LAKEHOUSE__CATALOG__NAME="batch_crash",
               LAKEHOUSE_FAULT_POINT="merge.before_append_commits")
    killed = subprocess.run(
        [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive", str(archive), "--protocol", "open"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert killed.returncode == -9, killed.stderr[-2000:]
    written = list((home / "warehouse").rglob("*-lakehouse.parquet"))
    assert written, "the job wrote the files before the crash"
    _backfill(spark_session, home, "batch_crash", archive)
    assert_lake_equals_upstream(spark_session, workload, cut)
    for name in workload.expected_json(cut):
        assert _snapshot_ops(spark_session, f"batch_crash.{name}") == [("append", str(cut))], name
        referenced = {r[0] for r in spark_session.sql(f"SELECT file_path FROM batch_crash.{name}.files").collect()}
        assert not referenced & {f"file:{p}" for p in written} and not referenced & {str(p) for p in written}


def test_tables_of_one_layout_share_a_change_set_and_column_ddl_costs_no_barrier(spark_session, tmp_path):
    """Nine tables of three layouts (sharded copies), with five mid-stream DDL of the kinds a run carries its
    rows through (widen, drop a column, truncate, rename a column, add one): the lake equals upstream, each
    table is written once in the run (no barrier MERGE: besides its creation only DDL markers and one append),
    and each (table, bucket) has one data file."""
    workload = Workload(seed=11, partitions=3, schema="sharded")
    workload.create_sample_tables(9)
    workload.resolve(final=True)
    kinds = ("widen", "drop", "truncate", "rename", "add")
    for i in range(60):
        workload.transaction(3)
        if i % 12 == 6:
            workload.scripted_ddl(kinds[i // 12])
        if i % 5 == 4:
            workload.resolve()
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()

    report = _backfill(spark_session, tmp_path / "home", "batch_s", archive)
    assert report["ok"], report
    assert_lake_equals_upstream(spark_session, workload, cut)
    for name in workload.expected_json(cut):
        lake = f"batch_s.{name}"
        writes = spark_session.sql(
            f"SELECT operation, summary['added-records'] AS added FROM {lake}.snapshots ORDER BY committed_at"
        ).collect()
        assert [r["operation"] for r in writes if r["added"] not in (None, "0")] == ["append"], (name, writes)
        assert all(r["operation"] in ("append", "delete") for r in writes), (name, writes)  # no overwrite (MERGE)
        per_bucket = spark_session.sql(f"SELECT partition, count(*) AS n FROM {lake}.files GROUP BY partition")
        assert all(r["n"] == 1 for r in per_bucket.collect()), name


def test_small_tables_of_distinct_columns_get_one_file_each_however_many_the_run_s_write_tasks(
        spark_session, tmp_path, monkeypatch):
    """Twelve tables, no two of the same columns, unpartitioned: the lake equals upstream and each table, of fewer
    row events than a write task takes, has one data file, while the run's events took several write tasks (a
    file of every table each, when each table's change set was spread over the run's). The tables whose keys
    have the same types are written by one frame of slots (``column_slots``): one plan per key type, not one per
    table."""
    from ticdc_lakehouse.merge import batch_write

    monkeypatch.setattr(batch_write, "EVENTS_PER_PARTITION", 150)
    recorded = record_write_frames(monkeypatch)
    workload = _workload(seed=12, tables=12, distinct=True)  # about 160 row events: two write tasks of 150
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()

    report = _backfill(spark_session, tmp_path / "home", "batch_d", archive, bucketed=False)
    assert report["ok"], report
    assert report["merge"]["events_read"] > 150
    assert_lake_equals_upstream(spark_session, workload, cut)
    columns = set()
    for name in workload.expected_json(cut):
        lake = f"batch_d.{name}"
        columns.add(tuple(f.name for f in spark_session.table(lake).schema.fields))
        assert spark_session.sql(f"SELECT count(*) AS n FROM {lake}.files").first()["n"] == 1, name
    assert len(columns) == 12
    key_types: dict[tuple, int] = {}
    for table in workload.tables.values():
        kind = tuple(next(c.mysql_type for c in table.columns if c.name == key) for key in table.primary_key)
        key_types[kind] = key_types.get(kind, 0) + 1
    frames = [(len(f.layouts), f.slots is not None) for f in recorded]
    assert sorted(frames) == sorted((count, True) for count in key_types.values()), frames


def test_a_write_task_gives_each_table_and_bucket_one_file_with_exactly_its_rows(tmp_path, monkeypatch):
    """The task-side writer (no Spark needed to call it): rows of two tables and three buckets arrive mixed over
    batches; each (table, bucket) gets one file in its table's data directory holding exactly its rows, with the
    table's field ids; its rows are held until ``WRITE_ROWS``, then written as one row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ticdc_lakehouse.merge import batch_write
    from ticdc_lakehouse.merge.batch_write import BUCKET, ArrowColumn, TableLayout, file_writer
    from ticdc_lakehouse.merge.table_events import TABLE_INDEX

    monkeypatch.setattr(batch_write, "WRITE_ROWS", 3)
    columns = (ArrowColumn("id", 1, True), ArrowColumn("v", 2, False))
    layouts = [TableLayout(f"file:{tmp_path}/t{t}/data/", columns, ("id_bucket", "id", 3)) for t in range(2)]
    rows = [(i, f"v{i}", i % 2, i % 3) for i in range(40)]  # id, v, table index, bucket
    batches = [pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in part], pa.int64()), pa.array([r[1] for r in part]),
         pa.array([r[2] for r in part], pa.int32()), pa.array([r[3] for r in part], pa.int32())],
        names=["_c0", "_c1", "_c2", "_c3"]) for part in (rows[:17], rows[17:18], rows[18:])]

    written = pa.Table.from_batches(list(file_writer(10, layouts, ["id", "v", TABLE_INDEX, BUCKET])(iter(batches))))

    files = written.to_pylist()
    groups: list[int] = []
    assert sorted((f["table_index"], f["bucket"]) for f in files) == [(t, b) for t in (10, 11) for b in range(3)]
    for file in files:
        table, bucket = file["table_index"] - 10, file["bucket"]
        path = file["path"][len("file:"):]
        assert path.startswith(f"{tmp_path}/t{table}/data/id_bucket={bucket}-")
        expected = [(i, v) for i, v, t, b in rows if (t, b) == (table, bucket)]
        data = pq.read_table(path)
        assert list(zip(data["id"].to_pylist(), data["v"].to_pylist())) == expected
        assert file["rows"] == len(expected) and file["bytes"] == os.path.getsize(path)
        assert [f.metadata[b"PARQUET:field_id"] for f in data.schema] == [b"1", b"2"]
        assert not data.schema.field("id").nullable
        groups.append(pq.ParquetFile(path).metadata.num_row_groups)
        assert groups[-1] == 1 or len(expected) > 3  # rows held until WRITE_ROWS, then one row group
    assert max(groups) > 1


def test_a_small_file_written_whole_is_not_compressed_and_the_others_take_the_tables_codec(tmp_path, monkeypatch):
    """Files of fewer than ``SMALL_FILE_ROWS`` rows written whole at the end of the task skip compression (its
    per-column setup was half of such a file's cost); larger files, and files opened before the task's end, are
    compressed with the table's codec. Either way the file holds exactly its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ticdc_lakehouse.merge import batch_write
    from ticdc_lakehouse.merge.batch_write import BUCKET, ArrowColumn, TableLayout, file_writer
    from ticdc_lakehouse.merge.table_events import TABLE_INDEX

    monkeypatch.setattr(batch_write, "SMALL_FILE_ROWS", 10)
    columns = (ArrowColumn("id", 1, True), ArrowColumn("v", 2, False))
    layouts = [TableLayout(f"file:{tmp_path}/t{t}/data/", columns, None, "zstd") for t in range(2)]
    rows = [(i, f"v{i}", 0 if i < 4 else 1) for i in range(30)]  # table 0: 4 rows, table 1: 26
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows]),
         pa.array([r[2] for r in rows], pa.int32())], names=["_c0", "_c1", "_c2"])

    files = pa.Table.from_batches(list(file_writer(0, layouts, ["id", "v", TABLE_INDEX])(iter([batch])))).to_pylist()

    codecs = {}
    for file in files:
        path = file["path"][len("file:"):]
        assert pq.read_table(path)["id"].to_pylist() == [r[0] for r in rows if r[2] == file["table_index"]]
        codecs[file["table_index"]] = pq.ParquetFile(path).metadata.row_group(0).column(0).compression
    assert codecs == {0: "UNCOMPRESSED", 1: "ZSTD"}
    assert BUCKET not in pq.read_table(files[0]["path"][len("file:"):]).column_names


def test_a_frame_gets_one_write_task_per_fifty_thousand_row_events(spark, settings):
    """Each write task is a Python worker round trip: a small frame is not spread over the job's partitions."""
    from ticdc_lakehouse.merge.batch_write import BUCKET, EVENTS_PER_PARTITION, TableLayout, images
    from ticdc_lakehouse.merge.changes import OP
    from ticdc_lakehouse.merge.table_events import TABLE_INDEX

    source = spark.createDataFrame([(0, 1, "I"), (1, 2, "U"), (1, 3, "D")], f"{TABLE_INDEX} int, id int, {OP} string")
    layout = TableLayout("/tmp/unused/", (), ("id_bucket", "id", 4))
    for row_events, tasks in ((3, 1), (EVENTS_PER_PARTITION, 1), (EVENTS_PER_PARTITION * 2 + 1, 3)):
        frame = images(source, settings.catalog_name, ["id"], layout, row_events)
        assert frame.rdd.getNumPartitions() == tasks, row_events
    rows = images(source, settings.catalog_name, ["id"], layout, 3).collect()
    assert sorted((r["id"], r[TABLE_INDEX], r[BUCKET]) for r in rows) == sorted(
        (r[0], r[1], r[2]) for r in spark.sql(f"SELECT 1, 0, {settings.catalog_name}.system.bucket(4, 1) UNION ALL "
                                              f"SELECT 2, 1, {settings.catalog_name}.system.bucket(4, 2)").collect())


@pytest.mark.parametrize("protocol", ENCODABLE)
def test_tables_of_distinct_columns_written_as_slots_equal_upstream_in_every_protocol(spark_session, tmp_path,
                                                                                    monkeypatch, protocol):
    """Each protocol's values (ENUM/SET as numbers or as names, binary and text forms, bucketed tables) reach the
    twelve distinct tables through frames of slots exactly as upstream holds them."""
    recorded = record_write_frames(monkeypatch)
    workload = _workload(seed=13, tables=12, distinct=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", protocol)
    cut = workload.global_resolved_ts()
    catalog = "slots_" + protocol.replace("-", "_")
    report = _backfill(spark_session, tmp_path / "home", catalog, archive, protocol=protocol)
    assert report["ok"] and report["merge"]["dead_letters"] == 0, report
    assert_lake_equals_upstream(spark_session, workload, cut)
    slotted = [f.slots is not None for f in recorded]
    assert slotted == [True, True, True], slotted
    for name, table in workload.tables.items():  # each row in the bucket of its first key, as Iceberg puts it
        key = table.primary_key[0]
        placed = spark_session.sql(f"SELECT {catalog}.system.bucket(16, `{key}`) AS b, _partition AS p "
                                   f"FROM {catalog}.{table.schema}.{name}").collect()
        assert placed and all(r["b"] == r["p"][0] for r in placed), name


def test_a_write_task_s_worker_imports_no_planning_code():
    """A write task's Python worker imports the writer's module and what it imports: not the planning modules'
    type library (pyiceberg, pydantic: 0.18 s of imports in each worker at the start of the write jobs)."""
    code = ("import sys, ticdc_lakehouse.merge.batch_write; "
            "print(sorted(m for m in ('pyiceberg', 'pydantic', 'ticdc_lakehouse.core.mysql_types', "
            "'ticdc_lakehouse.merge.changes', 'ticdc_lakehouse.merge.batch_rewrite') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
