"""TiCDC Craft (binary) decoder.

Follows the Go code (tiflow ``pkg/sink/codec/craft``), which differs from the published doc in several places
(see ``shared/ticdc-vectors/craft/README.md``). A message has no Kafka key; the value is::

    uvarint version (1) | headers | bodies | term dictionary | size tables | reversed-uvarint size-table bytes

* Size tables are found from the end: the last bytes are a uvarint written in *reverse* byte order giving the
  byte length of the tables. Each table is ``uvarint count`` + a delta zigzag-varint chunk. Table 0 =
  [header bytes, term-dictionary bytes], table 1 = body size per event (its length is the event count), table
  2+i = the column-group sizes of row event i.
* Headers are columnar chunks over all events: commit ts (delta uvarint), type (uvarint: 1 row, 2 DDL,
  3 resolved), partition (delta varint, -1 none), schema and table (delta varint *term ids*, -1 = null). The
  partition (physical table id of a partitioned table) has no place in the model and is not kept, as with
  Open Protocol's ``ptn``.
* Term dictionary: uvarint count, then a string chunk (all lengths, then all bytes); absent when empty.
* DDL body: uvarint TiDB action type, uvarint-length query. Resolved body: empty.
* Row body: column groups, 0x01 = new values, 0x02 = old values. new only = insert, new+old = update,
  old only = delete. A group is: type byte, uvarint column count, delta-varint name term ids, uvarint types,
  uvarint flags, nullable bytes chunk (zigzag lengths first, -1 = NULL, then the payloads).
* Values: signed integers and YEAR are zigzag varints; unsigned integers (flag 0x80), ENUM, SET and BIT are
  uvarints; FLOAT and DOUBLE are little-endian float64; DECIMAL, temporal, JSON and strings are raw bytes;
  NULL-type and GEOMETRY columns carry no value.

Every length and offset is checked against the region it must stay in, and every region must be consumed
exactly, so truncated or corrupted messages raise a DecodeError instead of yielding plausible garbage.

Speed: a batch repeats the same column layout (names, types, flags) for every row of a table. The decoder
parses a layout once, recognizes its bytes again with one ``bytes.startswith``, and reads the values with
straight-line code generated for that layout (no per-column dispatch); anything unusual falls back to the generic,
fully checked reader. Term dictionaries and their layouts are cached by the dictionary's bytes.
"""

from __future__ import annotations

import base64
import binascii
import struct
from itertools import accumulate
from typing import Any, Callable, Optional

from ticdc_lakehouse import model
from ticdc_lakehouse.decode.canonical_text import decimal_text
from ticdc_lakehouse.decode.go_text import float32_repr
from ticdc_lakehouse.decode.mysql_type_codes import (
    BLOB_CODES,
    FLAG_BINARY,
    FLAG_HANDLE_KEY,
    FLAG_UNSIGNED,
    INTEGER_CODES,
    STRING_CODES,
    TYPE_BIT,
    TYPE_DECIMAL,
    TYPE_DOUBLE,
    TYPE_ENUM,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
    TYPE_NEWDECIMAL,
    TYPE_NULL,
    TYPE_SET,
    TYPE_YEAR,
    descriptor,
)
from ticdc_lakehouse.decode.positions import make_position
from ticdc_lakehouse.decode.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.model import DecodeError, DDLEvent, Message, ResolvedEvent, RowChange

VERSION = 1
EVENT_ROW = 1
EVENT_DDL = 2
EVENT_RESOLVED = 3
GROUP_NEW = 0x01
GROUP_OLD = 0x02
_UINT64 = 1 << 64

_F64 = struct.Struct("<d")

# value kinds
C_TEXT = 0  # UTF-8 text (CHAR/VARCHAR/TEXT without BinaryFlag, temporal, JSON, vector)
C_SVARINT = 1  # zigzag varint (signed integers, YEAR)
C_UVARINT = 2  # uvarint (unsigned integers, BIT, ENUM index, SET bitmask)
C_DOUBLE = 3
C_FLOAT = 4
C_BYTES = 5  # raw bytes -> base64 (BinaryFlag set)
C_DECIMAL = 6
C_NONE = 7  # NULL type, GEOMETRY, unspecified: Go writes no value


