"""DDL statements -> schema changes, checked against the DDL found in the TiCDC vectors and real TiDB DDL."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ticdc_lakehouse.core import mysql_types as mt
from ticdc_lakehouse.merge.ddl.parse import (
    AddColumn,
    CreateSchema,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropSchema,
    DropTable,
    MetadataOnly,
    ModifyColumn,
    RenameColumn,
    RenameTable,
    SchemaChange,
    SetDefault,
    TruncateTable,
    Unsupported,
    parse_ddl,
)
from ticdc_lakehouse.core.model import ColumnSchema, TableSchema

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "ticdc-vectors"


class _AnyReason(str):
    """Matches any Unsupported reason: the tests pin the outcome and the table, not the wording."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    __hash__ = str.__hash__


ANY = _AnyReason("<any reason>")


def col(
    name: str,
    mysql_type: str,
    nullable: bool = True,
    default: Optional[str] = None,
    comment: Optional[str] = None,
) -> ColumnSchema:
    return ColumnSchema(name=name, mysql_type=mysql_type, nullable=nullable, default=default, comment=comment)


def table(schema: str, name: str, *columns: ColumnSchema, pk: tuple[str, ...] = ()) -> CreateTable:
    return CreateTable(TableSchema(schema=schema, table=name, columns=columns, primary_key=pk))


# --- every DDL statement in the vectors ------------------------------------------------------------------------


def _open_protocol_ddls() -> Iterator[tuple[str, str, str]]:
    """(source, query, schema) from the Open Protocol key/value JSON texts."""

    def walk(node: object) -> Iterator[dict]:
        if isinstance(node, dict):
            if isinstance(node.get("value_json"), str) and isinstance(node.get("key_json"), str):
                yield node
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    for path in sorted((VECTORS / "open-protocol").rglob("*.json")):
        for event in walk(json.loads(path.read_text())):
            value = json.loads(event["value_json"]) if event["value_json"] else {}
            if isinstance(value, dict) and "q" in value:
                yield str(path.relative_to(VECTORS)), value["q"], json.loads(event["key_json"])["scm"]


def vector_ddls() -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = list(_open_protocol_ddls())
    craft = json.loads((VECTORS / "craft/tibigdata/decoded_by_collector.json").read_text())
    for name, decoded in craft["files"].items():
        for event in decoded["events"]:
            if event["type"] == "DDL":
                found.append((f"craft/{name}", event["query"], event["schema"]))
    consumer = json.loads((VECTORS / "consumer/tiflow_writer_test_scenarios.json").read_text())
    for scenario in consumer["scenarios"]:
        for step in scenario["steps"]:
            if "Query" in step:
                found.append((f"consumer/{scenario['test']}", step["Query"], "test"))
    for path in sorted((VECTORS / "debezium").glob("*TestDDLEvent*.value.json")):
        payload = json.loads(path.read_text())["payload"]
        found.append((path.name, payload["ddl"], payload["databaseName"]))
    canal = json.loads((VECTORS / "canal-json/tiflow_TestDDLEventWithExtensionValueMarshal.expected.json").read_text())
    found.append(("canal-json TestDDLEventWithExtension", canal["sql"], canal["database"]))
    jsonc = (VECTORS / "canal-json/docs/ddl_event.jsonc").read_text()  # JSON with // comments
    found.append(
        (
            "canal-json/docs/ddl_event.jsonc",
            re.search(r'"sql":\s*"([^"]*)"', jsonc).group(1),  # type: ignore[union-attr]
            re.search(r'"database":\s*"([^"]*)"', jsonc).group(1),  # type: ignore[union-attr]
        )
    )
    simple = json.loads((VECTORS / "simple/docs/ddl_ALTER.json").read_text())
    found.append(("simple/docs/ddl_ALTER.json", simple["sql"], simple["tableSchema"]["schema"]))
    return found


PK_ID = col("id", "int", nullable=False)

VECTOR_EXPECTED: dict[tuple[str, str], list[SchemaChange]] = {
    ("create database a;", "a"): [CreateSchema("a")],
    ("drop database a;", "a"): [DropSchema("a")],
    ("create table c(id int primary key);", "a"): [table("a", "c", PK_ID, pk=("id",))],
    # hand-made Open Protocol fixtures (tiflow examples-java): table names only, no column list
    ("create table a", "a"): [Unsupported("a", "a", ANY)],
    ("create table b", "a"): [Unsupported("a", "b", ANY)],
    ("create table c", "a"): [Unsupported("a", "c", ANY)],
    ("CREATE TABLE test.t1(id int primary key, val varchar(16))", "test"): [
        table("test", "t1", PK_ID, col("val", "varchar(16)"), pk=("id",))
    ],
    ("create table t(id int primary key)", "test"): [table("test", "t", PK_ID, pk=("id",))],
    ("create table test.t1(id int primary key)", "test"): [table("test", "t1", PK_ID, pk=("id",))],
    ("create table test.t2(id int primary key)", "test"): [table("test", "t2", PK_ID, pk=("id",))],
    ("rename table test.t1 to test.t2", "test"): [RenameTable("test", "t1", "test", "t2")],
    ("rename table test.t3 to test.t4", "test"): [RenameTable("test", "t3", "test", "t4")],
    # the consumer test's placeholder text, not SQL
    ("rename tables split ddl", "test"): [Unsupported("test", "", ANY)],
    ("RENAME TABLE test.table1 to test.table2", "test"): [RenameTable("test", "table1", "test", "table2")],
    ("CREATE TABLE test.table1(id int(10) primary key)", "test"): [table("test", "table1", PK_ID, pk=("id",))],
    # tiflow's hand-built DDL event has a truncated query
    ("CREATE TABLE test.table1", "test"): [Unsupported("test", "table1", ANY)],
    ("DROP TABLE test.table2", "test"): [DropTable("test", "table2")],
    (
        "create table person(id int, name varchar(32), tiny tinyint unsigned, comment text, primary key(id))",
        "cdc",
    ): [
        table(
            "cdc",
            "person",
            PK_ID,
            col("name", "varchar(32)"),
            col("tiny", "tinyint unsigned"),
            col("comment", "text"),
            pk=("id",),
        )
    ],
    ("drop database if exists test", "test"): [DropSchema("test")],
    ("ALTER TABLE `user` ADD COLUMN `createTime` TIMESTAMP", "simple"): [
        AddColumn("simple", "user", col("createTime", "timestamp"))
    ],
}


