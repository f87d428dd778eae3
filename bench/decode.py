"""Decoder throughput against a bare parse of the same bytes.

For each protocol whose decoder exists, generate ``--events`` realistic row events (one ``shop.orders`` table:
70% inserts, 20% updates with old values, 10% deletes), encode them with our encoders as TiCDC would (Open
Protocol and Craft batch 16 rows per message, TiCDC's default max-batch-size), then time:

* decode: ``decoder.decode(message)`` for every message, best of ``--repeat`` runs;
* bare parse: the least work any decoder must do on those bytes: ``orjson.loads`` of every JSON payload (for
  Open Protocol: every key and value JSON inside the framing), ``fastavro.schemaless_reader`` for Avro. Craft has
  no parser to compare with; its target is to decode at least as many events/s as Open Protocol, so it is
  compared with the Open Protocol bare parse (and decode).

Targets: decoding costs at most 2x the bare parse for JSON and Avro protocols; Craft >= Open Protocol events/s.

Run: ``.venv/bin/python bench/decode.py [--events 50000] [--repeat 3] [--protocols open,craft]``
"""

from __future__ import annotations

import argparse
import importlib
import io
import random
import struct
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from ticdc_lakehouse import model  # noqa: E402
from ticdc_lakehouse.decode import make_decoder  # noqa: E402
from ticdc_lakehouse.model import Message, Position, RowChange  # noqa: E402

DECODE_DIR = Path(__file__).resolve().parents[1] / "ticdc_lakehouse" / "decode"

COLUMN_TYPES = {
    "id": "bigint",
    "customer_id": "int unsigned",
    "status": "enum('new','paid','shipped','cancelled')",
    "amount": "decimal(12,2)",
    "discount": "double",
    "qty": "smallint",
    "sku": "char(12)",
    "note": "varchar(255)",
    "created_at": "datetime",
    "updated_at": "timestamp",
    "is_gift": "tinyint",
}
STATUSES = ["new", "paid", "shipped", "cancelled"]
WORDS = ["blue", "large", "gift wrap", "express", "fragile", "leave at door", "thanks!", "café", "两个", "x"]


def _row_values(rng: random.Random, row_id: int, ts: int) -> dict[str, Optional[str]]:
    created = 1_700_000_000 + row_id
    return {
        "id": str(row_id),
        "customer_id": str(rng.randrange(1, 4_000_000_000)),
        "status": rng.choice(STATUSES),
        "amount": str(Decimal(rng.randrange(0, 10_000_000)) / 100),
        "discount": repr(round(rng.random(), 4)),
        "qty": str(rng.randrange(1, 50)),
        "sku": f"SKU-{rng.randrange(10**7):07d}",
        "note": None if rng.random() < 0.3 else " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6))),
        "created_at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(created)),
        "updated_at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(created + ts % 1000)),
        "is_gift": str(rng.randrange(2)),
    }


def generate_rows(count: int, seed: int = 7) -> list[RowChange]:
    """Realistic row events on one table: 70% inserts, 20% updates (with old values), 10% deletes."""
    rng = random.Random(seed)
    rows = []
    live: list[int] = []
    ts = 440_000_000_000_000_000
    position = Position("bench", 0, 0)
    for index in range(count):
        ts += rng.randrange(1, 1000)
        roll = rng.random()
        if roll < 0.7 or len(live) < 10:
            row_id = index + 1
            live.append(row_id)
            after: Optional[dict] = _row_values(rng, row_id, ts)
            before = None
            op = model.INSERT
        elif roll < 0.9:
            row_id = rng.choice(live)
            before = _row_values(rng, row_id, ts - 1)
            after = dict(before, status=rng.choice(STATUSES), updated_at=before["created_at"], qty=str(rng.randrange(1, 50)))
            op = model.UPDATE
        else:
            row_id = live.pop(rng.randrange(len(live)))
            before = _row_values(rng, row_id, ts)
            after = None
            op = model.DELETE
        rows.append(RowChange("shop", "orders", ts, op, after, before, ("id",), dict(COLUMN_TYPES), position))
    return rows


# --- per-protocol encoding and bare parse ---------------------------------------------------------------------

_U64 = struct.Struct(">Q")


def _open_payloads(key: bytes, value: bytes) -> list[bytes]:
    payloads = []
    for blob, pos in ((key, 8), (value, 0)):
        while pos < len(blob):
            size = _U64.unpack_from(blob, pos)[0]
            pos += 8
            if size:
                payloads.append(blob[pos:pos + size])
            pos += size
    return payloads


def _bare_json(payloads: list[bytes]) -> Callable[[], None]:
    loads = orjson.loads

    def run() -> None:
        for payload in payloads:
            loads(payload)
    return run