class _Layout:
    """The parsed name/type/flag section of a column group, reused for every row that repeats its bytes.

    ``values(data, pos, end)`` is the layout's generated reader of the value chunk: the canonical row, or None
    when the generic reader must take over.
    """

    __slots__ = ("section", "names", "kinds", "types", "keys", "count", "values")

    def __init__(self, section: bytes, names: list[str], kinds: list[int], types: dict[str, str],
                 keys: tuple[str, ...]) -> None:
        self.section = section
        self.names = names
        self.kinds = kinds
        self.types = types
        self.keys = keys
        self.count = len(names)
        self.values = _values_function(names, kinds)


# --- generated value readers --------------------------------------------------------------------------------
#
# A layout's value chunk is read by straight-line code generated for that layout (the technique ``dataclasses``
# uses for ``__init__``): no per-column dispatch, locals only. It handles the common case (lengths that fit two
# varint bytes) and returns None for anything else, and the generic reader then decodes the group or raises a
# precise DecodeError. Column names only enter the source as ``repr`` literals.

#: zigzag decoding of one-byte varints, and the canonical text of small values, by byte value
_ZIGZAG = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
_SIGNED_TEXT = [str(value) for value in _ZIGZAG]
_UNSIGNED_TEXT = [str(value) for value in range(0x80)]

#: for an n-byte varint read as a little-endian integer: which bits are continuation flags, and their values
_CONTINUATION_MASK = [sum(0x80 << (8 * k) for k in range(n)) for n in range(11)]
_CONTINUATION_BITS = [sum(0x80 << (8 * k) for k in range(n - 1)) for n in range(11)]

_LENGTH_SOURCE = """\
b = data[pos]
if b < 0x80:
    pos += 1
    L{i} = zigzag[b]
else:
    c = data[pos + 1]
    if c >= 0x80: return None
    b = (b & 0x7F) | (c << 7)
    pos += 2
    L{i} = (b >> 1) ^ -(b & 1)"""

_MULTI_BYTE_INT_SOURCE = """\
elif L{i} == 2:
    u = data[pos]
    c = data[pos + 1]
    if u < 0x80 or c >= 0x80: return None
    u = (u & 0x7F) | (c << 7)
    v{i} = CONVERT
elif L{i} == 3:
    u = data[pos]
    c = data[pos + 1]
    d = data[pos + 2]
    if u < 0x80 or c < 0x80 or d >= 0x80: return None
    u = (u & 0x7F) | ((c & 0x7F) << 7) | (d << 14)
    v{i} = CONVERT
elif 4 <= L{i} <= 8:  # continuation bits checked on all bytes at once, then the 7-bit groups packed
    u = from_bytes(data[pos:stop], 'little')
    if u & continuation_mask[L{i}] != continuation_bits[L{i}]: return None
    u = (u & 0x7F) | (u >> 1 & 0x3F80) | (u >> 2 & 0x1FC000) | (u >> 3 & 0xFE00000) | (u >> 4 & 0x7F0000000) \\
        | (u >> 5 & 0x3F800000000) | (u >> 6 & 0x1FC0000000000) | (u >> 7 & 0xFE000000000000)
    v{i} = CONVERT
else:
    u = varint_value(data, pos, stop)
    if u is None: return None
    v{i} = CONVERT"""

_VALUE_SOURCE: dict[int, str] = {
    C_TEXT: "v{i} = data[pos:stop].decode()",
    C_SVARINT: """\
if L{i} == 1:
    u = data[pos]
    if u >= 0x80: return None
    v{i} = signed_text[u]
""" + _MULTI_BYTE_INT_SOURCE.replace("CONVERT", "str((u >> 1) ^ -(u & 1))"),
    C_UVARINT: """\
if L{i} == 1:
    u = data[pos]
    if u >= 0x80: return None
    v{i} = unsigned_text[u]
""" + _MULTI_BYTE_INT_SOURCE.replace("CONVERT", "str(u)"),
    C_BYTES: "v{i} = b2a_base64(data[pos:stop], newline=False).decode()",
    C_DOUBLE: "if L{i} != 8: return None\nv{i} = repr(unpack_f64(data, pos)[0])",
    C_FLOAT: "if L{i} != 8: return None\nv{i} = float32_repr(unpack_f64(data, pos)[0])",
    # TiDB's plain decimal text is canonical; anything else goes to the generic path (normalize or reject)
    C_DECIMAL: """\
v{i} = data[pos:stop].decode('ascii')
t = v{i}[1:] if v{i}[:1] == '-' else v{i}
if not t.replace('.', '', 1).isdigit() or t[0] == '.' or t[-1] == '.': return None""",
    C_NONE: "if L{i}: return None\nv{i} = None",
}


