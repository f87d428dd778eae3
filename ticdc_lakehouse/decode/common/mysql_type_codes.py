"""MySQL column type codes and TiCDC column flags, to and from our type descriptors.

Open Protocol and Craft do not send SQL types: each column carries a MySQL *type code* (TiDB's
``mysql.TypeXxx`` byte: 1..16, 225, 245..255) and TiCDC's *column flag* bit set. The code alone cannot tell
TEXT from BLOB or CHAR from BINARY: the ``BinaryFlag`` (charset ``binary``) does. Nor can it tell INT from
INT UNSIGNED: the ``UnsignedFlag`` does. This module is the one place that knows those rules, so the decoders
(descriptor from code + flags) and the encoders (code + flags from a descriptor) cannot drift apart.

Descriptors follow ``ticdc_lakehouse.core.model``: lower-case SQL type text. Neither protocol carries lengths,
precision or ENUM/SET elements, so decoded descriptors are bare (``"decimal"``, ``"enum"``, ``"varchar"``) and a
bare ``enum``/``set`` means the value is the 1-based index / the bitmask.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# --- type codes (TiDB parser/mysql/type.go) -------------------------------------------------------------------
TYPE_DECIMAL = 0  # old-style DECIMAL, never written by TiCDC but harmless to name
TYPE_TINY = 1
TYPE_SHORT = 2
TYPE_LONG = 3
TYPE_FLOAT = 4
TYPE_DOUBLE = 5
TYPE_NULL = 6
TYPE_TIMESTAMP = 7
TYPE_LONGLONG = 8
TYPE_INT24 = 9
TYPE_DATE = 10
TYPE_DURATION = 11
TYPE_DATETIME = 12
TYPE_YEAR = 13
TYPE_NEWDATE = 14
TYPE_VARCHAR = 15
TYPE_BIT = 16
TYPE_VECTOR_FLOAT32 = 225
TYPE_JSON = 245
TYPE_NEWDECIMAL = 246
TYPE_ENUM = 247
TYPE_SET = 248
TYPE_TINY_BLOB = 249
TYPE_MEDIUM_BLOB = 250
TYPE_LONG_BLOB = 251
TYPE_BLOB = 252
TYPE_VAR_STRING = 253
TYPE_STRING = 254
TYPE_GEOMETRY = 255

# --- TiCDC column flags (tiflow cdc/model ColumnFlagType) ---------------------------------------------------
FLAG_BINARY = 0x01
FLAG_HANDLE_KEY = 0x02
FLAG_GENERATED = 0x04
FLAG_PRIMARY_KEY = 0x08
FLAG_UNIQUE_KEY = 0x10
FLAG_MULTIPLE_KEY = 0x20
FLAG_NULLABLE = 0x40
FLAG_UNSIGNED = 0x80

#: integer codes whose descriptor takes " unsigned" when the UnsignedFlag is set (YEAR carries the flag too
#: in TiDB, but "year unsigned" is not a type)
INTEGER_CODES = frozenset({TYPE_TINY, TYPE_SHORT, TYPE_LONG, TYPE_LONGLONG, TYPE_INT24})
#: codes whose value is binary-or-text bytes, told apart by FLAG_BINARY
STRING_CODES = frozenset({TYPE_VARCHAR, TYPE_VAR_STRING, TYPE_STRING})
BLOB_CODES = frozenset({TYPE_TINY_BLOB, TYPE_MEDIUM_BLOB, TYPE_LONG_BLOB, TYPE_BLOB})

_PLAIN: dict[int, str] = {
    TYPE_DECIMAL: "decimal",
    TYPE_TINY: "tinyint",
    TYPE_SHORT: "smallint",
    TYPE_LONG: "int",
    TYPE_FLOAT: "float",
    TYPE_DOUBLE: "double",
    TYPE_NULL: "null",
    TYPE_TIMESTAMP: "timestamp",
    TYPE_LONGLONG: "bigint",
    TYPE_INT24: "mediumint",
    TYPE_DATE: "date",
    TYPE_DURATION: "time",
    TYPE_DATETIME: "datetime",
    TYPE_YEAR: "year",
    TYPE_NEWDATE: "date",
    TYPE_BIT: "bit",
    TYPE_VECTOR_FLOAT32: "vector",
    TYPE_JSON: "json",
    TYPE_NEWDECIMAL: "decimal",
    TYPE_ENUM: "enum",
    TYPE_SET: "set",
    TYPE_GEOMETRY: "geometry",
}
#: (text descriptor, binary descriptor) for the codes that FLAG_BINARY splits
_SPLIT: dict[int, tuple[str, str]] = {
    TYPE_VARCHAR: ("varchar", "varbinary"),
    TYPE_VAR_STRING: ("varchar", "varbinary"),
    TYPE_STRING: ("char", "binary"),
    TYPE_TINY_BLOB: ("tinytext", "tinyblob"),
    TYPE_MEDIUM_BLOB: ("mediumtext", "mediumblob"),
    TYPE_LONG_BLOB: ("longtext", "longblob"),
    TYPE_BLOB: ("text", "blob"),
}

KNOWN_CODES = frozenset(_PLAIN) | frozenset(_SPLIT)


def descriptor(code: int, flags: int) -> str:
    """The type descriptor of a column sent as (MySQL type code, TiCDC flags); ValueError for unknown codes."""
    split = _SPLIT.get(code)
    if split is not None:
        return split[1] if flags & FLAG_BINARY else split[0]
    plain = _PLAIN.get(code)
    if plain is None:
        raise ValueError(f"unknown MySQL type code {code!r}")
    if code in INTEGER_CODES and flags & FLAG_UNSIGNED:
        return plain + " unsigned"
    return plain


# --- descriptor -> code ---------------------------------------------------------------------------------------

#: base SQL type name -> (code, flags implied by the type itself)
_BY_NAME: dict[str, tuple[int, int]] = {
    "tinyint": (TYPE_TINY, 0),
    "bool": (TYPE_TINY, 0),
    "boolean": (TYPE_TINY, 0),
    "smallint": (TYPE_SHORT, 0),
    "mediumint": (TYPE_INT24, 0),
    "int": (TYPE_LONG, 0),
    "integer": (TYPE_LONG, 0),
    "bigint": (TYPE_LONGLONG, 0),
    "float": (TYPE_FLOAT, 0),
    "double": (TYPE_DOUBLE, 0),
    "real": (TYPE_DOUBLE, 0),
    "decimal": (TYPE_NEWDECIMAL, 0),
    "numeric": (TYPE_NEWDECIMAL, 0),
    "dec": (TYPE_NEWDECIMAL, 0),
    "fixed": (TYPE_NEWDECIMAL, 0),
    "null": (TYPE_NULL, 0),
    "timestamp": (TYPE_TIMESTAMP, 0),
    "date": (TYPE_DATE, 0),
    "time": (TYPE_DURATION, 0),
    "datetime": (TYPE_DATETIME, 0),
    "year": (TYPE_YEAR, 0),
    "bit": (TYPE_BIT, 0),
    "json": (TYPE_JSON, 0),
    "vector": (TYPE_VECTOR_FLOAT32, 0),
    "enum": (TYPE_ENUM, 0),
    "set": (TYPE_SET, 0),
    "geometry": (TYPE_GEOMETRY, FLAG_BINARY),
    "varchar": (TYPE_VARCHAR, 0),
    "char": (TYPE_STRING, 0),
    "varbinary": (TYPE_VARCHAR, FLAG_BINARY),
    "binary": (TYPE_STRING, FLAG_BINARY),
    "tinytext": (TYPE_TINY_BLOB, 0),
    "mediumtext": (TYPE_MEDIUM_BLOB, 0),
    "longtext": (TYPE_LONG_BLOB, 0),
    "text": (TYPE_BLOB, 0),
    "tinyblob": (TYPE_TINY_BLOB, FLAG_BINARY),
    "mediumblob": (TYPE_MEDIUM_BLOB, FLAG_BINARY),
    "longblob": (TYPE_LONG_BLOB, FLAG_BINARY),
    "blob": (TYPE_BLOB, FLAG_BINARY),
}

_BASE_NAME = re.compile(r"\s*([a-z]+)")
_QUOTED = re.compile(r"'((?:[^'\\]|\\.|'')*)'")


@dataclass(frozen=True)
class ColumnType:
    """What a descriptor means on the wire: the MySQL type code, the flags the type implies, ENUM/SET elements."""

    code: int
    flags: int
    elements: Optional[tuple[str, ...]] = None  # ENUM/SET members when the descriptor lists them


def parse_descriptor(desc: str) -> ColumnType:
    """Map a descriptor such as ``"decimal(10,2)"``, ``"int unsigned"`` or ``"enum('a','b')"`` to wire terms."""
    text = desc.strip().lower()
    match = _BASE_NAME.match(text)
    if match is None or match.group(1) not in _BY_NAME:
        raise ValueError(f"unknown column type descriptor {desc!r}")
    code, flags = _BY_NAME[match.group(1)]
    rest = text[match.end():]
    if code in INTEGER_CODES and re.search(r"\bunsigned\b", rest):
        flags |= FLAG_UNSIGNED
    elements = None
    if code in (TYPE_ENUM, TYPE_SET) and rest.lstrip().startswith("("):
        # element names keep their case: read them from the original text
        start = desc.index("(")
        elements = tuple(_unquote_sql(m.group(1)) for m in _QUOTED.finditer(desc, start))
    return ColumnType(code, flags, elements)


def _unquote_sql(body: str) -> str:
    return body.replace("''", "'").replace("\\'", "'").replace("\\\\", "\\")
