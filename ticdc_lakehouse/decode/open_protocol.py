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
* ``ohk`` (only handle-key columns) means the row is *not* in the message: a DecodeError says so, instead of
  merging a partial row. A ``ccl`` (claim check) key is read from the changefeed's claim-check storage, and row
  and DDL value items compressed with ``large-message-handle-compression`` are decompressed first
  (``large_messages``), as TiCDC's consumer does.

Speed: rows of one table share their column names, type codes and flags. The first row of a table builds a
*shape*: descriptors, handle columns and a converter generated for exactly those columns, which checks every
row's codes and flags and converts its values in straight-line code. Anything the shape does not expect (a type
change, a flag change, a value of an unexpected JSON type, pre-2021 messages without flags) goes to the
column-by-column path, which is the reference behaviour and raises the precise errors.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Annotated, Any, Callable, Literal, Optional, Union

import msgspec

from orjson import JSONDecodeError, loads

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode.common.canonical_text import decimal_text, is_plain_decimal
from ticdc_lakehouse.decode.common.go_text import float32_repr, go_unquote
from ticdc_lakehouse.decode.common.mysql_type_codes import (
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
from ticdc_lakehouse.decode.common.positions import make_position
from ticdc_lakehouse.decode.common.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.decode.large_messages import LargeMessages
from ticdc_lakehouse.core.model import DecodeError, DDLEvent, Message, ResolvedEvent, RowChange

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


# --- the typed fast path --------------------------------------------------------------------------------------
#
# A row shape becomes msgspec Struct types: one per column (its type code and flag as Literals, its value's JSON
# types), one per column map (every column required, no other allowed) and one per value body ({u, p, d}).
# msgspec checks all of that in C while it parses, so the Python left per row is the conversion of the few
# values that are not canonical already. Whatever the types reject (another shape, a value of another JSON type,
# bad JSON, an integer beyond 64 bits) is decoded again by the orjson path, the reference, which also learns the
# new shape; so the typed path only ever answers for input it reads exactly as the reference does.

#: an integer in a FLOAT/DOUBLE column, read in the signed 64-bit range; anything else goes to the reference path
_INT64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
#: TiDB's plain decimal text, which is canonical; anything else goes to the reference path (normalize or reject)
_PLAIN_DECIMAL = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]+(?:\.[0-9]+)?\Z")]

#: value kind -> JSON types its value may have on the typed path
_VALUE_TYPES: dict[int, Any] = {
    K_STR: Optional[str],
    # any JSON integer (msgspec reads them whole): the conversion sends one outside [-2^63, 2^64-1] to the
    # reference path, so BIGINT UNSIGNED values above 2^63 stay on the typed path; text in an integer column is
    # kept as is (old Go test fixtures do that)
    K_INT: Union[int, str, None],
    K_DECIMAL: Optional[_PLAIN_DECIMAL],
    K_DOUBLE: Union[float, _INT64, None],
    K_FLOAT: Union[float, _INT64, None],
    K_QUOTED_BYTES: Optional[str],
    K_BASE64_TEXT: Optional[str],
    K_BASE64_BYTES: Optional[str],
}

#: value kind -> source lines that turn a column's value ``VAL`` (of a type from _VALUE_TYPES) into its canonical
#: string in place; conversions that raise ValueError hand the row to the reference path, for its error message
_CONVERT_SOURCE: dict[int, str] = {
    K_STR: "",
    K_INT: "if type(VAL) is int:\n    if not -0x8000000000000000 <= VAL <= 0xFFFFFFFFFFFFFFFF: raise ValueError\n"
           "    VAL = str(VAL)",
    K_DECIMAL: "",
    K_DOUBLE: "if VAL is not None: VAL = repr(float(VAL))",
    K_FLOAT: "if VAL is not None: VAL = float32_repr(float(VAL))",
    K_QUOTED_BYTES: "if VAL is not None: VAL = quoted_bytes(VAL)",
    K_BASE64_TEXT: "if VAL is not None: VAL = base64_text(VAL)",
    K_BASE64_BYTES: "if VAL is not None: VAL = base64_bytes(VAL)",
}
_CONVERT_GLOBALS = {"float32_repr": float32_repr, "quoted_bytes": _quoted_bytes, "base64_text": _base64_text,
                    "base64_bytes": _base64_bytes}

