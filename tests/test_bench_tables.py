"""``bench/tables.py --quick``: one run prints every case beside its plain-append baseline and every ratio
beside its target (the figures themselves are timings: not checked)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.spark
@pytest.mark.bench
def test_quick_run_prints_every_case_and_ratio(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "tables.py"), "--quick", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    number = r"[\d,]+(?:\.\d+)?"
    for label in ("4 tables, no DDL", "4 tables, six DDL", "12 tables, six DDL", "12 tables of distinct columns"):
        line = next((line for line in out.splitlines() if label in line), None)
        assert line is not None, f"no row for {label!r}:\n{out}"
        # events, backfill s, events/s, plain append s, backfill/append ratio, peak RSS
        assert re.search(rf"{number} +{number} s +{number} +{number} s +{number}x +{number} MB$", line), line
    for ratio, target in (("ratio DDL", r"target <= 1\.2x"), ("ratio many tables", r"target <= 1\.5x"),
                          ("  of distinct columns", r"target <= 1\.5x"), ("events/s", r"target >= 25,000/s"),
                          ("driver memory", "target: flat")):
        line = next((line for line in out.splitlines() if line.startswith(ratio)), None)
        assert line is not None and re.search(target, line), f"no {ratio} line with its target:\n{out}"
        assert re.search(rf":\s+{number}x? ", line), line