def test_every_ddl_in_the_vectors_is_covered_and_parses_as_expected() -> None:
    found = vector_ddls()
    assert len(found) >= 25
    for source, query, schema in found:
        key = (query, schema)
        assert key in VECTOR_EXPECTED, f"new DDL in {source}: {query!r}"
        assert parse_ddl(query, schema) == VECTOR_EXPECTED[key], source
    assert {(q, s) for _, q, s in found} == set(VECTOR_EXPECTED)


def test_create_table_lands_on_the_table_the_message_names() -> None:
    """Open Protocol keys and Craft events name the DDL's schema/table; a parsed CREATE TABLE must agree."""
    named: list[tuple[str, str, str]] = []  # (query, schema, table)
    for path in sorted((VECTORS / "open-protocol").rglob("expected_events.json")):
        for case in json.loads(path.read_text())["cases"].values():
            for event in case["events"]:
                key, value = json.loads(event["key_json"]), json.loads(event["value_json"] or "{}")
                if value.get("t") == 3 and "tbl" in key:  # type 3 = CREATE TABLE
                    named.append((value["q"], key["scm"], key["tbl"]))
    craft = json.loads((VECTORS / "craft/tibigdata/decoded_by_collector.json").read_text())
    for decoded in craft["files"].values():
        for event in decoded["events"]:
            if event["type"] == "DDL" and event["ddlType"] == 3:
                named.append((event["query"], event["schema"], event["table"]))
    parsed = 0
    for query, schema, name in named:
        [change] = parse_ddl(query, schema)
        if isinstance(change, CreateTable):  # the hand-made "create table a" fixtures are Unsupported
            assert (change.table.schema, change.table.table) == (schema, name), query
            parsed += 1
    assert parsed >= 2


def test_simple_alter_agrees_with_the_table_schema_it_carries() -> None:
    """Simple sends the table after the DDL: the added column must be the last one, same type and nullability."""
    message = json.loads((VECTORS / "simple/docs/ddl_ALTER.json").read_text())
    [change] = parse_ddl(message["sql"], message["tableSchema"]["schema"])
    assert isinstance(change, AddColumn)
    last = message["tableSchema"]["columns"][-1]
    assert change.table == message["tableSchema"]["table"]
    assert change.column.name == last["name"]
    assert change.column.mysql_type == mt.normalize(last["dataType"]["mysqlType"])
    assert change.column.nullable == last["nullable"]


# --- every type in debezium/datatype.ddl.sql -------------------------------------------------------------------

DATATYPE_COLUMNS = [
    ("pk", "int", "int"),
    ("col_d_2023", "date", "date"),
    ("col_d_1000", "date", "date"),
    ("col_d_9999", "date", "date"),
    ("col_d_0000", "date", "date"),
    ("col_dt", "datetime", "timestamp_ntz"),
    ("col_dt_fsp_0", "datetime", "timestamp_ntz"),
    ("col_dt_fsp_1", "datetime(1)", "timestamp_ntz"),
    ("col_dt_fsp_4", "datetime(4)", "timestamp_ntz"),
    ("col_dt_fsp_6", "datetime(6)", "timestamp_ntz"),
    ("col_dt_0000", "datetime(6)", "timestamp_ntz"),
    ("col_t", "time", "string"),
    ("col_t_fsp_0", "time", "string"),
    ("col_t_fsp_1", "time(1)", "string"),
    ("col_t_fsp_4", "time(4)", "string"),
    ("col_t_fsp_6", "time(6)", "string"),
    ("col_t_neg", "time(6)", "string"),
    ("col_ts", "timestamp", "timestamp_ntz"),
    ("col_ts_fsp_0", "timestamp", "timestamp_ntz"),
    ("col_ts_fsp_1", "timestamp(1)", "timestamp_ntz"),
    ("col_ts_fsp_5", "timestamp(5)", "timestamp_ntz"),
    ("col_ts_fsp_6", "timestamp(6)", "timestamp_ntz"),
    ("col_y", "year", "int"),
    ("col_bit_1", "bit(1)", "decimal(20,0)"),
    ("col_bit_5", "bit(5)", "decimal(20,0)"),
    ("col_bit_6", "bit(6)", "decimal(20,0)"),
    ("col_bit_60", "bit(60)", "decimal(20,0)"),
    ("col_varchar", "varchar(100)", "string"),
    ("col_char", "char(100)", "string"),
    ("col_varbinary", "varbinary(100)", "binary"),
    ("col_binary", "binary(100)", "binary"),
    ("col_blob", "blob", "binary"),
    ("col_decimal", "decimal(10,5)", "decimal(10,5)"),
    ("col_numeric", "decimal(10,5)", "decimal(10,5)"),
    ("col_float", "float", "float"),
    ("col_double", "double", "double"),
    ("col_int", "int", "int"),
    ("col_int_unsigned", "int unsigned", "bigint"),
    ("col_tinyint", "tinyint", "int"),
    ("col_tinyint_unsigned", "tinyint unsigned", "int"),
    ("col_smallint", "smallint", "int"),
    ("col_smallint_unsigned", "smallint unsigned", "int"),
    ("col_mediumint", "mediumint", "int"),
    ("col_mediumint_unsigned", "mediumint unsigned", "int"),
    ("col_bigint", "bigint", "bigint"),
    ("col_bigint_unsigned", "bigint unsigned", "decimal(20,0)"),
    ("col_enum", "enum('a','b','c')", "string"),
    ("col_enum_invalid", "enum('a','b','c')", "string"),
    ("col_set", "set('a','b','c')", "string"),
    ("col_set_invalid", "set('a','b','c')", "string"),
    ("col_json", "json", "string"),
]


