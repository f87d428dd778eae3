"""Shared helpers for the Open Protocol and Craft tests: vector paths, framing, event strategies, event checks."""

from __future__ import annotations

import base64
import random
import re
import struct
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Optional

import orjson
from hypothesis import strategies as st

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode.common.go_text import float32_repr
from ticdc_lakehouse.core.model import DDLEvent, DecodeFailure, Message, Position, ResolvedEvent, RowChange

SHARED = Path(__file__).resolve().parents[2] / "shared"
VECTORS = SHARED / "ticdc-vectors"
OPEN_VECTORS = VECTORS / "open-protocol"
CRAFT_VECTORS = VECTORS / "craft" / "tibigdata"
CRAFT_SEED_DOC = SHARED / "seeds" / "ticdc-craft-protocol.zh.md"

_U64 = struct.Struct(">Q")


def frame_open(pairs: list[tuple[str | bytes, str | bytes]]) -> tuple[bytes, bytes]:
    """Open Protocol framing of (key JSON, value JSON) pairs: version 1 in the key, u64be lengths."""
    key = bytearray(_U64.pack(1))
    value = bytearray()
    for key_json, value_json in pairs:
        key_bytes = key_json.encode() if isinstance(key_json, str) else key_json
        value_bytes = value_json.encode() if isinstance(value_json, str) else value_json
        key += _U64.pack(len(key_bytes)) + key_bytes
        value += _U64.pack(len(value_bytes)) + value_bytes
    return bytes(key), bytes(value)


def seed_dumps() -> list[bytes]:
    """The three hexdump blocks of the seed doc (row, DDL, resolved), as bytes."""
    blocks = re.findall(r"```\n((?:    [0-9a-f]{2} .*\n)+)```", CRAFT_SEED_DOC.read_text(encoding="utf-8"))
    dumps = []
    for block in blocks:
        hex_bytes = []
        for line in block.splitlines():
            hex_bytes += line.strip().split("  |")[0].split()
        dumps.append(bytes(int(h, 16) for h in hex_bytes))
    return dumps


def message(key: Optional[bytes], value: Optional[bytes], offset: int = 0, partition: int = 0) -> Message:
    return Message("topic", partition, offset, key, value)


def without_position(event: model.Event) -> model.Event:
    return replace(event, position=Position("", 0, 0))


# --- validity of whatever a decoder returns -------------------------------------------------------------------

OPS = {model.INSERT, model.UPDATE, model.DELETE}


def assert_valid_event(event: model.Event) -> None:
    """What the merge job relies on, whatever bytes the event came from."""
    assert isinstance(event, (RowChange, DDLEvent, ResolvedEvent, DecodeFailure)), type(event)
    assert isinstance(event.position, Position)
    if isinstance(event, DecodeFailure):
        assert isinstance(event.reason, str) and event.reason
        return
    if isinstance(event, ResolvedEvent):
        assert isinstance(event.ts, int) and 0 <= event.ts < 2**64
        return
    assert isinstance(event.schema, str) and isinstance(event.table, str)
    assert isinstance(event.commit_ts, int) and 0 <= event.commit_ts < 2**64
    if isinstance(event, DDLEvent):
        assert isinstance(event.query, str) and isinstance(event.ddl_type, str)
        return
    assert event.op in OPS
    images = [image for image in (event.after, event.before) if image is not None]
    assert images, "a row change without any row image"
    if event.op == model.INSERT:
        assert event.after is not None and event.before is None
    if event.op == model.DELETE:
        assert event.after is None and event.before is not None
    for image in images:
        for name, value in image.items():
            assert isinstance(name, str)
            assert value is None or isinstance(value, str), (name, value)
            assert isinstance(event.column_types.get(name), str), name
    assert all(isinstance(name, str) for name in event.key_columns)


# --- hypothesis strategies: canonical model events of every type family ------------------------------------------

_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1), "smallint": (-(2**15), 2**15 - 1), "mediumint": (-(2**23), 2**23 - 1),
    "int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1),
}

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=24)


def _decimal_text(draw: st.DrawFn) -> str:
    digits = draw(st.integers(min_value=1, max_value=65))
    scale = draw(st.integers(min_value=0, max_value=min(30, digits)))
    unscaled = draw(st.integers(min_value=-(10**digits - 1), max_value=10**digits - 1))
    return format(Decimal(unscaled).scaleb(-scale), "f")


def _time_text(draw: st.DrawFn) -> str:
    hours = draw(st.integers(min_value=0, max_value=838))
    text = f"{hours:02d}:{draw(st.integers(0, 59)):02d}:{draw(st.integers(0, 59)):02d}"
    if draw(st.booleans()):
        text += f".{draw(st.integers(0, 999_999)):06d}"
    return ("-" if draw(st.booleans()) and hours else "") + text


def _datetime_text(draw: st.DrawFn) -> str:
    moment = draw(st.datetimes())
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{moment.microsecond:06d}" if draw(st.booleans()) else "")


def _not_negative_zero(value: float) -> bool:
    return value != 0 or str(value) == "0.0"


