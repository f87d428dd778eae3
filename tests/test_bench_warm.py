"""``bench/warm.py``: one process backfills the same archive twice (cold, then on the warm session), each lake
checked value by value, and prints the warm run beside the cold one (the figures themselves are timings: not
checked)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.spark
@pytest.mark.bench
def test_a_cold_and_a_warm_backfill_in_one_process(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "warm.py"), "--transactions", "300", "--runs", "2",
                           "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    number = r"[\d,]+(?:\.\d+)?"
    assert re.search(rf"run 1 \(cold: a fresh driver\): {number} s, {number} events/s", done.stdout), done.stdout
    assert re.search(rf"run 2 \(warm\): {number} s, {number} events/s", done.stdout), done.stdout
    assert re.search(rf"warm runs \(median of 1\): {number} s, .* {number}x the cold run", done.stdout), done.stdout
    assert (tmp_path / "ddl" / "run2" / "catalog.db").is_file()  # each run its own deployment


def test_a_single_run_is_refused():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "warm.py"), "--runs", "1"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "--runs needs at least 2" in done.stderr
