"""Decoder throughput against a bare parse of the same bytes.

For each protocol whose decoder exists, generate ``--events`` realistic row events (one ``shop.orders`` table:
70% inserts, 20% updates with old values, 10% deletes), encode them with our encoders as TiCDC would (Open
Protocol and Craft batch 16 rows per message, TiCDC's default max-batch-size), then time, message by message and
interleaved (so both see the same machine load), best of ``--repeat`` per message:

* decode: ``decoder.decode(message)``;
* bare parse: the least work any decoder must do on those bytes: ``orjson.loads`` of every JSON payload (for
  Open Protocol: every key and value JSON inside the framing), ``fastavro.schemaless_reader`` for Avro bodies.
  Craft has no parser to compare with; its target is to decode at least as many events/s as Open Protocol, so
  its bare parse is Open Protocol's on the same rows, and the Open Protocol decoder is timed alongside it.

Targets: decoding costs at most 2x the bare parse for JSON and Avro protocols; Craft >= Open Protocol events/s.
``craft`` is the decoder as it runs (its value reader compiled by ``make setup``); ``craft-python`` is the same
decoder with its pure-Python value readers, the fallback where the compiled reader is not built.
Confluent Avro needs a schema registry; here the writer schemas are put straight into the decoder's cache.

Run: ``.venv/bin/python bench/decode.py [--events 50000] [--repeat 5] [--protocols open,craft,avro]``
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

from ticdc_lakehouse.core import model  # noqa: E402
from ticdc_lakehouse.decode import make_decoder  # noqa: E402
from ticdc_lakehouse.core.model import Message, Position, RowChange  # noqa: E402

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
            after = dict(before, status=rng.choice(STATUSES), qty=str(rng.randrange(1, 50)))
            op = model.UPDATE
        else:
            row_id = live.pop(rng.randrange(len(live)))
            before = _row_values(rng, row_id, ts)
            after = None
            op = model.DELETE
        rows.append(RowChange("shop", "orders", ts, op, after, before, ("id",), dict(COLUMN_TYPES), position))
    return rows


# --- per-protocol encoding and bare parse ---------------------------------------------------------------------
#
# A setup returns (messages, bare units, bare parse, prepare): ``bare units[i]`` is what the bare parse of message
# i needs, ``bare parse(unit)`` parses it (None: no bare parse), ``prepare(decoder)`` readies a decoder (or None).

_U64 = struct.Struct(">Q")
Setup = tuple[list[tuple], Optional[list[Any]], Optional[Callable[[Any], None]], Optional[Callable[[Any], None]]]


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


def _loads_all(payloads: list[bytes], loads: Callable[[bytes], Any] = orjson.loads) -> None:
    for payload in payloads:
        loads(payload)


def _setup_open(rows: list[RowChange]) -> Setup:
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder

    messages = OpenProtocolEncoder().encode_rows(rows)
    return messages, [_open_payloads(key, value) for key, value in messages], _loads_all, None


def _setup_craft(rows: list[RowChange]) -> Setup:
    """Craft has no parser of its own to compare with: its bare units are the Open Protocol payloads of the same
    rows, batched alike (and ``bench`` also times the Open Protocol decoder on them, interleaved)."""
    from ticdc_lakehouse.sim.encode.craft import CraftEncoder
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder

    open_messages = OpenProtocolEncoder().encode_rows(rows)
    units = [(_open_payloads(key, value), Message("bench", 0, offset, key, value))
             for offset, (key, value) in enumerate(open_messages)]
    return CraftEncoder().encode_rows(rows), units, _loads_open_payloads, None


def _loads_open_payloads(unit: tuple[list[bytes], Message]) -> None:
    _loads_all(unit[0])


def _setup_simple_json(rows: list[RowChange]) -> Setup:
    encoder = importlib.import_module("ticdc_lakehouse.sim.encode.simple").SimpleJsonEncoder()
    messages = [encoder.encode(row) for row in rows]
    return messages, [[value] for _, value in messages], _loads_all, None


def _avro_reader(units: list[tuple[bytes, Any]]) -> None:
    import fastavro

    for body, schema in units:
        fastavro.schemaless_reader(io.BytesIO(body), schema)


def _setup_simple_avro(rows: list[RowChange]) -> Setup:
    import fastavro

    simple = importlib.import_module("ticdc_lakehouse.decode.simple")
    encoder = importlib.import_module("ticdc_lakehouse.sim.encode.simple").SimpleAvroEncoder()
    messages = [encoder.encode(row) for row in rows]
    schema = fastavro.parse_schema(orjson.loads(Path(simple.SCHEMA_FILE).read_bytes()))
    return messages, [[(value, schema)] for _, value in messages], _avro_reader, None


def _avro_schema() -> dict[str, Any]:
    """The value schema TiCDC's Avro encoder registers for ``shop.orders`` (enable-tidb-extension=true)."""
    def column(name: str, avro_type: Any, tidb_type: str, nullable: bool = False, **extra: Any) -> dict[str, Any]:
        body = {"type": avro_type, "connect.parameters": {"tidb_type": tidb_type}, **extra}
        if tidb_type == "ENUM":
            body["connect.parameters"]["allowed"] = ",".join(STATUSES)
        return {"name": name, "type": ["null", body], "default": None} if nullable else {"name": name, "type": body}

    return {"type": "record", "name": "orders", "namespace": "default.shop", "fields": [
        column("id", "long", "BIGINT"), column("customer_id", "long", "INT UNSIGNED"),
        column("status", "string", "ENUM"),
        column("amount", "bytes", "DECIMAL", logicalType="decimal", precision=12, scale=2),
        column("discount", "double", "DOUBLE"), column("qty", "int", "INT"), column("sku", "string", "TEXT"),
        column("note", "string", "TEXT", nullable=True), column("created_at", "string", "DATETIME"),
        column("updated_at", "string", "TIMESTAMP"), column("is_gift", "int", "INT"),
        {"name": "_tidb_op", "type": "string", "default": ""},
        {"name": "_tidb_commit_ts", "type": "long", "default": 0},
        {"name": "_tidb_commit_physical_time", "type": "long", "default": 0},
    ]}