#: (code, flags, how "h" is checked, kind) -> the msgspec Struct of such a column
_COLUMN_STRUCTS: dict[tuple[int, int, Any, int], type] = {}


def _column_struct(code: int, flags: int, handle: bool, key_by_flag: bool, kind: int) -> type:
    """The Struct of one column: ``t`` and ``f`` exactly as in the shape, ``v`` of the kind's JSON types.

    ``h`` matters only to a column that is not a handle key by flag: then it must be ``true`` if the shape had it
    and absent or null if not (anything else is the reference path's to judge). Other members are ignored, as the
    reference path ignores them.
    """
    handle_type: Any = Any if key_by_flag else (Literal[True] if handle else None)
    cache_key = (code, flags, handle_type, kind)
    struct = _COLUMN_STRUCTS.get(cache_key)
    if struct is None:
        fields: list[tuple[Any, ...]] = [("t", Literal[code]), ("f", Literal[flags])]
        fields.append(("h", handle_type) if handle_type is Literal[True] else ("h", handle_type, None))
        fields.append(("v", _VALUE_TYPES[kind], None))  # a missing "v" is NULL, as in the reference path
        struct = msgspec.defstruct(f"Column_{code}_{flags}", fields, kw_only=True, gc=False)
        if len(_COLUMN_STRUCTS) < 4096:
            _COLUMN_STRUCTS[cache_key] = struct
    return struct


class _RowShape:
    """What every column map of one table shares: names, codes, flags, descriptors, handle columns.

    ``struct`` is the msgspec type of such a column map; ``convert`` is a function generated for the shape (the
    way ``dataclasses`` and ``namedtuple`` generate theirs): straight-line code that takes each column's value
    from a decoded ``struct``, converts it as its type requires and returns the canonical row, or None when a
    value needs the reference path. ``types`` is shared by every row of the shape (RowChange.column_types is
    read-only by contract), so building a row copies nothing.
    """

    __slots__ = ("signature", "struct", "types", "keys", "convert")

    def __init__(self, signature: tuple, struct: type, types: dict[str, str], keys: tuple[str, ...],
                 convert: Callable[[Any], Optional[dict[str, Optional[str]]]]) -> None:
        self.signature = signature
        self.struct = struct
        self.types = types
        self.keys = keys
        self.convert = convert


_ROW_SHAPES: dict[tuple, _RowShape] = {}


def _row_shape(cols: Any) -> Optional[_RowShape]:
    """The shape of a column map parsed by orjson, or None when it has something only the reference path reads."""
    if type(cols) is not dict or not cols:
        return None
    signature = []
    for name, col in cols.items():
        if type(col) is not dict or "t" not in col or "f" not in col:
            return None  # pre-2021 messages without flags: the reference path guesses TEXT vs BLOB per value
        code, flags, handle = col["t"], col["f"], col.get("h")
        if type(code) is not int or type(flags) is not int or not 0 <= code < 1 << 32 or not 0 <= flags < 1 << 62:
            return None
        if handle is not None and handle is not True:
            return None
        signature.append((name, code, flags, handle is True))
    key = tuple(signature)
    shape = _ROW_SHAPES.get(key)
    if shape is None:
        shape = _build_row_shape(key)
        if shape is not None:
            if len(_ROW_SHAPES) >= 1024:
                _ROW_SHAPES.clear()
            _ROW_SHAPES[key] = shape
    return shape


