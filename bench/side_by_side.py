"""Side-by-side benchmark: two variants of a backfill, started at the same moment, compared by their CPU time.

Why: on a shared machine the speed drifts by a third within minutes, in CPU time as well as wall time
(``bench/RESULTS.md``, 2026-11-29), so runs one after the other cannot tell a change of a few percent from the
drift. Two runs started together meet every slow minute alike: the ratio within a pair holds where the pairs'
totals do not. A variant is a checkout (its code) and a config file (its settings: the driver JVM's options,
Spark settings; see the README's configuration).

Each pair: both variants backfill one of ``bench/tables.py``'s cases (``--case``: by default the four-table case
with six DDL; ``many`` and ``distinct``, its 204 tables, for a change to what each table costs) through the CLI,
each into a fresh lake, at once. Each process tree's CPU time is read from ``/proc`` every 0.2 s, thread by
thread, and grouped: the driver JVM's task threads, its py4j gateway threads, its JIT compiler and GC threads, its
other threads; the Python driver (the CLI's process); the Python workers. Printed: each pair's wall time and CPU
time by group of both variants and B/A of their total CPU time, then the median of the pairs' ratios. Both lakes
are checked value by value against the upstream final rows.

Not a figure of the product's speed (each run has about one core of the two): that is ``bench/tables.py``. This
one says whether a change helps, and where its CPU time moved.

Usage: .venv/bin/python bench/side_by_side.py --b-config FILE [--b-root DIR] [--a-config FILE] [--a-root DIR]
       [--case ddl|no_ddl|many|distinct] [--transactions 100000] [--pairs 3] [--workdir DIR]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import tables  # noqa: E402  (bench/tables.py: the workload, the deployment's environment and the lake check)

#: the thread groups, in the order they are printed
GROUPS = ("jvm tasks", "jvm gateway", "jvm compiler", "jvm gc", "jvm other", "python driver", "python workers")
SAMPLE_SECONDS = 0.2
_TICKS = os.sysconf("SC_CLK_TCK")


def thread_group(command: str, thread: str, is_driver: bool) -> str:
    """The group of a thread (see ``GROUPS``): by its process's command (a JVM, the CLI's own Python, another
    Python: a worker) and, in the JVM, by its name (as ``/proc`` gives it: at most 15 characters)."""
    program = command.split(" ", 1)[0]
    if program.endswith("/java") or program == "java":
        if thread.startswith(("C1 Compiler", "C2 Compiler")):
            return "jvm compiler"
        if thread.startswith(("GC Thread", "G1 ")):
            return "jvm gc"
        if thread.startswith("Executor task"):
            return "jvm tasks"
        if thread.startswith("Thread-"):  # py4j's threads serving the Python driver's calls
            return "jvm gateway"
        return "jvm other"
    return "python driver" if is_driver else "python workers"


def _stat_fields(text: str) -> tuple[str, list[str]]:
    """(the name, the fields after it) of a ``/proc/.../stat`` line (a name may hold spaces and parentheses)."""
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one pass over ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                _, fields = _stat_fields(Path(f"/proc/{entry}/stat").read_text())
            except OSError:  # gone meanwhile
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


class TreeCpu:
    """CPU time of a process and its descendants, thread by thread: each thread counts as last read (a thread
    that ends between two readings loses at most ``SAMPLE_SECONDS`` of its time)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.threads: dict[tuple[int, int], tuple[str, float]] = {}

    def sample(self) -> None:
        children = _children_by_parent()
        pending, seen = [self.pid], set()
        while pending:
            pid = pending.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                for tid in os.listdir(f"/proc/{pid}/task"):
                    name, fields = _stat_fields(Path(f"/proc/{pid}/task/{tid}/stat").read_text())
                    seconds = (int(fields[11]) + int(fields[12])) / _TICKS
                    self.threads[(pid, int(tid))] = (thread_group(command, name, pid == self.pid), seconds)
            except OSError:  # the process ended meanwhile: its threads keep their last reading
                continue
            pending.extend(children.get(pid, ()))

    def by_group(self) -> dict[str, float]:
        groups = dict.fromkeys(GROUPS, 0.0)
        for group, seconds in self.threads.values():
            groups[group] += seconds
        return groups


@dataclass(frozen=True)
class Variant:
    """What one side runs: the checkout whose code it runs, and its config file (None: the embedded defaults)."""

    label: str
    root: Path
    config: Optional[Path]


@dataclass(frozen=True)
class Run:
    """One side's backfill in a pair: its process's wall time and its tree's CPU time by group (``GROUPS``)."""

    seconds: float
    cpu: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.cpu.values())