def value_for(draw: st.DrawFn, desc: str) -> str:
    """A canonical value for a decoded-form descriptor."""
    base, _, rest = desc.partition(" ")
    if base in _INT_RANGES:
        low, high = _INT_RANGES[base]
        if rest == "unsigned":
            low, high = 0, high * 2 + 1
        return str(draw(st.integers(min_value=low, max_value=high)))
    if base == "year":
        return str(draw(st.integers(min_value=1901, max_value=2155)))
    if base in ("bit", "set"):
        return str(draw(st.integers(min_value=0, max_value=2**64 - 1)))
    if base == "enum":
        return str(draw(st.integers(min_value=0, max_value=65535)))
    if base == "decimal":
        return _decimal_text(draw)
    if base == "float":  # -0.0 is left out: JSON "-0" reads back as the integer 0
        value = draw(st.floats(width=32, allow_nan=False, allow_infinity=False).filter(_not_negative_zero))
        return float32_repr(value)
    if base == "double":
        value = draw(st.floats(allow_nan=False, allow_infinity=False).filter(_not_negative_zero))
        return repr(value)
    if base in ("char", "varchar", "text", "tinytext", "mediumtext", "longtext"):
        return draw(_text)
    if base in ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob", "geometry"):
        return base64.b64encode(draw(st.binary(max_size=24))).decode()
    if base == "date":
        return draw(st.dates()).isoformat()
    if base in ("datetime", "timestamp"):
        return _datetime_text(draw)
    if base == "time":
        return _time_text(draw)
    if base == "json":
        members = st.one_of(st.integers(-(2**53), 2**53), _text, st.booleans())
        payload = draw(st.dictionaries(_text, members, max_size=3))
        return orjson.dumps(payload).decode()
    if base == "vector":
        values = draw(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=4))
        return "[" + ",".join(float32_repr(v) for v in values) + "]"
    raise AssertionError(f"no strategy for {desc}")


#: descriptors as the Open/Craft decoders produce them (bare: no lengths, precision or ENUM/SET members)
DESCRIPTORS = [
    "tinyint", "tinyint unsigned", "smallint", "smallint unsigned", "mediumint", "mediumint unsigned", "int",
    "int unsigned", "bigint", "bigint unsigned", "year", "bit", "enum", "set", "decimal", "float", "double",
    "char", "varchar", "binary", "varbinary", "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob",
    "mediumblob", "longblob", "date", "datetime", "timestamp", "time", "json", "vector", "geometry", "null",
]
#: Craft writes no value for GEOMETRY (TiCDC does not support it), so it cannot round-trip there
CRAFT_DESCRIPTORS = [desc for desc in DESCRIPTORS if desc != "geometry"]

_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)


@st.composite
def tables(draw: st.DrawFn, descriptors: list[str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(column name -> descriptor, key columns in column order); the first column is a BIGINT key."""
    names = draw(st.lists(_names, min_size=0, max_size=8, unique=True).filter(lambda n: "id" not in n))
    types = {"id": "bigint"}
    for name in names:
        types[name] = draw(st.sampled_from(descriptors))
    extra_keys = [n for n in names if types[n] in ("int", "varchar") and draw(st.booleans())]
    keys = tuple(n for n in types if n == "id" or n in extra_keys)
    return types, keys


@st.composite
def row_images(draw: st.DrawFn, types: dict[str, str], keys: tuple[str, ...]) -> dict[str, Optional[str]]:
    image: dict[str, Optional[str]] = {}
    for name, desc in types.items():
        if desc == "null" or (name not in keys and draw(st.integers(0, 4)) == 0):
            image[name] = None
        else:
            image[name] = value_for(draw, desc)
    return image


@st.composite
def row_changes(draw: st.DrawFn, descriptors: list[str] = DESCRIPTORS) -> RowChange:
    types, keys = draw(tables(descriptors))
    op = draw(st.sampled_from([model.INSERT, model.UPDATE, model.DELETE]))
    after = draw(row_images(types, keys)) if op != model.DELETE else None
    before = draw(row_images(types, keys)) if op != model.INSERT else None
    return RowChange(
        schema=draw(_names), table=draw(_names), commit_ts=draw(st.integers(0, 2**64 - 1)), op=op, after=after,
        before=before, key_columns=keys, column_types=dict(types), position=Position("", 0, 0))


_ROUND_TRIP_DDL_TYPES = ["CREATE_SCHEMA", "DROP_SCHEMA", "CREATE_TABLE", "DROP_TABLE", "ADD_COLUMN", "DROP_COLUMN",
                         "ADD_INDEX", "DROP_INDEX", "TRUNCATE_TABLE", "MODIFY_COLUMN", "RENAME_TABLE",
                         "RENAME_TABLES", "SET_DEFAULT", "OTHER"]


@st.composite
def ddl_events(draw: st.DrawFn) -> DDLEvent:
    ddl_type = draw(st.sampled_from(_ROUND_TRIP_DDL_TYPES + ["RENAME_COLUMN"]))
    query = draw(_text.filter(lambda q: "rename" not in q.lower()))
    if ddl_type == "RENAME_COLUMN":
        query = f"ALTER TABLE t RENAME COLUMN a TO b /* {query} */"
    return DDLEvent(schema=draw(st.one_of(st.just(""), _names)), table=draw(st.one_of(st.just(""), _names)),
                    commit_ts=draw(st.integers(0, 2**64 - 1)), query=query, ddl_type=ddl_type,
                    position=Position("", 0, 0))


resolved_events = st.builds(ResolvedEvent, ts=st.integers(0, 2**64 - 1), position=st.just(Position("", 0, 0)))


def corruptions(data: bytes, seed: int, count: int = 40) -> list[bytes]:
    """Truncations and random byte edits of one message part, deterministic per seed."""
    rng = random.Random(seed)
    out = [data[:cut] for cut in sorted({rng.randrange(len(data) + 1) for _ in range(count // 4)})] if data else []
    for _ in range(count):
        mutated = bytearray(data)
        if not mutated:
            break
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(len(mutated))
            action = rng.randrange(3)
            if action == 0:
                mutated[position] = rng.randrange(256)
            elif action == 1:
                del mutated[position]
            else:
                mutated.insert(position, rng.randrange(256))
        out.append(bytes(mutated))
    return out
