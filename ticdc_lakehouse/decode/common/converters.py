"""Value converters more than one protocol needs: wire values -> the model's canonical text.

A converter takes a non-null wire value and returns its canonical string (see ``ticdc_lakehouse.core.values``). The
typed ones here handle the one wire type their column type arrives as and hand anything else to the protocol's
own fallback, which knows that protocol's other value forms and names it in its errors.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional

from ticdc_lakehouse.decode.common.type_text import UINT64_MASK, float32_text

Converter = Callable[[Any], Optional[str]]


def scalar_text(value: Any) -> Optional[str]:
    """A JSON or Avro scalar as canonical text: booleans ``1``/``0`` (MySQL's BOOL is TINYINT(1)), integers in
    decimal, floats as Python ``repr``; None for any other kind (the caller decides what that is)."""
    if value is True or value is False:
        return "1" if value else "0"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float:
        return repr(value)
    return None


# The typed converters are partials of module-level functions, not closures: decoders cache them per table and
# travel to Spark executors by pickle, which takes a partial (and not a closure) as it is.


def unsigned_or(fallback: Converter) -> Converter:
    """BIGINT UNSIGNED (and BIT/SET) above 2^63-1 travel as the same bits in a signed int64: undo the wrap."""
    return partial(_unsigned, fallback)


def float32_or(fallback: Converter) -> Converter:
    """FLOAT sent as a float32 widened to a double: the shortest text that reads back as the same float32."""
    return partial(_float32, fallback)


def double_or(fallback: Converter) -> Converter:
    """DOUBLE sent as a double: Python's ``repr``, the shortest text that reads back as the same double."""
    return partial(_double, fallback)


def _unsigned(fallback: Converter, value: Any) -> Optional[str]:
    return str(value & UINT64_MASK) if type(value) is int else fallback(value)


def _float32(fallback: Converter, value: Any) -> Optional[str]:
    return float32_text(value) if type(value) is float else fallback(value)


def _double(fallback: Converter, value: Any) -> Optional[str]:
    return repr(value) if type(value) is float else fallback(value)


def canonical_row(raw: dict[str, Any], converters: Optional[dict[str, Converter]], other: Converter) -> dict:
    """A row image in canonical text, in place (rows are mostly strings already: no copy): each column with a
    typed converter goes through it first (it needs the wire type), then any value not yet a string through
    ``other``, the protocol's converter for the remaining wire forms."""
    if converters:
        for name, convert in converters.items():
            value = raw.get(name)
            if value is not None:
                raw[name] = convert(value)
    for name, value in raw.items():
        if value is not None and type(value) is not str:
            raw[name] = other(value)
    return raw
