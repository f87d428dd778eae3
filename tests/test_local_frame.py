"""local_frame: driver-held rows as a DataFrame, without a Python worker, equal to what createDataFrame gives."""

from __future__ import annotations

from datetime import datetime

import pytest

from ticdc_lakehouse.runtime.local_frame import local_frame

DDL = "name string, ts bigint, part int, at timestamp, note string"
ROWS = [
    ("cf'1\\\u4e2d", (1 << 63) - 1, 7, datetime(2026, 11, 25, 21, 30, 5, 123456), None),
    ("", -(1 << 63), -1, None, 'a "quoted" note'),
]


def test_rows_and_schema_are_those_of_create_dataframe(spark_session):
    built = local_frame(spark_session, ROWS, DDL)
    reference = spark_session.createDataFrame(ROWS, DDL)
    assert [(f.name, f.dataType) for f in built.schema.fields] == \
        [(f.name, f.dataType) for f in reference.schema.fields]
    assert [tuple(r) for r in built.collect()] == [tuple(r) for r in reference.collect()] == ROWS


def test_the_plan_evaluates_literals_in_the_jvm(spark_session):
    plan = local_frame(spark_session, ROWS, DDL)._jdf.queryExecution().executedPlan().toString()
    reference = spark_session.createDataFrame(ROWS, DDL)._jdf.queryExecution().executedPlan().toString()
    assert "ExistingRDD" in reference  # the pickled rows that a Python worker must read
    assert "ExistingRDD" not in plan and "Python" not in plan


def test_no_rows_give_an_empty_frame_of_the_schema(spark_session):
    empty = local_frame(spark_session, [], DDL)
    assert empty.collect() == []
    assert [f.name for f in empty.schema.fields] == ["name", "ts", "part", "at", "note"]
    assert empty.schema["ts"].dataType.simpleString() == "bigint"


def test_a_row_of_the_wrong_width_is_refused(spark_session):
    with pytest.raises(ValueError, match="2 values for 5 fields"):
        local_frame(spark_session, [("a", 1)], DDL)


def test_simple_rows_are_one_values_statement_equal_to_create_dataframe(spark_session):
    ddl = "name string, ts bigint, part int, ok boolean, note string"
    rows = [(name, ts, part, part > 0, note) for name, ts, part, _, note in ROWS] * 50
    built = local_frame(spark_session, rows, ddl)
    reference = spark_session.createDataFrame(rows, ddl)
    assert [(f.name, f.dataType) for f in built.schema.fields] == \
        [(f.name, f.dataType) for f in reference.schema.fields]
    assert [tuple(r) for r in built.collect()] == [tuple(r) for r in reference.collect()] == rows
    assert "LocalTableScan" in built._jdf.queryExecution().executedPlan().toString()


def test_simple_rows_keep_every_value_and_name_exactly(spark_session):
    ddl = "`odd ``name``` string, `x.y` double, small tinyint, big bigint, flag boolean"
    rows = [("it's \\ \"q\" \u4e2d\U0001f600\n\t\x01", 0.1 + 0.2, -128, -(1 << 63), False),
            ("", -1.5e-300, 127, (1 << 63) - 1, True),
            (None, None, None, None, None),
            ("5", 3.0, 0, 0, None)]
    built = local_frame(spark_session, rows, ddl)
    assert [f.name for f in built.schema.fields] == ["odd `name`", "x.y", "small", "big", "flag"]
    assert [tuple(r) for r in built.collect()] == [tuple(r) for r in spark_session.createDataFrame(rows, ddl).collect()]
    assert built.collect()[0][1] == 0.1 + 0.2


def test_a_value_its_field_cannot_hold_fails_instead_of_becoming_null(spark_session):
    with pytest.raises(Exception, match="(?i)malformed|overflow|out of range|FAILFAST"):
        local_frame(spark_session, [(1 << 40,)], "n int").collect()


def test_row_schema_parses_a_ddl_string_once(spark_session):
    from pyspark.sql.types import StructType

    from ticdc_lakehouse.runtime.local_frame import row_schema

    schema = row_schema(DDL)
    assert isinstance(schema, StructType)
    assert [f.name for f in schema.fields] == ["name", "ts", "part", "at", "note"]
    assert schema == spark_session.createDataFrame(ROWS, DDL).schema
    assert row_schema(DDL) is schema  # the same object: no second parse in the JVM
    with pytest.raises(ValueError, match="not a row schema"):
        row_schema("bigint")


