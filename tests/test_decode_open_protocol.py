"""Open Protocol decoder against TiCDC's own messages, the documented examples and the wire rules."""

from __future__ import annotations

import base64
import json
import pickle
import re
from dataclasses import replace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode import decode_safely, make_decoder
from ticdc_lakehouse.decode.open_protocol import OpenProtocolDecoder
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.model import DDLEvent, DecodeError, DecodeFailure, ResolvedEvent, RowChange

from tests.open_craft_support import (
    OPEN_VECTORS,
    assert_valid_event,
    corruptions,
    ddl_events,
    frame_open,
    message,
    resolved_events,
    row_changes,
)

CASE_SET = OPEN_VECTORS / "tiflow-pr1316-case_set"
ROW_KEY = '{"ts":7,"scm":"s","tbl":"t","t":1}'


@pytest.fixture
def decoder() -> OpenProtocolDecoder:
    return make_decoder("open")


def decode_one(decoder: OpenProtocolDecoder, key_json: str, value_json: str) -> model.Event:
    events = decoder.decode(message(*frame_open([(key_json, value_json)])))
    assert len(events) == 1
    return events[0]


def row(decoder: OpenProtocolDecoder, value: dict, key_json: str = ROW_KEY) -> RowChange:
    event = decode_one(decoder, key_json, json.dumps(value))
    assert isinstance(event, RowChange)
    return event


def expected_pairs(path) -> list[tuple[dict, dict]]:
    blocks = [block for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]
    return [tuple(json.loads(line) for line in block.strip().split("\n")) for block in blocks]


# --- TiCDC encoder output (tiflow PR #1316 case sets) -------------------------------------------------------------


@pytest.mark.parametrize("case, count", [("simple", 4), ("expand_char", 5), ("lang_event", 1024)])
def test_case_sets_decode_to_expected_txt(decoder, case, count):
    folder = CASE_SET / case
    events = decoder.decode(message((folder / "key.bin").read_bytes(), (folder / "value.bin").read_bytes()))
    expected = expected_pairs(folder / "expected.txt")
    assert len(events) == len(expected) == count
    for seq, (event, (key, value)) in enumerate(zip(events, expected)):
        assert isinstance(event, RowChange)
        assert (event.schema, event.table, event.commit_ts) == (key["scm"], key.get("tbl", ""), key["ts"])
        assert event.op == model.INSERT and event.before is None
        # the Go test put text into a TINYINT column; like Go's decoder we keep what is there
        assert event.after == {name: col["v"] for name, col in value["u"].items()}
        assert event.column_types == {"col1": "tinyint"}
        assert event.key_columns == ()  # 2021 format: flags 0, no "h"
        assert event.position == model.Position("topic", 0, 0, seq)


def test_case_set_keeps_go_escaped_text_and_partition_rows(decoder):
    events = decoder.decode(message((CASE_SET / "expand_char" / "key.bin").read_bytes(),
                                    (CASE_SET / "expand_char" / "value.bin").read_bytes()))
    assert events[3].after["col1"] == "~!@#$%^&*()_+\"'[]\\;',./|:>?`"  # \u0026 \u003c \u003e unescaped
    assert events[1].after["col1"] == "💋💼🕶💼👛💄💋💇"
    simple = decoder.decode(message((CASE_SET / "simple" / "key.bin").read_bytes(),
                                    (CASE_SET / "simple" / "value.bin").read_bytes()))
    assert (simple[3].table, simple[3].commit_ts) == ("c", 4)  # the "ptn":6 row decodes like any other


def test_lang_event_row_zero_has_no_table_name(decoder):
    folder = CASE_SET / "lang_event"
    events = decoder.decode(message((folder / "key.bin").read_bytes(), (folder / "value.bin").read_bytes()))
    assert (events[0].table, events[0].after) == ("", {"col1": ""})
    assert (events[1023].table, events[1023].after["col1"]) == ("8" * 1023, "8" * 1023)


# --- legacy fixtures: multi-DDL / multi-resolved batches and empty batches ------------------------------------


@pytest.mark.parametrize("folder", ["tiflow-examples-java", "tibigdata"])
def test_fixture_batches_have_the_documented_event_counts(decoder, folder):
    cases = json.loads((OPEN_VECTORS / folder / "expected_events.json").read_text())["cases"]
    for name, case in cases.items():
        events = decoder.decode(message((OPEN_VECTORS / folder / case["key_file"]).read_bytes(),
                                        (OPEN_VECTORS / folder / case["value_file"]).read_bytes()))
        assert len(events) == len(case["events"]), name
        kind = {"row": RowChange, "ddl": DDLEvent, "rts": ResolvedEvent}[name.split("_")[0]]
        assert all(isinstance(event, kind) for event in events), name
        for event, raw in zip(events, case["events"]):
            key = json.loads(raw["key_json"])
            assert getattr(event, "commit_ts", getattr(event, "ts", None)) == key["ts"]
            if isinstance(event, DDLEvent):
                assert event.query == json.loads(raw["value_json"])["q"]