def _setup_avro(rows: list[RowChange]) -> Setup:
    """Confluent Avro: the writer schema is put in the decoder's schema cache (no registry in a benchmark)."""
    import fastavro

    avro = importlib.import_module("ticdc_lakehouse.decode.confluent_avro")
    schema = _avro_schema()
    parsed = fastavro.parse_schema(schema)
    key_schema = {"type": "record", "name": "orders", "namespace": "default.shop",
                  "fields": [{"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}}]}
    parsed_key = fastavro.parse_schema(key_schema)
    messages = []
    for row in rows:
        image = row.after if row.after is not None else row.before
        key = io.BytesIO()
        fastavro.schemaless_writer(key, parsed_key, {"id": int(image["id"])})
        if row.op == model.DELETE:
            messages.append((avro.confluent_frame(2, key.getvalue()), None))
            continue
        record = {name: (None if value is None else value) for name, value in image.items()}
        for name in ("id", "customer_id", "qty", "is_gift"):
            record[name] = int(record[name])
        record["amount"] = Decimal(record["amount"])
        record["discount"] = float(record["discount"])
        record.update(_tidb_op="c" if row.op == model.INSERT else "u", _tidb_commit_ts=row.commit_ts,
                      _tidb_commit_physical_time=row.commit_ts >> 18)
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, record)
        messages.append((avro.confluent_frame(2, key.getvalue()), avro.confluent_frame(1, body.getvalue())))
    units = [[((value or key)[5:], parsed if value else parsed_key)] for key, value in messages]

    def prepare(decoder: Any) -> None:
        decoder._writers[1] = avro._writer_schema(orjson.dumps(schema).decode(), 1)
        decoder._writers[2] = avro._writer_schema(orjson.dumps(key_schema).decode(), 2)

    return messages, units, _avro_reader, prepare


SETUPS: dict[str, tuple[str, Callable]] = {
    "open": ("open_protocol.py", _setup_open),
    "craft": ("craft.py", _setup_craft),
    "craft-python": ("craft.py", _setup_craft),  # the same, with the pure-Python value readers (the fallback)
    "simple-json": ("simple.py", _setup_simple_json),
    "simple-avro": ("simple.py", _setup_simple_avro),
    "avro": ("confluent_avro.py", _setup_avro),
}


def _make_decoder(protocol: str) -> Any:
    """The registry's decoder; ``craft-python`` is Craft's with its pure-Python value readers, which it uses where
    the compiled reader (``decode/_craft_reader.pyx``) is not built."""
    if protocol == "craft-python":
        from ticdc_lakehouse.decode.craft import CraftDecoder

        return CraftDecoder(compiled=False)
    decoder = make_decoder(protocol)
    if protocol == "craft":
        from ticdc_lakehouse.decode import craft

        if not craft.COMPILED_READER:
            print("craft: the compiled value reader is not built (make setup); this row measures the Python readers")
    return decoder


def bench(protocol: str, rows: list[RowChange], repeat: int) -> Optional[dict[str, Any]]:
    """Decode time and bare-parse time, measured message by message, interleaved, best of ``repeat``.

    Interleaving puts both measurements under the same machine load, which matters on a shared 2-core box where
    other jobs come and go; the best of several runs per chunk drops the interruptions.
    """
    module_file, setup = SETUPS[protocol]
    if not (DECODE_DIR / module_file).exists():
        return None
    messages, units, bare, prepare = setup(rows)
    decoder = _make_decoder(protocol)
    if prepare is not None:
        prepare(decoder)
    wrapped = [Message("bench", 0, offset, key, value) for offset, (key, value) in enumerate(messages)]
    decode = decoder.decode
    events = sum(len(decode(message)) for message in wrapped)  # warm-up and sanity count
    if events != len(rows):
        raise SystemExit(f"{protocol}: decoded {events} events from {len(rows)} rows")
    decode_best = [float("inf")] * len(wrapped)
    bare_best = [float("inf")] * len(wrapped)
    open_best = [float("inf")] * len(wrapped)
    open_decode = make_decoder("open").decode if protocol.startswith("craft") else None
    clock = time.perf_counter
    for round_ in range(repeat):
        for index, message in enumerate(wrapped):
            if open_decode is not None and round_ % 2:  # Craft's target: time Open Protocol alongside, in turns
                began = clock()
                open_decode(units[index][1])
                ended = clock()
                if ended - began < open_best[index]:
                    open_best[index] = ended - began
            began = clock()
            decode(message)
            middle = clock()
            if bare is not None:
                bare(units[index])
            ended = clock()
            if middle - began < decode_best[index]:
                decode_best[index] = middle - began
            if ended - middle < bare_best[index]:
                bare_best[index] = ended - middle
            if open_decode is not None and not round_ % 2:
                began = clock()
                open_decode(units[index][1])
                ended = clock()
                if ended - began < open_best[index]:
                    open_best[index] = ended - began
    result = {"protocol": protocol, "messages": len(wrapped), "events": events, "decode_s": sum(decode_best)}
    if bare is not None:
        result["bare_s"] = sum(bare_best)
    if open_decode is not None:
        result["open_decode_s"] = sum(open_best)
    return result


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
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
        print(f"{protocol:12s} measured", flush=True)

    print(f"\n{args.events} row events, best of {args.repeat} per message\n")
    print(f"{'protocol':12s} {'messages':>9s} {'decode ev/s':>12s} {'bare ev/s':>12s} {'cost x bare':>12s}  target")
    for protocol, result in results.items():
        events = result["events"]
        decode_rate = events / result["decode_s"]
        bare_rate = events / result["bare_s"]
        ratio = result["decode_s"] / result["bare_s"]
        if protocol.startswith("craft"):
            versus_open = result["open_decode_s"] / result["decode_s"]
            if protocol == "craft":
                verdict = ("OK" if versus_open >= 1.0 else "MISSED") + \
                    f" (>= Open Protocol decode: {versus_open:.2f}x its events/s; bare = Open Protocol's)"
            else:
                verdict = f"fallback, no target: {versus_open:.2f}x Open Protocol's events/s"
        else:
            verdict = "OK (<= 2x)" if ratio <= 2.0 else "MISSED (> 2x)"
        print(f"{protocol:12s} {result['messages']:9d} {decode_rate:12,.0f} {bare_rate:12,.0f} {ratio:12.2f}"
              f"  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
