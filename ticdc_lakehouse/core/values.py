"""Canonical string forms of column values, shared by every decoder and by the Spark typing step.

One form per MySQL type family, chosen so that Spark's CAST reads it back exactly:

=================  =========================================================
family             canonical string
=================  =========================================================
integers, YEAR     decimal digits, sign if negative (BIGINT UNSIGNED up to 2^64-1)
BIT                the unsigned integer value in decimal digits
FLOAT, DOUBLE      Python ``repr`` of the float (``"1.5"``, ``"nan"``, ``"inf"``)
DECIMAL            plain decimal text, never an exponent (``"-12.3400"``)
DATE               ``YYYY-MM-DD``
DATETIME/TIMESTAMP ``YYYY-MM-DD HH:MM:SS[.ffffff]``
TIME               ``[-]HH:MM:SS[.ffffff]`` (hours may exceed 23)
CHAR/TEXT/JSON     the text itself
BINARY/BLOB        base64 of the bytes
ENUM / SET         index / bitmask digits when the descriptor is bare ``enum``/``set``; names otherwise
=================  =========================================================
"""

from __future__ import annotations

import base64
from decimal import Decimal, InvalidOperation


def from_bytes(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def to_bytes(canonical: str) -> bytes:
    return base64.b64decode(canonical)


def from_decimal(value: Decimal | str) -> str:
    """Plain (no exponent) text of a decimal, keeping its scale: ``Decimal('1E+2')`` -> ``'100'``."""
    try:
        dec = value if isinstance(value, Decimal) else Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"not a decimal: {value!r}") from exc
    if not dec.is_finite():
        raise ValueError(f"not a finite decimal: {value!r}")
    return format(dec, "f")


def from_float(value: float) -> str:
    return repr(float(value))