def test_tibigdata_ddl_assertions(decoder):
    folder = OPEN_VECTORS / "tibigdata"
    ddl0 = decoder.decode(message((folder / "ddl_0.key.bin").read_bytes(), (folder / "ddl_0.value.bin").read_bytes()))
    assert [(e.ddl_type, e.schema, e.table, e.query) for e in ddl0] == [
        ("CREATE_SCHEMA", "a", "", "create database a;")]
    ddl1 = decoder.decode(message((folder / "ddl_1.key.bin").read_bytes(), (folder / "ddl_1.value.bin").read_bytes()))
    assert [(e.ddl_type, e.schema, e.table, e.query) for e in ddl1] == [
        ("CREATE_SCHEMA", "a", "", "create database a;"),
        ("DROP_SCHEMA", "a", "", "drop database a;"),
        ("CREATE_SCHEMA", "a", "", "create database a;"),
        ("CREATE_TABLE", "a", "c", "create table c(id int primary key);"),
    ]
    assert [e.commit_ts for e in ddl1] == sorted(e.commit_ts for e in ddl1)
    assert [e.position.seq for e in ddl1] == [0, 1, 2, 3]


def test_tibigdata_rows_and_resolved(decoder):
    folder = OPEN_VECTORS / "tibigdata"
    [row0] = decoder.decode(message((folder / "row_0.key.bin").read_bytes(), (folder / "row_0.value.bin").read_bytes()))
    assert (row0.op, row0.schema, row0.table) == (model.INSERT, "a", "b")
    rows = decoder.decode(message((folder / "row_1.key.bin").read_bytes(), (folder / "row_1.value.bin").read_bytes()))
    assert [(e.op, e.schema, e.table) for e in rows] == [("I", "a", "b")] * 3 + [("I", "a", "c")]
    empty = message((folder / "row_2.key.bin").read_bytes(), (folder / "row_2.value.bin").read_bytes())
    assert decoder.decode(empty) == []
    for name in ("rts_0", "rts_1"):
        events = decoder.decode(message((folder / f"{name}.key.bin").read_bytes(),
                                        (folder / f"{name}.value.bin").read_bytes()))
        assert events and all(isinstance(e, ResolvedEvent) for e in events)


def test_tibigdata_row_json_every_type_code(decoder):
    """row.json: 27 columns, one per type code, all "h": true and flag 0 (so TEXT, not BLOB; VARCHAR, not
    VARBINARY: c25's ``\\x89PNG`` is literal backslash text, not Go-quoted bytes)."""
    event = row(decoder, json.loads((OPEN_VECTORS / "tibigdata" / "row.json").read_text()))
    assert len(event.after) == 27 and event.key_columns == tuple(f"c{i}" for i in range(1, 28))
    assert event.after == {
        "c1": "1", "c2": "1", "c3": "123", "c4": "153.123", "c5": "153.123", "c6": None,
        "c7": "1973-12-30 15:30:00", "c8": "123", "c9": "123", "c10": "2000-01-01", "c11": "23:59:59",
        "c12": "2015-12-20 23:58:58", "c13": "1970", "c14": "2000-01-01", "c15": "测试", "c16": "81",
        "c17": '{"key1": "value1"}', "c18": "129012.1230000", "c19": "1", "c20": "3",
        "c21": "测试text", "c22": "测试text", "c23": "测试text", "c24": "测试text",
        "c25": "\\x89PNG\\r\\n\\x1a\\n", "c26": "测试", "c27": None,
    }
    assert event.column_types == {
        "c1": "tinyint", "c2": "smallint", "c3": "int", "c4": "float", "c5": "double", "c6": "null",
        "c7": "timestamp", "c8": "bigint", "c9": "mediumint", "c10": "date", "c11": "time", "c12": "datetime",
        "c13": "year", "c14": "date", "c15": "varchar", "c16": "bit", "c17": "json", "c18": "decimal",
        "c19": "enum", "c20": "set", "c21": "tinytext", "c22": "mediumtext", "c23": "longtext", "c24": "text",
        "c25": "varchar", "c26": "char", "c27": "geometry",
    }


