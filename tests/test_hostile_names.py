"""No upstream name can break or inject the generated SQL: backticks, spaces, unicode, reserved words, SQL."""

from __future__ import annotations

import pytest

from tests.lake_helpers import lake_rows
from ticdc_lakehouse.sim.archive_writer import write_archive
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange
from ticdc_lakehouse.commands.pipeline import backfill

pytestmark = pytest.mark.spark

SCHEMA = "we`ird db"
TABLE = "Tab le; DROP"
COLUMNS = {"select": "int", "a b": "varchar", "ü名": "decimal", "x`; DROP TABLE t; --": "text"}


def _row(ts, op, key, a=None, u=None, x=None):
    values = {"select": str(key), "a b": a, "ü名": u, "x`; DROP TABLE t; --": x}
    after = None if op == DELETE else values
    before = {"select": str(key)} if op == DELETE else None
    return RowChange(SCHEMA, TABLE, ts, op, after, before, ("select",), dict(COLUMNS), Position("t", 0, 0))


def test_hostile_identifiers_round_trip_as_data(spark, settings, tmp_path):
    encoder = OpenProtocolEncoder()
    create = (
        "CREATE TABLE `we``ird db`.`Tab le; DROP` (`select` int NOT NULL, `a b` varchar(10), `ü名` decimal(5,1), "
        "`x``; DROP TABLE t; --` text, PRIMARY KEY (`select`))"
    )
    events = [
        DDLEvent(SCHEMA, "", 100, "CREATE DATABASE `we``ird db`", "CREATE_SCHEMA", Position("t", 0, 0)),
        DDLEvent(SCHEMA, TABLE, 110, create, "CREATE_TABLE", Position("t", 0, 0)),
        _row(120, INSERT, 1, "x'); DROP TABLE y; --", "1.5", "`backtick`"),
        _row(120, INSERT, 2, "two", "-2.0", None),
        _row(130, UPDATE, 1, "upd", "9.9", "ok"),
        _row(140, DELETE, 2),
        ResolvedEvent(150, Position("t", 0, 0)),
    ]
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert report["halted"] == [] and report["resolved_ts"] == 150
    # qualified with the catalog: Spark 4.1 first tries a one-part-quoted first name as a catalog, and building
    # its "catalog not found" error fails on the backtick (INVALID_ATTRIBUTE_NAME_SYNTAX) instead of falling back
    table = f"`{settings.catalog_name}`.`we``ird db`.`Tab le; DROP`"
    assert spark.table(table).columns == list(COLUMNS)
    assert lake_rows(spark, f"SELECT * FROM {table}") == [
        {"select": 1, "a b": "upd", "ü名": "9.9", "x`; DROP TABLE t; --": "ok"}
    ]


def test_hostile_names_of_tables_of_different_columns_written_and_rewritten_by_one_frame(spark, settings, tmp_path):
    """Two small tables of hostile names and different columns: their names travel as data through one frame of
    slots (appended in the first run, read back and rewritten in the second)."""
    from tests.lake_helpers import backfill_open_protocol_runs

    other, columns = "t`wo; --", {"select": "int", "ü名": "decimal"}
    at = Position("t", 0, 0)

    def row(ts, op, key, u):
        values = {"select": str(key), "ü名": u}
        return RowChange(SCHEMA, other, ts, op, values, {"select": str(key)} if op == UPDATE else None,
                         ("select",), dict(columns), at)

    create = ("CREATE TABLE `we``ird db`.`Tab le; DROP` (`select` int NOT NULL, `a b` varchar(10), `ü名` "
              "decimal(5,1), `x``; DROP TABLE t; --` text, PRIMARY KEY (`select`))")
    first = [
        DDLEvent(SCHEMA, "", 100, "CREATE DATABASE `we``ird db`", "CREATE_SCHEMA", at),
        DDLEvent(SCHEMA, TABLE, 110, create, "CREATE_TABLE", at),
        DDLEvent(SCHEMA, other, 111, "CREATE TABLE `we``ird db`.`t``wo; --` (`select` int NOT NULL, `ü名` "
                 "decimal(6,2), PRIMARY KEY (`select`))", "CREATE_TABLE", at),
        _row(120, INSERT, 1, "a", "1.5", "x"), _row(121, INSERT, 2, "b", "2.5", None),
        row(122, INSERT, 1, "10.25"), row(123, INSERT, 2, "20.50"),
        ResolvedEvent(150, at),
    ]
    second = [_row(160, UPDATE, 1, "a2", "1.6", "y"), row(161, UPDATE, 2, "20.75"), ResolvedEvent(200, at)]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second)
    lake = f"`{settings.catalog_name}`.`we``ird db`"
    assert lake_rows(spark, f"SELECT * FROM {lake}.`Tab le; DROP` ORDER BY `select`") == [
        {"select": 1, "a b": "a2", "ü名": "1.6", "x`; DROP TABLE t; --": "y"},
        {"select": 2, "a b": "b", "ü名": "2.5", "x`; DROP TABLE t; --": None}]
    assert lake_rows(spark, f"SELECT `select`, CAST(`ü名` AS STRING) AS u FROM {lake}.`t``wo; --` "
                            "ORDER BY `select`") == [{"select": 1, "u": "10.25"}, {"select": 2, "u": "20.75"}]
    for name in ("`Tab le; DROP`", "`t``wo; --`"):  # rewritten whole by the write jobs: no deletion vector
        last = lake_rows(spark, f"SELECT summary['added-delete-files'] AS dvs, operation "
                                f"FROM {lake}.{name}.snapshots ORDER BY committed_at DESC LIMIT 1")
        assert last == [{"dvs": None, "operation": "overwrite"}], name
