"""The engine's table format and SQL mode: Iceberg format v3 with deletion vectors, ANSI SQL."""

from __future__ import annotations

import pytest

from tests.lake_helpers import app_row as row, backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent

AT = Position("t", 0, 0)
def test_ansi_mode_is_kept_on_whatever_the_configuration_says(tmp_path):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import spark_plan

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


def _status_of(spark, settings, table: str) -> tuple[dict, str]:
    """``lakehouse status``'s row for a table, and the line its text shows for it."""
    from ticdc_lakehouse.commands.status import collect_status, render_status

    status = collect_status(settings, kafka=False, spark=spark)
    [row] = [t for feed in status["changefeeds"] for t in feed["tables"] if t["table"] == table]
    [line] = [line for line in render_status(status).splitlines() if line.strip().startswith(f"| {table} ")]
    return row, line


def _delete_formats(spark, table: str) -> list[str]:
    return [r["file_format"] for r in lake_rows(spark, f"SELECT file_format FROM {table}.delete_files")]


@pytest.mark.spark
def test_maintain_upgrade_format_takes_a_v2_lake_to_v3_and_every_tagged_cut_stays_readable(
        spark, settings, tmp_path, monkeypatch):
    """A lake as the previous version wrote it (format v2, position-delete files, ``tso_*`` tags), then
    ``lakehouse maintain --upgrade-format``: the tables are v3, both cuts read as before, and the next merge
    writes deletion vectors."""
    from ticdc_lakehouse.commands.cli import build_parser
    from ticdc_lakehouse.iceberg import tables
    from ticdc_lakehouse.commands.maintenance import maintain

    assert build_parser().parse_args(["maintain", "--upgrade-format"]).upgrade_format
    archive = tmp_path / "archive"
    monkeypatch.setattr(tables, "FORMAT_VERSION", 2)  # what the previous version created
    first = [*create_app_table(AT), *[row(110 + i, INSERT, {"id": str(i), "v": "a", "w": "b"}) for i in range(4)],
             ResolvedEvent(200, AT)]
    second = [row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}), row(211, DELETE, {"id": "2"}),
              ResolvedEvent(300, AT)]
    backfill_open_protocol_runs(spark, settings, archive, first, second)
    monkeypatch.undo()
    before = {r["key"]: r["value"] for r in lake_rows(spark, "SHOW TBLPROPERTIES app.a")}
    assert before["format-version"] == "2" and set(_delete_formats(spark, "app.a")) == {"PARQUET"}
    cuts = {ts: lake_rows(spark, f"SELECT * FROM app.a VERSION AS OF 'tso_{ts}' ORDER BY id") for ts in (200, 300)}
    shown, line = _status_of(spark, settings, "app.a")
    assert (shown["format_version"], shown["deletion_vectors"]) == (2, 0) and shown["delete_files"] >= 1
    assert "| v2 " in line
    assert [r["id"] for r in cuts[200]] == [0, 1, 2, 3] and [r["id"] for r in cuts[300]] == [0, 1, 3]

    dry = maintain(settings, spark=spark, dry_run=True, upgrade_format=True)
    assert dry["changefeeds"][0]["tables"]["app.a"]["format_version"] == {"before": 2, "would_set": 3}
    result = maintain(settings, spark=spark, upgrade_format=True)
    assert result["ok"], result["problems"]
    assert result["changefeeds"][0]["tables"]["app.a"]["format_version"] == {"before": 2, "after": 3}
    assert result["control_tables"]["_lakehouse.checkpoints"]["format_version"] == {"before": 2, "after": 3}
    for name in ("app.a", "_lakehouse.checkpoints"):
        assert {r["key"]: r["value"] for r in lake_rows(spark, f"SHOW TBLPROPERTIES {name}")}["format-version"] == "3"
    for ts, rows in cuts.items():  # the old snapshots (and their v2 position deletes) read the same
        assert lake_rows(spark, f"SELECT * FROM app.a VERSION AS OF 'tso_{ts}' ORDER BY id") == rows
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == cuts[300]

    third = [row(310, DELETE, {"id": "3"}), row(311, UPDATE, {"id": "0", "v": "z", "w": "z"}),
             ResolvedEvent(400, AT)]
    old = {r["file_path"] for r in lake_rows(spark, "SELECT file_path FROM app.a.delete_files")}
    backfill_open_protocol_runs(spark, settings, archive, third)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 0, "v": "z", "w": "z"}, {"id": 1, "v": "a2", "w": "b2"}]
    # the new deletes are deletion vectors (a v2 position-delete file of a data file the merge did not touch
    # stays live: readers apply both)
    added = [r["file_format"] for r in lake_rows(spark, "SELECT file_path, file_format FROM app.a.delete_files")
             if r["file_path"] not in old]
    assert added and set(added) == {"PUFFIN"}
    shown, line = _status_of(spark, settings, "app.a")
    formats = _delete_formats(spark, "app.a")
    assert (shown["format_version"], shown["deletion_vectors"], shown["delete_files"]) == (
        3, formats.count("PUFFIN"), formats.count("PARQUET"))
    assert formats.count("PUFFIN") >= 1
    assert shown["data_files"] >= 1 and "| v3 " in line
    assert lake_rows(spark, "SELECT * FROM app.a VERSION AS OF 'tso_300' ORDER BY id") == cuts[300]
    again = maintain(settings, spark=spark, upgrade_format=True)  # idempotent: nothing left to upgrade
    assert again["changefeeds"][0]["tables"]["app.a"]["format_version"] == {"before": 3, "after": 3}
