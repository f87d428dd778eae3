"""The value TiDB gives existing rows for a column added by ``ALTER TABLE ... ADD COLUMN``.

TiDB never rewrites the rows: it records the column's *original default* and every read of an older row returns
it. So no row event carries it, and the lake must fill its existing rows with exactly that value, in the
canonical string form the decoders produce (``values.py``). The rules, from MySQL/TiDB:

* ``DEFAULT NULL`` or no default on a nullable column: NULL.
* NOT NULL without a default: the type's implicit default: 0 for numbers and BIT, ``''`` for strings, BLOB and
  SET, the first member for ENUM, ``00:00:00`` for TIME, JSON ``null``, the zero date for DATE/DATETIME/TIMESTAMP
  (NULL in the lake, the product's rule for zero dates), BINARY(n) n zero bytes (MySQL pads BINARY).
* A literal default in any of its SQL forms, as ``ddl_parse`` renders it: a string or number (``'x'``,
  ``_utf8mb4'x'``, ``-1``, ``1.50``), a hex literal ``x'10'`` / ``0x10`` and a bit literal ``b'101'``. Hex and
  bit literals are binary strings: a number column takes their big-endian value (``0x10`` is 16), a text column
  their bytes as text, a binary column their bytes; a string in a number or BIT column is read as MySQL converts
  it (``'7'`` is 7; BIT takes a string's bytes, ``'a'`` is 97).
* An expression (``CURRENT_TIMESTAMP``, ``(uuid())``): TiDB evaluates it once, when the DDL runs; that value is
  in no message, so it is :data:`UNKNOWN` here and the caller says so instead of inventing one.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Optional

from ticdc_lakehouse.core import values
from ticdc_lakehouse.core.mysql_types import (
    BINARY_TYPES,
    CHAR_TYPES,
    FLOAT_TYPES,
    INTEGER_TYPES,
    TEXT_TYPES,
    MySQLType,
)


class UnknownDefault(ValueError):
    """The default is an expression whose value TiDB computed when the DDL ran (not in the stream)."""


_HEX = re.compile(r"^(?:[xX]'([0-9a-fA-F]*)'|0x([0-9a-fA-F]+))$")
_BITS = re.compile(r"^(?:[bB]'([01]*)'|0b([01]+))$")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_TIME = re.compile(r"^(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d+))?$")
_DATE_TIME = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d+))?)?$")
_EXPRESSIONS = ("current_timestamp", "now(", "localtime", "curdate", "curtime", "utc_", "uuid", "rand(", "(")


def _literal_bytes(text: str) -> Optional[bytes]:
    """The bytes of a hex or bit literal, None for other text."""
    hex_match = _HEX.match(text)
    if hex_match:
        digits = hex_match.group(1) if hex_match.group(1) is not None else hex_match.group(2)
        return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
    bit_match = _BITS.match(text)
    if bit_match:
        digits = bit_match.group(1) if bit_match.group(1) is not None else bit_match.group(2)
        number = int(digits or "0", 2)
        return number.to_bytes(max(1, (len(digits) + 7) // 8), "big") if digits else b""
    return None


def _implicit(t: MySQLType) -> Optional[str]:
    """The implicit default of a NOT NULL column without a DEFAULT clause, canonical (None: NULL in the lake)."""
    base = t.base
    if base in INTEGER_TYPES or base in ("year", "bit"):
        return "0"
    if base in FLOAT_TYPES:
        return "0.0"
    if base == "decimal":
        return values.from_decimal(Decimal(0).scaleb(-(t.scale or 0)))
    if base == "time":
        return "00:00:00" + ("." + "0" * t.fsp if t.fsp else "")
    if base == "json":
        return "null"
    if base == "enum":
        return t.elements[0] if t.elements else "1"
    if base in ("date", "datetime", "timestamp"):
        return None  # the zero date: NULL in the lake (changes.typed_value)
    if base == "binary":
        return values.from_bytes(b"\0" * (t.length or 0))
    if base in BINARY_TYPES:
        return values.from_bytes(b"")
    return ""  # char, varchar, text, set, vector


def _number(text: str, raw: Optional[bytes], t: MySQLType) -> str:
    if raw is not None:
        number: Decimal = Decimal(int.from_bytes(raw, "big"))
    else:
        try:
            number = Decimal(text.strip())
        except InvalidOperation:
            raise ValueError(f"default {text!r} is not a number for {t.descriptor()}") from None
    if t.base in FLOAT_TYPES:
        return values.from_float(float(number))
    if t.base == "decimal":
        scale = t.scale or 0
        return values.from_decimal(number.quantize(Decimal(1).scaleb(-scale)))
    return str(int(number.to_integral_value()))


def _time(text: str, t: MySQLType) -> str:
    m = _TIME.match(text.strip())
    if not m:
        raise ValueError(f"default {text!r} is not a TIME")
    sign, hours, minutes, seconds, fraction = m.groups()
    out = f"{sign or ''}{int(hours):02d}:{int(minutes):02d}:{int(seconds):02d}"
    return out + ("." + (fraction or "").ljust(t.fsp, "0")[: t.fsp] if t.fsp else "")


def _date_time(text: str, t: MySQLType) -> Optional[str]:
    m = _DATE_TIME.match(text.strip())
    if not m:
        raise ValueError(f"default {text!r} is not a {t.base.upper()}")
    year, month, day, hour, minute, second, fraction = m.groups()
    date = f"{int(year):04d}-{int(month):02d}-{int(day):02d}"
    if date.startswith("0000-00-00"):
        return None
    if t.base == "date":
        return date
    out = f"{date} {int(hour or 0):02d}:{int(minute or 0):02d}:{int(second or 0):02d}"
    return out + ("." + (fraction or "").ljust(t.fsp, "0")[: t.fsp] if t.fsp else "")


def _set_members(text: str, t: MySQLType) -> str:
    """A SET default with its members in the column's order (TiDB stores the bitmask, shows them so)."""
    wanted = {item.lower() for item in text.split(",") if item}
    return ",".join(e for e in t.elements if e.lower() in wanted) if t.elements else text


