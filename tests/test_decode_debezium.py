"""Debezium decoder against TiCDC's golden key/value JSON and the Debezium-MySQL golden data-type file."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

from ticdc_lakehouse.decode import decode_safely, make_decoder
from ticdc_lakehouse.decode.debezium import DebeziumDecoder
from ticdc_lakehouse.core.model import (
    DELETE,
    INSERT,
    UPDATE,
    DDLEvent,
    DecodeFailure,
    Message,
    ResolvedEvent,
    RowChange,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
DBZ = SHARED / "ticdc-vectors" / "debezium"
REPOS = ["tiflow", "ticdc"]


def pair(name: str) -> tuple[bytes, bytes]:
    return (DBZ / f"{name}.key.json").read_bytes(), (DBZ / f"{name}.value.json").read_bytes()


def decode_pair(name: str, decoder: DebeziumDecoder | None = None) -> list:
    key, value = pair(name)
    return decode_safely(decoder or DebeziumDecoder(), Message("dbz", 0, 7, key, value))


@pytest.mark.parametrize("repo", REPOS)
def test_checkpoint_is_a_resolved_event(repo):
    [event] = decode_pair(f"{repo}_TestCheckPointEvent_1")
    assert isinstance(event, ResolvedEvent) and event.ts == 3


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("n", [1, 2])
def test_insert(repo, n):
    [event] = decode_pair(f"{repo}_TestEncodeInsert_{n}")
    assert isinstance(event, RowChange)
    assert (event.schema, event.table, event.op, event.commit_ts) == ("test", "table1", INSERT, 1)
    assert event.after == {"tiny": "1"} and event.before is None
    assert event.key_columns == ("tiny",)
    # _1 has the schema disabled: no types; _2 carries the Connect schema (TINYINT is int16)
    assert event.column_types == ({} if n == 1 else {"tiny": "smallint"})


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("n, before", [(1, {"tiny": "2"}), (2, {"tiny": "2"}), (3, None)])
def test_update(repo, n, before):
    [event] = decode_pair(f"{repo}_TestEncodeUpdate_{n}")
    assert event.op == UPDATE and event.after == {"tiny": "1"} and event.before == before
    assert event.key_columns == ("tiny",)


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("n", [1, 2])
def test_delete(repo, n):
    [event] = decode_pair(f"{repo}_TestEncodeDelete_{n}")
    assert event.op == DELETE and event.after is None and event.before == {"tiny": "2"}
    assert event.commit_ts == 1 and not event.ts_made_up  # TiCDC's source.commit_ts: a real TSO


@pytest.mark.parametrize("repo", REPOS)
def test_ddl_messages(repo):
    [rename] = decode_pair(f"{repo}_TestDDLEvent_1")
    [create] = decode_pair(f"{repo}_TestDDLEvent_2")
    [drop] = decode_pair(f"{repo}_TestDDLEvent_3")
    assert isinstance(rename, DDLEvent)
    assert rename.query == "RENAME TABLE test.table1 to test.table2" and rename.ddl_type == "RENAME_TABLE"
    assert rename.table == ("table2" if repo == "ticdc" else "table1")  # the two repos disagree here
    assert create.ddl_type == "CREATE_TABLE" and create.query.startswith("CREATE TABLE test.table1")
    assert [(c.name, c.mysql_type, c.nullable) for c in create.table_schema.columns] == [("id", "int", False)]
    assert create.table_schema.primary_key == ("id",)
    assert (drop.ddl_type, drop.table, drop.table_schema) == ("DROP_TABLE", "table2", None)
    assert all(e.commit_ts == 1 and e.schema == "test" for e in (rename, create, drop))


def test_schema_less_rows_are_typed_from_the_last_ddl_of_their_table():
    decoder = DebeziumDecoder()
    ddl = {
        "payload": {
            "source": {"db": "shop", "table": "orders", "commit_ts": 10},
            "ddl": "CREATE TABLE orders (id bigint unsigned primary key, d date, dt datetime(6), b bit(8), "
            "e enum('x','y'), amount decimal(10,2))",
            "databaseName": "shop",
            "tableChanges": [
                {
                    "type": "CREATE",
                    "id": '"shop"."orders"',
                    "table": {
                        "primaryKeyColumnNames": ["id"],
                        "columns": [
                            {"name": "id", "typeName": "BIGINT UNSIGNED", "length": None, "optional": False},
                            {"name": "d", "typeName": "DATE", "optional": True},
                            {"name": "dt", "typeName": "DATETIME", "length": 6, "optional": True},
                            {"name": "b", "typeName": "BIT", "length": 8, "optional": True},
                            {"name": "e", "typeName": "ENUM", "enumValues": ["'x'", "'y'"], "optional": True},
                            {"name": "amount", "typeName": "DECIMAL", "length": 10, "scale": 2.0},
                        ],
                    },
                }
            ],
        }
    }
    [event] = decoder.decode(Message("dbz", 0, 0, b'{"payload":{"databaseName":"shop"}}', orjson.dumps(ddl)))
    assert [c.mysql_type for c in event.table_schema.columns] == [
        "bigint unsigned", "date", "datetime", "bit", "enum('x','y')", "decimal(10,2)"]
    row = {"payload": {"source": {"db": "shop", "table": "orders", "commit_ts": 11}, "op": "c", "before": None,
                       "after": {"id": -1, "d": 19691, "dt": 1701347696123456, "b": "EA==", "e": "y",
                                 "amount": 12.5}}}
    [insert] = decoder.decode(Message("dbz", 0, 1, b'{"payload":{"id":-1}}', orjson.dumps(row)))
    assert insert.after == {"id": "18446744073709551615", "d": "2023-11-30", "dt": "2023-11-30 12:34:56.123456",
                            "b": "16", "e": "y", "amount": "12.5"}
    assert insert.column_types["dt"] == "datetime" and insert.key_columns == ("id",)


def test_golden_debezium_datatypes():
    """Debezium 2.4 MySQL output for every type (what TiCDC's encoder must reproduce)."""
    key = (DBZ / "datatype.dbz.key.json").read_bytes()
    value = (DBZ / "datatype.dbz.json").read_bytes()
    [event] = decode_safely(DebeziumDecoder(), Message("dbz", 0, 0, key, value))
    after, types = event.after, event.column_types
    assert event.op == INSERT and event.key_columns == ("pk",)
    assert event.commit_ts == 1701673705000 << 18  # plain Debezium: no commit_ts, source.ts_ms
    assert event.ts_made_up  # milliseconds: the merge keeps Kafka order at one such ts
    expected = {
        "pk": "1",
        "col_d_2023": "2023-11-30",
        "col_d_1000": "1000-01-01",
        "col_d_9999": "9999-12-31",
        "col_d_0000": None,
        "col_dt": "2023-11-30 12:34:56",
        "col_dt_fsp_1": "2023-11-30 12:34:56.1",
        "col_dt_fsp_4": "2023-11-30 12:34:56.1235",
        "col_dt_fsp_6": "2023-11-30 12:34:56.123456",
        "col_dt_0000": None,
        "col_t": "12:34:56",
        "col_t_fsp_4": "12:34:56.1235",
        "col_t_neg": "-12:34:56.123456",
        "col_ts": "2023-11-30 12:34:56",
        "col_ts_fsp_5": "2023-11-30 12:34:56.12346",
        "col_y": "2023",
        "col_bit_1": "1",
        "col_bit_5": "16",
        "col_bit_60": "16",
        "col_varchar": "foo",
        "col_binary": "Zm9v" + "A" * 130 + "==",
        "col_blob": "Zm9v",
        "col_decimal": "12345.12345",
        "col_float": "12345.123",
        "col_double": "12345.12345",
        "col_int_unsigned": "4294967295",
        "col_bigint": "-9223372036854775808",
        "col_bigint_unsigned": "-1",  # plain Debezium schemas do not say unsigned; TiCDC's tidb_type does
        "col_enum": "a",
        "col_enum_invalid": "",
        "col_set": "a,b",
        "col_json": '["foo"]',
    }
    assert {name: after[name] for name in expected} == expected
    assert types["col_d_2023"] == "date" and types["col_dt_fsp_6"] == "datetime" and types["col_t"] == "time"
    assert types["col_ts"] == "timestamp" and types["col_bit_5"] == "bit(5)" and types["col_json"] == "json"
    assert types["col_enum"] == "enum('a','b','c')" and types["col_set"] == "set('a','b','c')"


def test_tidb_type_extension_recovers_unsigned_and_binary():
    schema_fields = [
        {"type": "int64", "optional": True, "field": "u", "tidb_type": "bigint unsigned"},
        {"type": "string", "optional": True, "field": "bin", "tidb_type": "varbinary"},
        {"type": "double", "optional": True, "field": "dec", "tidb_type": "decimal"},
        {"type": "float", "optional": True, "field": "f", "tidb_type": "float"},
    ]
    value = {
        "payload": {"source": {"db": "d", "table": "t", "commit_ts": 5}, "op": "u",
                    "before": {"u": 1, "bin": "AA==", "dec": 1e-05, "f": 0.1},
                    "after": {"u": -2, "bin": "AQ==", "dec": 2.5, "f": 1.5}},
        "schema": {"type": "struct", "fields": [
            {"type": "struct", "field": "before", "fields": schema_fields},
            {"type": "struct", "field": "after", "fields": schema_fields}]},
    }
    [event] = decode_safely(DebeziumDecoder(), Message("dbz", 0, 0, None, orjson.dumps(value)))
    assert event.after == {"u": "18446744073709551614", "bin": "AQ==", "dec": "2.5", "f": "1.5"}
    assert event.before == {"u": "1", "bin": "AA==", "dec": "0.00001", "f": "0.1"}
    assert event.column_types == {"u": "bigint unsigned", "bin": "varbinary", "dec": "decimal", "f": "float"}


def test_tombstone_is_no_event():
    assert decode_safely(DebeziumDecoder(), Message("dbz", 0, 9, b'{"payload":{"id":1}}', None)) == []


def test_unknown_op_is_dead_lettered():
    value = orjson.dumps({"payload": {"op": "x", "source": {"db": "d", "table": "t", "commit_ts": 1}}})
    [failure] = decode_safely(DebeziumDecoder(), Message("dbz", 0, 9, None, value))
    assert isinstance(failure, DecodeFailure) and "'x'" in failure.reason


def test_registered_and_picklable():
    decoder = make_decoder("debezium")
    decode_pair("ticdc_TestDDLEvent_2", decoder)
    assert pickle.loads(pickle.dumps(decoder))._ddl_plans


def test_truncated_and_corrupted_messages_never_raise():
    decoder = DebeziumDecoder()
    names = ["ticdc_TestEncodeUpdate_2", "ticdc_TestDDLEvent_1", "ticdc_TestCheckPointEvent_1",
             "tiflow_TestEncodeDelete_1"]
    samples = [pair(name) for name in names]
    samples.append(((DBZ / "datatype.dbz.key.json").read_bytes(), (DBZ / "datatype.dbz.json").read_bytes()))
    checked = 0
    for key, value in samples:
        variants = [value[:cut] for cut in range(1, len(value), max(1, len(value) // 40))]
        for i in range(0, len(value), max(1, len(value) // 40)):
            for byte in (0x00, 0xFF, ord("}"), ord('"'), ord("-"), ord("t")):
                variants.append(value[:i] + bytes([byte]) + value[i + 1 :])
        for variant in variants + [b"null", b"{}", b'{"payload": []}']:
            for k in (key, key[: len(key) // 2]):
                events = decode_safely(decoder, Message("dbz", 0, 0, k, variant))
                assert events
                assert all(isinstance(e, (DecodeFailure, RowChange, DDLEvent, ResolvedEvent)) for e in events)
                checked += 1
    assert checked > 500
