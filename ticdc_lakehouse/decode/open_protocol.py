"""TiCDC Open Protocol (JSON) decoder.

Wire format (tiflow ``pkg/sink/codec/open``, pingcap/ticdc ``pkg/sink/codec/open``):

* Kafka key = ``u64be version (1)`` then, per event, ``u64be length`` + key JSON. There is no version in the
  value; the Nth key goes with the Nth value item.
* Kafka value = per event ``u64be length`` + value JSON. A resolved event's item is empty (length 0).
* Key JSON ``{"ts","scm","tbl","rid","ptn","t","ohk","ccl"}`` with ``t`` 1 = row, 2 = DDL, 3 = resolved.
* Row value ``{"u": cols, "p": cols, "d": cols}``; a column is ``{"t": type code, "h": handle?, "f": flags,
  "v": value}``. ``d`` = delete; ``u`` with ``p`` = update; ``u`` alone = insert *or* an update sent without old
  values, which the merge upserts the same way, so it is decoded as INSERT.

What the decoder does beyond splitting the framing, and why:

* Numbers are parsed by orjson, which is exact up to uint64 (BIGINT UNSIGNED max) and for every double; DECIMAL
  is a JSON string on the wire, so no value ever goes through a float it did not come from. A JSON integer
  beyond uint64 would come back as a float and is rejected, never rounded.
* TEXT and BLOB (codes 249-252) are base64 because TiCDC holds them as Go ``[]byte``: TEXT decodes to its UTF-8
  text, BLOB stays bytes (canonical base64). BINARY/VARBINARY (BinaryFlag) are Go ``strconv.Quote`` bodies and
  decode back to bytes. CHAR/VARCHAR without the flag are plain text, even if they look like base64 (the
  docs' event stream shows ``"ZGQ="`` for a VARCHAR: that is the literal text).
* FLOAT is normalized to the shortest text of its float32, so the old widened ``1.2300000190734863`` and the
  current ``1.23`` decode alike.
* Legacy batches that pack several DDL or resolved events in one message (2020 encoders) and empty batches
  (a key that is only the version) are read as they are; current TiCDC never writes them.
* ``ohk`` (only handle-key columns) and ``ccl`` (claim check) keys mean the row is *not* in the message; they
  raise a DecodeError saying so, instead of merging a partial row.
* Not supported: values compressed with ``large-message-handle-compression`` (the error says so).

Speed: rows of one table share their column names, type codes and flags. The first row of a table builds a
*shape*: descriptors, handle columns and a converter generated for exactly those columns, which checks every
row's codes and flags and converts its values in straight-line code. Anything the shape does not expect (a type
change, a flag change, a value of an unexpected JSON type, pre-2021 messages without flags) goes to the
column-by-column path, which is the reference behaviour and raises the precise errors.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any, Callable, Optional

from orjson import JSONDecodeError, loads

from ticdc_lakehouse import model
from ticdc_lakehouse.decode.canonical_text import decimal_text, is_plain_decimal
from ticdc_lakehouse.decode.go_text import float32_repr, go_unquote
from ticdc_lakehouse.decode.mysql_type_codes import (
    BLOB_CODES,
    FLAG_BINARY,
    FLAG_HANDLE_KEY,
    INTEGER_CODES,
    STRING_CODES,
    TYPE_BIT,
    TYPE_DECIMAL,
    TYPE_DOUBLE,
    TYPE_ENUM,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
    TYPE_NEWDECIMAL,
    TYPE_SET,
    TYPE_YEAR,
    descriptor,
)
from ticdc_lakehouse.decode.positions import make_position
from ticdc_lakehouse.decode.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.model import DecodeError, DDLEvent, Message, ResolvedEvent, RowChange

BATCH_VERSION = 1
MESSAGE_ROW = 1
MESSAGE_DDL = 2
MESSAGE_RESOLVED = 3
_UINT64_MAX = (1 << 64) - 1

_U64 = struct.Struct(">Q")

# value kinds: how a column's JSON value becomes its canonical string
K_STR = 0  # JSON string kept as is (CHAR/VARCHAR text, dates, times, JSON, vector)
K_INT = 1  # JSON integer -> digits (integers, YEAR, BIT, ENUM index, SET bitmask)
K_DECIMAL = 2  # JSON string, plain decimal text
K_DOUBLE = 3
K_FLOAT = 4
K_QUOTED_BYTES = 5  # BINARY/VARBINARY: Go strconv.Quote body -> bytes -> base64
K_BASE64_TEXT = 6  # TEXT family: base64 -> UTF-8 text
K_BASE64_BYTES = 7  # BLOB family, GEOMETRY: base64 -> canonical base64
K_BASE64_GUESS = 8  # TEXT/BLOB without a flag (2020 format): text when it is UTF-8, else bytes

_INT_LIKE = INTEGER_CODES | {TYPE_YEAR, TYPE_BIT, TYPE_ENUM, TYPE_SET}

#: (type code, flags or None) -> (descriptor, kind, handle key by flag); filled lazily, bounded by the codes
_SPECS: dict[tuple[Any, Any], tuple[str, int, bool]] = {}


def _spec(code: Any, flags: Any) -> tuple[str, int, bool]:
    """Descriptor and value kind of a column, from its type code and flag (None when the message has no "f")."""
    if type(code) is not int:
        raise DecodeError(f"column type code {code!r} is not an integer")
    if flags is not None and (type(flags) is not int or flags < 0):
        raise DecodeError(f"column flag {flags!r} is not an unsigned integer")
    bits = flags or 0
    try:
        desc = descriptor(code, bits)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    if code in _INT_LIKE:
        kind = K_INT
    elif code in (TYPE_NEWDECIMAL, TYPE_DECIMAL):
        kind = K_DECIMAL
    elif code == TYPE_DOUBLE:
        kind = K_DOUBLE
    elif code == TYPE_FLOAT:
        kind = K_FLOAT
    elif code in STRING_CODES:
        kind = K_QUOTED_BYTES if bits & FLAG_BINARY else K_STR
    elif code in BLOB_CODES:
        if flags is None:
            kind = K_BASE64_GUESS
        else:
            kind = K_BASE64_BYTES if bits & FLAG_BINARY else K_BASE64_TEXT
    elif code == TYPE_GEOMETRY:
        kind = K_BASE64_BYTES
    else:
        kind = K_STR
    spec = (desc, kind, bool(bits & FLAG_HANDLE_KEY))
    if len(_SPECS) < 4096:
        _SPECS[(code, flags)] = spec
    return spec


def _convert(kind: int, value: Any, name: str, types: dict[str, str]) -> str:
    """The slow path of value conversion: everything but plain strings and in-range integers."""
    tv = type(value)
    if kind == K_INT:
        if tv is str:
            # TiCDC never sends it, but old Go test fixtures put text in TINYINT columns; Go's decoder keeps any
            # non-number as it is, and so do we rather than dropping the row.
            return value
        if tv is float:
            raise ValueError(f"integer {value!r} is out of the 64-bit range")
        raise ValueError(f"expected an integer, got {value!r}")
    if kind == K_DECIMAL:
        if tv is not str:
            raise ValueError(f"expected decimal text, got {value!r}")
        return decimal_text(value)
    if kind == K_DOUBLE or kind == K_FLOAT:
        if tv is not float and tv is not int:
            raise ValueError(f"expected a number, got {value!r}")
        number = float(value)
        return float32_repr(number) if kind == K_FLOAT else repr(number)
    if tv is not str:
        raise ValueError(f"expected a string, got {value!r}")
    if kind == K_QUOTED_BYTES:
        return base64.b64encode(go_unquote(value)).decode("ascii")
    raw = _b64decode(value)
    if kind == K_BASE64_BYTES:
        return base64.b64encode(raw).decode("ascii")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if kind == K_BASE64_GUESS:
            types[name] = types[name].replace("text", "blob")
            return base64.b64encode(raw).decode("ascii")
        raise ValueError("TEXT value is not valid UTF-8 (BinaryFlag not set)") from None
    return value  # pragma: no cover


def _b64decode(text: str) -> bytes:
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"invalid base64: {exc}") from None


def _columns(
    cols: Any, types: dict[str, str], keys: Optional[list[str]], where: str
) -> dict[str, Optional[str]]:
    """Canonical values of one column map (``u``, ``p`` or ``d``); records descriptors and handle columns."""
    if type(cols) is not dict:
        raise DecodeError(f"{where} is not a JSON object")
    out: dict[str, Optional[str]] = {}
    specs_get = _SPECS.get
    for name, col in cols.items():
        try:
            code = col["t"]
            flags = col.get("f")
            value = col.get("v")
            handle = col.get("h")
        except (KeyError, TypeError, AttributeError):
            raise DecodeError(f"{where}: column {name!r} is not an object with a type code \"t\"") from None
        try:
            spec = specs_get((code, flags))
        except TypeError:  # an unhashable type code or flag: let _spec say what is wrong
            spec = None
        if spec is None:
            try:
                spec = _spec(code, flags)
            except DecodeError as exc:
                raise DecodeError(f"{where}: column {name!r}: {exc}") from None
        desc, kind, key_by_flag = spec
        types[name] = desc
        if keys is not None and (key_by_flag or handle is True):
            keys.append(name)
        if value is None:
            out[name] = None
        elif kind == K_STR and type(value) is str:
            out[name] = value
        elif kind == K_INT and type(value) is int and -0x8000000000000000 <= value <= _UINT64_MAX:
            out[name] = str(value)
        elif kind == K_DECIMAL and type(value) is str and is_plain_decimal(value):
            out[name] = value
        else:
            try:
                out[name] = _convert(kind, value, name, types)
            except ValueError as exc:
                raise DecodeError(f"{where}: column {name!r} ({desc}): {exc}") from None
    return out


def _quoted_bytes(value: str) -> str:
    return base64.b64encode(go_unquote(value)).decode("ascii")


def _base64_text(value: str) -> str:
    return _b64decode(value).decode("utf-8")


def _base64_bytes(value: str) -> str:
    return base64.b64encode(_b64decode(value)).decode("ascii")


#: value kind -> source lines that convert the column's value ``VAL`` in place; ``return None`` hands the row to
#: the slow path, which converts it column by column or raises a precise error
_CONVERT_SOURCE: dict[int, str] = {
    K_STR: "if VAL is not None and type(VAL) is not str: return None",
    K_INT: """\