def _build_row_shape(signature: tuple[tuple[str, int, int, bool], ...]) -> Optional[_RowShape]:
    types: dict[str, str] = {}
    keys = []
    fields = []
    rename = {}
    body = ["def convert(row, str=str, type=type, repr=repr, float=float):", "    try:"]
    for position, (name, code, flags, handle) in enumerate(signature):
        try:
            desc, kind, key_by_flag = _spec(code, flags)
        except DecodeError:
            return None
        if kind == K_BASE64_GUESS:
            return None
        types[name] = desc
        if key_by_flag or handle:
            keys.append(name)
        field = f"c{position}"
        fields.append((field, _column_struct(code, flags, handle, key_by_flag, kind)))
        rename[field] = name
        body.append(f"        v{position} = row.{field}.v")
        body += ["        " + line for line in _CONVERT_SOURCE[kind].replace("VAL", f"v{position}").split("\n") if line]
    body += ["    except (ValueError, UnicodeDecodeError):  # base64, Go quoting: the reference path says why",
             "        return None"]
    body.append("    return {" + ", ".join(f"{name!r}: v{i}" for i, name in enumerate(types)) + "}")
    namespace = dict(_CONVERT_GLOBALS)
    try:  # msgspec refuses some names (quotes, backslashes, control characters): the reference path reads them
        struct = msgspec.defstruct("Row", fields, rename=rename, forbid_unknown_fields=True, gc=False)
    except (TypeError, ValueError):
        return None
    exec("\n".join(body), namespace)  # noqa: S102 - source built above from repr() literals and fixed templates
    return _RowShape(signature, struct, types, tuple(keys), namespace["convert"])


def _payload_error(what: str, index: int, payload: bytes, exc: Exception) -> DecodeError:
    hint = ""
    if payload[:1] != b"{":
        hint = (" (the payload is not JSON: if TiCDC compressed it with large-message-handle-compression, set the"
                " same large_message_compression in the changefeed's configuration)")
    return DecodeError(f"Open Protocol event {index}: {what} is not valid JSON: {exc}{hint}")


class _BodyCodec:
    """The typed decoder of one table's row values: the shapes of its ``u``, ``p`` and ``d`` column maps.

    ``row`` returns the event, or None when the typed path does not read the value exactly (the reference path
    then decodes it and teaches the table its new shapes).

    A table may send deletes of two shapes in one stream: the whole old row, and only its handle-key columns
    (``delete-only-output-handle-key-columns``, switched on while the changefeed runs). So ``deleted`` holds up to
    ``DELETE_SHAPES`` shapes, latest learnt first, and ``d`` is kept raw and read by the first that fits: one
    shape for ``d`` would send every other delete down the reference path.
    """

    __slots__ = ("decode", "inserted", "previous", "deleted", "delete_decoders", "update_types")

    def __init__(self, inserted: Optional[_RowShape], previous: Optional[_RowShape],
                 deleted: tuple[_RowShape, ...]) -> None:
        def member(shape: Optional[_RowShape]) -> tuple[Any, ...]:
            return (Optional[shape.struct], None) if shape is not None else (None, None)

        # a raw ``d`` (msgspec has no Optional Raw: a JSON null arrives as the text ``null``, which no shape reads,
        # so the reference path judges it, as it does an absent ``d``'s empty object)
        raw = (msgspec.Raw, None) if deleted else (None, None)
        body = msgspec.defstruct("Body", [("u", *member(inserted)), ("p", *member(previous)), ("d", *raw)],
                                 gc=False)
        self.decode = msgspec.json.Decoder(body).decode
        self.inserted = inserted
        self.previous = previous
        self.deleted = deleted
        self.delete_decoders = tuple((shape, msgspec.json.Decoder(shape.struct).decode) for shape in deleted)
        self.update_types: dict[str, str] = {}
        if inserted is not None and previous is not None:
            self.update_types = inserted.types if previous is inserted else {**inserted.types, **previous.types}

    def row(self, schema: str, table: str, ts: int, payload: bytes, position: model.Position) -> Optional[RowChange]:
        try:
            body = self.decode(payload)
        except Exception:  # noqa: BLE001 - msgspec's DecodeError/ValidationError, UnicodeDecodeError, ...:
            return None  # whatever it is, the reference path judges it
        if body.d is not None:
            for shape, decode in self.delete_decoders:
                try:
                    columns = decode(body.d)
                except Exception:  # noqa: BLE001 - another shape (or bad JSON): the next one, or the reference
                    continue
                before = shape.convert(columns)
                if before is None:
                    return None
                return RowChange(schema, table, ts, model.DELETE, None, before, shape.keys, shape.types, position)
            return None
        if body.u is None:
            return None
        shape = self.inserted
        after = shape.convert(body.u)
        if after is None:
            return None
        if body.p is None:
            return RowChange(schema, table, ts, model.INSERT, after, None, shape.keys, shape.types, position)
        before = self.previous.convert(body.p)
        if before is None:
            return None
        return RowChange(schema, table, ts, model.UPDATE, after, before, shape.keys, self.update_types, position)


