"""TiCDC Craft (binary) decoder.

Follows the Go code (tiflow ``pkg/sink/codec/craft``), which differs from the published doc in several places
(see ``shared/ticdc-vectors/craft/README.md``). A message has no Kafka key; the value is::

    uvarint version (1) | headers | bodies | term dictionary | size tables | reversed-uvarint size-table bytes

* Size tables are found from the end: the last bytes are a uvarint written in *reverse* byte order giving the
  byte length of the tables. Each table is ``uvarint count`` + a delta zigzag-varint chunk. Table 0 =
  [header bytes, term-dictionary bytes], table 1 = body size per event (its length is the event count), table
  2+i = the column-group sizes of row event i.
* Headers are columnar chunks over all events: commit ts (delta uvarint), type (uvarint: 1 row, 2 DDL,
  3 resolved), partition (delta varint, -1 none), schema and table (delta varint *term ids*, -1 = null).
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
parses a layout once and recognizes its bytes again with one ``bytes.startswith``; single-byte varint chunks
(the common case for lengths) are read with C-level ``max``/``list`` instead of a Python loop.
"""

from __future__ import annotations

import base64
import struct
from itertools import accumulate
from typing import Any, Optional

from ticdc_lakehouse import model
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
from ticdc_lakehouse.decode.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.model import DecodeError, DDLEvent, Message, ResolvedEvent, RowChange
from ticdc_lakehouse.values import from_decimal

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
    """The parsed name/type/flag section of a column group, reused for every row that repeats its bytes."""

    __slots__ = ("section", "names", "kinds", "types", "keys", "count")

    def __init__(self, section: bytes, names: list[str], kinds: list[int], types: dict[str, str],
                 keys: tuple[str, ...]) -> None:
        self.section = section
        self.names = names
        self.kinds = kinds
        self.types = types
        self.keys = keys
        self.count = len(names)


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
        value, pos = _uvarint(data, pos, end)
        append(value)
    return values, pos


def _varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _uvarint_chunk(data, pos, end, count)
    return [(u >> 1) ^ -(u & 1) for u in raw], pos


def _delta_varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _varint_chunk(data, pos, end, count)
    return list(accumulate(raw)), pos


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
        # term-dictionary bytes -> column count -> layouts seen with that dictionary
        self._layouts: dict[bytes, dict[int, list[_Layout]]] = {}

    def decode(self, message: Message) -> list[model.Event]:
        data = message.value
        if not data:
            raise DecodeError("craft message has an empty value (craft puts the whole batch in the value)")
        end = len(data)
        version, pos = _uvarint(data, 0, end)
        if version != VERSION:
            raise DecodeError(f"unsupported craft version {version} (expected {VERSION})")

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
        if header_size < 0 or dict_size < 0 or any(size < 0 for size in body_sizes):
            raise DecodeError("craft: negative size in the size tables")
        header_end = pos + header_size
        bodies_end = header_end + sum(body_sizes)
        dict_end = bodies_end + dict_size
        if dict_end != tables_start:
            raise DecodeError(
                f"craft: headers, bodies and dictionary end at byte {dict_end} but the size tables start at"
                f" {tables_start}")
        terms = self._terms(data, bodies_end, dict_end) if dict_size else []
        count = len(body_sizes)
        if count == 0:
            if header_size:
                raise DecodeError("craft: headers present in a message with no events")
            return []

        ts, pos = _uvarint_chunk(data, pos, header_end, count)
        ts = list(accumulate(ts))
        if ts[-1] >= _UINT64:
            raise DecodeError("craft: commit ts overflows 64 bits")
        kinds, pos = _uvarint_chunk(data, pos, header_end, count)
        _partitions, pos = _delta_varint_chunk(data, pos, header_end, count)
        schema_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        table_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        if pos != header_end:
            raise DecodeError(f"craft: headers have {header_end - pos} unread bytes")
        schemas = [self._term(terms, i) for i in schema_ids]
        table_names = [self._term(terms, i) for i in table_ids]

        layouts = self._layouts.get(data[bodies_end:dict_end])
        if layouts is None:
            if len(self._layouts) >= self._CACHE_LIMIT:
                self._layouts.clear()
            layouts = self._layouts[data[bodies_end:dict_end]] = {}

        events: list[model.Event] = []
        body_start = header_end
        topic, partition, offset = message.topic, message.partition, message.offset
        for index in range(count):
            body_end = body_start + body_sizes[index]
            position = model.Position(topic, partition, offset, index)
            kind = kinds[index]
            if kind == EVENT_ROW:
                if len(tables) <= 2 + index:
                    raise DecodeError(f"craft: row event {index} has no column-group size table")
                events.append(self._row(data, body_start, body_end, tables[2 + index], terms, layouts,
                                        schemas[index] or "", table_names[index] or "", ts[index], position, index))
            elif kind == EVENT_DDL:
                action, at = _uvarint(data, body_start, body_end)
                length, at = _uvarint(data, at, body_end)
                if at + length != body_end:
                    raise DecodeError(f"craft: DDL event {index} query length {length} does not fill its body")
                query = self._text(data[at:body_end], f"DDL event {index} query")
                events.append(DDLEvent(schema=schemas[index] or "", table=table_names[index] or "",
                                       commit_ts=ts[index], query=query,
                                       ddl_type=ddl_type_for_action(action, query), position=position))
            elif kind == EVENT_RESOLVED:
                if body_end != body_start:
                    raise DecodeError(f"craft: resolved event {index} has a {body_end - body_start}-byte body")
                events.append(ResolvedEvent(ts=ts[index], position=position))
            else:
                raise DecodeError(f"craft: event {index} has unknown type {kind}")
            body_start = body_end
        return events

    # --- message parts ----------------------------------------------------------------------------------------

    @staticmethod
    def _size_tables(data: bytes, pos: int, end: int) -> list[list[int]]:
        tables = []
        while pos < end:
            count, pos = _uvarint(data, pos, end)
            table, pos = _delta_varint_chunk(data, pos, end, count)
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
        types: dict[str, str] = {}
        keys: tuple[str, ...] = ()
        for size in group_sizes:
            if size <= 0 or pos + size > end:
                raise DecodeError(f"craft: row event {index} column group size {size} does not fit its body")
            group_type, values, layout = self._group(data, pos, pos + size, terms, layouts)
            pos += size
            if group_type == GROUP_NEW and after is None:
                after = values
                keys = layout.keys
            elif group_type == GROUP_OLD and before is None:
                before = values
                if after is None:
                    keys = layout.keys
            else:
                raise DecodeError(f"craft: row event {index} has an unexpected column group type {group_type}")
            types.update(layout.types)
        if pos != end:
            raise DecodeError(f"craft: row event {index} has {end - pos} bytes outside its column groups")
        if after is not None:
            op = model.UPDATE if before is not None else model.INSERT
        elif before is not None:
            op = model.DELETE
        else:
            raise DecodeError(f"craft: row event {index} has no column group")
        return RowChange(schema, table, ts, op, after, before, keys, types, position)

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
                text = data[pos:stop].decode("ascii", "replace")
                try:
                    values[name] = text if "e" not in text and "E" not in text and "\ufffd" not in text \
                        else from_decimal(text)
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
