"""merge/value_checks.py, column_defaults.py and the decoders' float sign: the pure typing rules, then the checks
evaluated by Spark itself, with ANSI mode off and on."""

from __future__ import annotations

import re

import pytest

from ticdc_lakehouse.core.column_defaults import UnknownDefault, existing_row_value
from ticdc_lakehouse.decode.open_protocol import OpenProtocolDecoder, keep_negative_zero
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.staged_stats import StatsFolder, finish
from ticdc_lakehouse.merge.value_checks import decimal_pattern, value_problem_sql
from ticdc_lakehouse.core.model import INSERT, Message, Position, RowChange
from ticdc_lakehouse.core.mysql_types import iceberg_type, parse_type, widening


@pytest.mark.parametrize("text, fits", [
    ("1.50", True), ("999.99", True), ("-999.99", True), ("0.5", True), ("1.230", True), ("0001.2", True),
    ("12345.67", False), ("1000", False), ("1.234", False), ("1e2", False), ("abc", False), ("1.2.3", False),
])
def test_decimal_pattern_is_exactly_what_fits_without_rounding(text, fits):
    assert bool(re.match(decimal_pattern(5, 2), text)) is fits


@pytest.mark.parametrize("mysql, default, nullable, value", [
    ("int", "x'10'", False, "16"),  # DEFAULT 0x10 (ddl_parse renders it x'10')
    ("int", "b'101'", True, "5"),
    ("bigint unsigned", "18446744073709551615", False, "18446744073709551615"),
    ("decimal(5,2)", "1.5", False, "1.50"),
    ("double", None, False, "0.0"),
    ("time", None, False, "00:00:00"),
    ("time(3)", "1:2:3", False, "01:02:03.000"),
    ("set('a','b')", None, False, ""),
    ("set('a','b')", "b,a", True, "a,b"),
    ("enum('x','y')", None, False, "x"),
    ("bit(8)", "7", True, "7"),
    ("bit(8)", "b'101'", True, "5"),
    ("bit(8)", None, False, "0"),
    ("varbinary(10)", "x", False, "eA=="),
    ("binary(3)", "x", False, "eAAA"),  # MySQL pads BINARY with zero bytes
    ("blob", None, False, ""),
    ("varchar(5)", "x'6162'", True, "ab"),
    ("varchar(5)", None, False, ""),
    ("json", None, False, "null"),
    ("date", None, False, None),  # the zero date: NULL in the lake
    ("datetime(2)", "2024-01-02 03:04:05.5", True, "2024-01-02 03:04:05.50"),
    ("int", None, True, None),
])
def test_existing_rows_get_what_tidb_gives_them(mysql, default, nullable, value):
    assert existing_row_value(parse_type(mysql), default, nullable) == value


def test_an_expression_default_is_said_to_be_unknown_not_invented():
    with pytest.raises(UnknownDefault, match="CURRENT_TIMESTAMP"):
        existing_row_value(parse_type("datetime"), "CURRENT_TIMESTAMP", False)


def test_bit_of_every_width_has_one_iceberg_type():
    assert {iceberg_type(parse_type(t)) for t in ("bit", "bit(1)", "bit(8)", "bit(63)", "bit(64)")} == {
        "decimal(20,0)"}
    assert widening(parse_type("bit"), parse_type("bit(8)")) == "same"


def test_negative_zero_is_rewritten_only_outside_strings():
    payload = b'{"u":{"f":{"t":5,"f":0,"v":-0},"s":{"t":15,"f":0,"v":"\\"v\\":-0"},"g":{"t":5,"f":0,"v":-0.5}}}'
    assert keep_negative_zero(payload) == payload.replace(b'"v":-0}', b'"v":-0.0}', 1)
    assert keep_negative_zero(b'{"v":-0e1}') == b'{"v":-0e1}'


