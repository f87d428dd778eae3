"""Confluent Avro decoder: TiCDC's golden value schemas registered in a real Schema Registry (Apicurio's Confluent
API), messages built with fastavro and decoded through confluent-kafka's SchemaRegistryClient."""

from __future__ import annotations

import json
import pickle
from decimal import Decimal
from pathlib import Path

import pytest

from tests.schema_registry_fixture import (  # noqa: F401 - schema_registry is a pytest fixture
    FailingFront,
    Producer,
    closed_port,
    schema_registry,
)
from ticdc_lakehouse.decode import DecoderOptions, decode_safely, make_decoder
from ticdc_lakehouse.decode.confluent_avro import ConfluentAvroDecoder, confluent_frame
from ticdc_lakehouse.core.model import (
    DELETE,
    INSERT,
    UPDATE,
    DDLEvent,
    DecodeFailure,
    Message,
    ResolvedEvent,
    RowChange,
    SourceUnavailable,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
AVRO = SHARED / "ticdc-vectors" / "avro"
COMMIT_TS = 417318403368288260  # newLargeEvent's commit ts

KEY_SCHEMA = {
    "type": "record",
    "name": "avroencode",
    "namespace": "default.testdb",
    "fields": [{"name": "id", "type": {"type": "int", "connect.parameters": {"tidb_type": "INT"}}}],
}

#: one value per golden column (TiCDC's avroTestColumns mapping: BIT 683 is b"\x02\xab", ENUM/SET are names)
VALUES = {
    "id": 1, "tiny": 127, "short": 32767, "int24": 8388607, "long": 2147483647, "longlong": -9223372036854775808,
    "tinyunsigned": 255, "shortunsigned": 65535, "int24unsigned": 16777215, "longunsigned": 4294967295,
    "longlongunsigned": -1, "float": 3.14, "double": 2.71, "bit": b"\x02\xab", "decimal": Decimal("129012"),
    "tinytext": "测试tinytext", "mediumtext": "m", "text": "t", "longtext": "l", "varchar": "v", "varstring": "vs",
    "string": "s", "tinyblob": b"\x00\xff", "mediumblob": b"m", "blob": b"b", "longblob": b"l",
    "varbinary": b"vb", "varbinary1": b"", "binary": b"bin", "enum": "a", "set": "a,b", "json": '{"key": "value"}',
    "date": "2020-02-20", "datetime": "2020-02-20 02:20:20", "timestamp": "2020-02-20 10:20:20.123",
    "time": "02:20:20", "year": 2020,
}
EXPECTED = {
    "id": "1", "tiny": "127", "short": "32767", "int24": "8388607", "long": "2147483647",
    "longlong": "-9223372036854775808", "tinyunsigned": "255", "shortunsigned": "65535",
    "int24unsigned": "16777215", "longunsigned": "4294967295", "longlongunsigned": "18446744073709551615",
    "float": "3.14", "double": "2.71", "bit": "683", "decimal": "129012", "tinytext": "测试tinytext",
    "mediumtext": "m", "text": "t", "longtext": "l", "varchar": "v", "varstring": "vs", "string": "s",
    "tinyblob": "AP8=", "mediumblob": "bQ==", "blob": "Yg==", "longblob": "bA==", "varbinary": "dmI=",
    "varbinary1": "", "binary": "Ymlu", "enum": "a", "set": "a,b", "json": '{"key": "value"}',
    "date": "2020-02-20", "datetime": "2020-02-20 02:20:20", "timestamp": "2020-02-20 10:20:20.123",
    "time": "02:20:20", "year": "2020",
}
DESCRIPTORS = {
    "id": "int", "tiny": "int", "longlong": "bigint", "tinyunsigned": "int unsigned",
    "longunsigned": "int unsigned", "longlongunsigned": "bigint unsigned", "float": "float", "double": "double",
    "bit": "bit", "decimal": "decimal(10,0)", "text": "text", "blob": "blob", "varbinary": "blob",
    "enum": "enum('a','b')", "set": "set('a','b')", "json": "json", "date": "date", "datetime": "datetime",
    "timestamp": "timestamp", "time": "time", "year": "year",
}


def golden(name: str) -> dict:
    return json.loads((AVRO / f"tiflow_{name}.avsc").read_text())


def record_for(schema: dict, **extension) -> dict:
    record = {}
    for field in schema["fields"]:
        name = field["name"]
        if name.endswith("nullable"):
            record[name] = None
        elif name in VALUES:
            record[name] = VALUES[name]
    record.update(extension)
    return record


def decoder_for(url: str) -> ConfluentAvroDecoder:
    return make_decoder("avro", DecoderOptions(schema_registry_url=url))


def decode(decoder, key, value, offset=0, partition=0):
    return decode_safely(decoder, Message("avro-topic", partition, offset, key, value))


# --- golden schemas -------------------------------------------------------------------------------------------------


def test_with_extension_insert_decodes_every_type(schema_registry):
    producer = Producer(schema_registry, "golden-ext")
    schema = golden("expectedSchemaWithExtension")
    key = producer.encode(KEY_SCHEMA, {"id": 1}, "key")
    value = producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=COMMIT_TS,
                                               _tidb_commit_physical_time=COMMIT_TS >> 18))
    [event] = decode(decoder_for(schema_registry), key, value)
    assert isinstance(event, RowChange)
    assert (event.schema, event.table, event.op, event.commit_ts) == ("testdb", "avroencode", INSERT, COMMIT_TS)
    assert event.key_columns == ("id",) and event.before is None
    assert {name: event.after[name] for name in EXPECTED} == EXPECTED
    assert event.after["tinynullable"] is None and event.after["decimalnullable"] is None
    assert {name: event.column_types[name] for name in DESCRIPTORS} == DESCRIPTORS
    assert not any(name.startswith("_tidb") for name in event.after)