def test_every_type_of_the_debezium_datatype_table_maps_to_the_right_iceberg_type() -> None:
    [change] = parse_ddl((VECTORS / "debezium/datatype.ddl.sql").read_text(), "test")
    assert isinstance(change, CreateTable)
    got = [(c.name, c.mysql_type, mt.iceberg_type(mt.parse_type(c.mysql_type))) for c in change.table.columns]
    assert got == DATATYPE_COLUMNS
    assert change.table.primary_key == ("pk",)
    # the same table as Debezium 2.4's MySQL connector saw it: columns, order, optionality and key
    dbz = json.loads((VECTORS / "debezium/datatype.dbz.json").read_text())
    [after] = [f for f in dbz["schema"]["fields"] if f["field"] == "after"]
    assert [(c.name, c.nullable) for c in change.table.columns] == [
        (f["field"], f["optional"]) for f in after["fields"]
    ]
    key = json.loads((VECTORS / "debezium/datatype.dbz.key.json").read_text())
    assert change.table.primary_key == tuple(f["field"] for f in key["schema"]["fields"])


# --- real TiDB DDL ---------------------------------------------------------------------------------------------
# Statements from pingcap/tiflow tests/integration_tests (debezium/sql/ddl.sql, debezium/sql/data_types.sql,
# ddl_attributes/data/prepare.sql; Apache-2.0, Copyright PingCAP, Inc.) and TiDB's own SHOW CREATE TABLE forms,
# parsed with default schema "db".

