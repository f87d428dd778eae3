"""The engine's table format and SQL mode: Iceberg format v3 with deletion vectors, ANSI SQL."""

from __future__ import annotations

import pytest

from tests.lake_helpers import backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent, RowChange

AT = Position("t", 0, 0)
FULL = {"id": "int", "v": "varchar", "w": "varchar"}


def row(ts, op, values):
    after = None if op == DELETE else values
    before = {"id": values["id"]} if op in (DELETE, UPDATE) else None
    return RowChange("app", "a", ts, op, after, before, ("id",), FULL, AT)


def test_ansi_mode_is_kept_on_whatever_the_configuration_says(tmp_path):
    from ticdc_lakehouse.config import load_settings
    from ticdc_lakehouse.spark_session import spark_plan

    env = {"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": str(tmp_path / "c.toml")}
    (tmp_path / "c.toml").write_text('[spark.conf]\n"spark.sql.ansi.enabled" = "false"\n')
    assert spark_plan(load_settings(env=env)).conf["spark.sql.ansi.enabled"] == "true"


@pytest.mark.spark
def test_the_session_runs_ansi_sql_so_a_bad_cast_fails_instead_of_giving_null(spark):
    from pyspark.errors import SparkRuntimeException
    from pyspark.errors.exceptions.captured import NumberFormatException

    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    with pytest.raises((NumberFormatException, SparkRuntimeException), match="CAST_INVALID_INPUT"):
        spark.sql("SELECT CAST('12x' AS INT)").collect()
    assert spark.sql("SELECT try_cast('12x' AS INT) AS v").collect()[0]["v"] is None


@pytest.mark.spark
def test_new_tables_are_format_v3_and_merges_write_deletion_vectors(spark, settings, tmp_path):
    first = [*create_app_table(AT), *[row(110 + i, INSERT, {"id": str(i), "v": "a", "w": "b"}) for i in range(6)],
             ResolvedEvent(200, AT)]
    second = [row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}), row(211, DELETE, {"id": "2"}),
              ResolvedEvent(300, AT)]
    third = [row(310, DELETE, {"id": "3"}), row(311, UPDATE, {"id": "4", "v": "x", "w": "y"}),
             ResolvedEvent(400, AT)]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second, third)
    assert [r["id"] for r in lake_rows(spark, "SELECT id FROM app.a ORDER BY id")] == [0, 1, 4, 5]
    properties = {r["key"]: r["value"] for r in lake_rows(spark, "SHOW TBLPROPERTIES app.a")}
    assert properties["format-version"] == "3"
    deletes = lake_rows(spark, "SELECT content, file_format, referenced_data_file, content_offset, "
                               "content_size_in_bytes, record_count FROM app.a.delete_files")
    assert deletes, "the merges deleted rows: there must be delete files"
    for delete in deletes:
        # a deletion vector: position deletes (content 1) as a blob of a Puffin file, naming its one data file
        assert delete["content"] == 1 and delete["file_format"] == "PUFFIN", delete
        assert delete["referenced_data_file"] and delete["content_offset"] is not None, delete
    # one DV per data file: a data file touched by both runs has one DV holding both runs' deletes
    live = [d["referenced_data_file"] for d in deletes]
    assert len(live) == len(set(live))
    assert sum(d["record_count"] for d in deletes) == 4  # ids 1 (updated), 2, 3, 4 (updated) marked deleted
    control = {r["key"]: r["value"] for r in lake_rows(spark, "SHOW TBLPROPERTIES _lakehouse.checkpoints")}
    assert control["format-version"] == "3"
