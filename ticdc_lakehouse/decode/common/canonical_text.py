"""Canonical DECIMAL text for decoders that receive decimals as text (Open Protocol, Craft).

TiDB writes decimals in plain notation (``-12.3400``), which is already canonical, so the common case must
cost next to nothing: a few C-level string checks. Anything else (an exponent, a leading ``+``, stray text)
goes through ``values.from_decimal``, which normalizes it or raises ValueError, so garbage never reaches the lake
looking like a number.
"""

from __future__ import annotations

from ticdc_lakehouse.core.values import from_decimal


def is_plain_decimal(text: str) -> bool:
    """``[-]digits[.digits]`` in ASCII: TiDB's own decimal text."""
    body = text[1:] if text[:1] == "-" else text
    return body.isascii() and body.replace(".", "", 1).isdigit() and body[:1] != "." and body[-1:] != "."


def decimal_text(text: str) -> str:
    """Canonical form of decimal text; ValueError when it is not a finite decimal."""
    return text if is_plain_decimal(text) else from_decimal(text)
