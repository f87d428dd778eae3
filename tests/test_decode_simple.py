"""Simple protocol decoders (JSON and Avro) against the documented messages and TiCDC's wire rules."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import fastavro
import orjson
import pytest

from ticdc_lakehouse.decode import DecoderOptions, decode_safely, make_decoder
from ticdc_lakehouse.decode.simple import SCHEMA_FILE, SimpleAvroDecoder, SimpleJsonDecoder, row_column_types
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
SIMPLE = SHARED / "ticdc-vectors" / "simple"
DOCS = SIMPLE / "docs"
NS = "com.pingcap.simple.avro."


def message(value: bytes | None, offset: int = 0, key: bytes | None = None) -> Message:
    return Message(topic="simple", partition=0, offset=offset, key=key, value=value)


def doc(name: str) -> dict:
    return orjson.loads((DOCS / name).read_bytes())


def decode_one(decoder, value: bytes, offset: int = 0):
    events = decode_safely(decoder, message(value, offset))
    assert len(events) == 1
    return events[0]


# --- Avro test messages: the documented JSON re-expressed in the official Avro schema ---------------------------

PARSED = fastavro.parse_schema(orjson.loads(SCHEMA_FILE.read_bytes()))


def avro_table_schema(table: dict) -> dict:
    columns = []
    for column in table["columns"]:
        data_type = column["dataType"]
        columns.append(
            {
                "name": column["name"],
                "dataType": {
                    "mysqlType": data_type["mysqlType"],
                    "charset": data_type["charset"],
                    "collate": data_type["collate"],
                    "length": data_type.get("length", 0),
                    "decimal": data_type.get("decimal"),
                    "elements": data_type.get("elements"),
                    "unsigned": data_type.get("unsigned"),
                    "zerofill": data_type.get("zerofill"),
                },
                "nullable": column["nullable"],
                "default": None if column["default"] is None else str(column["default"]),
            }
        )
    return {
        "database": table["schema"],
        "table": table["table"],
        "tableID": table["tableID"],
        "version": table["version"],
        "columns": columns,
        "indexes": table["indexes"],
    }


def avro_message(kind: str, payload_type: str, payload: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED, (NS + "Message", {"type": kind, "payload": (NS + payload_type, payload)}))
    return out.getvalue()


def avro_from_doc(name: str) -> bytes:
    """The docs' JSON example as the Avro message TiCDC writes for the same event."""
    d = doc(name)
    if d["type"] == "WATERMARK":
        return avro_message("WATERMARK", "Watermark", {k: d[k] for k in ("version", "commitTs", "buildTs")})
    if d["type"] == "BOOTSTRAP":
        payload = {"version": 1, "buildTs": d["buildTs"], "tableSchema": avro_table_schema(d["tableSchema"])}
        return avro_message("BOOTSTRAP", "Bootstrap", payload)
    if "sql" in d:
        payload = {
            "version": 1,
            "type": d["type"],
            "sql": d["sql"],
            "commitTs": d["commitTs"],
            "buildTs": d["buildTs"],
            "tableSchema": avro_table_schema(d["tableSchema"]),
            "preTableSchema": avro_table_schema(d["preTableSchema"]),
        }
        return avro_message("DDL", "DDL", payload)
    typed = {"age": ("long", 25), "id": ("long", 1), "name": ("string", "John Doe")}

    def row(values: dict) -> dict:
        out = {k: typed[k] for k in values if k in typed}
        out["score"] = ("float", float(values["score"]))
        return out

    payload = {
        "version": 1,
        "database": d["database"],
        "table": d["table"],
        "tableID": d["tableID"],
        "type": d["type"],
        "commitTs": d["commitTs"],
        "buildTs": d["buildTs"],
        "schemaVersion": d["schemaVersion"],
        "data": row(d["data"]) if "data" in d else None,
        "old": row(d["old"]) if "old" in d else None,
    }
    return avro_message("DML", "DML", payload)


JSON_AND_AVRO = [
    pytest.param(lambda: SimpleJsonDecoder(), lambda name: (DOCS / name).read_bytes(), id="json"),
    pytest.param(lambda: SimpleAvroDecoder(), avro_from_doc, id="avro"),
]


# --- the documented messages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, load", JSON_AND_AVRO)
def test_watermark_is_a_resolved_event(make, load):
    event = decode_one(make(), load("watermark.json"))
    assert event == ResolvedEvent(ts=447984124732375041, position=event.position)