def _varint_value(data: bytes, pos: int, stop: int) -> Optional[int]:
    """The uvarint filling exactly data[pos:stop], or None."""
    if not 1 <= stop - pos <= 10:
        return None
    value = 0
    shift = 0
    for byte in data[pos:stop - 1]:
        if byte < 0x80:
            return None
        value |= (byte & 0x7F) << shift
        shift += 7
    byte = data[stop - 1]
    if byte >= 0x80:
        return None
    value |= byte << shift
    return value if value < _UINT64 else None


def _values_function(names: list[str], kinds: list[int]) -> Callable[[bytes, int, int], Optional[dict]]:
    lines = ["def values(data, pos, end, str=str, repr=repr):", "    try:"]
    for i in range(len(names)):
        lines += ["        " + line for line in _LENGTH_SOURCE.format(i=i).split("\n")]
    for i, kind in enumerate(kinds):
        lines += [f"        if L{i} < 0:", f"            if L{i} != -1: return None", f"            v{i} = None",
                  "        else:", f"            stop = pos + L{i}"]  # an overrun leaves pos > end: caught below
        lines += ["            " + line for line in _VALUE_SOURCE[kind].format(i=i).split("\n")]
        lines.append("            pos = stop")
    lines += ["    except (IndexError, UnicodeDecodeError, ValueError, struct.error):", "        return None",
              "    if pos != end: return None",
              "    return {" + ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names)) + "}"]
    namespace = {"varint_value": _varint_value, "b2a_base64": binascii.b2a_base64, "unpack_f64": _F64.unpack_from,
                 "float32_repr": float32_repr, "struct": struct, "zigzag": _ZIGZAG, "signed_text": _SIGNED_TEXT,
                 "unsigned_text": _UNSIGNED_TEXT, "from_bytes": int.from_bytes,
                 "continuation_mask": _CONTINUATION_MASK, "continuation_bits": _CONTINUATION_BITS}
    exec("\n".join(lines), namespace)  # noqa: S102 - built from fixed templates and repr() literals
    return namespace["values"]


def _kind(code: int, flags: int) -> int:
    if code in INTEGER_CODES:
        return C_UVARINT if flags & FLAG_UNSIGNED else C_SVARINT
    if code == TYPE_YEAR:
        return C_SVARINT
    if code in (TYPE_BIT, TYPE_ENUM, TYPE_SET):
        return C_UVARINT
    if code == TYPE_FLOAT:
        return C_FLOAT
    if code == TYPE_DOUBLE:
        return C_DOUBLE
    if code == TYPE_NEWDECIMAL:
        return C_DECIMAL
    if code in STRING_CODES or code in BLOB_CODES:
        return C_BYTES if flags & FLAG_BINARY else C_TEXT
    if code in (TYPE_NULL, TYPE_GEOMETRY, TYPE_DECIMAL):
        return C_NONE
    return C_TEXT


# --- primitive readers; each takes the end of the region it may read ------------------------------------------


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise DecodeError(f"craft: varint at byte {pos} runs past its region (ends at {end})")
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise DecodeError(f"craft: varint at byte {pos} runs past its region (ends at {end})")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise DecodeError(f"craft: varint ending at byte {pos} is longer than 10 bytes")
    if result >= _UINT64:
        raise DecodeError(f"craft: varint ending at byte {pos} overflows 64 bits")
    return result, pos


def _uvarint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    if count > end - pos:
        raise DecodeError(f"craft: chunk of {count} varints at byte {pos} cannot fit in {end - pos} bytes")
    stop = pos + count
    chunk = data[pos:stop]
    if not chunk or max(chunk) < 0x80:  # every element is one byte
        return list(chunk), stop
    values = []
    append = values.append
    for _ in range(count):
        byte = data[pos] if pos < end else 0x80
        if byte < 0x80:
            append(byte)
            pos += 1
        else:
            value, pos = _uvarint(data, pos, end)
            append(value)
    return values, pos