#: the delete shapes a table's codec tries (see ``_BodyCodec``)
DELETE_SHAPES = 2


#: (schema, table) -> its typed decoder; (shape signatures) -> codec, so tables of one shape share one
_TABLES: dict[tuple[str, str], _BodyCodec] = {}
_CODECS: dict[tuple, _BodyCodec] = {}


def _learn(table: tuple[str, str], body: dict, current: Optional[_BodyCodec]) -> None:
    """Teach a table the shapes of a value the reference path just decoded.

    Column maps the value does not have keep the shape they had; a table's first value also stands for the maps
    it lacks (an update's old image and a delete have the columns of an insert, in the common case). A new delete
    shape goes first, the latest other one stays behind it (see ``_BodyCodec``).
    """
    shapes = [_row_shape(body.get(part)) for part in ("u", "p", "d")]
    known_deleted: tuple[_RowShape, ...] = ()
    if current is not None:
        shapes[:2] = [shape or known for shape, known in zip(shapes[:2], (current.inserted, current.previous))]
        known_deleted = current.deleted
    stand_in = shapes[0] or shapes[2] or shapes[1] or (known_deleted[0] if known_deleted else None)
    if stand_in is None:
        return
    inserted, previous = (shape or stand_in for shape in shapes[:2])
    if shapes[2] is not None:
        deleted = (shapes[2], *[s for s in known_deleted if s.signature != shapes[2].signature])[:DELETE_SHAPES]
    else:
        deleted = known_deleted or (stand_in,)
    key = (inserted.signature, previous.signature, tuple(shape.signature for shape in deleted))
    codec = _CODECS.get(key)
    if codec is None:
        codec = _BodyCodec(inserted, previous, deleted)
        if len(_CODECS) >= 1024:
            _CODECS.clear()
        _CODECS[key] = codec
    if len(_TABLES) >= 65536:
        _TABLES.clear()
    _TABLES[table] = codec


#: a JSON number that is exactly ``-0`` (Go's encoding/json text of a float -0.0)
_NEGATIVE_ZERO = re.compile(rb"-0(?![0-9.eE])")
#: JSON strings (skipped whole) or a bare ``-0``: so a ``-0`` inside a string is never touched
_STRING_OR_NEGATIVE_ZERO = re.compile(rb'"(?:[^"\\]|\\.)*"|-0(?![0-9.eE])', re.DOTALL)


def keep_negative_zero(payload: bytes) -> bytes:
    """The value JSON with every bare ``-0`` number written ``-0.0``, so a FLOAT/DOUBLE -0.0 keeps its sign.

    Go writes a float64 -0.0 as ``-0``, which every JSON parser reads as the integer 0; Simple and Canal-JSON
    keep the sign, so Open Protocol must too. Only floats are ever written ``-0`` (Go prints integers without a
    sign for zero), so the rewrite changes no other value."""
    if b"-0" not in payload or not _NEGATIVE_ZERO.search(payload):
        return payload
    return _STRING_OR_NEGATIVE_ZERO.sub(lambda m: b"-0.0" if m.group(0) == b"-0" else m.group(0), payload)


def _row_event(schema: str, table: str, ts: int, payload: bytes, position: model.Position, index: int) -> RowChange:
    """A row event from its value JSON: the table's typed decoder when it reads the value, else the reference."""
    payload = keep_negative_zero(payload)
    codec = _TABLES.get((schema, table))
    if codec is not None:
        row = codec.row(schema, table, ts, payload, position)
        if row is not None:
            return row
    return _row_reference(schema, table, ts, payload, position, index, codec)


def _row_reference(schema: str, table: str, ts: int, payload: bytes, position: model.Position, index: int,
                   codec: Optional[_BodyCodec]) -> RowChange:
    """A row event decoded by the reference path, which then teaches the table the value's shapes."""
    try:
        body = loads(payload)
    except JSONDecodeError as exc:
        raise _payload_error("row value", index, payload, exc) from None
    row = _row_slow(schema, table, ts, body, position, index)
    _learn((schema, table), body, codec)
    return row


def _row_slow(schema: str, table: str, ts: int, body: Any, position: model.Position, index: int) -> RowChange:
    """The reference path: column by column, with a precise error for whatever is wrong; also reads pre-2021
    messages."""
    if type(body) is not dict:
        raise DecodeError(f"Open Protocol event {index}: row value is not a JSON object")
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