def test_row_json_with_binary_flag_is_bytes(decoder):
    """The same values with BinaryFlag: BLOBs stay bytes and c25 is Go-unquoted to the PNG magic bytes."""
    value = json.loads((OPEN_VECTORS / "tibigdata" / "row.json").read_text())
    for name in ("c21", "c22", "c23", "c24", "c25", "c26"):
        value["u"][name]["f"] = 1
    event = row(decoder, value)
    assert event.after["c21"] == "5rWL6K+VdGV4dA=="
    assert base64.b64decode(event.after["c24"]).decode() == "测试text"
    assert base64.b64decode(event.after["c25"]) == b"\x89PNG\r\n\x1a\n"
    assert base64.b64decode(event.after["c26"]) == "测试".encode()
    assert [event.column_types[f"c{i}"] for i in range(21, 27)] == [
        "tinyblob", "mediumblob", "longblob", "blob", "varbinary", "binary"]


# --- the documented event stream ---------------------------------------------------------------------------------


def test_docs_event_stream(decoder):
    """docs-cn's 14 logs, one message per log on its partition.

    Logs 11-12 carry ``"ZGQ="``/``"ZWU="`` in a type-15 (VARCHAR) column without BinaryFlag. Current TiCDC
    writes VARCHAR as plain text and base64 only for TEXT/BLOB codes 249-252, so the decoder keeps the literal
    string: decoding it as base64 would corrupt every VARCHAR value that happens to look like base64."""
    stream = json.loads((OPEN_VECTORS / "docs" / "docs-cn_event_stream_example.json").read_text())["events"]
    events = {}
    for item in stream:
        decoded = decoder.decode(message(*frame_open([(item["key_json"], item["value_json"])]),
                                         offset=item["log"], partition=item["partition"]))
        assert len(decoded) == 1
        events[item["log"]] = decoded[0]
    for log in (1, 3):
        assert isinstance(events[log], DDLEvent)
        assert (events[log].ddl_type, events[log].schema, events[log].table) == ("CREATE_TABLE", "test", "t1")
        assert events[log].query == "CREATE TABLE test.t1(id int primary key, val varchar(16))"
    for log in (2, 4, 13, 14):
        assert isinstance(events[log], ResolvedEvent)
    assert events[13].ts == 415508881038376963 < events[12].commit_ts  # resolved may lag rows already sent
    assert [events[log].after for log in (5, 6, 7)] == [{"id": "1", "val": "aa"}, {"id": "2", "val": "bb"},
                                                        {"id": "3", "val": "cc"}]
    assert events[8].after == events[7].after and events[8].commit_ts == events[7].commit_ts  # duplicate
    assert events[5].key_columns == ("id",) and events[5].column_types == {"id": "int", "val": "varchar"}
    for log, row_id in ((9, "1"), (10, "2")):  # deletes carry only the handle column
        assert (events[log].op, events[log].before, events[log].after) == (model.DELETE, {"id": row_id}, None)
        assert events[log].key_columns == ("id",) and events[log].column_types == {"id": "int"}
    assert (events[11].op, events[11].after) == (model.INSERT, {"id": "3", "val": "ZGQ="})
    # the PK-changing update id=2 -> id=4 arrives as delete id=2 (log 10) + insert id=4 (log 12)
    assert (events[12].op, events[12].after) == (model.INSERT, {"id": "4", "val": "ZWU="})
    assert events[10].position.partition == 1 and events[12].position.partition == 0


def _markdown_cell_json(cell: str) -> str:
    return cell.replace("\\\\", "\\")


def test_docs_column_type_examples(decoder):
    rows = json.loads((OPEN_VECTORS / "docs" / "docs-cn_column_type_examples.json").read_text())["rows"]
    seen = {}
    for entry in rows:
        for part in filter(None, (p.strip() for p in entry["example_markdown_cell_verbatim"].split(" / "))):
            column = json.loads(_markdown_cell_json(part))
            event = row(decoder, {"u": {"c": column}})
            seen[(column["t"], json.dumps(column["v"]))] = (event.after["c"], event.column_types["c"])
    assert seen[(1, "1")] == ("1", "tinyint")
    assert seen[(4, "153.123")] == ("153.123", "float")
    assert seen[(246, '"129012.1230000"')] == ("129012.1230000", "decimal")
    assert seen[(249, '"5rWL6K+VdGV4dA=="')] == ("测试text", "tinytext")  # no flag given: TEXT
    assert seen[(245, '"{\\"key1\\": \\"value1\\"}"')] == ('{"key1": "value1"}', "json")
    assert seen[(225, '"[1.23, -0.4]"')] == ("[1.23, -0.4]", "vector")
    # the VARBINARY example without its flag is plain text; with BinaryFlag it is the PNG magic
    assert seen[(15, json.dumps("\\x89PNG\\r\\n\\x1a\\n"))] == ("\\x89PNG\\r\\n\\x1a\\n", "varchar")
    binary = row(decoder, {"u": {"c": {"t": 15, "f": 1, "v": "\\x89PNG\\r\\n\\x1a\\n"}}})
    assert base64.b64decode(binary.after["c"]) == b"\x89PNG\r\n\x1a\n"