t = type(VAL)
if t is int: VAL = str(VAL)
elif t is not str and VAL is not None: return None""",
    # TiDB's plain decimal text is canonical; anything else goes to the slow path (normalize or reject)
    K_DECIMAL: """\
if type(VAL) is str:
    t = VAL[1:] if VAL[:1] == '-' else VAL
    if not t.isascii() or not t.replace('.', '', 1).isdigit() or t[0] == '.' or t[-1] == '.': return None
elif VAL is not None: return None""",
    K_DOUBLE: """\
t = type(VAL)
if t is float or t is int: VAL = repr(float(VAL))
elif VAL is not None: return None""",
    K_FLOAT: """\
t = type(VAL)
if t is float or t is int: VAL = float32_repr(float(VAL))
elif VAL is not None: return None""",
    K_QUOTED_BYTES: "if type(VAL) is str: VAL = quoted_bytes(VAL)\nelif VAL is not None: return None",
    K_BASE64_TEXT: "if type(VAL) is str: VAL = base64_text(VAL)\nelif VAL is not None: return None",
    K_BASE64_BYTES: "if type(VAL) is str: VAL = base64_bytes(VAL)\nelif VAL is not None: return None",
}
_CONVERT_GLOBALS = {"float32_repr": float32_repr, "quoted_bytes": _quoted_bytes, "base64_text": _base64_text,
                    "base64_bytes": _base64_bytes}


class _Shape:
    """What every row of one table shares in a column map: names, codes, flags, descriptors, handle columns.

    ``convert`` is a function generated for the shape (the way ``dataclasses`` and ``namedtuple`` generate
    theirs): straight-line code that checks each column's type code and flag against the shape, converts its
    value as its type requires and returns the canonical row, or None when anything differs, so that the
    careful per-column path takes over. It is several times faster than a generic loop, which matters because
    decoding runs for every row in the lake.
    """

    __slots__ = ("types", "keys", "convert")

    def __init__(self, types: dict[str, str], keys: tuple[str, ...], convert: Callable[[dict], Optional[dict]]):
        self.types = types
        self.keys = keys
        self.convert = convert


_SHAPES: dict[tuple[str, ...], _Shape] = {}
_LAST_SHAPE: list[Optional[_Shape]] = [None]


def _build_shape(cols: dict) -> Optional[_Shape]:
    """The shape of a column map, or None when it has something only the slow path handles."""
    types: dict[str, str] = {}
    keys = []
    fetch = []
    convert = []
    for position, (name, col) in enumerate(cols.items()):
        if type(col) is not dict or "t" not in col or "f" not in col:
            return None
        code = col["t"]
        flags = col["f"]
        handle = col.get("h")
        if handle is not None and handle is not True:
            return None
        try:
            desc, kind, key_by_flag = _spec(code, flags)
        except DecodeError:
            return None
        if kind == K_BASE64_GUESS or type(name) is not str:
            return None
        types[name] = desc
        fetch.append(f"c = cols[{name!r}]")
        fetch.append(f"if c['t'] != {code!r} or c['f'] != {flags!r}: return None")
        if key_by_flag or handle:
            keys.append(name)
            if not key_by_flag:  # handle key by "h" alone (docs-era data): it must be there on every row
                fetch.append("if c.get('h') is not True: return None")
        fetch.append(f"v{position} = c['v']")
        convert.append(_CONVERT_SOURCE[kind].replace("VAL", f"v{position}"))
    count = len(types)
    body = ["def convert(cols, str=str, type=type, repr=repr, float=float, int=int, len=len):", "    try:"]
    body += ["        " + line for line in fetch]
    body += ["    except (KeyError, TypeError):", "        return None"]
    body += [f"    if len(cols) != {count}: return None", "    try:"]
    for block in convert:
        body += ["        " + line for line in block.split("\n")]
    body += ["    except (ValueError, UnicodeDecodeError):", "        return None"]
    body.append("    return {" + ", ".join(f"{name!r}: v{i}" for i, name in enumerate(types)) + "}")
    namespace = dict(_CONVERT_GLOBALS)
    exec("\n".join(body), namespace)  # noqa: S102 - source built above from repr() literals and fixed templates
    shape = _Shape(types, tuple(keys), namespace["convert"])
    if len(_SHAPES) >= 1024:
        _SHAPES.clear()
    _SHAPES[tuple(cols)] = shape
    return shape


def _fast_columns(cols: Any) -> Optional[tuple[dict[str, Optional[str]], _Shape]]:
    """Canonical values and shape of a column map, or None when it needs the careful slow path."""
    if type(cols) is not dict:
        return None
    # rows come in runs of one table: try the last shape first (its converter checks every name, code and flag)
    shape = _LAST_SHAPE[0]
    if shape is not None:
        out = shape.convert(cols)
        if out is not None:
            return out, shape
    shape = _SHAPES.get(tuple(cols))
    if shape is not None:
        out = shape.convert(cols)
        if out is not None:
            _LAST_SHAPE[0] = shape
            return out, shape
    shape = _build_shape(cols)  # first row of a table, or its columns changed type
    if shape is None:
        return None
    out = shape.convert(cols)
    if out is None:
        return None
    _LAST_SHAPE[0] = shape
    return out, shape


def _payload_error(what: str, index: int, payload: bytes, exc: Exception) -> DecodeError:
    hint = ""
    if payload[:1] != b"{":
        hint = (" (the payload is not JSON; values compressed with large-message-handle-compression are not"
                " supported)")
    return DecodeError(f"Open Protocol event {index}: {what} is not valid JSON: {exc}{hint}")


def _row_from_body(schema: str, table: str, ts: int, body: Any, position: model.Position, index: int) -> RowChange:
    """A row event from its parsed value JSON: the shape fast path, else the column-by-column slow path."""
    if type(body) is not dict:
        raise DecodeError(f"Open Protocol event {index}: row value is not a JSON object")
    deleted = body.get("d")
    if deleted:
        fast = _fast_columns(deleted)
        if fast is None:
            return _row_slow(schema, table, ts, body, position, index)
        before, shape = fast
        return RowChange(schema, table, ts, model.DELETE, None, before, shape.keys, dict(shape.types), position)
    fast = _fast_columns(body.get("u"))
    if fast is None:
        return _row_slow(schema, table, ts, body, position, index)
    after, shape = fast
    types = dict(shape.types)
    previous = body.get("p")
    if not previous:
        return RowChange(schema, table, ts, model.INSERT, after, None, shape.keys, types, position)
    fast = _fast_columns(previous)
    if fast is None:
        return _row_slow(schema, table, ts, body, position, index)
    before, old_shape = fast
    if old_shape is not shape:
        types.update(old_shape.types)
    return RowChange(schema, table, ts, model.UPDATE, after, before, shape.keys, types, position)


def _row_slow(schema: str, table: str, ts: int, body: dict, position: model.Position, index: int) -> RowChange:
    """Column by column, with a precise error for whatever is wrong; also reads pre-2021 messages."""
    types: dict[str, str] = {}
    keys: list[str] = []
    deleted = body.get("d")
    if deleted:
        before = _columns(deleted, types, keys, f"Open Protocol event {index} \"d\"")
        after = None
        op = model.DELETE
    else:
        updated = body.get("u")
        if not updated:
            raise DecodeError(f"Open Protocol event {index}: row value has no columns in \"u\" or \"d\"")
        after = _columns(updated, types, keys, f"Open Protocol event {index} \"u\"")
        previous = body.get("p")
        if previous:
            before = _columns(previous, types, None, f"Open Protocol event {index} \"p\"")
            op = model.UPDATE
        else:
            before = None
            op = model.INSERT
    return RowChange(schema, table, ts, op, after, before, tuple(keys), types, position)


class OpenProtocolDecoder:
    """Decoder for TiCDC Open Protocol messages (registry name ``open``)."""

    def __init__(self, options: Any = None) -> None:
        self.options = options

    def decode(self, message: Message) -> list[model.Event]:
        key = message.key
        value = message.value if message.value is not None else b""
        if key is None:
            raise DecodeError("Open Protocol message has no Kafka key (the events' keys and the version live there)")
        key_len = len(key)
        if key_len < 8:
            raise DecodeError(f"Open Protocol key is {key_len} bytes, shorter than the 8-byte version")
        version = _U64.unpack_from(key, 0)[0]
        if version != BATCH_VERSION:
            raise DecodeError(f"unsupported Open Protocol batch version {version} (expected {BATCH_VERSION})")
        value_len = len(value)
        events: list[model.Event] = []
        topic, partition, offset = message.topic, message.partition, message.offset
        unpack = _U64.unpack_from
        append = events.append
        kpos = 8
        vpos = 0
        index = 0
        while kpos < key_len:
            if kpos + 8 > key_len:
                raise DecodeError(f"Open Protocol event {index}: key length prefix truncated at byte {kpos}")
            size = unpack(key, kpos)[0]
            kpos += 8
            if kpos + size > key_len:
                raise DecodeError(f"Open Protocol event {index}: key claims {size} bytes, {key_len - kpos} left")
            key_json = key[kpos:kpos + size]
            kpos += size
            try:
                head = loads(key_json)
            except JSONDecodeError as exc:
                raise _payload_error("key", index, key_json, exc) from None
            if vpos < value_len:
                if vpos + 8 > value_len:
                    raise DecodeError(f"Open Protocol event {index}: value length prefix truncated at byte {vpos}")
                size = unpack(value, vpos)[0]
                vpos += 8
                if vpos + size > value_len:
                    raise DecodeError(
                        f"Open Protocol event {index}: value claims {size} bytes, {value_len - vpos} left")
                payload: Optional[bytes] = value[vpos:vpos + size]
                vpos += size
            else:
                payload = None
            position = make_position(topic, partition, offset, index)
            # fast path for the bulk of any topic: a plain row key {ts, scm, tbl, t} (more fields, e.g. ohk/ccl,
            # or anything unusual go through _event, which checks everything)
            if type(head) is dict and len(head) == 4 and head.get("t") == 1 and payload is not None:
                ts = head.get("ts")
                schema = head.get("scm")
                table = head.get("tbl")
                if (type(ts) is int and 0 <= ts <= 0xFFFFFFFFFFFFFFFF and type(schema) is str
                        and type(table) is str):
                    try:
                        body = loads(payload)
                    except JSONDecodeError as exc:
                        raise _payload_error("row value", index, payload, exc) from None
                    append(_row_from_body(schema, table, ts, body, position, index))
                    index += 1
                    continue
            append(self._event(head, payload, position, index))
            index += 1
        if vpos != value_len:
            raise DecodeError(
                f"Open Protocol value has {value_len - vpos} bytes left after the {index} events of the key")
        return events

    def _event(self, head: Any, payload: Optional[bytes], position: model.Position, index: int) -> model.Event:
        if type(head) is not dict:
            raise DecodeError(f"Open Protocol event {index}: key JSON is not an object")
        ts = head.get("ts")
        kind = head.get("t")
        if type(ts) is not int or not 0 <= ts <= _UINT64_MAX:
            raise DecodeError(f"Open Protocol event {index}: key has no valid commit ts: {ts!r}")
        if kind == MESSAGE_ROW:
            if payload is None:
                raise DecodeError(f"Open Protocol event {index}: row key without a value item")
            return self._row(head, ts, payload, position, index)
        if kind == MESSAGE_DDL:
            if payload is None:
                raise DecodeError(f"Open Protocol event {index}: DDL key without a value item")
            return self._ddl(head, ts, payload, position, index)
        if kind == MESSAGE_RESOLVED:
            # the value item of a resolved event is empty by definition; a missing one is tolerated
            return ResolvedEvent(ts=ts, position=position)
        raise DecodeError(f"Open Protocol event {index}: unknown message type t={kind!r}")

    @staticmethod
    def _names(head: dict, index: int) -> tuple[str, str]:
        schema = head.get("scm", "")
        table = head.get("tbl", "")
        if type(schema) is not str or type(table) is not str:
            raise DecodeError(f"Open Protocol event {index}: scm/tbl are not strings")
        return schema, table

    def _row(self, head: dict, ts: int, payload: bytes, position: model.Position, index: int) -> RowChange:
        schema, table = self._names(head, index)
        if head.get("ohk") is True:
            raise DecodeError(
                f"Open Protocol event {index} ({schema}.{table} @ {ts}): the row data is not in the message: the key"
                " has ohk=true (large-message-handle-option=handle-key-only), so only the handle-key columns were"
                " sent; the full row must be read from upstream TiDB at this ts")
        location = head.get("ccl")
        if location:
            raise DecodeError(
                f"Open Protocol event {index} ({schema}.{table} @ {ts}): the row data is not in the message: it was"
                f" moved to claim-check storage at {location!r} (large-message-handle-option=claim-check)")
        try:
            body = loads(payload)
        except JSONDecodeError as exc:
            raise _payload_error("row value", index, payload, exc) from None
        return _row_from_body(schema, table, ts, body, position, index)

    def _ddl(self, head: dict, ts: int, payload: bytes, position: model.Position, index: int) -> DDLEvent:
        schema, table = self._names(head, index)
        try:
            body = loads(payload)
        except JSONDecodeError as exc:
            raise _payload_error("DDL value", index, payload, exc) from None
        if type(body) is not dict:
            raise DecodeError(f"Open Protocol event {index}: DDL value is not a JSON object")
        query = body.get("q")
        action = body.get("t")
        if type(query) is not str or type(action) is not int:
            raise DecodeError(f"Open Protocol event {index}: DDL value needs a string \"q\" and an integer \"t\"")
        return DDLEvent(schema=schema, table=table, commit_ts=ts, query=query,
                        ddl_type=ddl_type_for_action(action, query), position=position)