def _setup_open(rows: list[RowChange]) -> tuple[list[tuple], Callable[[], None]]:
    from ticdc_lakehouse.encode.open_protocol import OpenProtocolEncoder

    messages = OpenProtocolEncoder().encode_rows(rows)
    payloads = [p for key, value in messages for p in _open_payloads(key, value)]
    return messages, _bare_json(payloads)


def _setup_craft(rows: list[RowChange]) -> tuple[list[tuple], Optional[Callable[[], None]]]:
    from ticdc_lakehouse.encode.craft import CraftEncoder

    return CraftEncoder().encode_rows(rows), None


def _setup_simple_json(rows: list[RowChange]) -> tuple[list[tuple], Callable[[], None]]:
    encoder = importlib.import_module("ticdc_lakehouse.encode.simple").SimpleJsonEncoder()
    messages = [encoder.encode(row) for row in rows]
    return messages, _bare_json([value for _, value in messages])


def _setup_simple_avro(rows: list[RowChange]) -> tuple[list[tuple], Callable[[], None]]:
    import fastavro

    simple = importlib.import_module("ticdc_lakehouse.decode.simple")
    encoder = importlib.import_module("ticdc_lakehouse.encode.simple").SimpleAvroEncoder()
    messages = [encoder.encode(row) for row in rows]
    schema = fastavro.parse_schema(orjson.loads(Path(simple.SCHEMA_FILE).read_bytes()))
    values = [value for _, value in messages]
    reader = fastavro.schemaless_reader

    def run() -> None:
        for value in values:
            reader(io.BytesIO(value), schema)
    return messages, run


SETUPS: dict[str, tuple[str, Callable]] = {
    "open": ("open_protocol.py", _setup_open),
    "craft": ("craft.py", _setup_craft),
    "simple-json": ("simple.py", _setup_simple_json),
    "simple-avro": ("simple.py", _setup_simple_avro),
}


def _best(run: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def bench(protocol: str, rows: list[RowChange], repeat: int) -> Optional[dict[str, Any]]:
    module_file, setup = SETUPS[protocol]
    if not (DECODE_DIR / module_file).exists():
        return None
    messages, bare = setup(rows)
    decoder = make_decoder(protocol)
    wrapped = [Message("bench", 0, offset, key, value) for offset, (key, value) in enumerate(messages)]
    decode = decoder.decode
    events = sum(len(decode(message)) for message in wrapped)  # warm-up and sanity count
    if events != len(rows):
        raise SystemExit(f"{protocol}: decoded {events} events from {len(rows)} rows")

    def run_decode() -> None:
        for message in wrapped:
            decode(message)

    result = {"protocol": protocol, "messages": len(wrapped), "events": events,
              "decode_s": _best(run_decode, repeat)}
    if bare is not None:
        result["bare_s"] = _best(bare, repeat)
    return result


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--protocols", default=",".join(SETUPS))
    args = parser.parse_args(argv)
    rows = generate_rows(args.events)
    results: dict[str, dict[str, Any]] = {}
    for protocol in args.protocols.split(","):
        try:
            result = bench(protocol, rows, args.repeat)
        except Exception as exc:  # another engineer's encoder may not handle every type yet
            print(f"{protocol:12s} skipped: {type(exc).__name__}: {exc}")
            continue
        if result is None:
            print(f"{protocol:12s} skipped: no decoder module yet")
            continue
        results[protocol] = result

    print(f"\n{args.events} row events, best of {args.repeat}\n")
    print(f"{'protocol':12s} {'messages':>9s} {'decode ev/s':>12s} {'bare ev/s':>12s} {'cost x bare':>12s}  target")
    open_bare = results.get("open", {}).get("bare_s")
    open_decode = results.get("open", {}).get("decode_s")
    for protocol, result in results.items():
        events = result["events"]
        decode_rate = events / result["decode_s"]
        if "bare_s" in result:
            bare_rate = events / result["bare_s"]
            ratio = result["decode_s"] / result["bare_s"]
            verdict = "OK (<= 2x)" if ratio <= 2.0 else "MISSED (> 2x)"
            print(f"{protocol:12s} {result['messages']:9d} {decode_rate:12,.0f} {bare_rate:12,.0f} {ratio:12.2f}  {verdict}")
        else:
            line = f"{protocol:12s} {result['messages']:9d} {decode_rate:12,.0f}"
            if open_bare is not None and open_decode is not None:
                vs_bare = (events / open_bare) / decode_rate
                vs_decode = decode_rate / (events / open_decode)
                verdict = "OK (>= open decode)" if vs_decode >= 1.0 else "MISSED (< open decode)"
                line += (f" {'(open bare)':>12s} {vs_bare:12.2f}  {verdict}; {vs_decode:.2f}x Open Protocol decode")
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