@pytest.mark.parametrize("ddl", [
    "kind string, after map<string,string>, named_enums array<string>, ok boolean, n tinyint, s smallint, i integer, "
    "f float, d double, b binary, day date, local timestamp_ntz, price decimal(12, 2)",
    "`x y` string, `we``ird` bigint, `_s0` map<string, array<decimal(38,0)>>",
    "A BIGINT, b MAP<STRING, STRING>",
])
def test_the_projects_ddl_strings_are_read_without_the_jvm_as_spark_reads_them(spark_session, ddl):
    """``row_schema`` reads the project's own DDL strings in Python (a fresh driver's first parses in the JVM
    were a quarter of a second of its start): the same ``StructType`` as Spark's parser gives."""
    from pyspark.sql.types import _parse_datatype_string

    from ticdc_lakehouse.core.events_arrow import EVENT_SPARK_SCHEMA
    from ticdc_lakehouse.merge.batch_write import FILE_SCHEMA
    from ticdc_lakehouse.runtime import state
    from ticdc_lakehouse.runtime.local_frame import simple_row_schema

    for text in (ddl, EVENT_SPARK_SCHEMA, FILE_SCHEMA, "topic string, partition int, offset bigint"):
        assert simple_row_schema(text) == _parse_datatype_string(text), text
    # the control tables' timestamps are the session's spark.sql.timestampType: Spark's parser reads them
    assert simple_row_schema(state.CHECKPOINTS_DDL) is None


@pytest.mark.parametrize("timestamp_type", ["TIMESTAMP_LTZ", "TIMESTAMP_NTZ"])
def test_the_control_tables_columns_are_read_as_the_session_s_parser_reads_them(spark_session, timestamp_type):
    """The control tables' strings hold ``timestamp``, which Spark reads as the session's
    ``spark.sql.timestampType``: ``session_row_schema`` reads them so, without the parser (a deployment's first run
    created its control tables from them right after the session started)."""
    from pyspark.sql.types import _parse_datatype_string

    from ticdc_lakehouse.merge.below_cut import BELOW_CUT_DDL
    from ticdc_lakehouse.runtime import state
    from ticdc_lakehouse.runtime.local_frame import session_row_schema

    before = spark_session.conf.get("spark.sql.timestampType")
    spark_session.conf.set("spark.sql.timestampType", timestamp_type)
    try:
        for ddl in (state.CHECKPOINTS_DDL, state.DEAD_LETTERS_DDL, state.HELD_DDL, state.HALTED_DDL, BELOW_CUT_DDL,
                    DDL):
            assert session_row_schema(spark_session, ddl) == _parse_datatype_string(ddl), ddl
        kind = type(session_row_schema(spark_session, DDL)["at"].dataType).__name__
        assert kind == ("TimestampType" if timestamp_type == "TIMESTAMP_LTZ" else "TimestampNTZType")
    finally:
        spark_session.conf.set("spark.sql.timestampType", before)


def test_a_string_without_timestamp_does_not_ask_the_session():
    """Each question to the session is a gateway call, and most frames' strings hold no ``timestamp``."""
    from ticdc_lakehouse.runtime.local_frame import session_row_schema

    class Unasked:
        class conf:
            @staticmethod
            def get(*_):
                raise AssertionError("the session was asked")

    assert [f.name for f in session_row_schema(Unasked, "name string, ts bigint").fields] == ["name", "ts"]


@pytest.mark.parametrize("ddl", ["a string NOT NULL", "a string COMMENT 'x'", "s struct<a:int>", "`a,b` string",
                                 "`open string", "a interval day", "a string,", "at timestamp"])
def test_other_ddl_strings_go_to_spark_s_parser(spark_session, ddl):
    """What the Python reader does not know it leaves to Spark, whatever Spark then says of it."""
    from ticdc_lakehouse.runtime.local_frame import simple_row_schema

    assert simple_row_schema(ddl) is None
