"""Canal-JSON decoder against TiCDC's test strings, golden JSON and documented encodings."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import orjson
import pytest

from ticdc_lakehouse.decode import decode_safely, make_decoder
from ticdc_lakehouse.decode.canal_json import CanalJsonDecoder
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
CANAL = SHARED / "ticdc-vectors" / "canal-json"


def message(value: bytes | None, offset: int = 0) -> Message:
    return Message(topic="canal", partition=2, offset=offset, key=None, value=value)


def decode(value: bytes, decoder: CanalJsonDecoder | None = None) -> list:
    return decode_safely(decoder or CanalJsonDecoder(), message(value))


def dml(**fields) -> bytes:
    base = {"id": 0, "database": "db", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
            "es": 1700000000000, "ts": 1700000000001, "sql": "", "sqlType": {}, "mysqlType": {"id": "int"},
            "data": [{"id": "1"}], "old": None}
    base.update(fields)
    return orjson.dumps(base)


def test_terminator_separated_batch_yields_the_three_row_events():
    """tiflow TestCanalJSONBatchDecoderWithTerminator: INSERT, UPDATE, DELETE of test.employee."""
    events = decode((CANAL / "tiflow_TestCanalJSONBatchDecoderWithTerminator.value.txt").read_bytes())
    assert [type(e) for e in events] == [RowChange] * 3
    insert, update, delete = events
    assert [e.op for e in events] == [INSERT, UPDATE, DELETE]
    assert [e.position.seq for e in events] == [0, 1, 2]
    assert insert.after == {"FirstName": "Bob", "HireDate": "2014-06-04", "LastName": "Smith",
                            "OfficeLocation": "New York", "id": "101"}
    assert update.before["OfficeLocation"] == "New York" and update.after["OfficeLocation"] == "Los Angeles"
    assert delete.after is None and delete.before["HireDate"] == "2015-10-08"
    assert insert.column_types == {"FirstName": "varchar", "HireDate": "date", "LastName": "varchar",
                                   "OfficeLocation": "varchar", "id": "int"}
    assert all(e.key_columns == ("id",) and (e.schema, e.table) == ("test", "employee") for e in events)
    # no _tidb extension: the commit ts is es << 18, the TSO of the commit's millisecond
    assert insert.commit_ts == 1668067205238 << 18


def test_tibigdata_message_is_an_insert_with_the_tidb_commit_ts():
    [event] = decode((CANAL / "tibigdata_TiDBCanalJsonDeserializationSchemaTest_testIgnoreCase.json").read_bytes())
    assert event.op == INSERT and event.after == {"Name": "zs", "id": "1"}
    assert event.commit_ts == 437430669647544322
    assert event.commit_ts >> 18 == 1668665579405  # es agrees with the TSO
    assert event.column_types == {"Name": "varchar", "id": "bigint"}


def test_watermark_is_a_resolved_event():
    [event] = decode((CANAL / "tiflow_TestCheckpointEventValueMarshal.expected.json").read_bytes())
    assert isinstance(event, ResolvedEvent) and event.ts == 1024


def test_ddl_with_extension():
    [event] = decode((CANAL / "tiflow_TestDDLEventWithExtensionValueMarshal.expected.json").read_bytes())
    assert isinstance(event, DDLEvent)
    assert (event.schema, event.table, event.commit_ts) == ("cdc", "person", 417318403368288260)
    assert event.query.startswith("create table person(") and event.ddl_type == "CREATE_TABLE"
    assert event.commit_ts >> 18 == 1591943372224  # the golden es


def test_drop_database_docs_example():
    text = (CANAL / "docs" / "ddl_event.jsonc").read_text()
    value = text.replace("// TiDB 的扩展字段", "").replace("// TiDB TSO 时间戳", "")
    [event] = decode(value.encode())
    assert (event.schema, event.table, event.ddl_type, event.commit_ts) == ("test", "", "DROP_SCHEMA",
                                                                            429918007904436226)


def test_latin1_varbinary_becomes_base64_of_the_original_bytes():
    example = orjson.loads((CANAL / "docs" / "varbinary_latin1_example.json").read_bytes())
    literal = example["json_string_literal_verbatim"]
    value = dml(mysqlType={"id": "int", "c_varbinary": "varbinary"},
                data=[{"id": "1"}]).replace(b'"data":[{"id":"1"}]',
                                            b'"data":[{"id":"1","c_varbinary":' + literal.encode() + b"}]")
    [event] = decode(value)
    assert base64.b64decode(event.after["c_varbinary"]) == bytes(example["raw_bytes"])
    assert event.column_types["c_varbinary"] == "varbinary"


def test_types_come_from_mysql_type_not_sql_type():
    value = dml(
        sqlType={"u": -5, "big": 3, "e": 4, "s": -7, "b": -7, "d": 3, "f": 7, "blob": 2004},
        mysqlType={"id": "int", "u": "int unsigned", "big": "bigint unsigned", "e": "enum", "s": "set",
                   "b": "bit", "d": "decimal(10,4)", "f": "float", "blob": "tinyblob"},
        data=[{"id": "1", "u": "2147483648", "big": "18446744073709551615", "e": "2", "s": "3", "b": "65",
               "d": "1.5000", "f": "3.14", "blob": "\u00ff\u0000"}],
    )
    [event] = decode(value)
    assert event.column_types == {"id": "int", "u": "int unsigned", "big": "bigint unsigned", "e": "enum",
                                  "s": "set", "b": "bit", "d": "decimal(10,4)", "f": "float",
                                  "blob": "tinyblob"}
    assert event.after == {"id": "1", "u": "2147483648", "big": "18446744073709551615", "e": "2", "s": "3",
                           "b": "65", "d": "1.5000", "f": "3.14", "blob": "/wA="}


def test_content_compatible_full_types_are_normalized_and_enum_stays_an_index():
    value = dml(mysqlType={"id": "int(11) unsigned zerofill", "e": "enum('a','b')", "v": "varchar(255)"},
                data=[{"id": "7", "e": "1", "v": "x"}])
    [event] = decode(value)
    assert event.column_types == {"id": "int unsigned", "e": "enum", "v": "varchar"}


def test_update_with_only_changed_old_columns_is_completed_from_data():
    value = dml(type="UPDATE", mysqlType={"id": "int", "a": "varchar", "b": "varchar"},
                data=[{"id": "1", "a": "new", "b": "same"}], old=[{"a": "old"}],
                _tidb={"commitTs": 99})
    [event] = decode(value)
    assert event.before == {"id": "1", "a": "old", "b": "same"}
    assert event.after == {"id": "1", "a": "new", "b": "same"}
    assert event.commit_ts == 99


def test_nulls_are_kept():
    [event] = decode(dml(mysqlType={"id": "int", "x": "double"}, data=[{"id": "1", "x": None}]))
    assert event.after == {"id": "1", "x": None}


@pytest.mark.parametrize(
    "tidb, reason", [({"commitTs": 1, "onlyHandleKey": True}, "onlyHandleKey"),
                     ({"claimCheckLocation": "s3://b/k"}, "claim-check")]
)
def test_large_message_handles_are_dead_lettered(tidb, reason):
    [failure] = decode(dml(_tidb=tidb))
    assert isinstance(failure, DecodeFailure) and reason in failure.reason
    assert (failure.position.partition, failure.position.offset) == (2, 0)


def test_watermark_without_extension_is_an_error():
    [failure] = decode(orjson.dumps({"isDdl": False, "type": "TIDB_WATERMARK", "es": 1}))
    assert isinstance(failure, DecodeFailure) and "watermarkTs" in failure.reason


def test_column_without_mysql_type_is_an_error():
    [failure] = decode(dml(data=[{"id": "1", "ghost": "x"}]))
    assert isinstance(failure, DecodeFailure) and "ghost" in failure.reason


def test_registered_and_picklable():
    decoder = make_decoder("canal-json")
    decode(dml(), decoder)
    assert isinstance(pickle.loads(pickle.dumps(decoder)), CanalJsonDecoder)


@pytest.mark.parametrize("codec", ["none", "lz4", "snappy"])  # large-message-handle-compression
def test_truncated_and_corrupted_messages_never_raise(codec):
    from ticdc_lakehouse.decode.large_messages import compress

    decoder = _large(codec)
    samples = [compress(codec, value) for value in (
        (CANAL / "tiflow_TestCanalJSONBatchDecoderWithTerminator.value.txt").read_bytes(),
        (CANAL / "tiflow_TestCheckpointEventValueMarshal.expected.json").read_bytes(),
        (CANAL / "tiflow_TestDDLEventWithExtensionValueMarshal.expected.json").read_bytes(),
        dml(mysqlType={"id": "int", "b": "varbinary", "f": "float"}, data=[{"id": "1", "b": "\u00ff", "f": "1"}]),
    )]
    checked = 0
    for value in samples:
        variants = [value[:cut] for cut in range(0, len(value), max(1, len(value) // 50))]
        for i in range(0, len(value), max(1, len(value) // 40)):
            for byte in (0x00, 0xFF, ord("\n"), ord("}"), ord('"'), ord("1")):
                variants.append(value[:i] + bytes([byte]) + value[i + 1 :])
        for variant in variants + [b"", b"null", b"[1]", b'{"data": {}}', b"{}\n{}"]:
            events = decode_safely(decoder, message(variant))
            assert events
            assert all(isinstance(e, (DecodeFailure, RowChange, DDLEvent, ResolvedEvent)) for e in events)
            checked += 1
    assert checked > 500


# --- large messages: large-message-handle-compression and claim-check --------------------------------------------


def _large(compression: str, uri: str = "", raw_value: bool = False) -> CanalJsonDecoder:
    from ticdc_lakehouse.decode import DecoderOptions
    from ticdc_lakehouse.decode.large_messages import LargeMessageOptions

    return CanalJsonDecoder(DecoderOptions(large_messages=LargeMessageOptions(compression, uri, raw_value)))


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_compressed_messages_decode_like_plain_ones(codec):
    from ticdc_lakehouse.decode.large_messages import compress

    value = dml(_tidb={"commitTs": 9}, data=[{"id": "7"}])
    assert decode(compress(codec, value), _large(codec)) == decode(value)


@pytest.mark.parametrize("raw_value", [False, True])
def test_a_claim_checked_row_is_read_from_the_claim_check_storage(raw_value, tmp_path):
    from ticdc_lakehouse.decode.large_messages import compress

    full = compress("lz4", dml(_tidb={"commitTs": 9}, data=[{"id": "7"}]))
    stored = full if raw_value else orjson.dumps({"key": None, "value": base64.b64encode(full).decode()})
    (tmp_path / "r9.json").write_bytes(stored)
    pointer = compress("lz4", dml(_tidb={"commitTs": 9, "claimCheckLocation": "s3:/b/r9.json"}, data=[{"id": "7"}]))
    [event] = decode(pointer, _large("lz4", f"file://{tmp_path}", raw_value))
    assert isinstance(event, RowChange) and event.after == {"id": "7"} and event.commit_ts == 9
    assert (event.position.partition, event.position.offset) == (2, 0)


@pytest.mark.parametrize("pk_names", [[], None])
def test_a_table_without_a_primary_key_is_a_row_without_key_columns(pk_names):
    """TiCDC writes ``"pkNames": []`` for every table without a PRIMARY KEY (its handle a NOT NULL UNIQUE key, or
    none): a row like any other, keyed later by the lake table's handle (or its whole row)."""
    [event] = decode(dml(pkNames=pk_names))
    assert type(event) is RowChange and event.key_columns == () and event.after == {"id": "1"}


def test_a_ts_without_the_tidb_extension_is_marked_made_up():
    """``es`` is milliseconds: two transactions may share it, so the merge must not treat it as one TSO."""
    [plain] = decode(dml())
    [tso] = decode(dml(_tidb={"commitTs": 42}))
    assert (plain.commit_ts, plain.ts_made_up) == (1700000000000 << 18, True)
    assert (tso.commit_ts, tso.ts_made_up) == (42, False)