def test_with_extension_update_carries_only_the_new_row(schema_registry):
    producer = Producer(schema_registry, "golden-ext-u")
    schema = golden("expectedSchemaWithExtension")
    value = producer.encode(schema, record_for(schema, _tidb_op="u", _tidb_commit_ts=COMMIT_TS + 1,
                                               _tidb_commit_physical_time=0))
    [event] = decode(decoder_for(schema_registry), producer.encode(KEY_SCHEMA, {"id": 1}, "key"), value)
    assert event.op == UPDATE and event.before is None and event.commit_ts == COMMIT_TS + 1


def test_checksum_schema_uses_string_decimal_and_string_unsigned_bigint(schema_registry):
    producer = Producer(schema_registry, "golden-checksum")
    schema = golden("expectedSchemaWithExtensionEnableChecksum")
    record = record_for(schema, _tidb_op="c", _tidb_commit_ts=COMMIT_TS, _tidb_commit_physical_time=0,
                        _tidb_row_level_checksum="3212122", _tidb_corrupted=False, _tidb_checksum_version=1)
    record["longlongunsigned"] = "18446744073709551615"
    record["decimal"] = "129012.1230000"
    [event] = decode(decoder_for(schema_registry), producer.encode(KEY_SCHEMA, {"id": 1}, "key"),
                     producer.encode(schema, record))
    assert event.after["longlongunsigned"] == "18446744073709551615"
    assert event.after["decimal"] == "129012.1230000"
    assert event.column_types["decimal"] == "decimal" and event.column_types["longlongunsigned"] == "bigint unsigned"
    assert list(event.after)[0] == "tiny"  # columns sorted by id: the schema's order is kept


def test_corrupted_rows_are_dead_lettered(schema_registry):
    producer = Producer(schema_registry, "golden-corrupt")
    schema = golden("expectedSchemaWithExtensionEnableChecksum")
    record = record_for(schema, _tidb_op="c", _tidb_commit_ts=1, _tidb_commit_physical_time=0,
                        _tidb_row_level_checksum="1", _tidb_corrupted=True, _tidb_checksum_version=1)
    record["longlongunsigned"], record["decimal"] = "1", "1"
    [failure] = decode(decoder_for(schema_registry), None, producer.encode(schema, record))
    assert isinstance(failure, DecodeFailure) and "corrupted" in failure.reason