class _RowKey(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The key of a plain row event, exactly: what the reference path reads as one."""

    ts: Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]  # msgspec's bound; a TSO is far below it
    scm: str
    tbl: str
    t: Literal[1]


_decode_row_key = msgspec.json.Decoder(_RowKey).decode


class OpenProtocolDecoder:
    """Decoder for TiCDC Open Protocol messages (registry name ``open``)."""

    def __init__(self, options: Any = None) -> None:
        self.options = options
        self.large = LargeMessages(getattr(options, "large_messages", None))

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])

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
        decode_row_key = _decode_row_key
        tables_get = _TABLES.get
        compressed = self.large.compressed
        kpos = 8
        vpos = 0
        index = 0
        while kpos < key_len:
            start = kpos + 8
            if start > key_len:
                raise DecodeError(f"Open Protocol event {index}: key length prefix truncated at byte {kpos}")
            kpos = start + unpack(key, kpos)[0]
            if kpos > key_len:
                raise DecodeError(
                    f"Open Protocol event {index}: key claims {kpos - start} bytes, {key_len - start} left")
            key_json = key[start:kpos]
            # the bulk of any topic is plain row keys {ts, scm, tbl, t: 1}: read by a typed decoder; anything else
            # (DDL, resolved, ohk/ccl fields, odd values) is parsed by orjson and checked by _event
            try:
                row_key: Optional[_RowKey] = decode_row_key(key_json)
            except Exception:  # noqa: BLE001 - msgspec's DecodeError/ValidationError, UnicodeDecodeError, ...
                row_key = None
            if row_key is None:
                try:
                    head = loads(key_json)
                except JSONDecodeError as exc:
                    raise _payload_error("key", index, key_json, exc) from None
            if vpos < value_len:
                start = vpos + 8
                if start > value_len:
                    raise DecodeError(f"Open Protocol event {index}: value length prefix truncated at byte {vpos}")
                vpos = start + unpack(value, vpos)[0]
                if vpos > value_len:
                    raise DecodeError(f"Open Protocol event {index}: value claims {vpos - start} bytes,"
                                      f" {value_len - start} left")
                payload: Optional[bytes] = value[start:vpos]
            else:
                payload = None
            position = make_position(topic, partition, offset, index)
            if row_key is not None:
                if payload is not None:  # _row_event, inlined for the bulk of the stream
                    if compressed:
                        payload = self.large.decompress(payload, f"Open Protocol event {index}: row value")
                    payload = keep_negative_zero(payload)
                    schema, table, ts = row_key.scm, row_key.tbl, row_key.ts
                    codec = tables_get((schema, table))
                    event = codec.row(schema, table, ts, payload, position) if codec is not None else None
                    append(event or _row_reference(schema, table, ts, payload, position, index, codec))
                    index += 1
                    continue
                head = loads(key_json)  # a row key without its value: _event says so
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
            return self._row(head, ts, self.large.decompress(payload, f"Open Protocol event {index}: row value"),
                             position, index)
        if kind == MESSAGE_DDL:
            if payload is None:
                raise DecodeError(f"Open Protocol event {index}: DDL key without a value item")
            return self._ddl(head, ts, self.large.decompress(payload, f"Open Protocol event {index}: DDL value"),
                             position, index)
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
            if type(location) is not str:
                raise DecodeError(f"Open Protocol event {index}: ccl is not a string")
            return self._claim_checked(location, position, f"Open Protocol event {index} ({schema}.{table} @ {ts})")
        return _row_event(schema, table, ts, payload, position, index)

    def _claim_checked(self, location: str, position: model.Position, what: str) -> RowChange:
        """The row stored in claim-check storage: the whole message TiCDC would have sent (one row event)."""
        key, value = self.large.claim_check(location, what)
        if key is None:
            raise DecodeError(f"{what}: the claim-check file has no key")
        inner = Message(position.topic, position.partition, position.offset, key, value)
        events = self.decode(inner)
        if len(events) != 1 or type(events[0]) is not RowChange:
            raise DecodeError(f"{what}: the claim-check file does not hold exactly one row event")
        row = events[0]
        row.position = position
        return row

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
