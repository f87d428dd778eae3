"""Fixed per-run cost: what a small run pays before and around its data work, through the CLI, fresh processes.

Measures, ``--rounds`` times (median printed):
  * ``import``: ``python -c 'import ticdc_lakehouse.commands.cli'`` (the CLI's own start);
  * ``backfill``: ``lakehouse backfill --archive`` of a small archived topic (300 transactions, 4 tables, six DDL)
    into a fresh lake: JVM and session start, landing, catalog, first queries, the merge;
  * ``backfill, nothing new``: the same command again: landing finds nothing, the merge has nothing to apply;
    all of it is fixed cost;
  * ``status``: ``lakehouse status --no-kafka``.
With ``--compare DIR`` (another checkout of the project, e.g. ``git worktree add /tmp/main main``), the same
commands run on that code too, interleaved round by round, and the ratio is printed: compare figures of one run.

Usage: .venv/bin/python bench/startup.py [--rounds 3] [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = ("import", "backfill", "backfill, nothing new", "status")


def timed(command: Sequence[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return time.monotonic() - started


def one_round(code: Path, archive: Path, home: Path) -> dict[str, float]:
    """The four steps on the project checkout ``code``, in a fresh lake ``home``."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "none.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update({"LAKEHOUSE_HOME": str(home / "lake"), "LAKEHOUSE_CONFIG": str(home / "none.toml"),
                "PYTHONPATH": str(code)})
    cli = [sys.executable, "-m", "ticdc_lakehouse.commands.cli"]
    backfill = [*cli, "backfill", "--archive", str(archive), "--protocol", "open", "--format", "json"]
    return {
        "import": timed([sys.executable, "-c", "import ticdc_lakehouse.commands.cli"], env),
        "backfill": timed(backfill, env),
        "backfill, nothing new": timed(backfill, env),
        "status": timed([*cli, "status", "--no-kafka"], env),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", default=None, help="another checkout of the project to measure beside this one")
    args = parser.parse_args(argv)
    from bench.tables import SIX_DDL, Case, generate

    workdir = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        generate(Case("startup", 300, 4, SIX_DDL), workdir)
        codes = {"this": ROOT, **({"compare": Path(args.compare).resolve()} if args.compare else {})}
        figures: dict[str, dict[str, list[float]]] = {name: {s: [] for s in STEPS} for name in codes}
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
        for i in range(args.rounds):
            order = list(codes.items()) if i % 2 == 0 else list(reversed(codes.items()))
            for name, code in order:
                for step, seconds in one_round(code, workdir / "archive", workdir / name).items():
                    figures[name][step].append(seconds)
        header = f"{'median of ' + str(args.rounds):<24}" + "".join(f"{n + ' (' + str(c) + ')':>28}"[-28:]
                                                                    for n, c in codes.items())
        print(header + ("   compare/this" if args.compare else ""))
        for step in STEPS:
            medians = [statistics.median(figures[name][step]) for name in codes]
            line = f"{step:<24}" + "".join(f"{m:>26.2f} s" for m in medians)
            if args.compare:
                line += f"   {medians[1] / medians[0]:11.2f}x"
            print(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
