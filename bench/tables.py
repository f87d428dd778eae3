"""Tables and DDL benchmark (issue 24): does a run's cost grow with its changes, or with its tables and DDL?

Each case is a TiCDC-shaped changefeed (Open Protocol, 3 partitions, TiCDC's batching of up to 16 row events
per message, DDL and resolved events alone, lagging resolved ts) written as an archived topic (Kafka log
segments), then backfilled end to end through the CLI in a fresh process: ``lakehouse backfill --archive``, JVM
start, landing and merge included. Beside each, its baseline: a plain Spark append of the case's final rows into
fresh Iceberg tables, also in a fresh process (JVM start included). Printed, in one run:

  * DDL:          T transactions over 4 tables with six mid-stream DDL (widen, drop, create, truncate, rename,
                  add) / the same transactions without DDL                     (target <= 1.2x)
  * many tables:  the same transactions with the same DDL over 204 tables / over 4 tables  (target <= 1.5x);
                  the 204 tables are copies of the four's shapes (sharded tables: a change set per shape), and
                  again each copy with a column of its own of one of many types (``distinct``, as in most
                  databases: no two tables share their columns, few their column types)
  * throughput:   the 4-table run with DDL, events/s end to end                (target >= 25k/s at 275k events)
  * driver memory: peak RSS of the backfill's driver (its Python process + JVM), 4 vs 204 tables (flat in N)
  * steady state (``--steady``, or ``--only-steady`` without the cases above; no target): the same transactions
                  without DDL in two halves; the first half is backfilled (not timed) and its lake saved, then
                  the second half's run is timed ``--repeat`` times from that lake (in rounds over the cases,
                  median): an incremental run into tables that hold
                  rows (small tables rewritten by shared write jobs, larger ones a MERGE each), over 204 tables
                  / over 4 tables, over 204 tables of distinct columns / over 4 tables, and over 204 tables of
                  which only 4 change (the others idle, as most tables of a changefeed are in a scheduled run)
                  / over 4 tables

The three cases share their transactions' shape: T transactions of 1-4 row changes (an insert, update, delete
or primary-key change each; 2.75 row events a transaction on average: T = 100,000 gives the issue's 275k row
events). Generating the workloads is not timed.

Each case's backfill runs ``--repeat`` times (default 3), in rounds over the cases so that a slow minute of the
machine hits every case alike, each into a fresh lake and checked value by value; the median is reported (a single
run's ratio moved by a tenth between runs of one commit). The plain appends run once.

Usage: .venv/bin/python bench/tables.py [--quick] [--transactions 100000] [--many-tables 204] [--repeat 3]
       [--steady | --only-steady] [--workdir DIR]
Settings come from the defaults and ``LAKEHOUSE__SECTION__KEY`` environment variables.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOPIC = "ticdc-bench"
PARTITIONS = 3
TICDC_BATCH = 16  # TiCDC's default max-batch-size for Open Protocol
RESOLVE_EVERY = 100  # transactions between resolved events (each partition lags by its own few transactions)
SIX_DDL = ("widen", "drop", "create", "truncate", "rename", "add")
TARGETS = {"ddl": 1.2, "tables": 1.5, "events_per_s": 25_000}


@dataclass(frozen=True)
class Case:
    """One workload: ``transactions`` over ``tables`` tables (at the end), ``ddl`` spread evenly mid-stream."""

    name: str
    transactions: int
    tables: int
    ddl: tuple[str, ...]
    distinct: bool = False  # every table beyond the first four with a column of its own (no shared layouts)
    busy: int = 0  # with ``halves``: the second half touches only this many of the tables (0: all of them)


@dataclass(frozen=True)
class Timing:
    seconds: float
    peak_mb: float  # the driver: its Python process and its JVM (not the Python workers the JVM starts)


@dataclass(frozen=True)
class Measured:
    case: Case
    row_events: int
    final_rows: int
    backfill: Timing
    append: Timing


def generate(case: Case, directory: Path, seed: int = 24, halves: bool = False) -> tuple[int, int]:
    """Write the case's archived topic under ``directory/archive`` and its final rows (strings) and lake types
    under ``directory/final``; returns (row events, final rows). ``halves``: also the topic as it stood after
    half the transactions, under ``directory/first_half`` (the same records, fewer of them); the row events are
    then the second half's (what the timed incremental run reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.core.model import RowChange
    from ticdc_lakehouse.core.mysql_types import iceberg_type, parse_type
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions

    workload = Workload(seed=seed, partitions=PARTITIONS, schema="bench", keep_history=False, quick_pick=True)
    creates = case.ddl.count("create")
    workload.create_sample_tables(case.tables - creates, case.distinct)
    workload.resolve(final=True)
    ddl_at = {(k + 1) * case.transactions // (len(case.ddl) + 1): kind for k, kind in enumerate(case.ddl)}
    first: dict[int, list] = {}
    only = None
    for i in range(case.transactions):
        if halves and i == case.transactions // 2:
            workload.resolve(final=True)
            first = encode_partitions(workload.new_events(), "open", max_batch_size=TICDC_BATCH)
            write_archive(directory / "first_half", TOPIC, first, records_per_batch=50, batches_per_segment=200)
            only = sorted(workload.tables)[:case.busy] if case.busy else None
        workload.transaction(workload.rng.randint(1, 4), only)
        if i in ddl_at:
            workload.scripted_ddl(ddl_at[i])
        if i % RESOLVE_EVERY == RESOLVE_EVERY - 1:
            workload.resolve()
    workload.resolve(final=True)
    events = workload.new_events()
    row_events = sum(isinstance(e, RowChange) for items in events.values() for e in items)
    records = encode_partitions(events, "open", max_batch_size=TICDC_BATCH)
    records = {p: [*first.get(p, []), *records.get(p, [])] for p in sorted(set(first) | set(records))}
    write_archive(directory / "archive", TOPIC, records, records_per_batch=50, batches_per_segment=200)
    final = directory / "final"
    final.mkdir(parents=True, exist_ok=True)
    types = {}
    for table in workload.tables.values():
        columns = [c.name for c in table.columns]
        types[table.name] = {c.name: iceberg_type(parse_type(c.mysql_type)) for c in table.columns}
        rows = list(table.rows.values())
        frame = pa.table({c: pa.array([r.get(c) for r in rows], pa.string()) for c in columns})
        pq.write_table(frame, final / f"{table.name}.parquet")
    (final / "types.json").write_text(json.dumps(types))
    return row_events, sum(len(t.rows) for t in workload.tables.values())


def append_final_rows(final: Path) -> None:
    """The baseline, run in its own process: start Spark as the pipeline does, then create each final table as
    a plain Iceberg append of its final rows."""
    from pyspark.sql import functions as F

    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import get_spark

    settings = load_settings()
    spark = get_spark(settings, "bench-append")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.bench")
    for table, columns in json.loads((final / "types.json").read_text()).items():
        frame = spark.read.parquet(str(final / f"{table}.parquet"))
        typed = frame.select(*[
            (F.unbase64(F.col(c)) if kind == "binary" else F.col(c).cast(kind)).alias(c)
            for c, kind in columns.items()])
        (typed.writeTo(f"{settings.catalog_name}.bench.`{table}`").using("iceberg")
         .tableProperty("format-version", "3").create())


def timed(command: Sequence[str], env: dict[str, str], log: Path) -> Timing:
    """Wall time of a fresh process, and the peak RSS of the driver (the Python process and its JVM, which is
    driver and executor in local mode; not the Python workers) sampled every 100 ms."""
    import psutil

    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        peak = 0
        watched = psutil.Process(process.pid)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                try:
                    driver = [watched] + [p for p in watched.children() if p.name() == "java"]
                    peak = max(peak, sum(p.memory_info().rss for p in driver))
                except psutil.Error:  # a process may end between listing and reading
                    pass
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = process.wait()
        seconds = time.monotonic() - started
        done.set()
        sampler.join()
    if code != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed (exit {code}); see {log}")
    return Timing(seconds, peak / 2**20)


def deployment(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update({k: v for k, v in os.environ.items() if k.startswith("LAKEHOUSE__")})
    env.update({"LAKEHOUSE_HOME": str(home), "LAKEHOUSE_CONFIG": str(config), "PYTHONPATH": str(ROOT)})
    return env


@dataclass(frozen=True)
class Prepared:
    """A case's archived topic and final rows, written once; its backfills each start from a fresh lake."""

    case: Case
    directory: Path
    row_events: int
    final_rows: int


def prepare(case: Case, workdir: Path) -> Prepared:
    directory = workdir / case.name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    row_events, final_rows = generate(case, directory)
    (directory / "lakehouse.toml").write_text("")
    return Prepared(case, directory, row_events, final_rows)


def backfill_command(archive: Path) -> list[str]:
    """The CLI backfill of an archived topic of the bench's workloads, as every timed run starts it."""
    return [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive", str(archive), "--protocol",
            "open", "--format", "json"]


def backfill_once(prepared: Prepared) -> Timing:
    """One backfill of the case's archive through the CLI into a fresh lake, checked value by value."""
    directory = prepared.directory
    shutil.rmtree(directory / "lake", ignore_errors=True)
    backfill = timed(backfill_command(directory / "archive"),
                     deployment(directory / "lake", directory / "lakehouse.toml"), directory / "backfill.log")
    check_backfill(directory / "backfill.log")
    verify(directory)
    return backfill


def append_baseline(prepared: Prepared) -> Timing:
    directory = prepared.directory
    return timed([sys.executable, str(Path(__file__).resolve()), "--append", str(directory / "final")],
                 deployment(directory / "append", directory / "lakehouse.toml"), directory / "append.log")


def median_timing(timings: Sequence[Timing]) -> Timing:
    """The median run (by wall time) of a case's backfills: one figure robust to a noisy neighbour's burst."""
    ordered = sorted(timings, key=lambda t: t.seconds)
    return ordered[(len(ordered) - 1) // 2]


@dataclass(frozen=True)
class Steady:
    """An incremental run: the second half of a case's transactions into tables that hold the first half."""

    case: Case
    row_events: int
    run: Timing


@dataclass(frozen=True)
class SteadyPrepared:
    """A steady case's topic in two halves and its lake after the first half (saved, restored before each run)."""

    case: Case
    directory: Path
    row_events: int


def _steady_command(directory: Path, archive: str) -> tuple[list[str], dict[str, str]]:
    return backfill_command(directory / archive), deployment(directory / "lake", directory / "lakehouse.toml")


def prepare_steady(case: Case, workdir: Path) -> SteadyPrepared:
    """Generate the case in halves and backfill the first half (not timed); the lake is then saved beside it."""
    directory = workdir / case.name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    row_events, _ = generate(case, directory, halves=True)
    (directory / "lakehouse.toml").write_text("")
    command, env = _steady_command(directory, "first_half")
    timed(command, env, directory / "first_half.log")
    check_backfill(directory / "first_half.log")
    shutil.copytree(directory / "lake", directory / "lake.first_half", symlinks=True)
    return SteadyPrepared(case, directory, row_events)


def steady_once(prepared: SteadyPrepared) -> Timing:
    """The lake as the first half left it (restored at the same path: its metadata names absolute paths), then
    the timed run that lands and merges the second half; the lake must then hold the case's final rows."""
    directory = prepared.directory
    shutil.rmtree(directory / "lake", ignore_errors=True)
    shutil.copytree(directory / "lake.first_half", directory / "lake", symlinks=True)
    command, env = _steady_command(directory, "archive")
    run = timed(command, env, directory / "backfill.log")
    check_backfill(directory / "backfill.log")
    verify(directory)
    return run


def check_backfill(log: Path) -> None:
    """The backfill's JSON report says ok (a failed merge is no figure)."""
    text = log.read_text()
    start = text.find("{\n")
    report = json.loads(text[start:]) if start >= 0 else {}
    if not report.get("ok", False):
        raise RuntimeError(f"the backfill did not report ok; see {log}")


def verify(directory: Path, lake: Optional[Path] = None, catalog_name: str = "lake") -> None:
    """The backfilled lake holds the case's final rows, every value: per table the same columns, and the same
    rows once the upstream canonical texts are read as the lake's types (base64 for binary columns), read by
    pyiceberg (no JVM). A run that is fast because it is wrong is no figure. ``lake``: the deployment's home
    (default ``directory/lake``), whose catalog is named ``catalog_name``."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    lake = lake or directory / "lake"
    catalog = SqlCatalog(catalog_name, uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=str(lake / "warehouse"))
    for table in json.loads((directory / "final" / "types.json").read_text()):
        expected = pq.read_table(directory / "final" / f"{table}.parquet")
        got = catalog.load_table(("bench", table)).scan().to_arrow()
        where = f"bench.{table} (see {directory})"
        if sorted(got.column_names) != sorted(expected.column_names):
            raise RuntimeError(f"{where}: columns {got.column_names} in the lake, {expected.column_names} upstream")
        got = got.select(expected.column_names)
        got = pa.Table.from_arrays(got.columns, names=got.column_names)  # the types only, not the field ids
        columns = []
        for name, field in zip(expected.column_names, got.schema):
            texts = expected.column(name)
            if pa.types.is_binary(field.type):
                texts = pa.array([None if t is None else base64.b64decode(t) for t in texts.to_pylist()], pa.binary())
            columns.append(texts.cast(field.type))
        expected = pa.Table.from_arrays(columns, schema=got.schema)
        order = [(name, "ascending") for name in expected.column_names]
        if not got.sort_by(order).equals(expected.sort_by(order)):
            raise RuntimeError(f"{where}: {got.num_rows:,} row(s) in the lake, {expected.num_rows:,} upstream, "
                               "and not the same rows")


def cases(transactions: int, many_tables: int) -> dict[str, Case]:
    return {
        "ddl": Case("ddl", transactions, 4, SIX_DDL),
        "no_ddl": Case("no_ddl", transactions, 4, ()),
        "many": Case("many", transactions, many_tables, SIX_DDL),
        "distinct": Case("distinct", transactions, many_tables, SIX_DDL, distinct=True),
    }


def row(label: str, m: Measured) -> str:
    b, a = m.backfill, m.append
    return (f"{label:<44} {m.row_events:>8,} {b.seconds:>8.1f} s {m.row_events / b.seconds:>9,.0f} "
            f"{a.seconds:>8.1f} s {b.seconds / a.seconds:>6.1f}x {b.peak_mb:>8,.0f} MB")


#: the order of a round's backfills (every other round the reverse): the 4-table run with DDL, the baseline of two
#: ratios, sits beside both runs it is compared with (and the run without DDL beside it)
ROUND_ORDER = ("no_ddl", "ddl", "many", "distinct")

#: each ratio the report prints: (case, its baseline)
RATIOS = {"ddl": ("ddl", "no_ddl"), "tables": ("many", "ddl"), "distinct": ("distinct", "ddl")}


def round_order(names: Sequence[str], round_number: int) -> list[str]:
    """The cases of one round in ``ROUND_ORDER``, reversed every other round (ABBA): a machine that drifts faster or
    slower over a round favours the early cases in one round and the late ones in the next."""
    ordered = [name for name in ROUND_ORDER if name in names] + [name for name in names if name not in ROUND_ORDER]
    return ordered if round_number % 2 == 0 else ordered[::-1]


def paired_ratio(runs: dict[str, list[Timing]], case: str, baseline: str) -> tuple[float, list[float]]:
    """The median over the rounds of each round's ``case`` / ``baseline`` backfill, and those per-round ratios.

    Why not the ratio of the medians: the machine's speed here drifts by a third within minutes, and each median
    may come from a different minute (three rounds of 20k transactions gave 1.63x as the ratio of the medians while
    three interleaved pairs of the same code gave 1.08-1.41x). Within a round the two runs are minutes apart at
    most, so a round's ratio compares like with like."""
    ratios = [c.seconds / b.seconds for c, b in zip(runs[case], runs[baseline])]
    ordered = sorted(ratios)
    return ordered[(len(ordered) - 1) // 2], ratios


def ratio_text(runs: dict[str, list[Timing]], case: str, baseline: str) -> str:
    """``paired_ratio`` as the reports print it: the median, then each round's ratio."""
    median, each = paired_ratio(runs, case, baseline)
    return f"{median:.2f}x (rounds {', '.join(f'{r:.2f}' for r in each)})"


def in_rounds(prepared: dict[str, Any], once: Callable[[Any], Timing], repeat: int) -> dict[str, list[Timing]]:
    """``once`` of every prepared case, ``repeat`` rounds over the cases (``round_order``): each case's timings,
    round by round, so that ``paired_ratio`` compares the runs of one round."""
    runs: dict[str, list[Timing]] = {name: [] for name in prepared}
    for number in range(max(1, repeat)):  # a slower minute of the machine hits every case of its round
        for name in round_order(list(prepared), number):
            runs[name].append(once(prepared[name]))
    return runs


def report(results: dict[str, Measured], many_tables: int, runs: dict[str, list[Timing]]) -> str:
    ddl, no_ddl, many, distinct = results["ddl"], results["no_ddl"], results["many"], results["distinct"]
    t = ddl.case.transactions

    def ratio(name: str) -> str:
        return ratio_text(runs, *RATIOS[name])

    lines = [
        f"{'workload (Open Protocol, 3 partitions, TiCDC batching)':<44} {'events':>8} {'backfill':>10} "
        f"{'events/s':>9} {'append':>10} {'/append':>7} {'peak RSS':>11}",
        row(f"{t:,} txns, 4 tables, no DDL", no_ddl),
        row(f"{t:,} txns, 4 tables, six DDL", ddl),
        row(f"{t:,} txns, {many_tables} tables, six DDL", many),
        row(f"{t:,} txns, {many_tables} tables of distinct columns", distinct),
        "",
        "ratios: the median of each round's ratio (its two backfills minutes apart at most)",
        f"ratio DDL (six DDL / no DDL):        {ratio('ddl')} "
        f"(target <= {TARGETS['ddl']}x; plain appends {ddl.append.seconds / no_ddl.append.seconds:.2f}x)",
        f"ratio many tables ({many_tables} / 4):         {ratio('tables')} "
        f"(target <= {TARGETS['tables']}x; plain appends {many.append.seconds / ddl.append.seconds:.2f}x)",
        f"  of distinct columns:               {ratio('distinct')} "
        f"(target <= {TARGETS['tables']}x; plain appends {distinct.append.seconds / ddl.append.seconds:.2f}x)",
        f"events/s, 4 tables with DDL:         {ddl.row_events / ddl.backfill.seconds:7,.0f} "
        f"(target >= {TARGETS['events_per_s']:,}/s at 275k events; plain append "
        f"{ddl.row_events / ddl.append.seconds:,.0f}/s)",
        f"driver memory ({many_tables} / 4 tables):      {many.backfill.peak_mb / ddl.backfill.peak_mb:5.2f}x "
        f"(target: flat; {many.backfill.peak_mb:,.0f} MB vs {ddl.backfill.peak_mb:,.0f} MB)",
    ]
    return "\n".join(lines)


def steady_report(few: Steady, many: Steady, distinct: Steady, idle: Steady, runs: dict[str, list[Timing]]) -> str:
    """The steady cases' medians, and each one's ratio to the 4-table case as the median of the rounds' own ratios
    (``paired_ratio``; ``runs``: each case's timings by its name, round by round)."""
    half = few.case.transactions // 2

    def line(label: str, m: Steady) -> str:
        return f"  {label:<30} {m.run.seconds:7.1f} s {m.row_events / m.run.seconds:>9,.0f} events/s"

    def ratio(m: Steady) -> str:
        return f"   ratio {ratio_text(runs, m.case.name, few.case.name)}"

    return "\n".join([
        f"steady state, second run of {half:,} txns into tables holding the first half, median (no target):",
        line(f"{few.case.tables} tables", few),
        line(f"{many.case.tables} tables", many) + ratio(many) + " (tables of at most merge.rewrite_max_rows rows "
        "rewritten by shared write jobs, larger ones a MERGE each)",
        line(f"{distinct.case.tables} tables of distinct columns", distinct) + ratio(distinct),
        line(f"{idle.case.tables} tables, {idle.case.busy} changing", idle) + ratio(idle)
        + " (each idle table: its watermark committed)",
    ])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (300 transactions, 12 tables)")
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--many-tables", type=int, default=204)
    parser.add_argument("--steady", action="store_true",
                        help="also time an incremental run into tables that hold rows (4 and --many-tables tables)")
    parser.add_argument("--only-steady", action="store_true",
                        help="the steady-state runs alone (no backfill cases), e.g. with --many-tables 1000")
    parser.add_argument("--repeat", type=int, default=3,
                        help="backfills of each case, in rounds over the cases; the median is reported")
    parser.add_argument("--workdir", default=None, help="kept when given (else a temporary directory, removed)")
    parser.add_argument("--append", default=None, help=argparse.SUPPRESS)  # the baseline's own process
    args = parser.parse_args(argv)
    if args.append:
        append_final_rows(Path(args.append))
        return 0
    transactions, many_tables = (300, 12) if args.quick else (args.transactions, args.many_tables)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-tables-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; workdir {workdir}", flush=True)
    chosen = {} if args.only_steady else cases(transactions, many_tables)
    prepared = {name: prepare(case, workdir) for name, case in chosen.items()}
    runs = in_rounds(prepared, backfill_once, args.repeat)
    results = {}
    for name, case in prepared.items():
        results[name] = Measured(case.case, case.row_events, case.final_rows, median_timing(runs[name]),
                                 append_baseline(case))
        m = results[name]
        times = ", ".join(f"{t.seconds:.1f}" for t in runs[name])
        print(f"  {name}: {m.row_events:,} row events, {m.final_rows:,} final rows, backfill {times} s (median "
              f"{m.backfill.seconds:.1f} s), plain append {m.append.seconds:.1f} s", flush=True)
    if results:
        print(report(results, many_tables, runs))
    if args.steady or args.only_steady:
        steady_cases = [Case(f"steady_{tables}{'_distinct' if distinct else ''}{f'_busy{busy}' if busy else ''}",
                             transactions, tables, (), distinct=distinct, busy=busy)
                        for tables, distinct, busy in ((4, False, 0), (many_tables, False, 0), (many_tables, True, 0),
                                                       (many_tables, False, 4))]
        ready = {case.name: prepare_steady(case, workdir) for case in steady_cases}
        steady_runs = in_rounds(ready, steady_once, args.repeat)
        print(steady_report(*[Steady(p.case, p.row_events, median_timing(steady_runs[name]))
                              for name, p in ready.items()], runs=steady_runs))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
