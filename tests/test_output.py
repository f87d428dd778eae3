"""JSON and table rendering of query results keep values exact."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal

from ticdc_lakehouse.commands.output import json_lines, json_value, table_text


def test_json_keeps_decimals_dates_and_bytes_exact():
    line = next(json_lines(
        ["d", "big", "ts", "day", "raw", "f", "n", "nan"],
        [(Decimal("12.30"), 18446744073709551615, datetime(2026, 1, 2, 3, 4, 5, 600000), date(2026, 1, 2),
          b"\x00\xff", 1.5, None, float("nan"))],
    ))
    assert json.loads(line) == {
        "d": "12.30", "big": 18446744073709551615, "ts": "2026-01-02T03:04:05.600000", "day": "2026-01-02",
        "raw": "AP8=", "f": 1.5, "n": None, "nan": "NaN",
    }
    assert json_value(Decimal("1E+2")) == "100"


def test_table_text_shows_every_row_and_nulls():
    text = table_text(["id", "name"], [(1, "a"), (2, None)])
    assert "| 2  | NULL |" in text and text.endswith("(2 rows)")


def test_float_columns_print_their_shortest_float32_form():
    import struct

    widened = struct.unpack("<f", struct.pack("<f", 1.23))[0]
    assert widened != 1.23
    line = next(json_lines(["f", "d"], [(widened, widened)], float32=["f"]))
    assert json.loads(line) == {"f": 1.23, "d": widened}
