"""MySQL type descriptors: parsing, normalization, the Iceberg mapping, widening and the column-doc round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import types as ice

from ticdc_lakehouse.core import mysql_types as mt
from ticdc_lakehouse.core.mysql_types import MySQLType

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "ticdc-vectors"


# --- parsing and normalization ---------------------------------------------------------------------------------

NORMALIZED = [
    # the forms the brief names
    ("int(11) unsigned zerofill", "int unsigned"),
    ("decimal(65,30)", "decimal(65,30)"),
    ("varchar(255)", "varchar(255)"),
    ("enum('a','it''s')", "enum('a','it''s')"),
    ("timestamp(3)", "timestamp(3)"),
    ("bit(1)", "bit(1)"),
    ("double unsigned", "double"),
    ("tinyint(1)", "tinyint"),
    ("vector(3)", "vector(3)"),
    # decoder descriptors stay as they are
    ("int", "int"),
    ("bigint unsigned", "bigint unsigned"),
    ("decimal(10,2)", "decimal(10,2)"),
    ("decimal", "decimal"),
    ("varchar", "varchar"),
    ("char", "char"),
    ("binary", "binary"),
    ("varbinary", "varbinary"),
    ("text", "text"),
    ("blob", "blob"),
    ("tinyblob", "tinyblob"),
    ("json", "json"),
    ("date", "date"),
    ("datetime", "datetime"),
    ("timestamp", "timestamp"),
    ("time", "time"),
    ("year", "year"),
    ("bit", "bit"),
    ("float", "float"),
    ("double", "double"),
    ("enum", "enum"),
    ("set", "set"),
    ("enum('a','b')", "enum('a','b')"),
    ("set('x','y z')", "set('x','y z')"),
    # full column type SQL, any case
    ("INT(11) UNSIGNED ZEROFILL", "int unsigned"),
    ("TINYINT(3) UNSIGNED", "tinyint unsigned"),
    ("SMALLINT(6)", "smallint"),
    ("MEDIUMINT(8) UNSIGNED", "mediumint unsigned"),
    ("BIGINT(20) UNSIGNED", "bigint unsigned"),
    ("YEAR(4)", "year"),
    ("DATETIME(0)", "datetime"),
    ("TIME(6)", "time(6)"),
    ("DECIMAL(5)", "decimal(5,0)"),
    ("DECIMAL(10, 2) UNSIGNED ZEROFILL", "decimal(10,2) unsigned"),
    ("FLOAT(7,3)", "float"),
    ("FLOAT(30)", "double"),
    ("FLOAT(24)", "float"),
    ("DOUBLE(10,2)", "double"),
    ("DOUBLE PRECISION", "double"),
    ("REAL", "double"),
    ("NUMERIC(10,5)", "decimal(10,5)"),
    ("DEC(4,2)", "decimal(4,2)"),
    ("FIXED(4,2)", "decimal(4,2)"),
    ("INTEGER", "int"),
    ("INT1", "tinyint"),
    ("INT2", "smallint"),
    ("INT3", "mediumint"),
    ("MIDDLEINT", "mediumint"),
    ("INT4", "int"),
    ("INT8", "bigint"),
    ("BOOL", "tinyint"),
    ("BOOLEAN", "tinyint"),
    ("SERIAL", "bigint unsigned"),
    ("CHARACTER(10)", "char(10)"),
    ("NCHAR(5)", "char(5)"),
    ("NATIONAL CHAR(5)", "char(5)"),
    ("CHARACTER VARYING(20)", "varchar(20)"),
    ("NVARCHAR(5)", "varchar(5)"),
    ("NATIONAL VARCHAR(5)", "varchar(5)"),
    ("var_string", "varchar"),
    ("LONG", "mediumtext"),
    ("LONG VARCHAR", "mediumtext"),
    ("LONG VARBINARY", "mediumblob"),
    ("TEXT(100)", "text"),
    ("BLOB(100)", "blob"),
    ("char(10) binary", "char(10)"),
    ("varchar(10) character set utf8mb4 collate utf8mb4_bin", "varchar(10)"),
    ("varchar(10) CHARACTER SET binary", "varbinary(10)"),
    ("char(4) charset binary", "binary(4)"),
    ("text character set binary", "blob"),
    ("longtext charset binary", "longblob"),
    ('ENUM("a","b")', "enum('a','b')"),
    ("enum('a\\'b','c\\\\d')", "enum('a''b','c\\\\d')"),
    ("bit unsigned", "bit"),  # TiDB flags BIT unsigned
    ("year unsigned", "year"),
    ("float unsigned", "float"),
    ("VECTOR", "vector"),
    ("VECTOR<FLOAT>(3)", "vector(3)"),
    ("vector<float32>(3)", "vector(3)"),
    ("TiDBVECTORFloat32", "vector"),  # Avro tidb_type
    ("INT UNSIGNED", "int unsigned"),  # Avro tidb_type
    ("  int   unsigned  ", "int unsigned"),
]


@pytest.mark.parametrize("text,expected", NORMALIZED)
def test_normalize(text: str, expected: str) -> None:
    assert mt.normalize(text) == expected
    # normalized text is a fixed point
    assert mt.normalize(expected) == expected


SQL_DEFAULTS = [
    ("decimal", "decimal(10,0)"),
    ("DECIMAL", "decimal(10,0)"),
    ("bit", "bit(1)"),
    ("char", "char(1)"),
    ("binary", "binary(1)"),
    ("varchar(3)", "varchar(3)"),
    ("vector", "vector"),
    ("enum('a')", "enum('a')"),
]


@pytest.mark.parametrize("text,expected", SQL_DEFAULTS)
def test_sql_defaults_fill_what_sql_means_by_a_bare_type(text: str, expected: str) -> None:
    assert mt.normalize(text, sql_defaults=True) == expected


def test_parsed_fields() -> None:
    assert mt.parse_type("enum('a','it''s')") == MySQLType("enum", elements=("a", "it's"))
    assert mt.parse_type("set('a,b')") == MySQLType("set", elements=("a,b",))
    assert mt.parse_type("decimal(65,30)") == MySQLType("decimal", length=65, scale=30)
    assert mt.parse_type("decimal(65,30)").precision == 65
    assert mt.parse_type("timestamp(3)") == MySQLType("timestamp", fsp=3)
    assert mt.parse_type("int(11) unsigned zerofill") == MySQLType("int", unsigned=True)
    assert mt.parse_type("vector(3)") == MySQLType("vector", length=3)
    assert mt.parse_type("varbinary(16)").is_binary
    assert mt.parse_type("longblob").is_binary
    assert not mt.parse_type("varchar(16)").is_binary
    assert not mt.parse_type("json").is_binary
    assert mt.parse_type("decimal").is_bare and mt.parse_type("bit").is_bare and mt.parse_type("enum").is_bare
    assert not mt.parse_type("enum('a')").is_bare and not mt.parse_type("decimal(5,0)").is_bare


def test_enum_members_keep_mysql_string_escapes() -> None:
    t = mt.parse_type(r"""enum('a\0b','c\nd','e\\f','g\%h','i''j',"k")""")
    assert t.elements == ("a\0b", "c\nd", "e\\f", "g\\%h", "i'j", "k")
    # rendering escapes what MySQL needs and stays on one line
    assert "\n" not in t.descriptor() and "\0" not in t.descriptor()
    assert mt.parse_type(t.descriptor()) == t


def test_enum_descriptor_builds_from_member_lists() -> None:
    assert mt.enum_descriptor("enum", ["a", "it's"]) == "enum('a','it''s')"
    assert mt.enum_descriptor("SET", ["x\\y"]) == "set('x\\\\y')"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "geometry",
        "int(",
        "enum('a'",
        "varchar(10) unsigned",
        "decimal(5,6)",
        "decimal(0)",
        "bit(65)",
        "datetime(7)",
        "int(1,2,3)",
        "enum(1)",
        "varchar('a')",
        "int frobnicate",
        "text character",
        "vector<int>(3)",
        "decimal(10,2) extra(",
    ],
)
def test_invalid_types_raise_with_the_text(text: str) -> None:
    with pytest.raises(ValueError):
        mt.parse_type(text)


# --- Iceberg mapping -------------------------------------------------------------------------------------------

ICEBERG = [
    ("tinyint", "int"),
    ("tinyint unsigned", "int"),
    ("smallint", "int"),
    ("smallint unsigned", "int"),
    ("mediumint", "int"),
    ("mediumint unsigned", "int"),
    ("int", "int"),
    ("int unsigned", "bigint"),
    ("year", "int"),
    ("bigint", "bigint"),
    ("bigint unsigned", "decimal(20,0)"),
    ("float", "float"),
    ("double", "double"),
    ("decimal(10,2)", "decimal(10,2)"),
    ("decimal(38,38)", "decimal(38,38)"),
    ("decimal(65,30)", "decimal(38,30)"),
    ("decimal(65,0)", "decimal(38,0)"),
    ("decimal", "decimal(38,10)"),
    ("date", "date"),
    ("datetime", "timestamp_ntz"),
    ("datetime(6)", "timestamp_ntz"),
    ("timestamp(3)", "timestamp_ntz"),
    ("time(6)", "string"),
    ("char(10)", "string"),
    ("varchar(255)", "string"),
    ("tinytext", "string"),
    ("longtext", "string"),
    ("json", "string"),
    ("enum('a','b')", "string"),
    ("enum", "string"),
    ("set('a')", "string"),
    ("binary(16)", "binary"),
    ("varbinary(100)", "binary"),
    ("blob", "binary"),
    ("mediumblob", "binary"),
    ("bit(1)", "decimal(20,0)"),  # one type for every width: a protocol without the width agrees with the DDL
    ("bit(63)", "decimal(20,0)"),
    ("bit(64)", "decimal(20,0)"),
    ("bit", "decimal(20,0)"),
    ("vector(3)", "string"),
]

PYICEBERG = {
    "int": ice.IntegerType(),
    "bigint": ice.LongType(),
    "float": ice.FloatType(),
    "double": ice.DoubleType(),
    "date": ice.DateType(),
    "timestamp_ntz": ice.TimestampType(),
    "string": ice.StringType(),
    "binary": ice.BinaryType(),
}


@pytest.mark.parametrize("descriptor,expected", ICEBERG)
def test_iceberg_type(descriptor: str, expected: str) -> None:
    t = mt.parse_type(descriptor)
    assert mt.iceberg_type(t) == expected
    py = mt.pyiceberg_type(t)
    if expected.startswith("decimal("):
        precision, scale = map(int, expected[len("decimal(") : -1].split(","))
        assert py == ice.DecimalType(precision, scale)
    else:
        assert py == PYICEBERG[expected]


def test_narrowing_is_recorded_only_where_values_may_not_fit() -> None:
    reason = mt.narrowing(mt.parse_type("decimal(65,30)"))
    assert reason is not None and "decimal(38,30)" in reason and "8 integer digits" in reason
    bare = mt.narrowing(mt.parse_type("decimal"))
    assert bare is not None and "decimal(38,10)" in bare
    for ok in ("decimal(38,2)", "bigint unsigned", "bit(64)", "int unsigned", "varchar(10)", "time"):
        assert mt.narrowing(mt.parse_type(ok)) is None, ok


def test_every_avro_tidb_type_in_the_vectors_maps_like_its_avro_schema() -> None:
    """Avro's ``connect.parameters.tidb_type`` is a descriptor a decoder will hand over as is."""
    expected = {
        "INT": "int",
        "INT UNSIGNED": "bigint",
        "BIGINT": "bigint",
        "BIGINT UNSIGNED": "decimal(20,0)",
        "FLOAT": "float",
        "DOUBLE": "double",
        "BIT": "decimal(20,0)",  # width not carried in tidb_type
        "DECIMAL": "decimal(38,10)",  # precision not carried in tidb_type
        "TEXT": "string",
        "BLOB": "binary",
        "ENUM": "string",
        "SET": "string",
        "JSON": "string",
        "DATE": "date",
        "DATETIME": "timestamp_ntz",
        "TIMESTAMP": "timestamp_ntz",
        "TIME": "string",
        "YEAR": "int",
    }
    seen: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            params = node.get("connect.parameters")
            if isinstance(params, dict) and "tidb_type" in params:
                seen.add(params["tidb_type"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for path in sorted((VECTORS / "avro").glob("*.avsc")):
        walk(json.loads(path.read_text()))
    assert seen == set(expected)
    for tidb_type in seen:
        assert mt.iceberg_type(mt.parse_type(tidb_type)) == expected[tidb_type], tidb_type


def test_every_mysql_type_in_the_simple_and_canal_vectors_parses() -> None:
    """Simple's ``dataType.mysqlType`` and Canal-JSON's ``mysqlType`` map (docs are JSONC, so read as text)."""
    found: set[str] = set()
    files = [*(VECTORS / "simple").rglob("*.json"), *(VECTORS / "canal-json").rglob("*.*")]
    for path in (p for p in files if p.suffix != ".md"):
        text = path.read_text()
        found.update(re.findall(r'"mysqlType"\s*:\s*"([^"]*)"', text))
        for mapping in re.findall(r'"mysqlType"\s*:\s*\{([^}]*)\}', text):
            found.update(re.findall(r'"[^"]*"\s*:\s*"([^"]*)"', mapping))
    assert {"int", "varchar", "float", "timestamp", "bigint", "date"} <= found
    for descriptor in found:
        assert mt.parse_type(descriptor).descriptor() == descriptor


# --- widening --------------------------------------------------------------------------------------------------

WIDENING = [
    ("int", "bigint", "widen"),
    ("tinyint", "int", "same"),
    ("smallint unsigned", "mediumint", "same"),
    ("int", "int unsigned", "widen"),  # int -> bigint in Iceberg
    ("mediumint unsigned", "int unsigned", "widen"),
    ("float", "double", "widen"),
    ("double", "float", "unsupported"),
    ("decimal(10,2)", "decimal(12,2)", "widen"),
    ("decimal(10,2)", "decimal(10,2) unsigned", "same"),
    ("decimal(12,2)", "decimal(10,2)", "unsupported"),
    ("decimal(10,2)", "decimal(12,3)", "unsupported"),
    ("decimal(60,10)", "decimal(65,10)", "same"),  # both narrowed to decimal(38,10)
    ("varchar(10)", "varchar(255)", "same"),
    ("varchar(255)", "varchar(10)", "same"),
    ("char(10)", "text", "same"),
    ("enum('a')", "enum('a','b')", "same"),
    ("enum('a')", "varchar(10)", "same"),
    ("varbinary(10)", "blob", "same"),
    ("datetime", "timestamp(6)", "same"),
    ("bigint", "bigint unsigned", "unsupported"),
    ("bigint", "decimal(20,0)", "unsupported"),
    ("int", "varchar(10)", "unsupported"),
    ("varchar(10)", "int", "unsupported"),
    ("varchar(10)", "varbinary(10)", "unsupported"),
    ("date", "datetime", "unsupported"),
    ("bit(8)", "bit(64)", "same"),
    ("bit", "bit(8)", "same"),  # typed from Open Protocol rows, then MODIFY b BIT(8) NOT NULL
    ("bit(8)", "bit(16)", "same"),
    ("int", "float", "unsupported"),
]


@pytest.mark.parametrize("old,new,expected", WIDENING)
def test_widening(old: str, new: str, expected: str) -> None:
    assert mt.widening(mt.parse_type(old), mt.parse_type(new)) == expected


# --- round trips -----------------------------------------------------------------------------------------------

member_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=12)


@st.composite
def mysql_type_values(draw: st.DrawFn, bare: bool = True) -> MySQLType:
    """Normalized types; ``bare=False`` leaves out the forms whose parameters are unknown."""
    kind = draw(st.sampled_from(["int", "simple", "decimal", "temporal", "fixed", "var", "bit", "vector", "enum"]))
    maybe = (lambda s: st.one_of(st.none(), s)) if bare else (lambda s: s)
    if kind == "int":
        return MySQLType(draw(st.sampled_from(sorted(mt.INTEGER_TYPES))), unsigned=draw(st.booleans()))
    if kind == "simple":
        names = sorted(mt.FLOAT_TYPES | mt.TEXT_TYPES | mt.BLOB_TYPES | {"date", "year", "json"})
        return MySQLType(draw(st.sampled_from(names)))
    if kind == "decimal":
        precision = draw(maybe(st.integers(1, 65)))
        scale = None if precision is None else draw(st.integers(0, min(precision, 30)))
        return MySQLType("decimal", unsigned=draw(st.booleans()), length=precision, scale=scale)
    if kind == "temporal":
        base = draw(st.sampled_from(sorted(mt.TEMPORAL_FSP_TYPES)))
        return MySQLType(base, fsp=draw(st.sampled_from([None, 1, 3, 6])))
    if kind == "fixed":
        return MySQLType(draw(st.sampled_from(["char", "binary"])), length=draw(maybe(st.integers(0, 255))))
    if kind == "var":
        return MySQLType(draw(st.sampled_from(["varchar", "varbinary"])), length=draw(maybe(st.integers(1, 65535))))
    if kind == "bit":
        return MySQLType("bit", length=draw(maybe(st.integers(1, 64))))
    if kind == "vector":
        return MySQLType("vector", length=draw(st.one_of(st.none(), st.integers(1, 16383))))
    base = draw(st.sampled_from(["enum", "set"]))
    members = draw(st.lists(member_text, min_size=0 if bare else 1, max_size=5, unique=True))
    if base == "set":
        members = [m.replace(",", ";") for m in members]
        members = list(dict.fromkeys(members))
    return MySQLType(base, elements=tuple(members))


@settings(max_examples=300, deadline=None)
@given(mysql_type_values())
def test_descriptor_round_trip(t: MySQLType) -> None:
    assert mt.parse_type(t.descriptor()) == t
    assert "\n" not in t.descriptor()


@settings(max_examples=300, deadline=None)
@given(mysql_type_values(), st.one_of(st.none(), st.text(max_size=40)))
def test_column_doc_round_trip(t: MySQLType, comment: str | None) -> None:
    doc = mt.column_doc(t, comment)
    assert doc.startswith("mysql:")
    assert mt.type_from_doc(doc) == t
    assert mt.comment_from_doc(doc) == comment


def test_column_doc_is_readable_and_rejects_foreign_docs() -> None:
    assert mt.column_doc(mt.parse_type("enum('a','b')")) == "mysql:enum('a','b')"
    assert mt.column_doc(mt.parse_type("bigint unsigned"), "order id") == "mysql:bigint unsigned\norder id"
    with pytest.raises(ValueError):
        mt.type_from_doc("order id")


@pytest.mark.parametrize("old, new, carried", [
    ("int", "bigint", True), ("tinyint", "int", True), ("int unsigned", "bigint", True),
    ("int unsigned", "int", False), ("int", "int unsigned", False), ("bigint", "int", False),
    ("decimal(5,2)", "decimal(9,2)", True), ("decimal(5,2)", "decimal(9,3)", False),
    ("varchar(10)", "varchar(20)", True), ("varchar(20)", "varchar(10)", False), ("char(3)", "text", True),
    ("float", "double", False), ("enum('a','b')", "enum('a','b','c')", False), ("int", "varchar(20)", False),
])
def test_which_type_changes_every_old_value_survives(old, new, carried):
    """A MODIFY COLUMN the rows below it may be typed through (no DDL barrier): only when each old value is the
    same value of the new type in the lake."""
    assert mt.holds_every_value(mt.parse_type(old), mt.parse_type(new)) is carried