def _varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _uvarint_chunk(data, pos, end, count)
    return [(u >> 1) ^ -(u & 1) for u in raw], pos


def _delta_varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _uvarint_chunk(data, pos, end, count)
    return list(accumulate([(u >> 1) ^ -(u & 1) for u in raw])), pos


def _reversed_uvarint(data: bytes, floor: int) -> tuple[int, int]:
    """(bytes used, value) of the uvarint written backwards at the end of ``data``, not reading below floor."""
    index = len(data) - 1
    result = 0
    shift = 0
    used = 0
    while index >= floor:
        byte = data[index]
        used += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return used, result
        shift += 7
        index -= 1
        if used >= 10:
            break
    raise DecodeError("craft: the trailing size-table length is truncated or longer than 10 bytes")


def _value_uvarint(data: bytes, pos: int, stop: int) -> int:
    value, pos = _uvarint(data, pos, stop)
    if pos != stop:
        raise DecodeError(f"craft: integer value has {stop - pos} extra bytes")
    return value


class CraftDecoder:
    """Decoder for TiCDC Craft messages (registry name ``craft``)."""

    _CACHE_LIMIT = 256

    def __init__(self, options: Any = None) -> None:
        self.options = options
        # term-dictionary bytes -> (its terms, column count -> layouts seen with that dictionary)
        self._dictionaries: dict[bytes, tuple[list[str], dict[int, list[_Layout]]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Decoders are shipped to Spark executors: the caches (with generated code) stay behind."""
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state.get("options"))

    def decode(self, message: Message) -> list[model.Event]:
        data = message.value
        if not data:
            raise DecodeError("craft message has an empty value (craft puts the whole batch in the value)")
        end = len(data)
        if data[0] != VERSION:
            version, _ = _uvarint(data, 0, end)
            raise DecodeError(f"unsupported craft version {version} (expected {VERSION})")
        pos = 1
        if data[-1] < 0x80 and end > 1:  # the usual one-byte trailing size
            used, tables_size = 1, data[-1]
        else:
            used, tables_size = _reversed_uvarint(data, pos)
        tables_end = end - used
        tables_start = tables_end - tables_size
        if tables_start < pos:
            raise DecodeError(f"craft: size tables claim {tables_size} bytes, only {tables_end - pos} precede them")
        tables = self._size_tables(data, tables_start, tables_end)
        if len(tables) < 2 or len(tables[0]) != 2:
            raise DecodeError("craft: size tables lack the meta table [header size, dictionary size] or body sizes")
        header_size, dict_size = tables[0]
        body_sizes = tables[1]
        if header_size < 0 or dict_size < 0 or (body_sizes and min(body_sizes) < 0):
            raise DecodeError("craft: negative size in the size tables")
        header_end = pos + header_size
        bodies_end = header_end + sum(body_sizes)
        dict_end = bodies_end + dict_size
        if dict_end != tables_start:
            raise DecodeError(
                f"craft: headers, bodies and dictionary end at byte {dict_end} but the size tables start at"
                f" {tables_start}")
        # the dictionary and the layouts parsed with it are cached by the dictionary's bytes: a topic repeats them
        dictionary = data[bodies_end:dict_end]
        cached = self._dictionaries.get(dictionary)
        if cached is None:
            terms = self._terms(data, bodies_end, dict_end) if dict_size else []
            if len(self._dictionaries) >= self._CACHE_LIMIT:
                self._dictionaries.clear()
            cached = self._dictionaries[dictionary] = (terms, {})
        terms, layouts = cached
        count = len(body_sizes)
        if count == 0:
            if header_size:
                raise DecodeError("craft: headers present in a message with no events")
            return []

        if count == 1:  # DDL, resolved and lone rows: five plain varints
            commit_ts, pos = _uvarint(data, pos, header_end)
            kind, pos = _uvarint(data, pos, header_end)
            _partition, pos = _uvarint(data, pos, header_end)
            schema_id, pos = _uvarint(data, pos, header_end)
            table_id, pos = _uvarint(data, pos, header_end)
            if pos != header_end:
                raise DecodeError(f"craft: headers have {header_end - pos} unread bytes")
            schema_id = (schema_id >> 1) ^ -(schema_id & 1)
            table_id = (table_id >> 1) ^ -(table_id & 1)
            if not (-1 <= schema_id < len(terms) and -1 <= table_id < len(terms)):
                raise DecodeError(f"craft: term id {max(schema_id, table_id)} is not in the {len(terms)}-entry"
                                  " dictionary")
            return self._events(data, header_end, body_sizes, tables, terms, layouts, [commit_ts], [kind],
                                [terms[schema_id] if schema_id >= 0 else ""],
                                [terms[table_id] if table_id >= 0 else ""], message)
        ts, pos = _uvarint_chunk(data, pos, header_end, count)
        # deltas are uint64 in Go: a batch whose ts goes down (rows of different tables) wraps around 2**64
        ts = [value % _UINT64 for value in accumulate(ts)]
        kinds, pos = _uvarint_chunk(data, pos, header_end, count)
        _partitions, pos = _uvarint_chunk(data, pos, header_end, count)  # not kept: see module docstring
        schema_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        table_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        if pos != header_end:
            raise DecodeError(f"craft: headers have {header_end - pos} unread bytes")
        if min(schema_ids + table_ids) < -1 or max(schema_ids + table_ids) >= len(terms):
            bad = next(i for i in schema_ids + table_ids if not -1 <= i < len(terms))
            raise DecodeError(f"craft: term id {bad} is not in the {len(terms)}-entry dictionary")
        schemas = [terms[i] if i >= 0 else "" for i in schema_ids]
        table_names = [terms[i] if i >= 0 else "" for i in table_ids]
        return self._events(data, header_end, body_sizes, tables, terms, layouts, ts, kinds, schemas, table_names,
                            message)

    def _events(self, data: bytes, body_start: int, body_sizes: list[int], tables: list[list[int]],
                terms: list[str], layouts: dict[int, list[_Layout]], ts: list[int], kinds: list[int],
                schemas: list[str], table_names: list[str], message: Message) -> list[model.Event]:
        count = len(body_sizes)
        events: list[model.Event] = []
        topic, partition, offset = message.topic, message.partition, message.offset
        append = events.append
        for index in range(count):
            body_end = body_start + body_sizes[index]
            position = make_position(topic, partition, offset, index)
            kind = kinds[index]
            if kind == EVENT_ROW:
                if len(tables) <= 2 + index:
                    raise DecodeError(f"craft: row event {index} has no column-group size table")
                group_sizes = tables[2 + index]
                # the bulk of any topic inline: an insert or delete whose single group has a known layout
                if len(group_sizes) == 1 and group_sizes[0] == body_end - body_start and body_end - body_start > 1:
                    values = None
                    column_count = data[body_start + 1]
                    for layout in layouts.get(column_count, ()):
                        start = body_start + 2 + len(layout.section)
                        if start <= body_end and data.startswith(layout.section, body_start + 2):
                            values = layout.values(data, start, body_end)
                            break
                    if values is not None:
                        group_type = data[body_start]
                        if group_type == GROUP_NEW:
                            append(RowChange(schemas[index], table_names[index], ts[index], model.INSERT, values,
                                             None, layout.keys, dict(layout.types), position))
                            body_start = body_end
                            continue
                        if group_type == GROUP_OLD:
                            append(RowChange(schemas[index], table_names[index], ts[index], model.DELETE, None,
                                             values, layout.keys, dict(layout.types), position))
                            body_start = body_end
                            continue
                append(self._row(data, body_start, body_end, group_sizes, terms, layouts,
                                 schemas[index], table_names[index], ts[index], position, index))
            elif kind == EVENT_DDL:
                action, at = _uvarint(data, body_start, body_end)
                length, at = _uvarint(data, at, body_end)
                if at + length != body_end:
                    raise DecodeError(f"craft: DDL event {index} query length {length} does not fill its body")
                query = self._text(data[at:body_end], f"DDL event {index} query")
                append(DDLEvent(schema=schemas[index], table=table_names[index],
                                       commit_ts=ts[index], query=query,
                                       ddl_type=ddl_type_for_action(action, query), position=position))
            elif kind == EVENT_RESOLVED:
                if body_end != body_start:
                    raise DecodeError(f"craft: resolved event {index} has a {body_end - body_start}-byte body")
                append(ResolvedEvent(ts=ts[index], position=position))
            else:
                raise DecodeError(f"craft: event {index} has unknown type {kind}")
            body_start = body_end
        return events

    # --- message parts ----------------------------------------------------------------------------------------

    @staticmethod
    def _size_tables(data: bytes, pos: int, end: int) -> list[list[int]]:
        tables = []
        while pos < end:
            count = data[pos]
            if count < 0x80:
                pos += 1
            else:
                count, pos = _uvarint(data, pos, end)
            if count > end - pos:
                raise DecodeError(f"craft: size table of {count} entries cannot fit in {end - pos} bytes")
            if count == 1 and pos + 1 < end:  # the column-group table of an insert or delete: one size
                byte = data[pos]
                if byte < 0x80:
                    tables.append([(byte >> 1) ^ -(byte & 1)])
                    pos += 1
                    continue
                following = data[pos + 1]
                if following < 0x80:
                    byte = (byte & 0x7F) | (following << 7)
                    tables.append([(byte >> 1) ^ -(byte & 1)])
                    pos += 2
                    continue
            table = []
            total = 0
            for _ in range(count):
                if pos >= end:
                    raise DecodeError("craft: size table runs past the size-table region")
                byte = data[pos]
                if byte < 0x80:
                    pos += 1
                elif pos + 1 < end and data[pos + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    byte, pos = _uvarint(data, pos, end)
                total += (byte >> 1) ^ -(byte & 1)
                table.append(total)
            tables.append(table)
        return tables

    @staticmethod
    def _text(raw: bytes, what: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"craft: {what} is not valid UTF-8: {exc}") from None

    def _terms(self, data: bytes, pos: int, end: int) -> list[str]:
        count, pos = _uvarint(data, pos, end)
        lengths, pos = _uvarint_chunk(data, pos, end, count)
        terms = []
        for length in lengths:
            stop = pos + length
            if stop > end:
                raise DecodeError("craft: term dictionary string runs past the dictionary")
            terms.append(self._text(data[pos:stop], "term dictionary entry"))
            pos = stop
        if pos != end:
            raise DecodeError(f"craft: term dictionary has {end - pos} unread bytes")
        return terms

    @staticmethod
    def _term(terms: list[str], term_id: int) -> Optional[str]:
        if term_id == -1:
            return None
        if not 0 <= term_id < len(terms):
            raise DecodeError(f"craft: term id {term_id} is not in the {len(terms)}-entry dictionary")
        return terms[term_id]

    def _row(self, data: bytes, pos: int, end: int, group_sizes: list[int], terms: list[str],
             layouts: dict[int, list[_Layout]], schema: str, table: str, ts: int, position: model.Position,
             index: int) -> RowChange:
        after: Optional[dict[str, Optional[str]]] = None
        before: Optional[dict[str, Optional[str]]] = None
        after_layout: Optional[_Layout] = None
        before_layout: Optional[_Layout] = None
        for size in group_sizes:
            group_end = pos + size
            if size <= 1 or group_end > end:
                raise DecodeError(f"craft: row event {index} column group size {size} does not fit its body")
            # the common case inline: a known layout whose generated reader accepts the values
            values = None
            count = data[pos + 1]
            if count < 0x80:
                for known in layouts.get(count, ()):
                    start = pos + 2 + len(known.section)
                    if start <= group_end and data.startswith(known.section, pos + 2):
                        values = known.values(data, start, group_end)
                        layout = known
                        break
            if values is None:
                group_type, values, layout = self._group(data, pos, group_end, terms, layouts)
            else:
                group_type = data[pos]
            if group_type == GROUP_NEW and after is None:
                after, after_layout = values, layout
            elif group_type == GROUP_OLD and before is None:
                before, before_layout = values, layout
            else:
                raise DecodeError(f"craft: row event {index} has an unexpected column group type {group_type}")
            pos = group_end
        if pos != end:
            raise DecodeError(f"craft: row event {index} has {end - pos} bytes outside its column groups")
        if after_layout is not None:
            types = dict(after_layout.types)
            if before_layout is not None and before_layout is not after_layout:
                types.update(before_layout.types)
            return RowChange(schema, table, ts, model.INSERT if before is None else model.UPDATE, after, before,
                             after_layout.keys, types, position)
        if before_layout is not None:
            return RowChange(schema, table, ts, model.DELETE, None, before, before_layout.keys,
                             dict(before_layout.types), position)
        raise DecodeError(f"craft: row event {index} has no column group")

    def _layout(self, data: bytes, pos: int, end: int, count: int, terms: list[str]) -> tuple[_Layout, int]:
        start = pos
        ids, pos = _delta_varint_chunk(data, pos, end, count)
        codes, pos = _uvarint_chunk(data, pos, end, count)
        flags, pos = _uvarint_chunk(data, pos, end, count)
        names = []
        for term_id in ids:
            name = self._term(terms, term_id)
            if name is None:
                raise DecodeError("craft: a column name term id is -1 (null)")
            names.append(name)
        types: dict[str, str] = {}
        kinds = []
        keys = []
        for name, code, flag in zip(names, codes, flags):
            if name in types:
                raise DecodeError(f"craft: column {name!r} appears twice in one column group")
            try:
                types[name] = descriptor(code, flag)
            except ValueError as exc:
                raise DecodeError(f"craft: column {name!r}: {exc}") from None
            kinds.append(_kind(code, flag))
            if flag & FLAG_HANDLE_KEY:
                keys.append(name)
        return _Layout(data[start:pos], names, kinds, types, tuple(keys)), pos

    def _group(self, data: bytes, pos: int, end: int, terms: list[str],
               layouts: dict[int, list[_Layout]]) -> tuple[int, dict[str, Optional[str]], _Layout]:
        group_type = data[pos]
        count = data[pos + 1] if pos + 1 < end else 0x80
        if count < 0x80:
            pos += 2
        else:
            count, pos = _uvarint(data, pos + 1, end)
        candidates = layouts.get(count)
        layout = None
        if candidates:
            for known in candidates:
                section = known.section
                if data.startswith(section, pos) and pos + len(section) <= end:
                    layout = known
                    pos += len(section)
                    break
        if layout is None:
            layout, pos = self._layout(data, pos, end, count, terms)
            if candidates is None:
                candidates = layouts[count] = []
            if len(candidates) < 64:
                candidates.append(layout)
        fast = layout.values(data, pos, end)
        if fast is not None:
            return group_type, fast, layout
        lengths, pos = _varint_chunk(data, pos, end, count)
        values: dict[str, Optional[str]] = {}
        kinds = layout.kinds
        names = layout.names
        for column in range(count):
            length = lengths[column]
            name = names[column]
            if length < 0:
                if length != -1:
                    raise DecodeError(f"craft: column {name!r} has value length {length}")
                values[name] = None
                continue
            stop = pos + length
            if stop > end:
                raise DecodeError(f"craft: column {name!r} value runs past its column group")
            kind = kinds[column]
            if kind == C_TEXT:
                try:
                    values[name] = data[pos:stop].decode("utf-8")
                except UnicodeDecodeError:
                    raise DecodeError(f"craft: column {name!r} text is not valid UTF-8") from None
            elif kind == C_SVARINT:
                if length == 1 and data[pos] < 0x80:
                    u = data[pos]
                else:
                    u = _value_uvarint(data, pos, stop)
                values[name] = str((u >> 1) ^ -(u & 1))
            elif kind == C_UVARINT:
                if length == 1 and data[pos] < 0x80:
                    values[name] = str(data[pos])
                else:
                    values[name] = str(_value_uvarint(data, pos, stop))
            elif kind == C_BYTES:
                values[name] = base64.b64encode(data[pos:stop]).decode("ascii")
            elif kind == C_DOUBLE or kind == C_FLOAT:
                if length != 8:
                    raise DecodeError(f"craft: float column {name!r} has {length} bytes, expected 8")
                number = _F64.unpack_from(data, pos)[0]
                values[name] = float32_repr(number) if kind == C_FLOAT else repr(number)
            elif kind == C_DECIMAL:
                try:
                    values[name] = decimal_text(data[pos:stop].decode("ascii", "replace"))
                except ValueError as exc:
                    raise DecodeError(f"craft: column {name!r}: {exc}") from None
            else:  # C_NONE
                if length:
                    raise DecodeError(f"craft: column {name!r} of a value-less type has {length} value bytes")
                values[name] = None
            pos = stop
        if pos != end:
            raise DecodeError(f"craft: column group has {end - pos} unread bytes")
        return group_type, values, layout