TIDB_DDL: list[tuple[str, list[SchemaChange]]] = [
    ("CREATE TABLE t1 (\n  PK INT PRIMARY KEY,\n  COL INT\n);", [
        table("db", "t1", col("PK", "int", False), col("COL", "int"), pk=("PK",))]),
    ("CREATE DATABASE foo;", [CreateSchema("foo")]),
    ("CREATE SCHEMA IF NOT EXISTS `my db` DEFAULT CHARACTER SET utf8mb4", [CreateSchema("my db")]),
    ("DROP SCHEMA `my db`", [DropSchema("my db")]),
    ("CREATE VIEW V1 AS \nSELECT *\nFROM bar\nWHERE COL > 2;", [MetadataOnly("db", "V1", "CREATE_VIEW")]),
    ("DROP VIEW IF EXISTS V1;", [MetadataOnly("db", "V1", "DROP_VIEW")]),
    ("ALTER TABLE bar\nADD COLUMN COL2 INT;", [AddColumn("db", "bar", col("COL2", "int"))]),
    ("ALTER TABLE bar\nMODIFY COLUMN COL2 FLOAT;", [ModifyColumn("db", "bar", "COL2", col("COL2", "float"))]),
    ("ALTER TABLE bar\nDROP COLUMN COL2;", [DropColumn("db", "bar", "COL2")]),
    ("ALTER TABLE bar AUTO_INCREMENT=310;", [MetadataOnly("db", "bar", "AUTO_INCREMENT")]),
    ("ALTER TABLE bar\nALTER COL SET DEFAULT 3;", [SetDefault("db", "bar", "COL", "3")]),
    ("ALTER TABLE bar ALTER COLUMN COL DROP DEFAULT", [SetDefault("db", "bar", "COL", None)]),
    ("ALTER TABLE bar COMMENT = 'New table comment';", [MetadataOnly("db", "bar", "TABLE_COMMENT")]),
    ("ALTER TABLE bar CHARACTER SET = utf8mb4 COLLATE utf8mb4_unicode_ci;", [
        MetadataOnly("db", "bar", "TABLE_CHARSET"), MetadataOnly("db", "bar", "TABLE_CHARSET")]),
    ("ALTER DATABASE foo CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;", [
        MetadataOnly("foo", "", "ALTER_DATABASE")]),
    ("ALTER TABLE test.t1 \nCHANGE COL COL2 VARCHAR(255);", [
        RenameColumn("test", "t1", "COL", "COL2"), ModifyColumn("test", "t1", "COL2", col("COL2", "varchar(255)"))]),
    ("CREATE TABLE t2 (\n    id INT NOT NULL,\n    year_col INT NOT NULL\n)\nPARTITION BY RANGE (year_col) (\n"
     "    PARTITION p0 VALUES LESS THAN (1991),\n    PARTITION p1 VALUES LESS THAN (1995)\n);", [
        table("db", "t2", col("id", "int", False), col("year_col", "int", False))]),
    ("ALTER TABLE t2 ADD PARTITION (PARTITION p3 VALUES LESS THAN (2002));", [MetadataOnly("db", "t2", "PARTITION")]),
    ("ALTER TABLE t2 REORGANIZE PARTITION p31,p32,p33,p2 INTO (PARTITION p21 VALUES LESS THAN (2008));", [
        MetadataOnly("db", "t2", "PARTITION")]),
    ("ALTER TABLE t2 PARTITION BY HASH(id) PARTITIONS 10;", [MetadataOnly("db", "t2", "PARTITION")]),
    ("ALTER TABLE t6 REMOVE PARTITIONING;", [MetadataOnly("db", "t6", "PARTITION")]),
    # these change rows without row events: never silently metadata-only
    ("ALTER TABLE t2 TRUNCATE PARTITION p0;", [Unsupported("db", "t2", ANY)]),
    ("ALTER TABLE t2 DROP PARTITION p0;", [Unsupported("db", "t2", ANY)]),
    ("ALTER TABLE foo.t5 EXCHANGE PARTITION p0 WITH TABLE foo.t6;", [Unsupported("foo", "t5", ANY)]),
    ("RECOVER TABLE attributes_t1;", [Unsupported("db", "attributes_t1", ANY)]),
    ("FLASHBACK TABLE attributes_t1 TO attributes_t1_back;", [Unsupported("db", "attributes_t1", ANY)]),
    ("CREATE TABLE t3 (\n  i INT,\n  j INT,\n  k INT,\n  INDEX i_idx (i) INVISIBLE\n) ENGINE = InnoDB;", [
        table("db", "t3", col("i", "int"), col("j", "int"), col("k", "int"))]),
    ("CREATE INDEX j_idx ON t3 (j) INVISIBLE;", [MetadataOnly("db", "t3", "ADD_INDEX")]),
    ("CREATE UNIQUE INDEX u ON other.t3 (j, k)", [MetadataOnly("other", "t3", "ADD_INDEX")]),
    ("ALTER TABLE t3 ADD INDEX k_idx (k) INVISIBLE;", [MetadataOnly("db", "t3", "ADD_INDEX")]),
    ("ALTER TABLE t3 ALTER INDEX i_idx VISIBLE;", [MetadataOnly("db", "t3", "ALTER_INDEX")]),
    ("CREATE TABLE t4 (col1 INT PRIMARY KEY /*T![clustered_index] NONCLUSTERED */, col2 INT);", [
        table("db", "t4", col("col1", "int", False), col("col2", "int"), pk=("col1",))]),
    ("CREATE INDEX idx2 ON t4 ((col1 + col2), (col1 - col2), col1);", [MetadataOnly("db", "t4", "ADD_INDEX")]),
    ("DROP INDEX idx1 ON t4;", [MetadataOnly("db", "t4", "DROP_INDEX")]),
    ("ALTER TABLE t4 ADD INDEX ((col1 * 40) DESC);", [MetadataOnly("db", "t4", "ADD_INDEX")]),
    ("ALTER TABLE t4 RENAME INDEX idx2 TO new_idx2;", [MetadataOnly("db", "t4", "RENAME_INDEX")]),
    ("ALTER TABLE t4 DROP PRIMARY KEY;", [MetadataOnly("db", "t4", "DROP_PRIMARY_KEY")]),
    ("ALTER TABLE t4 ADD PRIMARY KEY pk(col1);", [MetadataOnly("db", "t4", "ADD_PRIMARY_KEY")]),
    ("ALTER TABLE t4 DROP INDEX idx, DROP FOREIGN KEY fk, ADD CONSTRAINT fk2 FOREIGN KEY (a) REFERENCES p (id)", [
        MetadataOnly("db", "t4", "DROP_INDEX"), MetadataOnly("db", "t4", "DROP_FOREIGN_KEY"),
        MetadataOnly("db", "t4", "ADD_FOREIGN_KEY")]),
    ("CREATE TABLE t6 LIKE t5;", [CreateTableLike("db", "t6", "db", "t5")]),
    ("CREATE TABLE IF NOT EXISTS a.t6 (LIKE b.t5)", [CreateTableLike("a", "t6", "b", "t5")]),
    ("RENAME TABLE t7 TO rename_t7;", [RenameTable("db", "t7", "db", "rename_t7")]),
    ("RENAME TABLE t8 To rename_t8, t9 To rename_t9;", [
        RenameTable("db", "t8", "db", "rename_t8"), RenameTable("db", "t9", "db", "rename_t9")]),
    ("RENAME TABLE rename_t8 TO test.t8;", [RenameTable("db", "rename_t8", "test", "t8")]),
    ("ALTER TABLE a.t RENAME TO b.t2", [RenameTable("a", "t", "b", "t2")]),
    # an unqualified new name lands in the current database (MySQL/TiDB), here the default schema
    ("ALTER TABLE a.t RENAME AS t2", [RenameTable("a", "t", "db", "t2")]),
    ("ALTER TABLE a.t RENAME TO t2", [RenameTable("a", "t", "db", "t2")]),
    ("RENAME TABLE a.t TO t2", [RenameTable("a", "t", "db", "t2")]),
    ("TRUNCATE TABLE rename_t7;", [TruncateTable("db", "rename_t7")]),
    ("TRUNCATE `x`.`y`", [TruncateTable("x", "y")]),
    ("DROP TABLE foo.bar;", [DropTable("foo", "bar")]),
    ("DROP TABLE IF EXISTS ttl_t1, other.ttl_t2;", [DropTable("db", "ttl_t1"), DropTable("other", "ttl_t2")]),
    ("DROP DATABASE IF EXISTS foo;", [DropSchema("foo")]),
    ("CREATE TABLE t10 (\n     id int PRIMARY KEY,\n     created_at TIMESTAMP\n ) /*T![ttl] TTL = `created_at` + "
     "INTERVAL 3 MONTH TTL_ENABLE = 'ON'*/;", [
        table("db", "t10", col("id", "int", False), col("created_at", "timestamp"), pk=("id",))]),
    ("CREATE TABLE ttl_t1(id BIGINT NOT NULL PRIMARY KEY auto_increment, t datetime) TTL=`t` + INTERVAL 1 DAY;", [
        table("db", "ttl_t1", col("id", "bigint", False), col("t", "datetime"), pk=("id",))]),
    ("ALTER TABLE t10 TTL = `created_at` + INTERVAL 1 MONTH;", [MetadataOnly("db", "t10", "TTL")]),
    ("ALTER TABLE t10 REMOVE TTL;", [MetadataOnly("db", "t10", "TTL")]),
    ("ALTER TABLE t10 TTL_ENABLE = 'OFF';", [MetadataOnly("db", "t10", "TABLE_OPTION")]),
    ("CREATE TABLE t11 (\n     id       INT PRIMARY KEY,\n     embedding     VECTOR(5)\n );", [
        table("db", "t11", col("id", "int", False), col("embedding", "vector(5)"), pk=("id",))]),
    ("ALTER TABLE t11 SET TIFLASH REPLICA 1;", [MetadataOnly("db", "t11", "SET_TIFLASH_REPLICA")]),
    ("CREATE VECTOR INDEX idx_embedding ON t11 ((VEC_COSINE_DISTANCE(embedding)));", [
        MetadataOnly("db", "t11", "ADD_INDEX")]),
    ("ALTER TABLE t11 ADD VECTOR INDEX idx_embedding1 ((VEC_L2_DISTANCE(embedding))) USING HNSW;", [
        MetadataOnly("db", "t11", "ADD_INDEX")]),
    ("ALTER TABLE attributes_t1 ATTRIBUTES='merge_option=deny';", [
        MetadataOnly("db", "attributes_t1", "TABLE_OPTION")]),
    ("ALTER TABLE attributes_t2 PARTITION p0 ATTRIBUTES='merge_option=allow';", [
        MetadataOnly("db", "attributes_t2", "TABLE_OPTION")]),
    ("CREATE PLACEMENT POLICY placement1 followers=2;", [MetadataOnly("db", "", "PLACEMENT_POLICY")]),
    ("DROP PLACEMENT POLICY IF EXISTS placement1;", [MetadataOnly("db", "", "PLACEMENT_POLICY")]),
    ("CREATE TABLE placement_t1 (id BIGINT NOT NULL PRIMARY KEY auto_increment, b varchar(255)) "
     "PLACEMENT POLICY=placement1;", [
        table("db", "placement_t1", col("id", "bigint", False), col("b", "varchar(255)"), pk=("id",))]),
    ("CREATE TABLE `placement_t2` (id BIGINT NOT NULL PRIMARY KEY auto_increment) ENGINE=InnoDB DEFAULT "
     "CHARSET=utf8mb4 COLLATE=utf8mb4_bin /*T![placement] PLACEMENT POLICY=`placement1` */;", [
        table("db", "placement_t2", col("id", "bigint", False), pk=("id",))]),
    ("CREATE TABLE t_datetime(\n  col     DATETIME,\n  col_z   DATETIME DEFAULT 0,\n  "
     "col_default_current_timestamp DATETIME DEFAULT CURRENT_TIMESTAMP,\n  pk      INT PRIMARY KEY\n);", [
        table("db", "t_datetime", col("col", "datetime"), col("col_z", "datetime", default="0"),
              col("col_default_current_timestamp", "datetime", default="CURRENT_TIMESTAMP"),
              col("pk", "int", False), pk=("pk",))]),
    ("CREATE TABLE t_varchar(\n  col VARCHAR(64),\n  col_utf8_bin VARCHAR(64)\n CHARACTER SET utf8mb4 COLLATE "
     "utf8mb4_bin,\n  col_bin VARCHAR(64) CHARACTER SET BINARY,\n  pk INT PRIMARY KEY\n);", [
        table("db", "t_varchar", col("col", "varchar(64)"), col("col_utf8_bin", "varchar(64)"),
              col("col_bin", "varbinary(64)"), col("pk", "int", False), pk=("pk",))]),
    ("CREATE TABLE t_bool(col_bool BOOL, col_tinyint_1 TINYINT(1), col_tinyint_1_u TINYINT(1) UNSIGNED, "
     "col_tinyint_2 TINYINT(2), pk INT PRIMARY KEY);", [
        table("db", "t_bool", col("col_bool", "tinyint"), col("col_tinyint_1", "tinyint"),
              col("col_tinyint_1_u", "tinyint unsigned"), col("col_tinyint_2", "tinyint"),
              col("pk", "int", False), pk=("pk",))]),
    # TiDB's SHOW CREATE TABLE / restored form
    ("CREATE TABLE `t` (\n  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n  `c` varchar(10) COLLATE "
     "utf8mb4_general_ci DEFAULT NULL COMMENT 'the c',\n  `ts` timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) "
     "ON UPDATE CURRENT_TIMESTAMP(3),\n  `amount` decimal(65,30) DEFAULT '0.000',\n  PRIMARY KEY (`id`) "
     "/*T![clustered_index] CLUSTERED */\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin "
     "AUTO_INCREMENT=30001", [
        table("db", "t", col("id", "bigint unsigned", False), col("c", "varchar(10)", comment="the c"),
              col("ts", "timestamp(3)", False, "CURRENT_TIMESTAMP(3)"),
              col("amount", "decimal(65,30)", default="0.000"), pk=("id",))]),
    ("CREATE TABLE `test`.`t1` (`id` INT(11) NOT NULL,`c` VARCHAR(10) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin "
     "DEFAULT _UTF8MB4'abc' COMMENT 'x',PRIMARY KEY(`id`) /*T![clustered_index] CLUSTERED */) ENGINE = InnoDB "
     "DEFAULT CHARACTER SET = UTF8MB4 DEFAULT COLLATE = UTF8MB4_BIN", [
        table("test", "t1", col("id", "int", False), col("c", "varchar(10)", default="abc", comment="x"),
              pk=("id",))]),
    # TiDB-only words written bare
    ("CREATE TABLE t (a bigint AUTO_RANDOM(5, 54) PRIMARY KEY CLUSTERED, b int)", [
        table("db", "t", col("a", "bigint", False), col("b", "int"), pk=("a",))]),
    ("CREATE TABLE t (a int, b int, PRIMARY KEY (a, b) NONCLUSTERED)", [
        table("db", "t", col("a", "int", False), col("b", "int", False), pk=("a", "b"))]),
    ("ALTER TABLE t MODIFY COLUMN a bigint AUTO_RANDOM(5)", [ModifyColumn("db", "t", "a", col("a", "bigint"))]),
    # one ALTER, several clauses, in order
    ("ALTER TABLE t ADD COLUMN c int AFTER b, DROP COLUMN d, MODIFY COLUMN e bigint NOT NULL FIRST, "
     "CHANGE f g varchar(10), ALTER COLUMN h SET DEFAULT 'x', RENAME COLUMN j TO k, ADD INDEX idx(a), "
     "DROP INDEX idx2, RENAME TO t2", [
        AddColumn("db", "t", col("c", "int"), after="b"),
        DropColumn("db", "t", "d"),
        ModifyColumn("db", "t", "e", col("e", "bigint", False), first=True),
        RenameColumn("db", "t", "f", "g"),
        ModifyColumn("db", "t", "g", col("g", "varchar(10)")),
        SetDefault("db", "t", "h", "x"),
        RenameColumn("db", "t", "j", "k"),
        MetadataOnly("db", "t", "ADD_INDEX"),
        MetadataOnly("db", "t", "DROP_INDEX"),
        RenameTable("db", "t", "db", "t2"),
    ]),
    ("ALTER TABLE `x`.`y` CHANGE `Old` `old` int(11) unsigned NOT NULL DEFAULT '0' COMMENT 'c' AFTER `id`", [
        RenameColumn("x", "y", "Old", "old"),
        ModifyColumn("x", "y", "old", col("old", "int unsigned", False, "0", "c"), after="id")]),
    ("ALTER TABLE t CHANGE COLUMN a a bigint", [ModifyColumn("db", "t", "a", col("a", "bigint"))]),
    ("ALTER TABLE t ADD COLUMN (a int, `b c` varchar(3) NOT NULL)", [
        AddColumn("db", "t", col("a", "int")), AddColumn("db", "t", col("b c", "varchar(3)", False))]),
    ("ALTER TABLE t ADD COLUMN c decimal(10,2) NOT NULL DEFAULT -1.5 COMMENT 'it''s' FIRST, ALGORITHM=INSTANT", [
        AddColumn("db", "t", col("c", "decimal(10,2)", False, "-1.5", "it's"), first=True)]),
    ("ALTER TABLE t ADD COLUMN u int UNIQUE", [AddColumn("db", "t", col("u", "int")),
                                                MetadataOnly("db", "t", "ADD_INDEX")]),
    ("ALTER TABLE t ADD COLUMN v int AS (a + 1) VIRTUAL", [MetadataOnly("db", "t", "ADD_VIRTUAL_COLUMN")]),
    ("ALTER TABLE t ADD COLUMN s int AS (a + 1) STORED", [AddColumn("db", "t", col("s", "int"))]),
    ("ALTER TABLE t ALTER COLUMN c SET DEFAULT (now())", [SetDefault("db", "t", "c", "(NOW())")]),
    ("ALTER TABLE t ENGINE = InnoDB", [MetadataOnly("db", "t", "TABLE_OPTION")]),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", [MetadataOnly("db", "t", "TABLE_CHARSET")]),
    ("ALTER TABLE t PLACEMENT POLICY = p1", [MetadataOnly("db", "t", "PLACEMENT_POLICY")]),
    ("ALTER TABLE t CACHE", [MetadataOnly("db", "t", "CACHE")]),
    ("ALTER TABLE t COMPACT", [MetadataOnly("db", "t", "TABLE_OPTION")]),
    ("ALTER TABLE t SHARD_ROW_ID_BITS = 4", [MetadataOnly("db", "t", "TABLE_OPTION")]),
    ("CREATE TEMPORARY TABLE tmp (a int)", [MetadataOnly("db", "tmp", "CREATE_TEMPORARY_TABLE")]),
    ("CREATE GLOBAL TEMPORARY TABLE tmp (a int) ON COMMIT DELETE ROWS", [
        MetadataOnly("db", "tmp", "CREATE_TEMPORARY_TABLE")]),
    ("CREATE TABLE t AS SELECT * FROM x", [Unsupported("db", "t", ANY)]),
    ("CREATE SEQUENCE seq START 1", [MetadataOnly("db", "seq", "CREATE_SEQUENCE")]),
    ("ALTER SEQUENCE seq RESTART 1", [MetadataOnly("db", "", "SEQUENCE")]),
    ("DROP TEMPORARY TABLE IF EXISTS tmp", [MetadataOnly("db", "tmp", "DROP_TEMPORARY_TABLE")]),
    ("ALTER DATABASE SET TIFLASH REPLICA 1", [MetadataOnly("db", "", "ALTER_DATABASE")]),
    ("ALTER SCHEMA `x` READ ONLY = 1", [MetadataOnly("x", "", "ALTER_DATABASE")]),
    ("CREATE RESOURCE GROUP rg1 RU_PER_SEC = 500", [MetadataOnly("db", "", "RESOURCE_GROUP")]),
    ("FLASHBACK DATABASE d TO d2", [Unsupported("d", "", ANY)]),
    ("FLASHBACK CLUSTER TO TIMESTAMP '2022-09-21 16:02:50'", [Unsupported("db", "", ANY)]),
    ("CREATE TABLE t (view int, x int", [Unsupported("db", "", ANY)]),
    ("ALTER TABLE t FROBNICATE", [Unsupported("db", "t", ANY)]),
    ("CREATE TABLE t (g geometry)", [Unsupported("db", "t", ANY)]),
    ("INSERT INTO t VALUES (1)", [Unsupported("db", "t", ANY)]),
]