@pytest.mark.parametrize("make, load", JSON_AND_AVRO)
def test_bootstrap_is_a_create_table_with_the_schema_and_no_query(make, load):
    event = decode_one(make(), load("bootstrap.json"))
    assert isinstance(event, DDLEvent)
    assert (event.schema, event.table, event.commit_ts, event.query) == ("simple", "new_user", 0, "")
    assert event.is_bootstrap and event.ddl_type == "CREATE_TABLE"
    table = event.table_schema
    assert [(c.name, c.mysql_type, c.nullable) for c in table.columns] == [
        ("id", "int", False),
        ("name", "varchar", True),
        ("age", "int", True),
        ("score", "float", True),
    ]
    assert table.primary_key == ("id",)
    assert table.version == 447984074911121426


@pytest.mark.parametrize("make, load", JSON_AND_AVRO)
def test_alter_ddl_carries_both_schemas_and_a_precise_type(make, load):
    event = decode_one(make(), load("ddl_ALTER.json"))
    assert isinstance(event, DDLEvent)
    assert event.query == "ALTER TABLE `user` ADD COLUMN `createTime` TIMESTAMP"
    assert event.ddl_type == "ADD_COLUMN"
    assert (event.schema, event.table, event.commit_ts) == ("simple", "user", 447987408682614795)
    assert [c.name for c in event.table_schema.columns][-1] == "createTime"
    assert event.table_schema.columns[-1].mysql_type == "timestamp"
    assert len(event.pre_table_schema.columns) == 4
    assert event.pre_table_schema.version == 447984074911121426
    assert not event.is_bootstrap


@pytest.mark.parametrize("make, load", JSON_AND_AVRO)
def test_dml_before_any_schema_is_emitted_untyped_with_its_schema_version(make, load):
    event = decode_one(make(), load("dml_INSERT.json"))
    assert isinstance(event, RowChange)
    assert (event.schema, event.table, event.op, event.commit_ts) == ("simple", "user", INSERT, 447984084414103554)
    assert event.after == {"age": "25", "id": "1", "name": "John Doe", "score": "90.5"}
    assert event.before is None
    assert event.column_types == {} and event.key_columns == ()
    assert event.schema_version == 447984074911121426
    assert event.table_id == 148


@pytest.mark.parametrize("make, load", JSON_AND_AVRO)
def test_dml_is_typed_once_a_ddl_cached_its_schema_version(make, load):
    decoder = make()
    # the ALTER carries preTableSchema at version ...426, the version the DML messages were written with
    decode_one(decoder, load("ddl_ALTER.json"))
    insert = decode_one(decoder, load("dml_INSERT.json"), 1)
    update = decode_one(decoder, load("dml_UPDATE.json"), 2)
    delete = decode_one(decoder, load("dml_DELETE.json"), 3)
    types = {"id": "int", "name": "varchar", "age": "int", "score": "float"}
    assert insert.column_types == types and insert.key_columns == ("id",)
    assert update.op == UPDATE
    assert update.after == {"age": "25", "id": "1", "name": "John Doe", "score": "95.0"}  # FLOAT "95" -> repr
    assert update.before == {"age": "25", "id": "1", "name": "John Doe", "score": "90.5"}
    assert delete.op == DELETE and delete.after is None
    assert delete.before == {"age": "25", "id": "1", "name": "John Doe", "score": "95.0"}
    assert delete.column_types == types


def test_bootstrap_of_another_table_does_not_type_rows_of_this_one():
    decoder = SimpleJsonDecoder()
    decode_one(decoder, (DOCS / "bootstrap.json").read_bytes())  # new_user
    insert = decode_one(decoder, (DOCS / "dml_INSERT.json").read_bytes())  # user
    assert insert.column_types == {}


# --- JSON value forms --------------------------------------------------------------------------------------------


def rich_table_schema(version: int = 7) -> dict:
    def col(name, mysql_type, **extra):
        data_type = {"mysqlType": mysql_type, "charset": "binary", "collate": "binary", **extra}
        return {"name": name, "dataType": data_type, "nullable": True, "default": None}

    return {
        "schema": "db",
        "table": "t",
        "tableID": 9,
        "version": version,
        "columns": [
            col("id", "bigint", length=20, unsigned=True),
            col("amount", "decimal", length=10, decimal=2),
            col("whole", "decimal", length=12),
            col("kind", "enum", elements=["a", "b'c"]),
            col("tags", "set", elements=["x", "y"]),
            col("ts", "timestamp", length=19),
            col("raw", "varbinary", length=16),
            col("flag", "bit", length=1),
            col("ratio", "double"),
            {"name": "n", "dataType": {"mysqlType": "int", "charset": "binary", "collate": "binary", "length": 11},
             "nullable": False, "default": 5},
        ],
        "indexes": [{"name": "uk", "unique": True, "primary": False, "nullable": False, "columns": ["id"]}],
    }


