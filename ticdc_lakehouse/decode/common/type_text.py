"""Small helpers shared by the Simple, Canal-JSON, Debezium and Confluent Avro decoders.

They build and normalize MySQL type descriptors (see ``ticdc_lakehouse.core.model``) and produce canonical value strings
(see ``ticdc_lakehouse.core.values``) for the few wire forms that are not canonical already. Everything here is called
once per column schema, or per value only for the types that need it (floats, bits), so it stays cheap.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Iterable, Optional

from ticdc_lakehouse.core.model import TableSchema

UINT64_MASK = 0xFFFFFFFFFFFFFFFF

_F32 = struct.Struct("<f")

#: MySQL types for which ``unsigned`` is meaningful in a descriptor
_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_FIXED_TYPES = frozenset({"decimal", "numeric"})


def quote_elements(elements: Iterable[str]) -> str:
    """``['a', "b'c"]`` -> ``'a','b''c'`` (MySQL quoting, as in ``SHOW CREATE TABLE``)."""
    return ",".join("'" + element.replace("'", "''") + "'" for element in elements)


def build_descriptor(
    mysql_type: str,
    *,
    length: Optional[int] = None,
    scale: Optional[int] = None,
    unsigned: bool = False,
    elements: Optional[Iterable[str]] = None,
) -> str:
    """A type descriptor from its parts: ``decimal(10,2)``, ``bigint unsigned``, ``enum('a','b')``, ``varchar``.

    Only DECIMAL keeps its precision, BIT its width (``bit(8)``: the MySQL type, as a CREATE TABLE states it) and
    ENUM/SET their members: the other lengths do not change how a value is read, and bare names keep the
    descriptors comparable across protocols.
    """
    base = mysql_type.strip().lower()
    if base == "bit" and isinstance(length, int) and 1 <= length <= 64:
        return f"bit({length})"
    if base in _FIXED_TYPES:
        if length and length > 0:
            return f"decimal({length},{scale if scale and scale > 0 else 0})"
        return "decimal"
    if base in ("enum", "set") and elements is not None:
        return f"{base}({quote_elements(elements)})"
    if unsigned and base in _INTEGER_TYPES:
        return f"{base} unsigned"
    return base


def normalize_descriptor(text: str, *, keep_elements: bool = True) -> str:
    """Normalize a MySQL column type text as protocols print it.

    ``int(11) unsigned zerofill`` -> ``int unsigned``, ``DECIMAL(10,4)`` -> ``decimal(10,4)``, ``float unsigned``
    -> ``float``, ``varchar(255)`` -> ``varchar``; ``enum('a','b')`` stays as is unless ``keep_elements`` is false
    (the protocol sends the index, so the descriptor must be the bare ``enum``).
    """
    raw = text.strip()
    lower = raw.lower()
    paren = lower.find("(")
    base = (lower[:paren] if paren >= 0 else lower.split(" ", 1)[0]).strip()
    if base in ("enum", "set"):
        if keep_elements and paren >= 0 and raw.endswith(")"):
            return base + raw[paren:].strip()
        return base
    unsigned = " unsigned" in lower
    if base == "bit" and paren >= 0:
        width = lower[paren + 1 : lower.find(")", paren)].strip()
        return f"bit({int(width)})" if width.isdigit() and 1 <= int(width) <= 64 else "bit"
    if base in _FIXED_TYPES:
        if paren >= 0:
            inside = lower[paren + 1 : lower.find(")", paren)]
            parts = [p.strip() for p in inside.split(",")]
            try:
                precision = int(parts[0])
                scale = int(parts[1]) if len(parts) > 1 and parts[1] else 0
            except ValueError:
                return "decimal"
            return f"decimal({precision},{scale})"
        return "decimal"
    if base == "integer":
        base = "int"
    if base == "real":
        base = "double"
    if base == "boolean" or base == "bool":
        base = "tinyint"
    return f"{base} unsigned" if unsigned and base in _INTEGER_TYPES else base


def is_binary_descriptor(descriptor: str) -> bool:
    """True for BINARY/VARBINARY/*BLOB: their canonical value is base64."""
    return "blob" in descriptor or "binary" in descriptor


def base_type(descriptor: str) -> str:
    """``decimal(10,2)`` -> ``decimal``, ``bigint unsigned`` -> ``bigint``."""
    end = len(descriptor)
    for stop in ("(", " "):
        pos = descriptor.find(stop)
        if 0 <= pos < end:
            end = pos
    return descriptor[:end]


def float32_text(value: float) -> str:
    """The canonical text of a FLOAT (binary32) value: the shortest decimal that reads back to the same float32.

    Avro and Debezium hand us float32 values widened to double (``0.1f`` -> ``0.10000000149011612``); TiCDC's own
    text encoders print the float32 shortest form (``0.1``), and so must we for the values to agree.
    """
    if not math.isfinite(value):
        return repr(value)
    for precision in range(1, 10):
        text = "%.*g" % (precision, value)
        candidate = float(text)
        try:
            if _F32.unpack(_F32.pack(candidate))[0] == value:
                return repr(candidate)
        except OverflowError:  # a short text of a value near FLT_MAX rounds above it: try more digits
            continue
    return repr(value)


def is_float32_exact(value: float) -> bool:
    """True when a double holds exactly a binary32 value (used when the wire type is not known)."""
    try:
        return _F32.unpack(_F32.pack(value))[0] == value
    except OverflowError:
        return False


def decimal_text_from_float(value: float) -> str:
    """Plain decimal text of a double that stands for a DECIMAL (Debezium): ``1e-05`` -> ``0.00001``."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite decimal: {value!r}")
    text = format(Decimal(repr(value)), "f")
    return text


def dml_column_types(table: TableSchema) -> dict[str, str]:
    """Descriptors for rows whose ENUM/SET values are index/bitmask (Simple): members are dropped."""
    result: dict[str, str] = {}
    for column in table.columns:
        descriptor = column.mysql_type
        if descriptor.startswith(("enum(", "set(")):
            descriptor = descriptor[: descriptor.find("(")]
        result[column.name] = descriptor
    return result


def split_escaped_members(text: str) -> list[str]:
    """Split ``allowed`` lists (Avro/Debezium) on commas; TiCDC escapes commas inside a member as ``\\,``."""
    if "\\" not in text:
        return text.split(",") if text else []
    members: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and text[i + 1 : i + 2] == ",":
            current.append(",")
            i += 2
            continue
        if ch == ",":
            members.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    members.append("".join(current))
    return members