@pytest.mark.parametrize("sql,expected", TIDB_DDL, ids=[" ".join(s.split())[:60] for s, _ in TIDB_DDL])
def test_tidb_ddl(sql: str, expected: list[SchemaChange]) -> None:
    assert parse_ddl(sql, "db") == expected


# --- table schema details --------------------------------------------------------------------------------------


def _created(sql: str, schema: str = "db") -> TableSchema:
    [change] = parse_ddl(sql, schema)
    assert isinstance(change, CreateTable), change
    return change.table


def test_every_column_type_keeps_its_normalized_descriptor() -> None:
    t = _created(
        "CREATE TABLE t (a INT(11) UNSIGNED ZEROFILL, b DECIMAL, c NUMERIC(5), d BIT, e CHAR, f BINARY, "
        "g FLOAT(30), h REAL, i INT8, j LONG VARCHAR, k ENUM('a','it''s'), l SET(\"x\",'y'), m SERIAL, "
        "n NATIONAL VARCHAR(5), o TEXT CHARACTER SET binary, p YEAR(4), q DOUBLE(10,2) UNSIGNED, r MIDDLEINT, "
        "s JSON, t_ TIME(3), u LONGBLOB, v FLOAT UNSIGNED)"
    )
    assert [(c.name, c.mysql_type) for c in t.columns] == [
        ("a", "int unsigned"),
        ("b", "decimal(10,0)"),
        ("c", "decimal(5,0)"),
        ("d", "bit(1)"),
        ("e", "char(1)"),
        ("f", "binary(1)"),
        ("g", "double"),
        ("h", "double"),
        ("i", "bigint"),
        ("j", "mediumtext"),
        ("k", "enum('a','it''s')"),
        ("l", "set('x','y')"),
        ("m", "bigint unsigned"),
        ("n", "varchar(5)"),
        ("o", "blob"),
        ("p", "year"),
        ("q", "double"),
        ("r", "mediumint"),
        ("s", "json"),
        ("t_", "time(3)"),
        ("u", "longblob"),
        ("v", "float"),
    ]
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE: it becomes the handle
    assert t.primary_key == ("m",)
    assert not t.columns[12].nullable


