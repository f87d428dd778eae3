"""Rendering query results for people (aligned table) and machines (one JSON object per line).

JSON rules, so that values survive exactly: DECIMAL as a string (never a float), dates and times as ISO-8601
strings, binary as base64, NaN/Infinity as strings, nested structs/maps/arrays recursively.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Iterable, Sequence


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value).replace("inf", "Infinity").replace("nan", "NaN")
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "asDict"):
        return {k: json_value(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def shortest_float32(value: float) -> float:
    """A FLOAT (float32) column value as the shortest decimal that is the same float32: ``1.23``, not
    ``1.2300000190734863`` (what widening it to a double prints)."""
    if math.isnan(value) or math.isinf(value):
        return value
    exact = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack("<f", candidate) == exact:
            return candidate
    return value


def json_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]], float32: Sequence[str] = ()) -> Iterable[str]:
    narrow = set(float32)
    for row in rows:
        yield json.dumps(
            {c: json_value(shortest_float32(v) if c in narrow and isinstance(v, float) else v)
             for c, v in zip(columns, row)},
            ensure_ascii=False,
        )


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    rendered = json_value(value)
    if isinstance(rendered, (dict, list)):
        return json.dumps(rendered, ensure_ascii=False)
    text = str(rendered)
    if any(ch < " " for ch in text):  # a tab or newline in a value must not break the grid
        text = text.encode("unicode_escape").decode("ascii") if text.isascii() else "".join(
            ch.encode("unicode_escape").decode("ascii") if ch < " " else ch for ch in text)
    return text


def table_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |", line]
    out += ["| " + " | ".join(t.ljust(w) for t, w in zip(row, widths)) + " |" for row in cells]
    out.append(line)
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)
