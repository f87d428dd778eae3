"""Merge benchmark: N landed change events merged into Iceberg tables of M existing rows, local Spark.

Prints, for each (N, M):
  * end-to-end events/s from landed segments to committed Iceberg snapshots (decode + merge, one run);
  * the ratio of that merge time to a plain Iceberg append of the same number of final rows, measured side by
    side in the same session (the floor: a merge cannot beat writing its output);
  * peak resident memory of the driver (the JVM, which is driver and executor in local mode, and the Python
    driver process), sampled every 100 ms;
and how cost grows with N and with M.

Each case runs in a fresh process with its own Spark session, as a scheduled merge does: no case inherits a
warmed-up JVM or Python workers from the one before (that made the second case look 1.5x faster than it is).

Usage: .venv/bin/python bench/merge.py [--quick] [--events 100000,1000000] [--rows 1000000,10000000]
Settings come from the defaults (driver memory 2g) and ``LAKEHOUSE__SECTION__KEY`` environment variables, e.g.
``LAKEHOUSE__MERGE__PARALLEL_TABLES=1`` to apply the tables one after the other.
Targets (issue 8): merge of 1M events <= 2.5x the append; 100k events into 10M rows <= 1.5x into 1M rows;
>= 50k events/s end to end at N = 1M; driver peak < 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLES = ("accounts", "orders", "events")
PARTITIONS = 4
BASE_TS = 470_000_000_000_000_000


class PeakMemory:
    """Samples the RSS of this process and its children (the Spark JVM) in a thread."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak_python = 0
        self.peak_jvm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_python = max(self.peak_python, self.process.memory_info().rss)
                jvm = sum(c.memory_info().rss for c in self.process.children(recursive=True) if "java" in c.name())
                self.peak_jvm = max(self.peak_jvm, jvm)
            except Exception:  # noqa: BLE001 - a child may vanish between listing and reading
                pass
            time.sleep(0.1)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def table_schema(name: str):
    from ticdc_lakehouse.core.model import ColumnSchema, TableSchema

    columns = (
        ColumnSchema("id", "bigint", False),
        ColumnSchema("account", "int"),
        ColumnSchema("amount", "decimal(12,2)"),
        ColumnSchema("status", "varchar(16)"),
        ColumnSchema("updated_at", "datetime"),
    )
    return TableSchema("bench", name, columns, ("id",))


