"""Landing throughput: Kafka -> landed Parquet segments, against a bare consume that writes nothing.

    .venv/bin/python bench/land.py                       # starts a private Apache Kafka broker
    .venv/bin/python bench/land.py --bootstrap host:9092 --records 500000 --size 1024

Produces ``--records`` distinct TiCDC-like JSON messages of about ``--size`` bytes over ``--partitions`` partitions,
then measures (best of ``--repeat``) a bare confluent-kafka consume of the whole topic that only touches every
message, and ``land_from_kafka`` of the same topic into a fresh landing directory. Prints MB/s and records/s of
both and the ratio landing/bare; the target is >= 0.7 (exit status 1 below ``--min-ratio``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.broker_fixture import Broker, create_topic, produce  # noqa: E402
from ticdc_lakehouse.runtime.config import ChangefeedConfig  # noqa: E402
from ticdc_lakehouse.landing.kafka_source import consumer_config, land_from_kafka  # noqa: E402


WORDS = ("order customer shipped pending amount total price discount region north south east west warehouse "
         "item sku quantity returned invoice paid status created updated note express standard gift").split()


def message(i: int, size: int, rng: random.Random, corpus: str) -> tuple[bytes, bytes]:
    """A TiCDC Open-Protocol-like key/value of about ``size`` bytes; every value differs and compresses like
    real row data (a slice of a text corpus, ids, decimals), not like one repeated template."""
    key = json.dumps({"ts": 440000000000000000 + i, "scm": "shop", "tbl": "orders", "t": 1}).encode()
    start = rng.randrange(0, len(corpus) - size)
    row = {"u": {"id": {"t": 8, "h": True, "v": i}, "amount": {"t": 246, "v": f"{rng.random() * 10000:.2f}"},
                 "buyer": {"t": 15, "v": f"user{rng.randrange(10**6)}"},
                 "note": {"t": 15, "v": corpus[start : start + max(0, size - 170)]}}}
    return key, json.dumps(row).encode()


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int, headers: int = 0) -> int:
    """Produce the records (TiCDC sets no Kafka headers; ``headers`` adds that many per record anyway)."""
    rng = random.Random(7)
    corpus = " ".join(rng.choices(WORDS, k=400_000))
    record_headers = [(f"h{i}", b"%d" % i) for i in range(headers)] or None
    total = 0
    chunk = 20000
    for begin in range(0, records, chunk):
        batch = []
        for i in range(begin, min(records, begin + chunk)):
            key, value = message(i, size, rng, corpus)
            batch.append((key, value, record_headers, i % partitions))
            total += len(key) + len(value)
        produce(bootstrap, topic, batch, compression="lz4", linger_ms=20, batch_num_messages=10000)
    return total


def changefeed(bootstrap: str, topic: str) -> ChangefeedConfig:
    return ChangefeedConfig(name=f"bench-{uuid.uuid4().hex[:6]}", protocol="open", topics=(topic,),
                            bootstrap_servers=bootstrap, schema_registry_url="", kafka={},
                            schema_registry={}, consumer_group="")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread: ours, librdkafka's, the writer's
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of another process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(broker: Broker | None, quiet_s: float = 1.5, timeout_s: float = 60.0) -> None:
    """Wait until our private broker has been idle for ``quiet_s``, so no measurement pays for the one before.

    The broker keeps working a moment after a produce or an offset commit (flushing, its JIT compiling the
    fetch path), which on this 2-core machine would otherwise run during whichever measurement comes next.
    No-op for an external broker (``--bootstrap``).
    """
    if broker is None or broker.pid is None or not Path(f"/proc/{broker.pid}/stat").exists():
        return
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        before = process_cpu_seconds(broker.pid)
        time.sleep(0.25)
        if process_cpu_seconds(broker.pid) - before > 0.02:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return


def measured(func, *args) -> tuple[float, int, int, float]:  # noqa: ANN001
    """``func``'s (wall seconds, records, bytes) plus the CPU seconds this process spent meanwhile."""
    before = cpu_seconds()
    seconds, records, size = func(*args)
    return seconds, records, size, cpu_seconds() - before


def bare_consume(bootstrap: str, topic: str, partitions: int) -> tuple[float, int, int]:
    """Read every partition to its high watermark, touching each message; returns (seconds, records, bytes)."""
    config = consumer_config(changefeed(bootstrap, topic))
    consumer = Consumer(config)
    began = time.perf_counter()
    ends = {}
    for p in range(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
        if high > low:
            ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    records = size = 0
    pending = set(ends)
    deadline = time.monotonic() + 600
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"bare consume stuck with partitions {sorted(pending)} unfinished")
        for msg in consumer.consume(num_messages=2000, timeout=0.1):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            key, value = msg.key(), msg.value()
            records += 1
            size += (len(key) if key else 0) + (len(value) if value else 0)
            msg.headers()
            msg.timestamp()
            if msg.offset() + 1 >= ends[msg.partition()]:
                pending.discard(msg.partition())
    seconds = time.perf_counter() - began
    consumer.close()
    return seconds, records, size


def land_once(bootstrap: str, topic: str) -> tuple[float, int, int]:
    root = Path(tempfile.mkdtemp(prefix="bench-landing-"))
    try:
        began = time.perf_counter()
        report = land_from_kafka(changefeed(bootstrap, topic), root)
        return time.perf_counter() - began, report.records, report.bytes
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="an existing broker; default: start a private Apache Kafka broker")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024, help="approximate message size in bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--headers", type=int, default=0, help="Kafka headers per record (TiCDC sends none)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--min-ratio", type=float, default=0.7)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below: stop our broker

    broker = None if args.bootstrap else Broker().start()
    bootstrap = args.bootstrap or broker.bootstrap
    try:
        topic = create_topic(bootstrap, f"bench-{uuid.uuid4().hex[:8]}", partitions=args.partitions)
        began = time.perf_counter()
        produced = fill(bootstrap, topic, args.records, args.size, args.partitions, args.headers)
        print(f"produced {args.records} records, {produced / 1e6:.1f} MB in {time.perf_counter() - began:.1f}s "
              f"to {topic} ({args.partitions} partitions) on {bootstrap}")
        bare, landed = [], []
        for _ in range(args.repeat):  # interleaved, so load changes on a shared machine hit both alike
            settle(broker)
            bare.append(measured(bare_consume, bootstrap, topic, args.partitions))
            settle(broker)
            landed.append(measured(land_once, bootstrap, topic))
        for name, runs in (("bare consume", bare), ("landing", landed)):
            seconds, records, size, cpu = min(runs)
            assert records == args.records, f"{name} read {records} records, expected {args.records}"
            print(f"{name:>13}: {size / seconds / 1e6:8.1f} MB/s {records / seconds:10.0f} records/s "
                  f"({seconds:.2f}s best of {len(runs)}; {cpu:.2f} CPU-s in this process)")
        ratio = min(bare)[0] / min(landed)[0]
        cpu_ratio = min(b[3] for b in bare) / min(r[3] for r in landed)
        print(f"        ratio: {ratio:.2f} (landing / bare consume throughput; target >= {args.min_ratio})")
        print(f"    CPU ratio: {cpu_ratio:.2f} (bare / landing CPU seconds: the cost of landing on a busy machine)")
        return 0 if ratio >= args.min_ratio else 1
    finally:
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    sys.exit(main())