def existing_row_value(t: MySQLType, default: Optional[str], nullable: bool) -> Optional[str]:
    """The canonical value (``values.py``) existing rows hold for a column added with type ``t``, ``default``
    (``ddl_parse``'s text, None for none or NULL) and ``nullable``; None for NULL. Raises :class:`UnknownDefault`
    for an expression default, ``ValueError`` for a literal the type cannot take."""
    if default is None:
        return None if nullable else _implicit(t)
    text = default
    if text.strip().lower().startswith(_EXPRESSIONS):
        raise UnknownDefault(f"default {text} was evaluated by TiDB when the DDL ran; its value is not in the stream")
    raw = _literal_bytes(text.strip())
    base = t.base
    if base in INTEGER_TYPES or base in FLOAT_TYPES or base in ("decimal", "year"):
        return _number(text, raw, t)
    if base == "bit":
        return str(int.from_bytes(raw if raw is not None else text.encode("utf-8"), "big")) if (
            raw is not None or not _NUMBER.match(text.strip())) else _number(text, None, t)
    if base in BINARY_TYPES:
        data = raw if raw is not None else text.encode("utf-8")
        if base == "binary" and t.length:
            data = data.ljust(t.length, b"\0")
        return values.from_bytes(data)
    if raw is not None and (base in CHAR_TYPES or base in TEXT_TYPES or base in ("enum", "set", "json")):
        text = raw.decode("utf-8", errors="strict")
    if base == "time":
        return _time(text, t)
    if base in ("date", "datetime", "timestamp"):
        return _date_time(text, t)
    if base == "set":
        return _set_members(text, t)
    return text