def test_table_schema_descriptors_are_built_from_data_type_parts():
    value = orjson.dumps({"version": 1, "type": "BOOTSTRAP", "commitTs": 0, "buildTs": 1,
                          "tableSchema": rich_table_schema()})
    table = decode_one(SimpleJsonDecoder(), value).table_schema
    assert {c.name: c.mysql_type for c in table.columns} == {
        "id": "bigint unsigned",
        "amount": "decimal(10,2)",
        "whole": "decimal(12,0)",
        "kind": "enum('a','b''c')",
        "tags": "set('x','y')",
        "ts": "timestamp",
        "raw": "varbinary",
        "flag": "bit(1)",  # BIT keeps its width
        "ratio": "double",
        "n": "int",
    }
    assert table.columns[-1].default == "5" and not table.columns[-1].nullable
    assert table.primary_key == ("id",)  # no primary index: the NOT NULL unique key is the handle
    assert row_column_types(table)["kind"] == "enum"  # rows carry the index, so their descriptor is bare


def test_json_row_values_timestamp_object_enum_index_and_binary_base64():
    decoder = SimpleJsonDecoder()
    decode_one(decoder, orjson.dumps({"version": 1, "type": "BOOTSTRAP", "commitTs": 0, "buildTs": 1,
                                      "tableSchema": rich_table_schema()}))
    row = {
        "id": "18446744073709551615",
        "amount": "-12.30",
        "whole": None,
        "kind": "2",
        "tags": "3",
        "ts": {"location": "Asia/Shanghai", "value": "2024-02-26 10:00:00.123"},
        "raw": "AAH/",
        "flag": "1",
        "ratio": "100000000000000000000",
        "n": "5",
    }
    value = orjson.dumps({"version": 1, "database": "db", "table": "t", "tableID": 9, "type": "INSERT",
                          "commitTs": 42, "buildTs": 1, "schemaVersion": 7, "data": row})
    event = decode_one(decoder, value)
    assert event.after == {**row, "ts": "2024-02-26 10:00:00.123", "ratio": "1e+20"}
    assert event.column_types["kind"] == "enum" and event.column_types["tags"] == "set"
    assert event.column_types["amount"] == "decimal(10,2)"
    assert event.key_columns == ("id",)


def test_uncached_timestamp_object_still_becomes_its_value():
    value = orjson.dumps({"version": 1, "database": "db", "table": "t", "type": "DELETE", "commitTs": 3,
                          "buildTs": 1, "schemaVersion": 99,
                          "old": {"ts": {"location": "UTC", "value": "2020-01-01 00:00:00"}, "id": "1"}})
    event = decode_one(SimpleJsonDecoder(), value)
    assert event.before == {"ts": "2020-01-01 00:00:00", "id": "1"} and event.schema_version == 99


@pytest.mark.parametrize(
    "extra, reason",
    [
        ({"handleKeyOnly": True}, "handle-key-only"),
        ({"claimCheckLocation": "s3://bucket/claim/1.json"}, "claim-check"),
    ],
)
def test_large_message_handles_are_dead_lettered_with_a_reason(extra, reason):
    value = orjson.dumps({"version": 1, "database": "db", "table": "t", "type": "INSERT", "commitTs": 3,
                          "buildTs": 1, "schemaVersion": 1, "data": {"id": "1"}, **extra})
    [failure] = decode_safely(SimpleJsonDecoder(), message(value, 11))
    assert isinstance(failure, DecodeFailure)
    assert reason in failure.reason
    assert failure.position.offset == 11 and failure.value == value


def test_drop_database_ddl_names_its_schema_from_the_query():
    value = orjson.dumps({"version": 1, "type": "QUERY", "sql": "DROP DATABASE IF EXISTS `shop`",
                          "commitTs": 5, "buildTs": 1})
    event = decode_one(SimpleJsonDecoder(), value)
    assert (event.schema, event.table, event.ddl_type) == ("shop", "", "DROP_SCHEMA")