def build_tables(spark, settings, rows_per_table: int) -> None:
    """M existing rows in total, spread over the tables, written by a plain append; watermark BASE_TS."""
    from pyspark.sql import functions as F

    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.iceberg.tables import create_table

    ji = JavaIceberg(spark, settings.catalog_name)
    for name in TABLES:
        create_table(ji, table_schema(name), "default", BASE_TS, "merge-on-read", 16)
        frame = spark.range(rows_per_table).select(
            F.col("id"),
            (F.col("id") % 1000).cast("int").alias("account"),
            (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("amount"),
            F.lit("new").alias("status"),
            F.lit("2026-01-01 00:00:00").cast("timestamp_ntz").alias("updated_at"),
        )
        frame.writeTo(f"{settings.catalog_name}.bench.{name}").append()
        ji.commit_marker(ji.load("bench", name), {"tidb.resolved-ts": BASE_TS})


def land_changes(settings, events: int, rows_per_table: int, seed: int = 1) -> int:
    """N Open Protocol change events (60% update, 25% insert, 15% delete) plus one DDL and resolved events,
    written straight into landed segments. Returns the number of distinct keys changed (final rows).

    Shaped like TiCDC's defaults: up to 16 consecutive row events of a partition per message (max-batch-size;
    a DDL or resolved event closes the batch and goes alone), updates carry the whole old row (old values are on
    by default), deletes the whole deleted row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
    from ticdc_lakehouse.landing.segments import LANDED_SCHEMA, segment_path, write_partition_count
    from ticdc_lakehouse.core.model import DDLEvent, Position, ResolvedEvent, RowChange

    rng = random.Random(seed)
    encoder = OpenProtocolEncoder()
    types = {"id": "bigint", "account": "int", "amount": "decimal", "status": "varchar", "updated_at": "datetime"}
    per_partition: list[list[tuple[bytes, bytes]]] = [[] for _ in range(PARTITIONS)]
    batches: list[list[RowChange]] = [[] for _ in range(PARTITIONS)]

    def close_batch(p: int) -> None:
        if batches[p]:
            per_partition[p].append(encoder.encode_batch(batches[p]))
            batches[p] = []

    def alone(p: int, event) -> None:  # noqa: ANN001 - a DDL or resolved event: its own message, after the rows
        close_batch(p)
        per_partition[p].append(encoder.encode(event))

    next_id = {name: rows_per_table for name in TABLES}
    touched = set()
    ts = BASE_TS
    ddl_at = events // 2
    for i in range(events):
        ts += 1 << 10
        if i == ddl_at:
            query = "ALTER TABLE `bench`.`orders` ADD COLUMN `note` varchar(32) NULL"
            for p in range(PARTITIONS):
                alone(p, DDLEvent("bench", "orders", ts, query, "ADD_COLUMN", Position("b", p, 0)))
            ts += 1 << 10
        table = TABLES[i % len(TABLES)]
        roll = rng.random()
        if roll < 0.25:
            key = next_id[table]
            next_id[table] += 1
            op = "I"
        else:
            # recent rows change most (like real OLTP): keys near the top of the table
            key = max(0, next_id[table] - 1 - int(rng.expovariate(1 / max(1, rows_per_table // 50))))
            op = "D" if roll > 0.85 else "U"
        touched.add((table, key))
        row = {"id": str(key), "account": str(key % 1000),
               "amount": f"{rng.randint(0, 99999)}.{rng.randint(0, 99):02d}",
               "status": rng.choice(("new", "paid", "shipped")), "updated_at": "2026-11-01 10:00:00"}
        column_types = dict(types)
        if table == "orders" and i > ddl_at:
            row["note"] = "n"
            column_types["note"] = "varchar"
        old_row = dict(row, amount=f"{rng.randint(0, 99999)}.{rng.randint(0, 99):02d}", status="new")
        after = None if op == "D" else row
        before = None if op == "I" else old_row
        partition = key % PARTITIONS
        batches[partition].append(
            RowChange("bench", table, ts, op, after, before, ("id",), column_types, Position("b", partition, 0)))
        if len(batches[partition]) == 16:
            close_batch(partition)
        if i % 5000 == 4999:
            for p in range(PARTITIONS):
                alone(p, ResolvedEvent(ts + 1, Position("b", p, 0)))
    for p in range(PARTITIONS):
        alone(p, ResolvedEvent(ts + 1, Position("b", p, 0)))
    write_partition_count(settings.landing_path, "default", "bench", PARTITIONS)
    for p, records in enumerate(per_partition):
        path = segment_path(settings.landing_path, "default", "bench", p, 0, len(records))
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.table(
            {
                "topic": ["bench"] * len(records),
                "partition": pa.array([p] * len(records), pa.int32()),
                "offset": pa.array(range(len(records)), pa.int64()),
                "timestamp": pa.array([None] * len(records), pa.int64()),
                "key": [k for k, _ in records],
                "value": [v for _, v in records],
                "headers": pa.array([[]] * len(records), LANDED_SCHEMA.field("headers").type),
            },
            schema=LANDED_SCHEMA,
        )
        pq.write_table(table, path, compression="zstd")
    return len(touched)


def plain_append_seconds(spark, settings, rows: int) -> float:
    """The floor: append ``rows`` rows of the same shape to a fresh Iceberg table."""
    from pyspark.sql import functions as F

    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.iceberg.tables import create_table

    ji = JavaIceberg(spark, settings.catalog_name)
    create_table(ji, table_schema("append_floor"), "default", BASE_TS, "merge-on-read", 16)
    frame = spark.range(rows).select(
        F.col("id"), (F.col("id") % 1000).cast("int").alias("account"),
        (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("amount"), F.lit("paid").alias("status"),
        F.lit("2026-11-01 10:00:00").cast("timestamp_ntz").alias("updated_at"),
    )
    started = time.monotonic()
    frame.writeTo(f"{settings.catalog_name}.bench.append_floor").append()
    return time.monotonic() - started


def run_case(events: int, rows: int, workdir: Path) -> dict:
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.merge.engine import run_merge
    from ticdc_lakehouse.runtime.spark_session import get_spark, use_catalog

    home = workdir / f"n{events}-m{rows}"
    shutil.rmtree(home, ignore_errors=True)
    overrides = {k: v for k, v in os.environ.items() if k.startswith("LAKEHOUSE__")}  # e.g. MERGE__PARALLEL_TABLES
    settings = load_settings(env={**overrides, "LAKEHOUSE_HOME": str(home),
                                  "LAKEHOUSE__CATALOG__NAME": f"b{events}_{rows}", "LAKEHOUSE_CONFIG": ""})
    spark = get_spark(settings, "bench-merge")
    use_catalog(spark, settings)
    build_tables(spark, settings, rows // len(TABLES))
    # generated in a child process: the generator's memory must not count as the merge driver's
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        final_rows = pool.submit(land_changes, settings, events, rows // len(TABLES)).result()
    marks: dict[str, float] = {}

    def progress(message: str) -> None:
        for word in ("decoding", "cut at", "committed cut"):
            if word in message:
                marks[word] = time.monotonic()

    with PeakMemory() as memory:
        started = time.monotonic()
        report = run_merge(spark, settings, "default", "open", progress=progress)
        merge_seconds = time.monotonic() - started
    decode_seconds = marks["cut at"] - marks["decoding"]
    apply_seconds = marks["committed cut"] - marks["cut at"]
    append_seconds = plain_append_seconds(spark, settings, final_rows)
    return {
        "events": events, "rows": rows, "final_rows": final_rows, "merge_s": merge_seconds,
        "decode_s": decode_seconds, "apply_s": apply_seconds, "apply_ratio": apply_seconds / append_seconds,
        "append_s": append_seconds, "events_per_s": events / merge_seconds, "ratio": merge_seconds / append_seconds,
        "jvm_peak_mb": memory.peak_jvm / 2**20, "python_peak_mb": memory.peak_python / 2**20,
        "tables": report.tables_merged,
    }


def run_case_in_process(events: int, rows: int, workdir: Path) -> dict:
    """``run_case`` in a fresh Python process and Spark session."""
    command = [sys.executable, str(Path(__file__).resolve()), "--case", f"{events},{rows}", "--workdir", str(workdir)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N=100k, M=1M only")
    parser.add_argument("--events", default="100000,1000000")
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)  # N,M: run one case, print its JSON
    args = parser.parse_args()
    if args.case:
        n, m = (int(x) for x in args.case.split(","))
        print("RESULT " + json.dumps(run_case(n, m, Path(args.workdir))), flush=True)
        return 0
    events = [100_000] if args.quick else [int(x) for x in args.events.split(",")]
    rows = [1_000_000] if args.quick else [int(x) for x in args.rows.split(",")]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-merge-"))
    print(f"machine: {os.cpu_count()} cores; workdir {workdir}")
    results = []
    for m in rows:
        for n in events:
            result = run_case_in_process(n, m, workdir)
            results.append(result)
            print(
                f"N={n:>9,} M={m:>11,}  end-to-end {result['merge_s']:6.1f}s = {result['events_per_s']:7,.0f} events/s "
                f"(decode+stats {result['decode_s']:5.1f}s, DDL+MERGE {result['apply_s']:5.1f}s)  "
                f"plain append of {result['final_rows']:,} rows {result['append_s']:5.1f}s  "
                f"ratio end-to-end {result['ratio']:5.1f}x, merge phase {result['apply_ratio']:5.1f}x  "
                f"peak JVM {result['jvm_peak_mb']:,.0f} MB, python driver {result['python_peak_mb']:,.0f} MB",
                flush=True,
            )
    by = {(r["events"], r["rows"]): r for r in results}
    if len(rows) > 1:
        for n in events:
            small, large = by[(n, rows[0])], by[(n, rows[-1])]
            print(f"cost vs table size, N={n:,}: M={rows[-1]:,} / M={rows[0]:,} = "
                  f"{large['merge_s'] / small['merge_s']:.2f}x (target <= 1.5x)")
    if len(events) > 1:
        for m in rows:
            small, large = by[(events[0], m)], by[(events[-1], m)]
            print(f"cost vs changes, M={m:,}: N={events[-1]:,} / N={events[0]:,} = "
                  f"{large['merge_s'] / small['merge_s']:.2f}x for {events[-1] / events[0]:.0f}x the events")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
