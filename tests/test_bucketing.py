"""A table's partitioning follows its size (iceberg/tables.py ``buckets_for``, merge/table_work.py): small tables
unpartitioned (one file per write), a table bucketed from ``merge.bucket_min_rows`` rows on: created so when its
first run brings that many, evolved so when it grows past it later."""

from __future__ import annotations

import pytest

from tests.lake_helpers import backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent, RowChange
from ticdc_lakehouse.iceberg.tables import buckets_for

AT = Position("t", 0, 0)
COLUMNS = {"id": "int", "v": "varchar", "w": "varchar"}


def test_buckets_come_with_the_rows_and_never_against_the_configuration():
    assert buckets_for(16, 100, 99) == 0
    assert buckets_for(16, 100, 100) == 16
    assert buckets_for(16, 0, 0) == 16  # 0: every keyed table bucketed when created, as before
    assert buckets_for(0, 0, 10**9) == 0  # bucket_count = 0: never partitioned


def _insert(table: str, ts: int, key: int) -> RowChange:
    return RowChange("app", table, ts, INSERT, {"id": str(key), "v": f"v{key}", "w": None}, None, ("id",),
                     COLUMNS, AT)


def _partitions(spark, table: str) -> list[dict]:
    """Each data file's spec, bucket (None: unpartitioned) and rows, as a reader sees them in the files table (an
    unpartitioned table's has no ``partition`` column)."""
    files = spark.table(f"app.{table}.data_files")
    bucket = "partition.id_bucket" if "partition" in files.columns else "CAST(NULL AS INT)"
    return lake_rows(spark, f"SELECT spec_id, {bucket} AS bucket, record_count FROM app.{table}.data_files "
                            "ORDER BY spec_id, bucket")


@pytest.mark.spark
@pytest.mark.parametrize("rewrite_max_rows", [10_000, 0], ids=["rewritten", "merged"])
def test_a_small_table_is_one_file_a_big_one_buckets_and_a_growing_one_evolves(spark, lakehouse_env, tmp_path,
                                                                                rewrite_max_rows):
    """Three tables in one backfill (the shared write jobs): ``a`` stays under the bound and is written as one
    unpartitioned file; ``big`` is created bucketed, its first run bringing the bound's rows; ``grows`` starts
    small, and the run that takes it past the bound partitions it first, so that run's rows land in buckets:
    rewritten whole (a small table), every row; MERGEd (``rewrite_max_rows = 0``), the new rows, while the earlier
    file keeps the unpartitioned spec and a deletion vector for the rows changed. Every row reads back, also as
    of the earlier cut."""
    (tmp_path / "none.toml").write_text(
        f"[merge]\nbucket_count = 4\nbucket_min_rows = 20\nrewrite_max_rows = {rewrite_max_rows}\n")
    from ticdc_lakehouse.runtime.config import load_settings

    settings = load_settings()
    first = [*create_app_table(AT),
             *create_app_table(AT, "CREATE TABLE app.big (id int PRIMARY KEY, v varchar(9), w varchar(9))")[1:],
             *create_app_table(AT, "CREATE TABLE app.grows (id int PRIMARY KEY, v varchar(9), w varchar(9))")[1:],
             *[_insert("a", 110 + i, i) for i in range(5)],
             *[_insert("big", 110 + i, i) for i in range(30)],
             *[_insert("grows", 110 + i, i) for i in range(10)],
             ResolvedEvent(200, AT)]
    second = [*[_insert("a", 210 + i, 100 + i) for i in range(3)],
              *[_insert("grows", 210 + i, 100 + i) for i in range(12)],
              RowChange("app", "grows", 250, UPDATE, {"id": "0", "v": "again", "w": "x"}, {"id": "0"}, ("id",),
                        COLUMNS, AT),
              RowChange("app", "grows", 251, DELETE, None, {"id": "1", "v": "v1", "w": None}, ("id",), COLUMNS, AT),
              ResolvedEvent(300, AT)]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first)

    assert _partitions(spark, "a") == [{"spec_id": 0, "bucket": None, "record_count": 5}]
    big = _partitions(spark, "big")
    assert {f["spec_id"] for f in big} == {0} and len(big) > 1 and sum(f["record_count"] for f in big) == 30
    assert all(f["bucket"] in range(4) for f in big)
    assert _partitions(spark, "grows") == [{"spec_id": 0, "bucket": None, "record_count": 10}]

    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", second)
    grown = _partitions(spark, "grows")
    bucketed = [f for f in grown if f["spec_id"] == 1]
    assert bucketed and all(f["bucket"] in range(4) for f in bucketed), grown
    if rewrite_max_rows:
        assert [f["record_count"] for f in _partitions(spark, "a")] == [8]  # rewritten whole: one file
        assert bucketed == grown and sum(f["record_count"] for f in grown) == 21, grown
    else:
        assert sorted(f["record_count"] for f in _partitions(spark, "a")) == [3, 5]
        assert [f for f in grown if f["spec_id"] == 0] == [{"spec_id": 0, "bucket": None, "record_count": 10}]
        assert sum(f["record_count"] for f in bucketed) == 13  # the 12 new rows and the updated one
        deletes = lake_rows(spark, "SELECT count(*) AS n FROM app.grows.delete_files")
        assert deletes == [{"n": 1}], "the earlier file's changed rows are marked in a deletion vector"
    assert lake_rows(spark, "SELECT count(*) AS n, max(CASE WHEN id = 0 THEN v END) AS v0, "
                            "count(CASE WHEN id = 1 THEN 1 END) AS gone FROM app.grows") == [
        {"n": 21, "v0": "again", "gone": 0}]
    assert lake_rows(spark, "SELECT count(*) AS n FROM app.grows VERSION AS OF 'tso_200'") == [{"n": 10}]