def test_rename_keeps_the_query_and_both_names():
    old = rich_table_schema()
    new = {**old, "table": "t2"}
    value = orjson.dumps({"version": 1, "type": "RENAME", "sql": "RENAME TABLE `db`.`t` TO `db`.`t2`",
                          "commitTs": 8, "buildTs": 1, "tableSchema": new, "preTableSchema": old})
    event = decode_one(SimpleJsonDecoder(), value)
    assert (event.table, event.pre_table_schema.table, event.ddl_type) == ("t2", "t", "RENAME_TABLE")


# --- Avro value forms --------------------------------------------------------------------------------------------


def test_avro_messages_start_with_the_message_branch_byte():
    assert avro_from_doc("dml_INSERT.json")[0] == 0x16
    [failure] = decode_safely(SimpleAvroDecoder(), message(b"\x02" + avro_from_doc("dml_INSERT.json")[1:]))
    assert isinstance(failure, DecodeFailure) and "0x16" in failure.reason


def test_avro_typed_union_values_become_canonical_strings():
    decoder = SimpleAvroDecoder()
    table = avro_table_schema(rich_table_schema())
    decode_one(decoder, avro_message("BOOTSTRAP", "Bootstrap", {"version": 1, "buildTs": 1, "tableSchema": table}))
    data = {
        "id": (NS + "UnsignedBigint", {"value": -1}),
        "amount": ("string", "3.50"),
        "kind": ("long", 2),
        "tags": ("long", -1),
        "ts": (NS + "Timestamp", {"location": "UTC", "value": "2024-01-01 00:00:00"}),
        "raw": ("bytes", b"\x00\x01\xff"),
        "flag": ("long", 1),
        "ratio": ("double", 0.1),
        "n": ("long", -7),
        "whole": None,
    }
    payload = {"version": 1, "database": "db", "table": "t", "tableID": 9, "type": "INSERT", "commitTs": 10,
               "buildTs": 1, "schemaVersion": 7, "data": data}
    event = decode_one(decoder, avro_message("DML", "DML", payload), 1)
    assert event.after == {
        "id": "18446744073709551615",
        "amount": "3.50",
        "kind": "2",
        "tags": "18446744073709551615",
        "ts": "2024-01-01 00:00:00",
        "raw": "AAH/",
        "flag": "1",
        "ratio": "0.1",
        "n": "-7",
        "whole": None,
    }


def test_avro_float_is_the_shortest_float32_text():
    decoder = SimpleAvroDecoder()
    decode_one(decoder, avro_from_doc("ddl_ALTER.json"))
    payload = {"version": 1, "database": "simple", "table": "user", "tableID": 148, "type": "INSERT",
               "commitTs": 10, "buildTs": 1, "schemaVersion": 447984074911121426,
               "data": {"id": ("long", 1), "score": ("float", 0.1)}}
    event = decode_one(decoder, avro_message("DML", "DML", payload))
    assert event.after == {"id": "1", "score": "0.1"}  # not 0.10000000149011612


@pytest.mark.parametrize("value", [3.4025001647762064e38, 3.4028234663852886e38, -3.4028234663852886e38, 1e-45])
def test_float32_text_near_the_float32_limits_reads_back(value):
    # a short text of a value near FLT_MAX ("3.403e+38") lies above FLT_MAX: it must be skipped, not crash
    import struct

    from ticdc_lakehouse.decode.common.type_text import float32_text

    exact = struct.unpack("<f", struct.pack("<f", value))[0]
    text = float32_text(exact)
    assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == exact


@pytest.mark.parametrize(
    "flag, reason",
    [({"handleKeyOnly": True}, "handle-key-only"), ({"claimCheckLocation": "file:///claim"}, "claim-check")],
)
def test_avro_large_message_handles_are_dead_lettered(flag, reason):
    payload = {"version": 1, "database": "db", "table": "t", "tableID": 1, "type": "DELETE", "commitTs": 1,
               "buildTs": 1, "schemaVersion": 1, "old": {"id": ("long", 1)}, **flag}
    [failure] = decode_safely(SimpleAvroDecoder(), message(avro_message("DML", "DML", payload)))
    assert isinstance(failure, DecodeFailure) and reason in failure.reason


# --- robustness --------------------------------------------------------------------------------------------------


def test_decoders_are_registered_and_pickle_with_their_cache():
    decoder = make_decoder("simple-avro", DecoderOptions())
    decode_one(decoder, avro_from_doc("ddl_ALTER.json"))
    clone = pickle.loads(pickle.dumps(decoder))
    assert decode_one(clone, avro_from_doc("dml_INSERT.json")).column_types["id"] == "int"
    assert isinstance(make_decoder("simple-json"), SimpleJsonDecoder)


