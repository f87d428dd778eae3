"""Craft decoder against TiBigData's vectors, the seed doc's hex dumps and the layout rules of TiCDC's Go code."""

from __future__ import annotations

import json
import pickle
import re
import struct
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode import decode_safely, make_decoder
from ticdc_lakehouse.decode.craft import CraftDecoder
from ticdc_lakehouse.sim.encode.craft import CraftEncoder, uvarint, varint
from ticdc_lakehouse.core.model import DDLEvent, DecodeError, DecodeFailure, ResolvedEvent, RowChange

from tests.open_craft_support import (
    CRAFT_DESCRIPTORS,
    CRAFT_VECTORS,
    assert_valid_event,
    corruptions,
    ddl_events,
    message,
    resolved_events,
    row_changes,
    seed_dumps,
)

#: the decoder's value readers: the compiled one (built by setup) and the generated Python ones (its fallback)
READERS = [pytest.param(True, id="compiled-reader"), pytest.param(False, id="python-readers")]


@pytest.fixture(params=READERS)
def decoder(request) -> CraftDecoder:
    return CraftDecoder(compiled=request.param)


def test_the_compiled_reader_is_built_and_read_with_by_default():
    """``make setup`` builds it (setup.py); a decoder from the registry reads values with it."""
    from ticdc_lakehouse.decode import craft

    assert craft.COMPILED_READER, "ticdc_lakehouse/decode/_craft_reader.pyx was not built: run make setup"
    decoder = make_decoder("craft")
    decode(decoder, (CRAFT_VECTORS / "row_0.value.bin").read_bytes())
    layouts = [layout for _, by_count in decoder._dictionaries.values() for found in by_count.values()
               for layout in found]
    assert layouts and all(type(layout.values.__self__).__name__ == "ValueReader" for layout in layouts)


def decode(decoder: CraftDecoder, value: bytes) -> list[model.Event]:
    return decoder.decode(message(None, value))


def assemble(header: bytes, bodies: list[bytes], terms: list[str], tables: list[list[int]] | None = None) -> bytes:
    """A craft message from its parts, with correct size tables unless ``tables`` overrides them."""
    raw_terms = [t.encode() for t in terms]
    dictionary = (uvarint(len(raw_terms)) + b"".join(uvarint(len(t)) for t in raw_terms) + b"".join(raw_terms)
                  if raw_terms else b"")
    if tables is None:
        tables = [[len(header), len(dictionary)], [len(body) for body in bodies]]
    encoded = b""
    for table in tables:
        encoded += uvarint(len(table))
        last = 0
        for i, value in enumerate(table):
            encoded += varint(value if i == 0 else value - last)
            last = value
    return uvarint(1) + header + b"".join(bodies) + dictionary + encoded + uvarint(len(encoded))[::-1]


def resolved_header(ts: int) -> bytes:
    return uvarint(ts) + uvarint(3) + varint(-1) + varint(-1) + varint(-1)


# --- TiBigData vectors ---------------------------------------------------------------------------------------------


def test_every_vector_matches_the_collector_cross_check(decoder):
    expected = json.loads((CRAFT_VECTORS / "decoded_by_collector.json").read_text())["files"]
    for name, entry in expected.items():
        events = decode(decoder, (CRAFT_VECTORS / name).read_bytes())
        assert len(events) == len(entry["events"]), name
        for event, want in zip(events, entry["events"]):
            if want["type"] == "RESOLVED":
                assert isinstance(event, ResolvedEvent) and event.ts == want["commitTs"]
                continue
            assert (event.schema, event.table, event.commit_ts) == (want["schema"], want["table"] or "",
                                                                     want["commitTs"])
            if want["type"] == "DDL":
                assert isinstance(event, DDLEvent) and event.query == want["query"]
                assert event.ddl_type == {1: "CREATE_SCHEMA", 2: "DROP_SCHEMA", 3: "CREATE_TABLE"}[want["ddlType"]]
            else:
                [group] = want["columnGroups"]
                assert isinstance(event, RowChange) and group["groupType"] == "new" and event.op == model.INSERT
                assert event.after == {c["name"]: c["rawValueHex"] for c in group["columns"]}
                assert event.column_types == {"null": "null"}