# --- wire rules ----------------------------------------------------------------------------------------------------


def test_update_with_old_values_and_without(decoder):
    cols = {"id": {"t": 3, "h": True, "f": 11, "v": 1}, "v": {"t": 15, "f": 0, "v": "new"}}
    update = row(decoder, {"u": cols, "p": {"id": cols["id"], "v": {"t": 15, "f": 0, "v": "old"}}})
    assert (update.op, update.after, update.before) == (model.UPDATE, {"id": "1", "v": "new"}, {"id": "1", "v": "old"})
    assert update.key_columns == ("id",)
    looks_like_insert = row(decoder, {"u": cols})
    assert (looks_like_insert.op, looks_like_insert.before) == (model.INSERT, None)


def test_only_updated_columns_old_image_is_partial(decoder):
    cols = {"id": {"t": 3, "h": True, "f": 11, "v": 1}, "a": {"t": 3, "f": 0, "v": 2}, "b": {"t": 3, "f": 0, "v": 3}}
    update = row(decoder, {"u": cols, "p": {"a": {"t": 3, "f": 0, "v": 9}}})
    assert update.before == {"a": "9"} and update.column_types == {"id": "int", "a": "int", "b": "int"}


def test_exact_numbers(decoder):
    event = row(decoder, {"u": {
        "u64": {"t": 8, "f": 128, "v": 18446744073709551615},
        "i64": {"t": 8, "f": 0, "v": -9223372036854775808},
        "big": {"t": 246, "f": 0, "v": "123456789012345678901234567890.123456789012345678901234567890"},
        "exp": {"t": 246, "f": 0, "v": "1.5E+3"},
        "bit": {"t": 16, "f": 0, "v": 18446744073709551615},
        "dbl": {"t": 5, "f": 0, "v": 0.1},
        "whole": {"t": 5, "f": 0, "v": 3},
        "widened": {"t": 4, "f": 0, "v": 1.2300000190734863},
        "short": {"t": 4, "f": 0, "v": 1.23},
    }})
    assert event.after == {
        "u64": "18446744073709551615", "i64": "-9223372036854775808",
        "big": "123456789012345678901234567890.123456789012345678901234567890", "exp": "1500",
        "bit": "18446744073709551615", "dbl": "0.1", "whole": "3.0", "widened": "1.23", "short": "1.23",
    }
    assert event.column_types["u64"] == "bigint unsigned" and event.column_types["i64"] == "bigint"


def test_integer_beyond_uint64_is_rejected_not_rounded(decoder):
    with pytest.raises(DecodeError, match="out of the 64-bit range"):
        row(decoder, {"u": {"x": {"t": 8, "f": 128, "v": 18446744073709551616}}})


def test_binary_strings_use_go_quote_escapes(decoder):
    quoted = r'\x00\a\b\f\n\r\t\v\\\"\u00e9\U0001f600\101ok\xff'
    event = row(decoder, {"u": {"b": {"t": 254, "f": 1, "v": quoted}}})
    assert base64.b64decode(event.after["b"]) == b'\x00\x07\x08\x0c\n\r\t\x0b\\"' + "é😀".encode() + b"Aok\xff"
    with pytest.raises(DecodeError, match="column 'b'"):
        row(decoder, {"u": {"b": {"t": 254, "f": 1, "v": r"\q"}}})


def test_text_and_blob_base64(decoder):
    event = row(decoder, {"u": {"t": {"t": 252, "f": 0, "v": "w6k="}, "b": {"t": 252, "f": 1, "v": "/w=="}}})
    assert event.after == {"t": "é", "b": "/w=="} and event.column_types == {"t": "text", "b": "blob"}
    with pytest.raises(DecodeError, match="not valid UTF-8"):
        row(decoder, {"u": {"t": {"t": 252, "f": 0, "v": "/w=="}}})
    with pytest.raises(DecodeError, match="base64"):
        row(decoder, {"u": {"t": {"t": 250, "f": 1, "v": "not base64!"}}})


def test_pre_2021_text_without_flag_falls_back_to_bytes_when_not_utf8(decoder):
    event = row(decoder, {"u": {"a": {"t": 251, "v": "/w=="}, "b": {"t": 251, "v": "w6k="}}})
    assert event.after == {"a": "/w==", "b": "é"}
    assert event.column_types == {"a": "longblob", "b": "longtext"}