def all_messages(kind: str) -> list[bytes]:
    names = ["watermark.json", "bootstrap.json", "ddl_ALTER.json", "dml_INSERT.json", "dml_UPDATE.json",
             "dml_DELETE.json"]
    if kind == "json":
        return [(DOCS / name).read_bytes() for name in names]
    return [avro_from_doc(name) for name in names]


@pytest.mark.parametrize("codec", ["none", "lz4", "snappy"])  # large-message-handle-compression
@pytest.mark.parametrize("kind, make", [("json", SimpleJsonDecoder), ("avro", SimpleAvroDecoder)])
def test_truncated_and_corrupted_messages_never_raise(kind, make, codec):
    from ticdc_lakehouse.decode.large_messages import compress

    decoder = make(_large_options(codec))
    checked = 0
    for value in (compress(codec, value) for value in all_messages(kind)):
        variants = [value[:cut] for cut in range(0, len(value), max(1, len(value) // 40))]
        for i in range(0, len(value), max(1, len(value) // 30)):
            for byte in (0x00, 0xFF, value[i] ^ 0x01, ord("}"), ord('"')):
                variants.append(value[:i] + bytes([byte]) + value[i + 1 :])
        variants += [value + b"\x00", b"", b"\x16", b"null", b"[]", b'{"type": "INSERT", "data": []}']
        for variant in variants:
            events = decode_safely(decoder, message(variant))
            assert events, "a message never vanishes"
            for event in events:
                assert isinstance(event, (DecodeFailure, RowChange, DDLEvent, ResolvedEvent))
                if isinstance(event, DecodeFailure):
                    assert event.reason
            checked += 1
    assert checked > 500


def test_empty_value_is_a_failure_not_an_event():
    [failure] = decode_safely(SimpleJsonDecoder(), message(None, 3))
    assert isinstance(failure, DecodeFailure) and "empty" in failure.reason


# --- large messages: large-message-handle-compression and claim-check --------------------------------------------


def _large_options(compression: str, uri: str = "") -> DecoderOptions:
    from ticdc_lakehouse.decode.large_messages import LargeMessageOptions

    return DecoderOptions(large_messages=LargeMessageOptions(compression=compression, claim_check_storage_uri=uri))


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
@pytest.mark.parametrize("make, load", [(SimpleJsonDecoder, lambda name: orjson.dumps(doc(name))),
                                        (SimpleAvroDecoder, avro_from_doc)])
def test_compressed_messages_decode_like_plain_ones(codec, make, load):
    from ticdc_lakehouse.decode.large_messages import compress

    names = ["bootstrap.json", "ddl_ALTER.json", "dml_INSERT.json", "dml_UPDATE.json", "watermark.json"]
    plain, packed = make(), make(_large_options(codec))
    for offset, name in enumerate(names):
        assert decode_one(packed, compress(codec, load(name)), offset) == decode_one(plain, load(name), offset)
    [failure] = decode_safely(make(), message(compress(codec, load("dml_INSERT.json"))))
    assert isinstance(failure, DecodeFailure)


@pytest.mark.parametrize("codec", ["none", "snappy"])
def test_a_claim_checked_row_is_read_from_the_claim_check_storage(codec, tmp_path):
    import base64

    from ticdc_lakehouse.decode.large_messages import compress

    full = orjson.dumps({"version": 1, "database": "db", "table": "t", "type": "INSERT", "commitTs": 3,
                         "buildTs": 1, "schemaVersion": 1, "data": {"id": "1", "note": "n" * 9000}})
    (tmp_path / "c1.json").write_bytes(
        orjson.dumps({"key": "", "value": base64.b64encode(compress(codec, full)).decode()})
    )
    pointer = orjson.dumps({"version": 1, "database": "db", "table": "t", "type": "INSERT", "commitTs": 3,
                            "buildTs": 1, "schemaVersion": 1, "data": {"id": "1"},
                            "claimCheckLocation": "s3:/bucket/claim/c1.json"})
    decoder = SimpleJsonDecoder(_large_options(codec, str(tmp_path)))
    event = decode_one(decoder, compress(codec, pointer), 12)
    assert isinstance(event, RowChange) and event.after == {"id": "1", "note": "n" * 9000}
    assert event.commit_ts == 3 and event.position.offset == 12
    [failure] = decode_safely(SimpleJsonDecoder(_large_options(codec, str(tmp_path / "elsewhere"))),
                              message(compress(codec, pointer), 12))
    assert isinstance(failure, DecodeFailure) and "c1.json" in failure.reason and "does not exist" in failure.reason
