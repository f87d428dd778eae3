"""Simple protocol encoders: TiCDC's exact JSON shape, and random events round-tripping through the decoders."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ticdc_lakehouse.decode.common.type_text import float32_text
from ticdc_lakehouse.decode.simple import SimpleAvroDecoder, SimpleJsonDecoder, row_column_types
from ticdc_lakehouse.sim.encode.simple import SimpleAvroEncoder, SimpleJsonEncoder, go_float_text
from ticdc_lakehouse.core.model import (
    DELETE,
    INSERT,
    UPDATE,
    ColumnSchema,
    DDLEvent,
    Message,
    Position,
    ResolvedEvent,
    RowChange,
    TableSchema,
)
from ticdc_lakehouse.core.values import from_decimal

SHARED = Path(__file__).resolve().parents[2] / "shared"
DOCS = SHARED / "ticdc-vectors" / "simple" / "docs"
POS = Position("t", 0, 0)


def decode(decoder, value: bytes):
    [event] = decoder.decode(Message("t", 0, 0, None, value))
    return event


USER = TableSchema(
    schema="simple",
    table="user",
    columns=(
        ColumnSchema("id", "int", nullable=False),
        ColumnSchema("name", "varchar"),
        ColumnSchema("age", "int"),
        ColumnSchema("score", "float"),
    ),
    primary_key=("id",),
    version=447984074911121426,
)


# --- exact wire shape -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, op, after, before",
    [
        ("dml_INSERT.json", INSERT, {"age": "25", "id": "1", "name": "John Doe", "score": "90.5"}, None),
        (
            "dml_UPDATE.json",
            UPDATE,
            {"age": "25", "id": "1", "name": "John Doe", "score": "95.0"},
            {"age": "25", "id": "1", "name": "John Doe", "score": "90.5"},
        ),
        ("dml_DELETE.json", DELETE, None, {"age": "25", "id": "1", "name": "John Doe", "score": "95.0"}),
    ],
)
def test_json_rows_are_byte_for_byte_the_documented_messages(name, op, after, before):
    expected = orjson.loads((DOCS / name).read_bytes())
    row = RowChange(
        schema="simple",
        table="user",
        commit_ts=expected["commitTs"],
        op=op,
        after=after,
        before=before,
        key_columns=("id",),
        column_types=row_column_types(USER),
        position=POS,
        table_id=148,
        schema_version=USER.version,
    )
    key, value = SimpleJsonEncoder(clock=lambda: expected["buildTs"]).encode(row)
    assert key is None
    assert value == orjson.dumps(expected)  # same fields, same order, data keys sorted, FLOAT "95" not "95.0"


def test_json_watermark_and_bootstrap_match_the_documented_messages():
    watermark = orjson.loads((DOCS / "watermark.json").read_bytes())
    encoder = SimpleJsonEncoder(clock=lambda: watermark["buildTs"])
    assert encoder.encode(ResolvedEvent(watermark["commitTs"], POS)) == (None, orjson.dumps(watermark))
    bootstrap = orjson.loads((DOCS / "bootstrap.json").read_bytes())
    decoded = decode(SimpleJsonDecoder(), (DOCS / "bootstrap.json").read_bytes())
    _, value = SimpleJsonEncoder(clock=lambda: bootstrap["buildTs"]).encode(decoded)
    produced = orjson.loads(value)
    # lengths and the table id are not part of the model; everything else is TiCDC's shape
    for column in bootstrap["tableSchema"]["columns"]:
        del column["dataType"]["length"]
    bootstrap["tableSchema"]["tableID"] = 0
    assert produced == bootstrap
    assert list(produced) == list(bootstrap)


def test_json_escapes_like_go_and_sends_timestamps_as_objects():
    table = TableSchema("db", "t", (ColumnSchema("id", "int"), ColumnSchema("ts", "timestamp"),
                                    ColumnSchema("s", "varchar")), ("id",), version=3)
    row = RowChange("db", "t", 10, INSERT, {"id": "1", "ts": "2024-01-01 00:00:00", "s": "<a&b>\u2028"}, None,
                    ("id",), row_column_types(table), POS, table_id=5, schema_version=3)
    _, value = SimpleJsonEncoder(time_zone="Asia/Shanghai", clock=lambda: 1).encode(row)
    assert b"\\u003ca\\u0026b\\u003e\\u2028" in value
    assert orjson.loads(value)["data"]["ts"] == {"location": "Asia/Shanghai", "value": "2024-01-01 00:00:00"}


def test_go_float_text_never_uses_an_exponent():
    assert go_float_text("1e+20") == "100000000000000000000"
    assert go_float_text("95.0") == "95"
    assert go_float_text("1e-05") == "0.00001"
    assert go_float_text("-0.5") == "-0.5"


def test_avro_values_use_the_typed_union_branches():
    table = TableSchema("db", "t", (ColumnSchema("id", "bigint unsigned"), ColumnSchema("e", "enum('x','y')")),
                        ("id",), version=1)
    row = RowChange("db", "t", 10, INSERT, {"id": "18446744073709551615", "e": "y"}, None, ("id",),
                    {"id": "bigint unsigned", "e": "enum('x','y')"}, POS, schema_version=1)
    encoder = SimpleAvroEncoder(clock=lambda: 1)
    decoder = SimpleAvroDecoder()
    decode(decoder, encoder.encode(DDLEvent("db", "t", 0, "", "CREATE_TABLE", POS, table_schema=table,
                                            is_bootstrap=True))[1])
    _, value = encoder.encode(row)
    assert value[0] == 0x16
    event = decode(decoder, value)
    assert event.after == {"id": "18446744073709551615", "e": "2"}  # names go out as the index
    assert event.column_types == {"id": "bigint unsigned", "e": "enum"}


# --- property tests: random events round-trip --------------------------------------------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)
SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)

COLUMN_KINDS = {
    "int": st.integers(-(2**31), 2**31 - 1).map(str),
    "tinyint unsigned": st.integers(0, 255).map(str),
    "bigint": INT64.map(str),
    "bigint unsigned": st.integers(0, 2**64 - 1).map(str),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(float32_text),
    "double": st.floats(allow_nan=False, allow_infinity=False).map(repr),
    "decimal(12,3)": st.decimals(min_value=-(10**9), max_value=10**9, places=3).map(from_decimal),
    "varchar": SAFE_TEXT,
    "text": SAFE_TEXT,
    "json": SAFE_TEXT.map(lambda s: orjson.dumps({"k": s}).decode()),
    "varbinary": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "blob": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "date": st.dates().map(lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}"),
    "datetime": st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f")),
    "timestamp": st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S")),
    "time": st.integers(-838, 838).map(lambda h: f"{h:03d}:59:59"),
    "year": st.integers(1901, 2155).map(str),
    "bit": st.integers(0, 2**64 - 1).map(str),
    "enum": st.integers(1, 3).map(str),
    "set": st.integers(0, 7).map(str),
}


@st.composite
def table_and_rows(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMN_KINDS)), min_size=1, max_size=8))
    columns = [ColumnSchema("pk", "bigint", nullable=False)]
    columns += [ColumnSchema(f"c{i}_{kind.split('(')[0].replace(' ', '_')}", kind) for i, kind in enumerate(kinds)]
    version = draw(st.integers(1, 2**62))
    table = TableSchema(draw(st.sampled_from(["db", "shop"])), draw(st.sampled_from(["t", "orders"])),
                        tuple(columns), ("pk",), version=version)
    types = {c.name: c.mysql_type for c in columns}

    def image():
        values = {"pk": draw(INT64.map(str))}
        for column, kind in zip(columns[1:], kinds):
            values[column.name] = draw(st.none() | COLUMN_KINDS[kind])
        return values

    rows = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from([INSERT, UPDATE, DELETE]))
        after = image() if op != DELETE else None
        before = image() if op != INSERT else None
        rows.append(RowChange(table.schema, table.table, draw(st.integers(0, 2**63 - 1)), op, after, before,
                              ("pk",), types, POS, table_id=draw(st.integers(1, 10**6)), schema_version=version))
    return table, rows


@pytest.mark.parametrize(
    "encoder_class, decoder_class", [(SimpleJsonEncoder, SimpleJsonDecoder), (SimpleAvroEncoder, SimpleAvroDecoder)]
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=table_and_rows())
def test_random_rows_round_trip_after_a_bootstrap(encoder_class, decoder_class, data):
    table, rows = data
    encoder, decoder = encoder_class(clock=lambda: 1), decoder_class()
    bootstrap = DDLEvent(table.schema, table.table, 0, "", "CREATE_TABLE", POS, table_schema=table,
                         is_bootstrap=True)
    assert decode(decoder, encoder.encode(bootstrap)[1]) == bootstrap
    expected_types = row_column_types(table)
    for row in rows:
        event = decode(decoder, encoder.encode(row)[1])
        assert (event.op, event.commit_ts, event.after, event.before) == (row.op, row.commit_ts, row.after,
                                                                          row.before)
        assert event.column_types == {name: expected_types[name] for name in (row.after or row.before)}
        assert event.key_columns == ("pk",)
        assert (event.table_id, event.schema_version) == (row.table_id, row.schema_version)


DDL_QUERIES = {
    "CREATE_TABLE": "CREATE TABLE `t` (`pk` bigint PRIMARY KEY)",
    "ADD_COLUMN": "ALTER TABLE `t` ADD COLUMN `c` int",
    "DROP_COLUMN": "ALTER TABLE `t` DROP COLUMN `c`",
    "MODIFY_COLUMN": "ALTER TABLE `t` MODIFY COLUMN `c` bigint",
    "RENAME_COLUMN": "ALTER TABLE `t` RENAME COLUMN `c` TO `d`",
    "SET_DEFAULT": "ALTER TABLE `t` ALTER COLUMN `c` SET DEFAULT 1",
    "ADD_INDEX": "CREATE INDEX `i` ON `t` (`c`)",
    "DROP_INDEX": "DROP INDEX `i` ON `t`",
    "TRUNCATE_TABLE": "TRUNCATE TABLE `t`",
    "DROP_TABLE": "DROP TABLE `t`",
    "RENAME_TABLE": "RENAME TABLE `t` TO `u`",
}


@pytest.mark.parametrize("encoder_class, decoder_class",
                         [(SimpleJsonEncoder, SimpleJsonDecoder), (SimpleAvroEncoder, SimpleAvroDecoder)])
@settings(max_examples=40, deadline=None)
@given(data=table_and_rows(), ddl_type=st.sampled_from(sorted(DDL_QUERIES)), ts=st.integers(1, 2**63 - 1),
       watermark=st.integers(0, 2**63 - 1))
def test_random_ddls_and_watermarks_round_trip(encoder_class, decoder_class, data, ddl_type, ts, watermark):
    table, _ = data
    encoder, decoder = encoder_class(clock=lambda: 1), decoder_class()
    ddl = DDLEvent(table.schema, table.table, ts, DDL_QUERIES[ddl_type], ddl_type, POS, table_schema=table,
                   pre_table_schema=table)
    assert decode(decoder, encoder.encode(ddl)[1]) == ddl
    assert decode(decoder, encoder.encode(ResolvedEvent(watermark, POS))[1]) == ResolvedEvent(watermark, POS)


# --- the typed path of JSON DML messages agrees with the reference path ---------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=6), inner, max_size=2),
    max_leaves=4,
)
DML_MEMBERS = ["version", "database", "table", "tableID", "type", "commitTs", "buildTs", "schemaVersion", "data",
               "old", "handleKeyOnly", "claimCheckLocation", "checksum", "other"]


def _outcome(decode_one, value: bytes):
    """The event, or the error a caller would dead-letter."""
    try:
        return decode_one(Message("t", 0, 5, None, value))
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc).__name__, str(exc)


@st.composite
def mutated_dml(draw, value: bytes) -> bytes:
    """A DML message with members replaced, removed or added, row values retyped, or its bytes edited."""
    message = orjson.loads(value)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.integers(0, 4))
        member = draw(st.sampled_from(DML_MEMBERS))
        if action == 0:
            message[member] = draw(JSON_VALUES)
        elif action == 1:
            message.pop(member, None)
        elif action == 2 and isinstance(message.get("data"), dict) and message["data"]:
            column = draw(st.sampled_from(sorted(message["data"])))
            message["data"][column] = draw(JSON_VALUES | st.fixed_dictionaries(
                {"location": st.text(max_size=3), "value": JSON_VALUES}))
        elif action == 3:
            message[member] = draw(st.sampled_from([True, False, 0, "", "x", -1, 2**63, 2**64 - 1, None, {}]))
        else:
            message["checksum"] = {"version": 0, "corrupted": draw(st.booleans()), "current": 1, "previous": 2}
    raw = orjson.dumps(message)
    if draw(st.booleans()):
        edit = draw(st.integers(0, len(raw) - 1))
        raw = raw[:edit] + draw(st.sampled_from(
            [b"", b"\xff", b"\\ud800", b'"', b"1e400", b" ", b"}", b"18446744073709551616", b"9223372036854775808",
             b"-0", b"1.0"])) + raw[edit + 1:]
    if draw(st.booleans()):  # a duplicate member: the last one wins in both parsers, or both reject it
        raw = raw[:-1] + b',"' + draw(st.sampled_from(DML_MEMBERS)).encode() + b'":' + orjson.dumps(
            draw(JSON_VALUES)) + b"}"
    return raw


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=table_and_rows(), bootstrap=st.booleans(), draw=st.data())
def test_typed_dml_path_agrees_with_the_reference_path(data, bootstrap, draw):
    """Every DML message, as encoded or mutated, decodes to the same event or the same error both ways."""
    table, rows = data
    encoder = SimpleJsonEncoder(clock=lambda: 1)
    typed, reference = SimpleJsonDecoder(), SimpleJsonDecoder()
    if bootstrap:
        schema = DDLEvent(table.schema, table.table, 0, "", "CREATE_TABLE", POS, table_schema=table, is_bootstrap=True)
        for decoder in (typed, reference):
            decode(decoder, encoder.encode(schema)[1])
    def reference_decode(message: Message):
        return super(SimpleJsonDecoder, reference).decode(message)  # the dict path alone

    for row in rows:
        value = encoder.encode(row)[1]
        for variant in [value] + [draw.draw(mutated_dml(value)) for _ in range(4)]:
            assert _outcome(typed.decode, variant) == _outcome(reference_decode, variant), variant