def test_handle_key_from_flag_or_h(decoder):
    event = row(decoder, {"u": {"a": {"t": 3, "f": 2, "v": 1}, "b": {"t": 3, "h": True, "v": 2},
                                "c": {"t": 3, "f": 0, "v": 3}}})
    assert event.key_columns == ("a", "b")


def test_row_data_not_in_message_is_a_clear_error(decoder):
    value = json.dumps({"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}}})
    with pytest.raises(DecodeError, match="row data is not in the message.*handle-key"):
        decode_one(decoder, '{"ts":7,"scm":"s","tbl":"t","t":1,"ohk":true}', value)
    for key in ('{"ts":7,"scm":"s","tbl":"t","t":1,"ccl":"s3://bucket/x.json"}',
                '{"ts":7,"scm":"s","tbl":"t","t":1,"ohk":false,"ccl":"s3://bucket/x.json"}'):
        with pytest.raises(DecodeError,
                           match="in claim-check storage at 's3://bucket/x.json'.*no claim_check_storage_uri"):
            decode_one(decoder, key, value)


def test_ddl_types(decoder):
    cases = {1: "CREATE_SCHEMA", 4: "DROP_TABLE", 5: "ADD_COLUMN", 11: "TRUNCATE_TABLE", 14: "RENAME_TABLE",
             15: "SET_DEFAULT", 32: "ADD_INDEX", 47: "RENAME_TABLES", 21: "OTHER", 61: "OTHER"}
    for action, expected in cases.items():
        event = decode_one(decoder, '{"ts":5,"scm":"s","tbl":"t","t":2}', json.dumps({"q": "x", "t": action}))
        assert event.ddl_type == expected and event.query == "x"
    rename = decode_one(decoder, '{"ts":5,"scm":"s","tbl":"t","t":2}',
                        json.dumps({"q": "ALTER TABLE t RENAME COLUMN a TO b", "t": 12}))
    assert rename.ddl_type == "RENAME_COLUMN"


def test_empty_batch_and_missing_resolved_value(decoder):
    assert decoder.decode(message(b"\x00" * 7 + b"\x01", b"")) == []
    key, _ = frame_open([('{"ts":9,"t":3}', "")])
    assert decoder.decode(message(key, None)) == [ResolvedEvent(9, model.Position("topic", 0, 0, 0))]


@pytest.mark.parametrize("key, value, reason", [
    (None, b"", "no Kafka key"),
    (b"\x00\x01", b"", "shorter than the 8-byte version"),
    (b"\x00" * 7 + b"\x02", b"", "version 2"),
    (frame_open([(ROW_KEY, "{}")])[0][:-3], frame_open([(ROW_KEY, "{}")])[1], "key claims"),
    (frame_open([(ROW_KEY, "{}")])[0], b"", "row key without a value"),
    (frame_open([('{"ts":1,"t":3}', "")])[0], b"\x00" * 5, "value length prefix truncated"),
    (frame_open([('{"ts":1,"t":3}', "")])[0], b"\x00" * 16, "8 bytes left"),
    (*frame_open([(ROW_KEY, "{}")]), "no columns"),
    (*frame_open([(ROW_KEY, b"\x82\x53\x4e\x41\x50")]), "compressed"),
    (*frame_open([('{"ts":-1,"t":3}', "")]), "commit ts"),
    (*frame_open([('{"ts":1,"t":9}', "")]), "unknown message type"),
    (*frame_open([(ROW_KEY, '{"u":{"a":{"t":99,"f":0,"v":1}}}')]), "unknown MySQL type code 99"),
    (*frame_open([(ROW_KEY, '{"u":{"a":{"t":3,"f":0,"v":"1.5x"}}}')]), None),
    (*frame_open([(ROW_KEY, '{"u":{"a":{"t":15,"f":0,"v":5}}}')]), "expected a string"),
    (*frame_open([(ROW_KEY, '{"u":{"a":{"t":3,"f":0,"v":true}}}')]), "expected an integer"),
    (*frame_open([(ROW_KEY, '{"u":{"a":[1]}}')]), "not an object"),
])
def test_bad_messages_raise_precise_errors(decoder, key, value, reason):
    if reason is None:  # text in an integer column is kept, as Go's decoder does
        assert decoder.decode(message(key, value))[0].after == {"a": "1.5x"}
        return
    with pytest.raises(DecodeError, match=re.escape(reason)):
        decoder.decode(message(key, value))


def test_a_used_decoder_pickles_for_spark_executors(decoder):
    folder = CASE_SET / "simple"
    msg = message((folder / "key.bin").read_bytes(), (folder / "value.bin").read_bytes())
    first = decoder.decode(msg)
    assert pickle.loads(pickle.dumps(decoder)).decode(msg) == first


def test_decode_safely_names_the_position(decoder):
    [failure] = decode_safely(decoder, model.Message("orders", 3, 42, b"junk", b""))
    assert isinstance(failure, DecodeFailure) and failure.position == model.Position("orders", 3, 42)
    assert "shorter than the 8-byte version" in failure.reason and failure.key == b"junk"


def test_a_column_changing_type_is_not_served_from_the_shape_cache(decoder):
    first = row(decoder, {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}, "x": {"t": 3, "f": 0, "v": 5}}})
    second = row(decoder, {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 2}, "x": {"t": 8, "f": 128, "v": 5}}})
    third = row(decoder, {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 3}, "x": {"t": 15, "f": 1, "v": "\\x01"}}})
    assert first.column_types["x"] == "int" and second.column_types["x"] == "bigint unsigned"
    assert third.column_types["x"] == "varbinary" and third.after["x"] == "AQ=="
    assert first.column_types is not second.column_types  # every event owns its dict


