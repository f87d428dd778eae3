"""Lake tables created from upstream CREATE TABLE statements before a changefeed's rows arrive."""

from __future__ import annotations

import pytest

from tests.lake_helpers import (
    archive_of_existing_tables,
    assert_lake_equals_upstream,
    lake_rows,
    snapshot_watermarks,
)
from ticdc_lakehouse.core.model import ColumnSchema, TableSchema
from ticdc_lakehouse.core.mysql_types import parse_type
from ticdc_lakehouse.commands.pipeline import backfill
from ticdc_lakehouse.commands.seed_tables import create_tables, members_to_learn, tables_in_ddl
from ticdc_lakehouse.commands.status import collect_status, render_status
from ticdc_lakehouse.sim.workload import write_to_archive

DUMP = """
-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)
/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop`;
USE `shop`;
DROP TABLE IF EXISTS `orders`;
CREATE TABLE `orders` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `status` enum('new','paid') NOT NULL DEFAULT 'new',
  `tags` set('gift','rush') DEFAULT NULL,
  `amount` decimal(12,2) DEFAULT NULL,
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE `crm`.`people` (`id` int PRIMARY KEY, `name` varchar(20));
"""


def test_a_dump_gives_its_tables_with_their_exact_types_and_says_what_it_ignored():
    found = tables_in_ddl(DUMP)
    assert [(t.schema, t.table) for t in found.tables] == [("shop", "orders"), ("crm", "people")]
    orders = found.tables[0]
    assert [(c.name, c.mysql_type) for c in orders.columns] == [
        ("id", "bigint"), ("status", "enum('new','paid')"), ("tags", "set('gift','rush')"),
        ("amount", "decimal(12,2)")]
    assert orders.primary_key == ("id",)
    assert any("DropTable" in reason for reason in found.ignored)  # reported, never applied


def test_an_unqualified_table_without_a_database_is_reported_not_guessed():
    found = tables_in_ddl("CREATE TABLE t (id int PRIMARY KEY)")
    assert found.tables == [] and "no database" in found.ignored[0]
    assert [t.schema for t in tables_in_ddl("CREATE TABLE t (id int PRIMARY KEY)", "app").tables] == ["app"]


@pytest.mark.spark
def test_tables_created_from_the_upstream_ddl_get_enum_names_and_decimal_precision(spark, settings, tmp_path):
    """The changefeed starts on existing tables: their CREATE TABLE is never in the stream, and Open Protocol
    rows carry ENUM indexes and DECIMALs without precision. Created from the upstream DDL first, the lake equals
    upstream in every column (created from the rows, ``orders.status`` would hold "1", "2"...)."""
    archive = tmp_path / "archive"
    workload = archive_of_existing_tables(archive, seed=43, partitions=2, transactions=8, size=4)
    ddl = workload.show_create_tables()

    result = create_tables(settings, ddl, spark=spark)
    assert "typed from row events" not in render_status(collect_status(settings, kafka=False, spark=spark))
    assert sorted(result["created"]) == sorted(f"shop.{name}" for name in workload.tables)
    again = create_tables(settings, ddl, spark=spark)
    assert again["created"] == [] and sorted(again["existing"]) == sorted(result["created"])

    backfill(settings, archive, protocol="open", spark=spark)
    cut = workload.global_resolved_ts()
    assert_lake_equals_upstream(spark, workload, cut)
    statuses = {r["status"] for r in lake_rows(spark, "SELECT DISTINCT status FROM shop.orders")}
    assert statuses and statuses <= {"new", "paid", "shipped", "cancelled", None}
    amount = spark.table("shop.orders").schema["amount"].dataType.simpleString()
    assert amount == next(c.mysql_type for c in workload.tables["orders"].columns if c.name == "amount")
    assert snapshot_watermarks(spark, "shop.orders")[0] == 0  # created at watermark 0, before any row


def test_only_enum_and_set_columns_typed_without_members_learn_them_and_numeric_members_are_refused():
    upstream = TableSchema("s", "t", (
        ColumnSchema("id", "int"), ColumnSchema("State", "enum('new','paid')"), ColumnSchema("tags", "set('a','b')"),
        ColumnSchema("known", "enum('x','y')"), ColumnSchema("level", "enum('1','2')"),
        ColumnSchema("was_enum", "varchar(9)")), ("id",))
    lake = [("id", parse_type("int")), ("state", parse_type("enum")), ("tags", parse_type("set")),
            ("known", parse_type("enum('x','y')")), ("level", parse_type("enum")), ("was_enum", parse_type("enum")),
            ("lake_only", parse_type("enum")), ("no_doc", None)]
    repair = members_to_learn(lake, upstream)
    assert [(name, t.descriptor()) for name, t in repair.columns] == [
        ("state", "enum('new','paid')"), ("tags", "set('a','b')")]  # names as MySQL matches them: any case
    assert repair.refused == ("level: a member is a number, so stored numbers cannot be told from names",)


@pytest.mark.spark
def test_status_names_the_enum_columns_a_table_typed_from_rows_holds_as_numbers(spark, settings, tmp_path):
    """...and create-tables turns them into names in place: the lake then equals upstream, rows merged later
    included, the table's watermark unchanged, and a second run changes nothing."""
    # no CREATE TABLE in the stream, none created from the upstream DDL either
    workload = archive_of_existing_tables(tmp_path / "archive", seed=44, partitions=1, transactions=3, size=3)
    backfill(settings, tmp_path / "archive", protocol="open", spark=spark)
    status = collect_status(settings, kafka=False, spark=spark)
    [feed] = status["changefeeds"]
    unknown = {t["table"]: t["members_unknown"] for t in feed["tables"]}
    assert unknown["shop.orders"] == ["status"] and unknown["shop.customers"] == []
    assert "shop.orders: ENUM/SET column(s) status typed from row events" in render_status(status)
    numbers = {r["status"] for r in lake_rows(spark, "SELECT DISTINCT status FROM shop.orders")}
    assert numbers and all(n is None or n.isdigit() for n in numbers)
    watermarks = snapshot_watermarks(spark, "shop.orders")

    result = create_tables(settings, workload.show_create_tables(), spark=spark)
    assert result["created"] == [] and result["members_learned"] == {"shop.orders": ["status"]}
    names = {r["status"] for r in lake_rows(spark, "SELECT DISTINCT status FROM shop.orders")}
    assert names and names <= {"new", "paid", "shipped", "cancelled", None}
    assert snapshot_watermarks(spark, "shop.orders") == watermarks + [watermarks[-1]]  # one snapshot, same ts
    assert "typed from row events" not in render_status(collect_status(settings, kafka=False, spark=spark))
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    again = create_tables(settings, workload.show_create_tables(), spark=spark)
    assert again["members_learned"] == {} and len(snapshot_watermarks(spark, "shop.orders")) == len(watermarks) + 1

    for _ in range(3):
        workload.transaction(3)
    workload.resolve(final=True)
    write_to_archive(workload, tmp_path / "archive", "ticdc", "open")
    backfill(settings, tmp_path / "archive", protocol="open", spark=spark)
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())  # new rows typed with names