def test_defaults_and_comments() -> None:
    t = _created(
        "CREATE TABLE t (a varchar(10) DEFAULT 'x' COMMENT 'a\\'b\\\\c''d\\n', b datetime(3) DEFAULT NOW(3), "
        "c bit(3) DEFAULT b'101', d int DEFAULT -1, e tinyint(1) DEFAULT TRUE, f varchar(3) DEFAULT NULL, "
        "g float DEFAULT 1e3, h decimal(5,2) DEFAULT 1.50, i json DEFAULT (json_array()), "
        "j timestamp DEFAULT CURRENT_TIMESTAMP, k varchar(3) NULL, l int NOT NULL)"
    )
    assert [(c.name, c.default, c.nullable) for c in t.columns] == [
        ("a", "x", True),
        ("b", "CURRENT_TIMESTAMP(3)", True),
        ("c", "b'101'", True),
        ("d", "-1", True),
        ("e", "1", True),
        ("f", None, True),
        ("g", "1e3", True),
        ("h", "1.50", True),
        ("i", "(JSON_ARRAY())", True),
        ("j", "CURRENT_TIMESTAMP", True),
        ("k", None, True),
        ("l", None, False),
    ]
    assert t.columns[0].comment == "a'b\\c'd\n"


def test_virtual_generated_columns_are_left_out_stored_ones_kept() -> None:
    t = _created(
        "CREATE TABLE t (a int, c int GENERATED ALWAYS AS (a + 1) VIRTUAL, d int AS (a*2) STORED, e int AS (a))"
    )
    assert [c.name for c in t.columns] == ["a", "d"]