def test_full_and_key_only_deletes_and_unsigned_bigints_stay_on_the_typed_path(decoder, monkeypatch):
    """A changefeed may send deletes of both shapes (``delete-only-output-handle-key-columns`` switched while it
    runs) and BIGINT UNSIGNED values above 2^63: both are read by the typed path once it knows the table's shapes,
    giving what the reference path gives (every other delete and every such value took the reference path, a
    fifth of a 275k-event run's rows)."""
    from ticdc_lakehouse.decode import open_protocol

    key = '{"ts":9,"scm":"typed","tbl":"shapes","t":1}'

    def image(i: int, big: int) -> dict:
        return {"id": {"t": 8, "h": True, "f": 11, "v": i}, "big": {"t": 8, "f": 160, "v": big},
                "name": {"t": 15, "f": 0, "v": f"n{i}"}}

    full = json.dumps({"d": image(1, 5)})
    key_only = json.dumps({"d": {"id": image(2, 5)["id"]}})
    wide = json.dumps({"u": image(3, (1 << 64) - 1)})
    for value in (wide, full, key_only):  # teach the table its shapes
        decode_one(decoder, key, value)
    references: list[int] = []
    slow = open_protocol._row_reference
    monkeypatch.setattr(open_protocol, "_row_reference", lambda *a: references.append(1) or slow(*a))
    values = (full, key_only, wide, key_only, full, wide)
    events = [decode_one(decoder, key, value) for value in values]
    assert references == []
    expected = [open_protocol._row_slow("typed", "shapes", 9, orjson.loads(v), model.Position("t", 0, 0, 0), 0)
                for v in values]
    for got, want in zip(events, expected):
        assert (got.op, got.after, got.before, got.column_types) == (want.op, want.after, want.before,
                                                                     want.column_types)
    assert events[2].after["big"] == str((1 << 64) - 1) and events[1].before == {"id": "2"}


# --- properties ---------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(row_changes(), ddl_events(), resolved_events), min_size=1, max_size=4),
       st.sampled_from(["ticdc", "tiflow"]))
def test_round_trip_from_our_encoder(events, flavor):
    """Whatever the encoder writes (one message per event, or all in one batch), the decoder reads back."""
    encoder = OpenProtocolEncoder(flavor)
    decoder = make_decoder("open")
    for batches in ([events], [[event] for event in events]):
        decoded = [e for batch in batches for e in decoder.decode(message(*encoder.encode_batch(batch)))]
        assert len(decoded) == len(events)
        for original, got in zip(events, decoded):
            if isinstance(original, RowChange):
                # tiflow sorts columns by name; and the typed path, shared by every decoder of the process, lists a
                # table's keys in the column order it first saw for that table (an earlier test may have sent the
                # same generated table name with its columns in another order; TiCDC keeps table order)
                assert sorted(got.key_columns) == sorted(original.key_columns)
                got = replace(got, key_columns=original.key_columns)
            assert replace(got, position=original.position) == original


def _vector_messages() -> list[tuple[bytes, bytes]]:
    samples = [((CASE_SET / "simple" / "key.bin").read_bytes(), (CASE_SET / "simple" / "value.bin").read_bytes())]
    for name in ("ddl_1", "rts_1", "row_1"):
        folder = OPEN_VECTORS / "tibigdata"
        samples.append(((folder / f"{name}.key.bin").read_bytes(), (folder / f"{name}.value.bin").read_bytes()))
    value = json.loads((OPEN_VECTORS / "tibigdata" / "row.json").read_text())
    samples.append(frame_open([(ROW_KEY, orjson.dumps(value))]))
    return samples


