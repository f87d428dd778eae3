"""Canonical column values back to the typed values TiCDC holds before it serializes them.

Both Open Protocol and Craft start from the same Go values (int64/uint64, float32/float64, string, []byte,
nil) chosen by the MySQL type code; this module turns a model column (canonical string + type descriptor + is
it a key column) into that code, the TiCDC flags and the typed value, so the two encoders only differ in how
they write it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

from ticdc_lakehouse.decode.common.go_text import to_float32
from ticdc_lakehouse.decode.common.mysql_type_codes import (
    BLOB_CODES,
    FLAG_BINARY,
    FLAG_HANDLE_KEY,
    FLAG_PRIMARY_KEY,
    INTEGER_CODES,
    STRING_CODES,
    TYPE_BIT,
    TYPE_DOUBLE,
    TYPE_ENUM,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
    TYPE_NULL,
    TYPE_SET,
    TYPE_YEAR,
    ColumnType,
    parse_descriptor,
)

GoValue = Union[None, int, float, str, bytes]


@dataclass(frozen=True)
class WireColumn:
    """One column as TiCDC sends it: name, type code, flags, handle-key or not, and the typed value."""

    name: str
    code: int
    flags: int
    handle: bool
    value: GoValue


@lru_cache(maxsize=1024)
def column_type(desc: str) -> ColumnType:
    return parse_descriptor(desc)


def wire_column(name: str, canonical: Optional[str], desc: str, is_key: bool) -> WireColumn:
    """The Go-side view of a model column; ValueError when the value does not fit its descriptor."""
    ctype = column_type(desc)
    # the model does not know nullability, unique keys or generated columns: only what the type implies and
    # the handle key are flagged (TiCDC marks handle columns HandleKey + PrimaryKey)
    flags = ctype.flags | (FLAG_HANDLE_KEY | FLAG_PRIMARY_KEY if is_key else 0)
    value = None if canonical is None else go_value(canonical, ctype)
    return WireColumn(name, ctype.code, flags, is_key, value)


def go_value(canonical: str, ctype: ColumnType) -> GoValue:
    code = ctype.code
    if code in INTEGER_CODES or code in (TYPE_YEAR, TYPE_BIT):
        return int(canonical)
    if code == TYPE_ENUM:
        if ctype.elements is None:
            return int(canonical)
        return 0 if canonical == "" else ctype.elements.index(canonical) + 1
    if code == TYPE_SET:
        if ctype.elements is None:
            return int(canonical)
        return sum(1 << ctype.elements.index(name) for name in canonical.split(",")) if canonical else 0
    if code == TYPE_FLOAT:
        return to_float32(float(canonical))
    if code == TYPE_DOUBLE:
        return float(canonical)
    if code in STRING_CODES or code in BLOB_CODES or code == TYPE_GEOMETRY:
        if ctype.flags & FLAG_BINARY:
            try:
                return base64.b64decode(canonical, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"binary value is not base64: {exc}") from None
        return canonical
    if code == TYPE_NULL:
        return None
    return canonical  # DECIMAL, temporal, JSON, vector: text on the wire


def row_columns(
    values: dict[str, Optional[str]], column_types: dict[str, str], key_columns: tuple[str, ...]
) -> list[WireColumn]:
    """Wire columns of one row image, in the row's column order."""
    keys = set(key_columns)
    columns = []
    for name, canonical in values.items():
        try:
            desc = column_types[name]
        except KeyError:
            raise ValueError(f"column {name!r} has no type descriptor in column_types") from None
        columns.append(wire_column(name, canonical, desc, name in keys))
    return columns