@pytest.mark.parametrize(
    "sql,expected_key",
    [
        # table-level composite primary key; its columns become NOT NULL
        ("CREATE TABLE t (a int, b varchar(10), c int, PRIMARY KEY (a, b(5)))", ("a", "b")),
        ("CREATE TABLE t (a int, b int, CONSTRAINT pk PRIMARY KEY (b, a))", ("b", "a")),
        # KEY as a column attribute means PRIMARY KEY in MySQL
        ("CREATE TABLE t (a int KEY, b int)", ("a",)),
        # key names resolve case-insensitively to the column as declared
        ("CREATE TABLE t (`Id` int, PRIMARY KEY (`ID`))", ("Id",)),
        # no primary key: the unique key whose columns are all NOT NULL, fewest columns first
        ("CREATE TABLE t (a int NOT NULL, b int NOT NULL, c int NOT NULL, UNIQUE KEY u2 (a, b), UNIQUE (c))", ("c",)),
        # a nullable unique key cannot be the handle
        ("CREATE TABLE t (a int, b int NOT NULL, UNIQUE (a), UNIQUE KEY (b))", ("b",)),
        # equal size: table-level keys were declared (numbered) before column-level UNIQUE attributes
        ("CREATE TABLE t (a int NOT NULL UNIQUE, b int NOT NULL, UNIQUE KEY ub (b))", ("b",)),
        ("CREATE TABLE t (a int NOT NULL UNIQUE, b int NOT NULL UNIQUE)", ("a",)),
        ("CREATE TABLE t (a int NOT NULL, b int NOT NULL, UNIQUE (a, b))", ("a", "b")),
        # expression (functional) unique keys cannot be a handle
        ("CREATE TABLE t (a int NOT NULL, UNIQUE KEY ((a + 1)))", ()),
        ("CREATE TABLE t (a int, b int)", ()),
    ],
)
def test_primary_key_and_handle_key(sql: str, expected_key: tuple[str, ...]) -> None:
    t = _created(sql)
    assert t.primary_key == expected_key
    for name in expected_key:
        assert not next(c for c in t.columns if c.name == name).nullable


def test_names_are_kept_exactly_as_written() -> None:
    t = _created(
        "CREATE TABLE `My Db`.`T``x` (`a``b` int, `col 1` int, `中文列` int, `select` int, Mixed int, `ü` int)"
    )
    assert (t.schema, t.table) == ("My Db", "T`x")
    assert [c.name for c in t.columns] == ["a`b", "col 1", "中文列", "select", "Mixed", "ü"]
    assert _created("CREATE TABLE 表格 (列 int)", "库").table == "表格"
    assert parse_ddl("RENAME TABLE `a b`.`c``d` TO `e,f`.`g`, 中文 TO 英文", "db") == [
        RenameTable("a b", "c`d", "e,f", "g"),
        RenameTable("db", "中文", "db", "英文"),
    ]
    assert parse_ddl("DROP TABLE `db``x`.`a;b`", "d") == [DropTable("db`x", "a;b")]


def test_several_statements_and_use() -> None:
    assert parse_ddl("CREATE DATABASE a; USE `a`; CREATE TABLE c (id int primary key); DROP TABLE other.x;", "z") == [
        CreateSchema("a"),
        table("a", "c", PK_ID, pk=("id",)),
        DropTable("other", "x"),
    ]
    assert parse_ddl("  ;  /* nothing */ ", "z") == []
    assert parse_ddl("", "z") == []
    # a semicolon inside a quoted name or string does not split
    assert parse_ddl("ALTER TABLE `a;b` ADD COLUMN c int COMMENT ';'", "z") == [
        AddColumn("z", "a;b", col("c", "int", comment=";"))
    ]