def test_tibigdata_assertions(decoder):
    resolved = [decode(decoder, (CRAFT_VECTORS / f"rts_{i}.value.bin").read_bytes()) for i in range(3)]
    assert all(len(events) == 1 and isinstance(events[0], ResolvedEvent) for events in resolved)
    assert [events[0].ts for events in resolved] == sorted(events[0].ts for events in resolved)
    for i in range(3):
        [row] = decode(decoder, (CRAFT_VECTORS / f"row_{i}.value.bin").read_bytes())
        assert (row.op, row.schema, row.table) == (model.INSERT, "test", "test")
    ddls = {i: decode(decoder, (CRAFT_VECTORS / f"ddl_{i}.value.bin").read_bytes())[0] for i in range(4)}
    assert (ddls[0].ddl_type, ddls[0].schema, ddls[0].table, ddls[0].query) == (
        "CREATE_SCHEMA", "a", "", "create database a;")
    assert (ddls[1].ddl_type, ddls[1].query) == ("DROP_SCHEMA", "drop database a;")
    assert (ddls[2].ddl_type, ddls[2].query) == ("CREATE_SCHEMA", "create database a;")
    assert (ddls[3].ddl_type, ddls[3].schema, ddls[3].table, ddls[3].query) == (
        "CREATE_TABLE", "a", "c", "create table c(id int primary key);")


# --- the seed doc's hex dumps (where the doc's tables are wrong, its dumps follow the code) ---------------------


def test_seed_doc_row_dump(decoder):
    [event] = decode(decoder, seed_dumps()[0])
    assert (event.op, event.schema, event.table) == (model.UPDATE, "a", "b")
    assert event.after == {"varchar": "varchar1", "string": "string1", "date": "2021/01/02",
                           "timestamp": "2021/01/02 00:00:00", "datetime": "2021/01/02 00:00:00",
                           "float": "2.0", "long": "2000", "null": None}
    assert event.before == {"varchar": "varchar0", "string": "string0", "date": "2021/01/01",
                            "timestamp": "2021/01/01 00:00:00", "datetime": "2021/01/01 00:00:00",
                            "float": "1.0", "long": "1000", "null": None}
    assert event.column_types == {"varchar": "varchar", "string": "char", "date": "date", "timestamp": "timestamp",
                                  "datetime": "datetime", "float": "float", "long": "int", "null": "null"}


def test_seed_doc_ddl_and_resolved_dumps(decoder):
    [ddl] = decode(decoder, seed_dumps()[1])
    assert (ddl.schema, ddl.table, ddl.query, ddl.ddl_type) == ("a", "b", "create table a", "CREATE_SCHEMA")
    [resolved] = decode(decoder, seed_dumps()[2])
    assert isinstance(resolved, ResolvedEvent) and resolved.ts == 424316594097225729


# --- layout rules ---------------------------------------------------------------------------------------------------


def test_value_encodings_by_type(decoder):
    row = RowChange("s", "t", 5, model.INSERT, {
        "i": "-5", "u": "18446744073709551615", "y": "2024", "b": "255", "e": "2", "set": "5",
        "f": "0.1", "d": "2.5", "dec": "-0.0100", "bin": "AP8=", "txt": "é", "blob": "", "c": "", "n": None,
    }, None, ("i",), {
        "i": "bigint", "u": "bigint unsigned", "y": "year", "b": "bit", "e": "enum", "set": "set", "f": "float",
        "d": "double", "dec": "decimal", "bin": "varbinary", "txt": "text", "blob": "blob", "c": "char", "n": "int",
    }, model.Position("", 0, 0))
    _, value = CraftEncoder().encode(row)
    [event] = decode(decoder, value)
    assert event.after == row.after and event.column_types == row.column_types and event.key_columns == ("i",)


def test_batches_share_one_dictionary_and_keep_event_order(decoder):
    rows = [RowChange("s", "t", 100 + i, op, {"id": str(i), "v": "x" * i} if op != model.DELETE else None,
                      {"id": str(i), "v": "old"} if op != model.INSERT else None, ("id",),
                      {"id": "int", "v": "varchar"}, model.Position("", 0, 0))
            for i, op in enumerate([model.INSERT, model.UPDATE, model.DELETE, model.INSERT])]
    _, value = CraftEncoder().encode_batch(rows)
    events = decode(decoder, value)
    assert [(e.op, e.commit_ts, e.position.seq) for e in events] == [
        ("I", 100, 0), ("U", 101, 1), ("D", 102, 2), ("I", 103, 3)]
    assert events[1].before == {"id": "1", "v": "old"} and events[2].before == {"id": "2", "v": "old"}


