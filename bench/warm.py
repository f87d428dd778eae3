"""Warm-driver benchmark: what a long-lived driver (``lakehouse run --every``) saves per run.

One Python process backfills the same TiCDC-shaped archive (``bench/tables.py``'s four-table case with six DDL)
``--runs`` times through ``pipeline.backfill``, each into a deployment of its own (its own home and catalog name),
all on the one Spark session the first run started. The first run pays what every ``lakehouse`` process pays (the
JVM's start, class loading, code generation and JIT compilation); the later ones are what each cycle of continuous
mode costs. Printed in one run: each run's wall time and events/s, and the warm runs' median beside the first.
Each lake is checked value by value against the upstream final rows (``bench/tables.py``'s ``verify``).

Usage: .venv/bin/python bench/warm.py [--transactions 100000] [--runs 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import tables  # noqa: E402  (bench/tables.py: the workload and the lake check)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="backfills in the one process (the first is cold)")
    parser.add_argument("--workdir", default=None, help="kept when given (else a temporary directory, removed)")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs needs at least 2: a cold run and a warm one")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-warm-"))
    prepared = tables.prepare(tables.Case("ddl", args.transactions, 4, tables.SIX_DDL), workdir)
    directory, row_events = prepared.directory, prepared.row_events
    print(f"{row_events:,} row events, {prepared.final_rows:,} final rows over 4 tables, six DDL; workdir {workdir}",
          flush=True)

    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.config import load_settings

    seconds = []
    for run in range(1, args.runs + 1):
        home = directory / f"run{run}"
        shutil.rmtree(home, ignore_errors=True)
        config = directory / f"run{run}.toml"
        config.write_text(f'[catalog]\nname = "lake{run}"\n')
        settings = load_settings(env={"LAKEHOUSE_HOME": str(home), "LAKEHOUSE_CONFIG": str(config)})
        started = time.monotonic()
        result = backfill(settings, directory / "archive", protocol="open")
        seconds.append(time.monotonic() - started)
        if not result.get("ok"):
            raise RuntimeError(f"run {run} did not report ok: {result.get('error')}")
        tables.verify(directory, lake=home, catalog_name=f"lake{run}")
        print(f"  run {run} ({'cold: a fresh driver' if run == 1 else 'warm'}): {seconds[-1]:.1f} s, "
              f"{row_events / seconds[-1]:,.0f} events/s", flush=True)
    warm = statistics.median(seconds[1:])
    print(f"warm runs (median of {len(seconds) - 1}): {warm:.1f} s, {row_events / warm:,.0f} events/s; "
          f"{warm / seconds[0]:.2f}x the cold run ({seconds[0]:.1f} s, {row_events / seconds[0]:,.0f} events/s; "
          f"target >= 25,000/s at 275k events)")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