def test_if_not_exists_is_reported() -> None:
    [change] = parse_ddl("CREATE TABLE IF NOT EXISTS t (a int)", "db")
    assert isinstance(change, CreateTable) and change.if_not_exists


def test_unreadable_sql_falls_back_on_the_protocol_ddl_type() -> None:
    assert parse_ddl("CREATE FROBNICATED INDEX whatever", "db", "ADD_INDEX") == [MetadataOnly("db", "", "ADD_INDEX")]
    [change] = parse_ddl("CREATE FROBNICATED INDEX whatever", "db", "CREATE_TABLE")
    assert isinstance(change, Unsupported) and "cannot parse" in change.reason
    [change] = parse_ddl("CREATE TABLE t (a int", "db")
    assert isinstance(change, Unsupported)


# --- property: generated CREATE TABLE statements parse back to the same TableSchema ----------------------------

# any character MySQL allows in a quoted identifier (no NUL, no trailing space), with the troublesome ones frequent
_tricky = st.sampled_from(["`", " ", ".", ",", ";", "'", '"', "\\", "(", ")", "-", "/", "*", "中", "é", "😀"])
_any_char = st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00")
identifier = st.one_of(
    st.sampled_from(["select", "KEY", "primary", "Order", "a``b"]),
    st.text(st.one_of(_any_char, _tricky), min_size=1, max_size=20),
).filter(lambda s: not s.endswith(" ") and s.strip() != "")
free_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@st.composite
def ddl_types(draw: st.DrawFn) -> str:
    """Descriptors a CREATE TABLE can state exactly (no bare decimal/bit/char, whose SQL default differs)."""
    kind = draw(st.sampled_from(["int", "simple", "decimal", "temporal", "fixed", "var", "bit", "vector", "enum"]))
    if kind == "int":
        return mt.MySQLType(draw(st.sampled_from(sorted(mt.INTEGER_TYPES))), unsigned=draw(st.booleans())).descriptor()
    if kind == "simple":
        return draw(st.sampled_from(sorted(mt.FLOAT_TYPES | mt.TEXT_TYPES | mt.BLOB_TYPES | {"date", "year", "json"})))
    if kind == "decimal":
        precision = draw(st.integers(1, 65))
        t = mt.MySQLType("decimal", draw(st.booleans()), precision, draw(st.integers(0, min(precision, 30))))
        return t.descriptor()
    if kind == "temporal":
        t = mt.MySQLType(draw(st.sampled_from(sorted(mt.TEMPORAL_FSP_TYPES))), fsp=draw(st.sampled_from([None, 3, 6])))
        return t.descriptor()
    if kind == "fixed":
        return f"{draw(st.sampled_from(['char', 'binary']))}({draw(st.integers(0, 255))})"
    if kind == "var":
        return f"{draw(st.sampled_from(['varchar', 'varbinary']))}({draw(st.integers(1, 65535))})"
    if kind == "bit":
        return f"bit({draw(st.integers(1, 64))})"
    if kind == "vector":
        return draw(st.sampled_from(["vector", "vector(3)", "vector(1536)"]))
    members = draw(st.lists(free_text.filter(lambda s: "," not in s), min_size=1, max_size=4, unique=True))
    return mt.enum_descriptor(draw(st.sampled_from(["enum", "set"])), members)


@st.composite
def table_schemas(draw: st.DrawFn) -> TableSchema:
    names = draw(st.lists(identifier, min_size=1, max_size=6, unique_by=str.lower))
    pk_size = draw(st.integers(0, len(names)))
    pk = tuple(draw(st.permutations(names))[:pk_size])
    columns = []
    for name in names:
        descriptor = draw(ddl_types())
        base = mt.parse_type(descriptor).base
        default: Optional[str] = None
        if base in mt.CHAR_TYPES | {"varchar"}:
            default = draw(st.one_of(st.none(), free_text))
        elif base in mt.INTEGER_TYPES:
            default = draw(st.one_of(st.none(), st.integers(-(2**31), 2**31).map(str)))
        columns.append(
            ColumnSchema(
                name=name,
                mysql_type=descriptor,
                nullable=name not in pk and draw(st.booleans()),
                default=default,
                comment=draw(st.one_of(st.none(), free_text)),
            )
        )
    return TableSchema(schema=draw(identifier), table=draw(identifier), columns=tuple(columns), primary_key=pk)


def _quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def create_table_sql(t: TableSchema, inline_pk: bool) -> str:
    """Render a TableSchema the way a user would write it (quoting with MySQL's own rules)."""
    parts = []
    for c in t.columns:
        sql = f"{_quote_name(c.name)} {c.mysql_type}"
        if not c.nullable:
            sql += " NOT NULL"
        if c.default is not None:
            is_int = mt.parse_type(c.mysql_type).base in mt.INTEGER_TYPES
            sql += f" DEFAULT {c.default if is_int else mt.quote_string(c.default)}"
        if c.comment is not None:
            sql += f" COMMENT {mt.quote_string(c.comment)}"
        if inline_pk and t.primary_key == (c.name,):
            sql += " PRIMARY KEY"
        parts.append(sql)
    if t.primary_key and not (inline_pk and len(t.primary_key) == 1):
        parts.append(f"PRIMARY KEY ({', '.join(_quote_name(n) for n in t.primary_key)})")
    return f"CREATE TABLE {_quote_name(t.schema)}.{_quote_name(t.table)} (\n  " + ",\n  ".join(parts) + "\n)"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_schemas(), st.booleans())
def test_generated_create_table_parses_back_to_the_same_schema(t: TableSchema, inline_pk: bool) -> None:
    [change] = parse_ddl(create_table_sql(t, inline_pk), "unused")
    assert change == CreateTable(t)