def test_changed_column_types_with_the_same_dictionary_are_not_cached_wrongly(decoder):
    def one(desc: str, value: str) -> RowChange:
        row = RowChange("s", "t", 1, model.INSERT, {"x": value}, None, (), {"x": desc}, model.Position("", 0, 0))
        return decode(decoder, CraftEncoder().encode(row)[1])[0]

    assert one("int", "-3").column_types == {"x": "int"}
    assert one("int unsigned", "3").column_types == {"x": "int unsigned"}
    assert one("varbinary", "AQ==").after == {"x": "AQ=="}


def test_long_values_take_the_generic_path(decoder):
    row = RowChange("s", "t", 1, model.INSERT, {"id": "1", "big": "ü" * 5000}, None, ("id",),
                    {"id": "int", "big": "longtext"}, model.Position("", 0, 0))
    [event] = decode(decoder, CraftEncoder().encode(row)[1])
    assert event.after == row.after


def _row_group(kind: int = 1, lengths: bytes = b"\x01", values: bytes = b"", code: int = 3, flag: int = 0) -> bytes:
    return bytes([kind]) + uvarint(1) + varint(1) + uvarint(code) + uvarint(flag) + lengths + values


def _row_message(group: bytes, ts: int = 9) -> bytes:
    header = uvarint(ts) + uvarint(1) + varint(-1) + varint(0) + varint(0)
    raw_terms = [b"t", b"c"]
    dictionary = uvarint(2) + uvarint(1) + uvarint(1) + b"".join(raw_terms)
    return assemble(header, [group], ["t", "c"],
                    [[len(header), len(dictionary)], [len(group)], [len(group)]])


@pytest.mark.parametrize("value, reason", [
    (b"", "empty value"),
    (b"\x02\x00", "unsupported craft version 2"),
    (assemble(resolved_header(5), [b""], [])[:-1], "size"),
    (assemble(resolved_header(5), [b""], [])[:-2] + b"\x00" + assemble(resolved_header(5), [b""], [])[-2:], None),
    (assemble(resolved_header(5) + b"\x00", [b""], []), "unread bytes"),
    (assemble(resolved_header(5), [b"\x01"], []), "1-byte body"),
    (assemble(uvarint(5) + uvarint(7) + varint(-1) + varint(-1) + varint(-1), [b""], []), "unknown type 7"),
    (assemble(uvarint(5) + uvarint(3) + varint(-1) + varint(4) + varint(-1), [b""], ["a"]), "term id 4"),
    (_row_message(_row_group(kind=3, lengths=varint(-1))), "column group type 3"),
    (_row_message(_row_group(lengths=varint(-2))), "value length -2"),
    (_row_message(_row_group(lengths=varint(3), values=b"\x80\x80\x80")), "runs past"),
    (_row_message(_row_group(lengths=varint(2), values=b"\x01\x01")), "extra bytes"),
    (_row_message(_row_group(lengths=varint(4), values=b"abcd", code=5)), "expected 8"),
    (_row_message(_row_group(lengths=varint(1), values=b"\xff", code=15)), "not valid UTF-8"),
    (_row_message(_row_group(lengths=varint(1), values=b"\x01", code=6)), "value-less type"),
    (_row_message(_row_group(lengths=varint(1), values=b"\x01", code=200)), "unknown MySQL type code 200"),
    (_row_message(_row_group(lengths=varint(1), values=b"x", code=246)), "not a decimal"),
])
def test_bad_messages_raise_precise_errors(decoder, value, reason):
    if reason is None:  # a byte inserted in the trailing region shifts everything: still an error
        with pytest.raises(DecodeError):
            decode(decoder, value)
        return
    with pytest.raises(DecodeError, match=re.escape(reason)):
        decode(decoder, value)


def test_a_valid_hand_assembled_row(decoder):
    [event] = decode(decoder, _row_message(_row_group(lengths=varint(1), values=varint(-7))))
    assert (event.after, event.column_types, event.commit_ts) == ({"c": "-7"}, {"c": "int"}, 9)


def test_a_used_decoder_pickles_for_spark_executors(decoder):
    raw = (CRAFT_VECTORS / "row_0.value.bin").read_bytes()
    first = decode(decoder, raw)
    clone = pickle.loads(pickle.dumps(decoder))
    assert decode(clone, raw) == first


def test_decode_safely_names_the_position(decoder):
    [failure] = decode_safely(decoder, model.Message("t", 1, 7, None, b"\x01"))
    assert isinstance(failure, DecodeFailure) and failure.position == model.Position("t", 1, 7)