def run_pair(variants: Sequence[Variant], prepared: "tables.Prepared", number: int) -> list[Run]:
    """Both variants' backfills of the case's archive, started together, each into a fresh lake of its own;
    each lake checked value by value."""
    directory = prepared.directory
    started, processes, samplers, homes, logs, ended = time.monotonic(), [], [], [], [], {}
    for variant in variants:
        home = directory / f"pair{number}_{variant.label}"
        shutil.rmtree(home, ignore_errors=True)
        log = directory / f"pair{number}_{variant.label}.log"
        # no config file: the case's own, empty (the embedded defaults)
        env = tables.deployment(home, variant.config or directory / "lakehouse.toml")
        env["PYTHONPATH"] = str(variant.root)
        with open(log, "w") as out:
            processes.append(subprocess.Popen(tables.backfill_command(directory / "archive"), env=env, stdout=out,
                                              stderr=subprocess.STDOUT, cwd=variant.root))
        samplers.append(TreeCpu(processes[-1].pid))
        homes.append(home)
        logs.append(log)
    while len(ended) < len(processes):
        for index, (process, sampler) in enumerate(zip(processes, samplers)):
            if index not in ended:
                sampler.sample()
                if process.poll() is not None:
                    ended[index] = time.monotonic() - started
        time.sleep(SAMPLE_SECONDS)
    for process, log, home in zip(processes, logs, homes):
        if process.returncode != 0:
            raise RuntimeError(f"a backfill failed (exit {process.returncode}); see {log}")
        tables.check_backfill(log)
        tables.verify(directory, lake=home)
    return [Run(ended[index], sampler.by_group()) for index, sampler in enumerate(samplers)]


def run_text(run: Run) -> str:
    groups = ", ".join(f"{group} {run.cpu[group]:.1f}" for group in GROUPS if run.cpu[group] >= 0.05)
    return f"{run.seconds:.1f} s wall, {run.total:.1f} CPU-s ({groups})"


def median_ratio(pairs: Sequence[Sequence[Run]], measure) -> tuple[float, list[float]]:
    """The median over the pairs of B's ``measure`` over A's, and each pair's ratio."""
    ratios = [measure(b) / measure(a) for a, b in pairs]
    return statistics.median(ratios), ratios


def summary(pairs: Sequence[Sequence[Run]]) -> str:
    cpu, cpu_ratios = median_ratio(pairs, lambda run: run.total)
    wall, wall_ratios = median_ratio(pairs, lambda run: run.seconds)
    moved = {group: statistics.median(b.cpu[group] - a.cpu[group] for a, b in pairs) for group in GROUPS}
    shifts = ", ".join(f"{group} {delta:+.1f}" for group, delta in moved.items() if abs(delta) >= 0.05)
    return (f"B/A CPU time: median {cpu:.2f}x (pairs: {', '.join(f'{r:.2f}' for r in cpu_ratios)}); "
            f"wall: median {wall:.2f}x (pairs: {', '.join(f'{r:.2f}' for r in wall_ratios)})\n"
            f"B - A by group (CPU-s, median of the pairs): {shifts or 'none'}")


def _variant(parser: argparse.ArgumentParser, label: str, root: Optional[str], config: Optional[str]) -> Variant:
    """A side as the options give it, checked before any work."""
    directory = Path(root).resolve() if root else ROOT
    if not (directory / "ticdc_lakehouse").is_dir():
        parser.error(f"--{label.lower()}-root {directory}: not a checkout of this project (no ticdc_lakehouse/)")
    path = Path(config).resolve() if config else None
    if path is not None and not path.is_file():
        parser.error(f"--{label.lower()}-config {path}: no such file")
    return Variant(label, directory, path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a-root", help="checkout A runs (default: this one)")
    parser.add_argument("--a-config", help="config file of A (default: the embedded defaults)")
    parser.add_argument("--b-root", help="checkout B runs (default: this one)")
    parser.add_argument("--b-config", help="config file of B (default: the embedded defaults)")
    parser.add_argument("--case", choices=sorted(tables.cases(1, 1)), default="ddl",
                        help="bench/tables.py's case both variants backfill (default: ddl, four tables, six DDL)")
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--many-tables", type=int, default=204, help="tables of the many and distinct cases")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="kept when given (else a temporary directory, removed)")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs needs at least 1")
    variants = [_variant(parser, "A", args.a_root, args.a_config), _variant(parser, "B", args.b_root, args.b_config)]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-side-by-side-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        case = tables.cases(args.transactions, args.many_tables)[args.case]
        prepared = tables.prepare(case, workdir)
        print(f"case {case.name}: {prepared.row_events:,} row events over {case.tables} tables, {len(case.ddl)} DDL; "
              f"workdir {workdir}", flush=True)
        for variant in variants:
            print(f"{variant.label}: {variant.root} with {variant.config or 'the embedded defaults'}", flush=True)
        pairs = []
        for number in range(1, args.pairs + 1):
            pair = run_pair(variants, prepared, number)
            pairs.append(pair)
            print(f"pair {number}: A {run_text(pair[0])}\n        B {run_text(pair[1])}\n"
                  f"        B/A CPU {pair[1].total / pair[0].total:.2f}x", flush=True)
        print(summary(pairs))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