def test_open_protocol_decodes_go_negative_zero_with_its_sign():
    at = Position("t", 0, 0)
    row = RowChange("s", "t", 5, INSERT, {"id": "1", "f": "-0.0", "g": "-0.0"}, None, ("id",),
                    {"id": "int", "f": "double", "g": "float"}, at)
    key, value = OpenProtocolEncoder().encode(row)
    assert b'"v":-0}' in value  # Go's encoding/json text
    for _ in range(2):  # the reference path, then the typed path it taught
        (event,) = OpenProtocolDecoder().decode(Message("t", 0, 0, key, value))
        assert event.after["f"] == "-0.0" and event.after["g"] == "-0.0"


def test_row_typed_decimal_scale_comes_from_every_value_not_a_sample():
    at = Position("t", 0, 0)
    types = {"id": "int", "d": "decimal"}
    rows = [RowChange("s", "t", 5 + i, INSERT, {"id": str(i), "d": d}, None, ("id",), types, at)
            for i, d in enumerate([None, "1.5", "-2.12345678901", "3"])]
    folder = StatsFolder()
    folder.add(rows)
    stats = finish(folder.finish())
    assert dict(stats.rows[("s", "t")].column_types)["d"] == "decimal(38,11)"


# --- evaluated by Spark ------------------------------------------------------------------------------------------

CASES = [
    (TargetColumn("id", "int", "int", True), ["1", "-7"], ["nine", "1.5", "99999999999", "", None]),
    (TargetColumn("n", "int", "int"), ["1", None], ["x"]),
    (TargetColumn("a", "decimal(5,2)", "decimal(5,2)"), ["1.50", "999.99", "-0.5", None], ["12345.67", "1.234"]),
    (TargetColumn("u", "decimal(20,0)", "bigint unsigned"), ["18446744073709551615"], ["1.5", "-x"]),
    (TargetColumn("f", "double", "double"), ["-0.0", "nan", "inf", "1e308"], ["abc"]),
    (TargetColumn("r", "float", "float"), ["1.5", "-inf"], ["1e39"]),
    (TargetColumn("d", "date", "date"), ["2024-01-02", "0000-00-00"], ["2024-01-02 10:00:00", "2024-13-01"]),
    (TargetColumn("ts", "timestamp_ntz", "datetime(6)"), ["2024-01-02 10:00:00.123456"], ["yesterday"]),
    (TargetColumn("e", "string", "enum('a','b')"), ["1", "2", "0"], ["3"]),
    (TargetColumn("s", "string", "set('a','b')"), ["3", "0"], ["4"]),
    (TargetColumn("bin", "binary", "varbinary(4)"), ["eA=="], ["not base64!"]),
    (TargetColumn("t", "string", "varchar(5)"), ["anything"], []),
]


@pytest.mark.spark
@pytest.mark.parametrize("ansi", ["false", "true"])
def test_spark_judges_every_value_the_same_with_ansi_mode_off_and_on(spark, ansi):
    from pyspark.sql import functions as F

    from ticdc_lakehouse.merge.changes import typed_value

    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        for column, good, bad in CASES:
            rows = [({column.name: v}, [], v in good) for v in good + bad]
            frame = spark.createDataFrame(rows, "v map<string,string>, named_enums array<string>, good boolean")
            judged = frame.select("good", F.expr(value_problem_sql("v", column, "false")).alias("problem")).collect()
            for row, value in zip(judged, good + bad):
                assert (row["problem"] is None) is row["good"], (column, value, row["problem"])
            typed = frame.filter("good").select(typed_value("v", F.col("named_enums"), column).alias("x"))
            assert typed.count() == len(good)  # no failure for a good value
            for value in bad:
                one = frame.filter(F.col("v")[column.name] == value) if value is not None else frame.filter(
                    F.col("v")[column.name].isNull() & ~F.col("good"))
                with pytest.raises(Exception, match="lakehouse-invalid-value"):
                    one.select(typed_value("v", F.col("named_enums"), column)).collect()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def test_protocols_that_carry_the_bit_width_keep_it():
    from ticdc_lakehouse.decode.common.type_text import build_descriptor, normalize_descriptor

    assert normalize_descriptor("bit(8)") == "bit(8)" and normalize_descriptor("BIT") == "bit"  # Canal-JSON
    assert build_descriptor("bit", length=8) == "bit(8)" and build_descriptor("bit") == "bit"  # Simple, Debezium