# --- properties ---------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(row_changes(CRAFT_DESCRIPTORS), min_size=1, max_size=4), ddl_events(), resolved_events))
def test_round_trip_from_our_encoder(events):
    encoder = CraftEncoder()
    decoder = make_decoder("craft")
    if isinstance(events, list):
        decoded = decode(decoder, encoder.encode_batch(events)[1])
        decoded_alone = [decode(decoder, encoder.encode(event)[1])[0] for event in events]
    else:
        events = [events]
        decoded = decoded_alone = decode(decoder, encoder.encode(events[0])[1])
    assert len(decoded) == len(events)
    for original, got, alone in zip(events, decoded, decoded_alone):
        assert replace(got, position=original.position) == original
        assert replace(alone, position=original.position) == original


def test_fuzz_corrupted_vectors_never_escape_decode_safely(decoder):
    samples = [path.read_bytes() for path in sorted(CRAFT_VECTORS.glob("*.bin"))] + seed_dumps()
    for index, value in enumerate(samples):
        for broken in corruptions(value, seed=index, count=200):
            for event in decode_safely(decoder, message(None, broken)):
                assert_valid_event(event)


@pytest.mark.parametrize("compiled", READERS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_changes(CRAFT_DESCRIPTORS), min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_fuzz_corrupted_encoder_output_never_escapes_decode_safely(compiled, rows, rng):
    _, value = CraftEncoder().encode_batch(rows)
    decoder = CraftDecoder(compiled=compiled)
    for broken in corruptions(value, seed=rng.randrange(2**32), count=30):
        for event in decode_safely(decoder, message(None, broken)):
            assert_valid_event(event)


# --- the row-batch path and the generated readers agree with the generic reader -----------------------------------


def _outcome(decoder: CraftDecoder, value: bytes) -> list:
    """Events without positions' identity games, or the failure reason: what a caller can observe."""
    return [event.reason if isinstance(event, DecodeFailure) else event
            for event in decode_safely(decoder, message(None, value))]


@pytest.mark.parametrize("compiled", READERS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_changes(CRAFT_DESCRIPTORS), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_row_batch_path_agrees_with_the_reference_reader(compiled, rows, rng):
    """Same events, or the same error, with every shortcut on (row batches, fast value readers) and off.

    Each batch is decoded twice by the fast decoder: the first time teaches it the layouts, the second takes the
    row-batch path; corrupted variants must fail (or not) exactly as the reference decoder says.
    """
    rows += [replace(row, commit_ts=rng.randrange(2**64)) for row in rows[: rng.randrange(len(rows) + 1)]]
    _, value = CraftEncoder().encode_batch(rows)
    fast, reference = CraftDecoder(compiled=compiled), CraftDecoder(reference=True)
    expected = _outcome(reference, value)
    assert _outcome(fast, value) == expected
    assert _outcome(fast, value) == expected  # layouts known now: the row-batch path
    for broken in corruptions(value, seed=rng.randrange(2**32), count=40):
        assert _outcome(fast, broken) == _outcome(reference, broken)


U64 = 2**64 - 1
#: one column's (type code, flags, value length chunk, value bytes): edges of every value kind
READER_EDGES = [
    (8, 0x80, varint(10), b"\xff" * 9 + b"\x01"),  # BIGINT UNSIGNED max, a 10-byte uvarint
    (8, 0x80, varint(10), b"\xff" * 9 + b"\x02"),  # beyond 64 bits
    (8, 0x80, varint(11), b"\x80" * 10 + b"\x00"),  # 11 bytes
    (8, 0, varint(10), b"\xff" * 9 + b"\x01"),  # BIGINT min (zigzag)
    (3, 0, varint(3), b"\x81\x80\x00"),  # a non-minimal encoding of -1, as Go reads it
    (3, 0, varint(2), b"\x05\x05"),  # a varint that ends before its value does
    (3, 0, varint(1), b"\x85"),  # a varint that does not end
    (3, 0, varint(0), b""),  # an empty integer
    (247, 0, varint(2), b"\x80\x01"),  # ENUM index 128
    (248, 0, varint(1), b"\x05"),  # SET bitmask
    (16, 0, varint(1), b"\x7f"),  # BIT
    (13, 0, varint(2), b"\xcc\x1f"),  # YEAR (zigzag)
    (15, 0, varint(20000), "ü".encode() * 10000),  # a length that takes three varint bytes
    (15, 0, varint(2), b"\xc3\x28"),  # invalid UTF-8
    (15, 0, varint(3), b"\xed\xa0\x80"),  # an encoded surrogate
    (15, 1, varint(3), b"\x00\xff\x10"),  # VARBINARY -> base64
    (252, 1, varint(0), b""),  # an empty BLOB
    (5, 0, varint(8), struct.pack("<d", float("nan"))),
    (5, 0, varint(8), struct.pack("<d", -0.0)),
    (5, 0, varint(7), b"\x00" * 7),  # a DOUBLE of 7 bytes
    (4, 0, varint(8), struct.pack("<d", 1.2300000190734863)),  # FLOAT widened to float64
    *[(246, 0, varint(len(text)), text) for text in (
        b"12.50", b"-0.5", b"007", b"1.", b".5", b"-", b"", b"1.2.3", b"1e5", b" 1", b"-.5", b"--1", b"\xd9\xa3")],
    (6, 0, varint(0), b""),  # the NULL type: no value bytes
    (6, 0, varint(1), b"\x00"),  # ... and one too many
    (3, 0, varint(-1), b""),  # NULL
    (3, 0, varint(-2), b""),  # a negative length that is not NULL
    (3, 0, varint(5), b"\x02"),  # a value that runs past its group
    (3, 0, b"\x80", b""),  # a length varint that does not end
]


@pytest.mark.parametrize("code, flags, lengths, values", READER_EDGES)
def test_both_value_readers_read_every_edge_as_the_reference_does(code, flags, lengths, values):
    """The same row, or the same decode error, from the compiled reader, the generated Python readers and the
    reference (which reads every value column by column), the first time and once the layout is known."""
    value = _row_message(_row_group(lengths=lengths, values=values, code=code, flag=flags))
    expected = _outcome(CraftDecoder(reference=True), value)
    for decoder in (CraftDecoder(compiled=True), CraftDecoder(compiled=False)):
        assert _outcome(decoder, value) == expected
        assert _outcome(decoder, value) == expected


@pytest.mark.parametrize("compiled", READERS)
def test_a_batch_of_known_layouts_takes_the_row_batch_path(compiled):
    types = {"id": "bigint", "amount": "decimal", "name": "varchar", "score": "double", "n": "int unsigned"}
    rows = [RowChange("db", "t", 400 + i, op, after, before, ("id",), types, model.Position("", 0, 0))
            for i, (op, after, before) in enumerate([
                (model.INSERT, {"id": "1", "amount": "-12.50", "name": "a", "score": "0.5", "n": "4000000000"}, None),
                (model.UPDATE, {"id": "1", "amount": "3", "name": None, "score": "1e+300", "n": "0"},
                 {"id": "1", "amount": "-12.50", "name": "a", "score": "0.5", "n": "4000000000"}),
                (model.DELETE, None, {"id": "-70000", "amount": "0.00", "name": "é" * 40, "score": "-0.0", "n": "7"}),
            ])]
    _, value = CraftEncoder().encode_batch(rows)
    decoder = CraftDecoder(compiled=compiled)
    first = decode(decoder, value)
    batch = decoder._row_batch(value, message(None, value))
    assert batch is not None and batch == first == decode(CraftDecoder(reference=True), value)
    assert [replace(event, position=row.position) for event, row in zip(batch, rows)] == rows


@given(st.integers(0, 2**70), st.binary(max_size=3), st.integers(0, 3))
def test_long_uvarint_reads_as_the_plain_reader(number, tail, cut):
    from ticdc_lakehouse.decode.craft import _long_uvarint, _uvarint

    data = b"\x05" + uvarint(number) + tail
    end = max(1, len(data) - cut)

    def outcome(read):
        try:
            return read(data, 1, end)
        except DecodeError as exc:
            return str(exc)

    assert outcome(_long_uvarint) == outcome(_uvarint)


def test_a_layout_wider_than_tidb_allows_is_still_read_as_the_reference_reads_it():
    """More columns than the compiled reader takes (4096, TiDB's limit): the Python readers answer instead."""
    count = 4100
    group = (bytes([1]) + uvarint(count) + b"".join(varint(1) for _ in range(count)) + uvarint(3) * count
             + uvarint(0) * count + varint(1) * count + varint(-7) * count)
    terms = ["t"] + [f"c{i}" for i in range(count)]
    raw_terms = [t.encode() for t in terms]
    dictionary = uvarint(len(raw_terms)) + b"".join(uvarint(len(t)) for t in raw_terms) + b"".join(raw_terms)
    header = uvarint(9) + uvarint(1) + varint(-1) + varint(0) + varint(0)
    value = assemble(header, [group], terms, [[len(header), len(dictionary)], [len(group)], [len(group)]])
    [event] = _outcome(CraftDecoder(), value)
    assert len(event.after) == count and set(event.after.values()) == {"-7"}
    assert [event] == _outcome(CraftDecoder(reference=True), value)