def test_fuzz_corrupted_vectors_never_escape_decode_safely(decoder):
    for index, (key, value) in enumerate(_vector_messages()):
        for broken_key in corruptions(key, seed=index, count=24) + [key]:
            for broken_value in corruptions(value, seed=index + 100, count=24)[:10] + [value]:
                for event in decode_safely(decoder, message(broken_key, broken_value)):
                    assert_valid_event(event)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(row_changes(), ddl_events(), resolved_events), min_size=1, max_size=3),
       st.randoms(use_true_random=False))
def test_fuzz_corrupted_encoder_output_never_escapes_decode_safely(events, rng):
    key, value = OpenProtocolEncoder().encode_batch(events)
    decoder = make_decoder("open")
    seed = rng.randrange(2**32)
    for broken_key in corruptions(key, seed=seed, count=8) + [key]:
        for broken_value in corruptions(value, seed=seed + 1, count=8):
            for event in decode_safely(decoder, message(broken_key, broken_value)):
                assert_valid_event(event)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(row_changes(), ddl_events(), resolved_events), min_size=1, max_size=3),
       st.sampled_from(["snappy", "lz4"]), st.randoms(use_true_random=False))
def test_fuzz_corrupted_compressed_messages_never_escape_decode_safely(events, codec, rng):
    """large-message-handle-compression: corrupted compressed value items are dead letters, like any bad bytes."""
    key, value = OpenProtocolEncoder(compression=codec).encode_batch(events)
    decoder = _large(codec)
    assert decode_safely(decoder, message(key, value)) == decode_safely(
        make_decoder("open"), message(*OpenProtocolEncoder().encode_batch(events))
    )
    seed = rng.randrange(2**32)
    for broken_value in corruptions(value, seed=seed, count=12):
        for event in decode_safely(decoder, message(key, broken_value)):
            assert_valid_event(event)


# --- the typed fast path reads exactly what the reference path reads ------------------------------------------

#: (type code, flags) of columns whose values the typed path converts differently: ints, decimals, floats,
#: doubles, binary strings, TEXT and BLOB, plain strings, a handle key by flag
TYPED_COLUMNS = [(8, 10), (8, 128), (3, 0), (246, 0), (5, 0), (4, 0), (254, 0), (15, 128), (252, 0), (252, 128),
                 (12, 0), (1, 0)]
JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.sampled_from([(1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, -(1 << 63), -(1 << 63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from(["12.50", "-0.1", "1e5", " 1", "1.", ".5", "1\n", "AAEC", "w6k=", "\\x00", "YWJj", "---"]),
    st.just({"x": 1}), st.just([1]),
)


def _column_json(code: int, flags: int, value, extra: dict) -> str:
    return json.dumps({"t": code, "f": flags, "v": value, **extra}) if value is not ... else \
        json.dumps({"t": code, "f": flags, **extra})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=st.lists(st.sampled_from(TYPED_COLUMNS), min_size=1, max_size=5),
       values=st.lists(st.one_of(JSON_VALUES, st.just(...)), min_size=5, max_size=5),
       handle=st.sampled_from([{}, {"h": True}, {"h": False}, {"h": None}, {"h": 1}]),
       part=st.sampled_from(["u", "d", "p"]), reorder=st.booleans(), extra_column=st.booleans())
def test_typed_path_agrees_with_the_reference_path(columns, values, handle, part, reorder, extra_column):
    """A table first taught its shape by a valid row, then a row of any values: the typed path (msgspec) must give
    exactly the reference path's event, or the reference path's error."""
    from ticdc_lakehouse.decode import open_protocol

    decoder = make_decoder("open")
    names = [f"c{i}" for i in range(len(columns))]
    teach = {name: {"t": code, "f": flags, "v": None} for name, (code, flags) in zip(names, columns)}
    cols = [(name, _column_json(code, flags, value, handle if i == 0 else {}))
            for i, (name, (code, flags), value) in enumerate(zip(names, columns, values))]
    if reorder:
        cols.reverse()
    if extra_column:
        cols.append(("zz", _column_json(254, 0, "x", {})))
    body = "{" + ",".join(f"{json.dumps(name)}:{text}" for name, text in cols) + "}"
    value_json = {"u": '{"u":%s}' % body, "d": '{"d":%s}' % body,
                  "p": '{"u":%s,"p":%s}' % (json.dumps(teach), body)}[part]
    key_json = '{"ts":7,"scm":"typed","tbl":"t%d","t":1}' % len(columns)
    decode_one(decoder, key_json, json.dumps({"u": teach}))  # teaches the table its shape
    decode_one(decoder, key_json, json.dumps({"d": teach}))
    try:
        expected = open_protocol._row_slow("typed", f"t{len(columns)}", 7, orjson.loads(value_json),
                                           model.Position("t", 0, 0, 0), 0)
    except DecodeError as exc:
        with pytest.raises(DecodeError) as raised:
            decode_one(decoder, key_json, value_json)
        assert str(raised.value) == str(exc)
        return
    got = decode_one(decoder, key_json, value_json)
    # key columns as a set: a message listing the table's columns in another order (TiCDC never does) keeps the
    # order of the shape learnt first, the reference path takes the message's order; both name the same key
    assert (got.op, got.after, got.before, sorted(got.key_columns), got.column_types) == \
        (expected.op, expected.after, expected.before, sorted(expected.key_columns), expected.column_types)


# --- large messages: large-message-handle-compression and claim-check --------------------------------------------


def _large(compression: str = "none", claim_check_storage_uri: str = "") -> OpenProtocolDecoder:
    from ticdc_lakehouse.decode import DecoderOptions
    from ticdc_lakehouse.decode.large_messages import LargeMessageOptions

    return make_decoder(
        "open", DecoderOptions(large_messages=LargeMessageOptions(compression, claim_check_storage_uri))
    )


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_compressed_row_and_ddl_values_decode_like_plain_ones(codec):
    rows = [RowChange("shop", "orders", 10 + i, model.UPDATE, {"id": str(i), "note": "n" * 300},
                      {"id": str(i), "note": "o"}, ("id",), {"id": "bigint", "note": "varchar(512)"},
                      model.Position("t", 0, 0)) for i in range(20)]
    ddl = DDLEvent("shop", "orders", 40, "ALTER TABLE orders ADD COLUMN c int", "ADD_COLUMN", model.Position("t", 0, 0))
    stream = OpenProtocolEncoder().encode_rows(rows) + [OpenProtocolEncoder().encode(ddl)] + \
        [OpenProtocolEncoder().encode(ResolvedEvent(50, model.Position("t", 0, 0)))]
    compressed = OpenProtocolEncoder(compression=codec).encode_rows(rows) + \
        [OpenProtocolEncoder(compression=codec).encode(ddl)] + \
        [OpenProtocolEncoder(compression=codec).encode(ResolvedEvent(50, model.Position("t", 0, 0)))]
    assert compressed[0][1] != stream[0][1]

    def decoded(decoder, messages):
        return [e for offset, (key, value) in enumerate(messages)
                for e in decoder.decode(model.Message("t", 0, offset, key, value))]

    assert decoded(_large(codec), compressed) == decoded(make_decoder("open"), stream)
    [failure] = decode_safely(make_decoder("open"), model.Message("t", 0, 9, *compressed[0]))[:1]
    assert isinstance(failure, DecodeFailure) and "large_message_compression" in failure.reason
    [failure] = decode_safely(_large("lz4" if codec == "snappy" else "snappy"),
                              model.Message("t", 0, 9, *compressed[0]))
    assert isinstance(failure, DecodeFailure) and "does not decompress" in failure.reason


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_a_claim_checked_row_is_read_from_the_claim_check_storage(codec, tmp_path):
    row_event = RowChange("shop", "orders", 77, model.INSERT, {"id": "5", "note": "x" * 10000}, None, ("id",),
                          {"id": "bigint", "note": "text"}, model.Position("t", 0, 0))
    key, value, stored = OpenProtocolEncoder(compression=codec).encode_claim_check(row_event, "s3:/b/claims/77.json")
    assert b'"ccl":"s3:/b/claims/77.json"' in key and len(value) < 200
    (tmp_path / "77.json").write_bytes(stored)
    [event] = _large(codec, f"file://{tmp_path}").decode(model.Message("t", 3, 41, key, value))
    [plain] = make_decoder("open").decode(model.Message("t", 3, 41, *OpenProtocolEncoder().encode(row_event)))
    assert event == plain and event.after["note"] == "x" * 10000
    assert (event.position.partition, event.position.offset) == (3, 41)
    (tmp_path / "77.json").unlink()
    [failure] = decode_safely(_large(codec, f"file://{tmp_path}"), model.Message("t", 3, 41, key, value))
    assert isinstance(failure, DecodeFailure) and "77.json" in failure.reason and "does not exist" in failure.reason
    assert (failure.position.offset, failure.key) == (41, key)