def test_without_extension_rows_are_upserts_whose_ts_is_marked_made_up(schema_registry):
    """No ``_tidb_commit_ts``: the decoder keeps no guess of its own (one would depend on which Spark task decoded
    the row); the merge fills it in Kafka order (``merge.made_up_ts``)."""
    producer = Producer(schema_registry, "golden-plain")
    schema = golden("expectedSchemaWithoutExtension")
    ext_schema = golden("expectedSchemaWithExtension")
    decoder = decoder_for(schema_registry)
    key = producer.encode(KEY_SCHEMA, {"id": 1}, "key")
    [first] = decode(decoder, key, producer.encode(schema, record_for(schema)), offset=1)
    assert first.op == UPDATE and (first.commit_ts, first.ts_made_up) == (0, True)
    with_ts = producer.encode(ext_schema, record_for(ext_schema, _tidb_op="c", _tidb_commit_ts=500,
                                                     _tidb_commit_physical_time=0))
    [real] = decode(decoder, key, with_ts, offset=2)
    assert (real.commit_ts, real.ts_made_up) == (500, False)
    [later] = decode(decoder, key, producer.encode(schema, record_for(schema)), offset=3)
    assert (later.commit_ts, later.ts_made_up) == (0, True)


def test_tombstone_is_a_delete_of_the_key_columns(schema_registry):
    producer = Producer(schema_registry, "golden-del")
    decoder = decoder_for(schema_registry)
    schema = golden("expectedSchemaWithExtension")
    key = producer.encode(KEY_SCHEMA, {"id": 42}, "key")
    decode(decoder, key, producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=77,
                                                            _tidb_commit_physical_time=0)))
    [event] = decode(decoder, key, None, offset=1)
    assert (event.op, event.after, event.before) == (DELETE, None, {"id": "42"})
    assert event.key_columns == ("id",) and event.column_types == {"id": "int"}
    assert (event.schema, event.table, event.commit_ts, event.ts_made_up) == ("testdb", "avroencode", 0, True)


def test_watermark_mode_delete_has_op_d_and_key_columns(schema_registry):
    producer = Producer(schema_registry, "wm-del")
    schema = {**KEY_SCHEMA, "fields": KEY_SCHEMA["fields"] + [
        {"name": "_tidb_op", "type": "string", "default": ""},
        {"name": "_tidb_commit_ts", "type": "long", "default": 0},
        {"name": "_tidb_commit_physical_time", "type": "long", "default": 0}]}
    value = producer.encode(schema, {"id": 3, "_tidb_op": "d", "_tidb_commit_ts": 900,
                                     "_tidb_commit_physical_time": 0})
    [event] = decode(decoder_for(schema_registry), producer.encode(KEY_SCHEMA, {"id": 3}, "key"), value)
    assert (event.op, event.before, event.after, event.commit_ts) == (DELETE, {"id": "3"}, None, 900)


def test_union_branch_order_follows_the_writer_schema(schema_registry):
    producer = Producer(schema_registry, "branches")
    int_type = {"type": "int", "connect.parameters": {"tidb_type": "INT"}}
    schema = {
        "type": "record", "name": "t_1", "namespace": "default.shop",
        "fields": [
            {"name": "id", "type": int_type},
            {"name": "with_default", "type": [int_type, "null"], "default": 5},
            {"name": "no_default", "type": ["null", int_type], "default": None},
            {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                                "scale": 2, "connect.parameters": {"tidb_type": "DECIMAL"}}],
             "default": None},
            {"name": "_tidb_op", "type": "string"}, {"name": "_tidb_commit_ts", "type": "long"},
        ],
    }
    decoder = decoder_for(schema_registry)
    for with_default, no_default, price in [(None, 7, Decimal("-0.05")), (9, None, None)]:
        value = producer.encode(schema, {"id": 1, "with_default": with_default, "no_default": no_default,
                                         "price": price, "_tidb_op": "c", "_tidb_commit_ts": 1})
        [event] = decode(decoder, None, value)
        assert event.after == {
            "id": "1",
            "with_default": None if with_default is None else str(with_default),
            "no_default": None if no_default is None else str(no_default),
            "price": None if price is None else "-0.05",
        }
        assert (event.schema, event.table) == ("shop", "t_1")
        assert event.column_types["price"] == "decimal(10,2)"


# --- testing-only control messages ----------------------------------------------------------------------------------


def test_watermark_message_is_a_resolved_event(schema_registry):
    [event] = decode(decoder_for(schema_registry), None, b"\x02" + (COMMIT_TS).to_bytes(8, "big"))
    assert isinstance(event, ResolvedEvent) and event.ts == COMMIT_TS


