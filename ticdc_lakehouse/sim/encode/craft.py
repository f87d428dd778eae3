"""TiCDC Craft encoder: the bytes of tiflow ``pkg/sink/codec/craft``'s encoder, for demos, benchmarks and tests.

Craft has no Kafka key (``encode`` returns ``(None, value)``). Layout and value encodings are documented in
``ticdc_lakehouse.decode.craft``. Details that matter for byte-exactness: the term dictionary is filled in the
order the encoder meets strings (all header schemas, all header tables, then column names event by event, new
group before old group); ids and sizes are delta zigzag varints; the size-table length is a reversed uvarint;
FLOAT is widened from float32 to float64. TiCDC batches rows (``encode_batch``); DDL and resolved events are
always alone in their message.
"""

from __future__ import annotations

import struct
from typing import Optional, Sequence

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode.common import mysql_type_codes as type_codes
from ticdc_lakehouse.decode.common.tidb_ddl_actions import action_for_ddl_type
from ticdc_lakehouse.sim.encode.batches import RowBatches
from ticdc_lakehouse.sim.encode.column_values import WireColumn, row_columns
from ticdc_lakehouse.core.model import DDLEvent, ResolvedEvent, RowChange

VERSION = 1
_F64 = struct.Struct("<d")


def uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"uvarint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer (Go ``encodeVarint``)."""
    return uvarint((value << 1) ^ (value >> 63) if value < 0 else value << 1)


def _delta_varints(values: Sequence[int]) -> bytes:
    out = bytearray()
    last = 0
    for index, value in enumerate(values):
        out += varint(value if index == 0 else value - last)
        last = value
    return bytes(out)


def _delta_uvarints(values: Sequence[int]) -> bytes:
    """Delta uvarint chunk; like Go's uint64 arithmetic, a decreasing value wraps around 2**64."""
    out = bytearray()
    last = 0
    for index, value in enumerate(values):
        out += uvarint(value if index == 0 else (value - last) % (1 << 64))
        last = value
    return bytes(out)


class _Terms:
    """The message's term dictionary: ids in order of first use."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, term: Optional[str]) -> int:
        if term is None:
            return -1
        found = self.ids.get(term)
        if found is None:
            found = self.ids[term] = len(self.ids)
        return found

    def encode(self) -> bytes:
        if not self.ids:
            return b""
        raw = [term.encode("utf-8") for term in self.ids]
        return uvarint(len(raw)) + b"".join(uvarint(len(term)) for term in raw) + b"".join(raw)


def _value(column: WireColumn) -> Optional[bytes]:
    value = column.value
    if value is None:
        return None
    code = column.code
    if code in type_codes.INTEGER_CODES:
        return uvarint(value) if column.flags & type_codes.FLAG_UNSIGNED else varint(value)
    if code == type_codes.TYPE_YEAR:
        return varint(value)
    if code in (type_codes.TYPE_BIT, type_codes.TYPE_ENUM, type_codes.TYPE_SET):
        return uvarint(value)
    if code in (type_codes.TYPE_FLOAT, type_codes.TYPE_DOUBLE):
        return _F64.pack(value)
    if code in (type_codes.TYPE_NULL, type_codes.TYPE_GEOMETRY):
        return None
    if isinstance(value, bytes):
        return value
    if code in type_codes.STRING_CODES or code in type_codes.BLOB_CODES or isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"craft cannot encode {value!r} for type code {code}")  # pragma: no cover


def _column_group(group_type: int, columns: list[WireColumn], terms: _Terms) -> bytes:
    values = [_value(column) for column in columns]
    out = bytearray([group_type])
    out += uvarint(len(columns))
    out += _delta_varints([terms.id(column.name) for column in columns])
    out += b"".join(uvarint(column.code) for column in columns)
    out += b"".join(uvarint(column.flags) for column in columns)
    out += b"".join(varint(-1 if value is None else len(value)) for value in values)
    out += b"".join(value for value in values if value is not None)
    return bytes(out)


class CraftEncoder(RowBatches):
    """Encode model events as Craft messages (no Kafka key)."""

    def encode(self, event: model.Event) -> tuple[Optional[bytes], bytes]:
        """One event as one message."""
        if isinstance(event, RowChange):
            return self.encode_batch([event])
        if isinstance(event, DDLEvent):
            body = uvarint(action_for_ddl_type(event.ddl_type))
            query = event.query.encode("utf-8")
            body += uvarint(len(query)) + query
            header = (event.commit_ts, 2, event.schema or None, event.table or None)
            return None, self._message([header], [body], [])
        if isinstance(event, ResolvedEvent):
            return None, self._message([(event.ts, 3, None, None)], [b""], [])
        raise TypeError(f"craft cannot encode {type(event).__name__}")

    def encode_batch(self, rows: Sequence[RowChange]) -> tuple[Optional[bytes], bytes]:
        """Several row events in one message, as TiCDC's craft batch encoder writes them."""
        if not rows:
            raise ValueError("a craft batch needs at least one row event")
        headers = []
        for row in rows:
            if not isinstance(row, RowChange):
                raise TypeError("craft batches hold row events only; encode DDL and resolved events alone")
            headers.append((row.commit_ts, 1, row.schema or None, row.table or None))
        return None, self._message(headers, rows, None)

    @staticmethod
    def _row_groups(row: RowChange) -> list[tuple[int, list[WireColumn]]]:
        groups = []
        if row.op != model.DELETE:
            if not row.after:
                raise ValueError("an INSERT or UPDATE needs the new row in `after`")
            groups.append((0x01, row_columns(row.after, row.column_types, row.key_columns)))
        if row.op != model.INSERT and row.before:
            groups.append((0x02, row_columns(row.before, row.column_types, row.key_columns)))
        if not groups:
            raise ValueError("a DELETE needs the old row in `before`")
        return groups

    def _message(self, headers: list[tuple[int, int, Optional[str], Optional[str]]], bodies: Sequence,
                 group_tables: Optional[list[list[int]]]) -> bytes:
        terms = _Terms()
        header = bytearray()
        header += _delta_uvarints([ts for ts, _, _, _ in headers])
        header += b"".join(uvarint(kind) for _, kind, _, _ in headers)
        header += _delta_varints([-1] * len(headers))  # partition: unknown to the model, -1 = not partitioned
        header += _delta_varints([terms.id(schema) for _, _, schema, _ in headers])
        header += _delta_varints([terms.id(table) for _, _, _, table in headers])
        body_bytes = []
        size_tables: list[list[int]] = []
        if group_tables is None:  # row events: build the column groups now, after the header terms
            for row in bodies:
                groups = [_column_group(kind, columns, terms) for kind, columns in self._row_groups(row)]
                size_tables.append([len(group) for group in groups])
                body_bytes.append(b"".join(groups))
        else:
            body_bytes = list(bodies)
        dictionary = terms.encode()
        tables = [[len(header), len(dictionary)], [len(body) for body in body_bytes]] + size_tables
        encoded_tables = b"".join(uvarint(len(table)) + _delta_varints(table) for table in tables)
        return (uvarint(VERSION) + bytes(header) + b"".join(body_bytes) + dictionary + encoded_tables
                + uvarint(len(encoded_tables))[::-1])