def test_ddl_message_maps_the_tidb_action_code():
    value = b"\x01" + json.dumps({"query": "ALTER TABLE t ADD COLUMN c int", "type": 5, "schema": "s",
                                  "table": "t", "commitTs": 12}).encode()
    [event] = decode(ConfluentAvroDecoder(), None, value)
    assert isinstance(event, DDLEvent)
    assert (event.schema, event.table, event.ddl_type, event.commit_ts) == ("s", "t", "ADD_COLUMN", 12)


@pytest.mark.parametrize(
    "value, reason",
    [
        (b"\x03\x00" + b"u" * 16 + b"body", "Glue"),
        (b"\x07abc", "0x07"),
        (b"\x02\x00", "9 bytes"),
    ],
)
def test_bad_framing_is_dead_lettered_with_a_reason(value, reason):
    [failure] = decode(ConfluentAvroDecoder(), None, value, offset=5)
    assert isinstance(failure, DecodeFailure) and reason in failure.reason and failure.position.offset == 5


def test_unknown_schema_id_is_dead_lettered(schema_registry):
    [failure] = decode(decoder_for(schema_registry), None, confluent_frame(999999, b"\x02"))
    assert isinstance(failure, DecodeFailure) and "999999" in failure.reason


def test_unreachable_registry_fails_the_decode_instead_of_dead_lettering_good_rows(schema_registry):
    producer = Producer(schema_registry, "outage")
    schema = golden("expectedSchemaWithExtension")
    value = producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=3, _tidb_commit_physical_time=0))
    down = decoder_for(f"http://sr:hunter2pw@127.0.0.1:{closed_port()}")
    with pytest.raises(SourceUnavailable) as raised:
        decode(down, None, value, offset=8)
    message = str(raised.value)
    assert "schema registry" in message and "rerun" in message and "hunter2pw" not in message


def test_registry_server_errors_fail_the_decode_and_a_retry_succeeds(schema_registry):
    server = FailingFront(schema_registry).start()
    try:
        producer = Producer(server.url, "flaky")
        schema = golden("expectedSchemaWithExtension")
        value = producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=3,
                                                   _tidb_commit_physical_time=0))
        decoder = decoder_for(server.url)
        server.failing_status = 503
        with pytest.raises(SourceUnavailable, match="503"):
            decode(decoder, None, value)
        server.failing_status = None  # the registry recovers: the same decoder reads the message
        [event] = decode(decoder, None, value)
        assert isinstance(event, RowChange) and event.after["id"] == "1"
    finally:
        server.stop()


def test_no_registry_configured_fails_the_decode():
    with pytest.raises(SourceUnavailable, match="no schema registry configured"):
        decode(ConfluentAvroDecoder(), None, b"\x00\x00\x00\x00\x01\x02")


def test_decoder_pickles_before_and_after_use(schema_registry):
    producer = Producer(schema_registry, "pickle")
    schema = golden("expectedSchemaWithExtension")
    value = producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=3,
                                               _tidb_commit_physical_time=0))
    decoder = decoder_for(schema_registry)
    decoder = pickle.loads(pickle.dumps(decoder))
    assert decode(decoder, None, value)[0].commit_ts == 3
    clone = pickle.loads(pickle.dumps(decoder))  # the live registry client stays behind
    assert decode(clone, None, value)[0].after == decode(decoder, None, value)[0].after


def test_truncated_and_corrupted_messages_never_raise(schema_registry):
    producer = Producer(schema_registry, "fuzz")
    schema = golden("expectedSchemaWithExtension")
    key = producer.encode(KEY_SCHEMA, {"id": 1}, "key")
    value = producer.encode(schema, record_for(schema, _tidb_op="c", _tidb_commit_ts=3,
                                               _tidb_commit_physical_time=0))
    decoder = decoder_for(schema_registry)
    variants = [value[:cut] for cut in range(0, len(value), 3)]
    for i in range(5, len(value), 4):
        for byte in (0x00, 0xFF, 0x7F, value[i] ^ 0x55):
            variants.append(value[:i] + bytes([byte]) + value[i + 1 :])
    variants += [value + b"\x00", b"\x01{", b"\x01[]", b"\x02" + b"\x00" * 9]
    checked = 0
    for variant in variants:
        for k in (key, None, key[:3]):
            events = decode(decoder, k, variant)
            assert len(events) == 1
            assert isinstance(events[0], (DecodeFailure, RowChange, DDLEvent, ResolvedEvent))
            checked += 1
    assert checked > 300
