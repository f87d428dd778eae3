"""``bench/tables.py --quick``: one run prints every case beside its plain-append baseline and every ratio
beside its target (the figures themselves are timings: not checked)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lake_helpers import bench_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.spark
@pytest.mark.bench
def test_quick_run_prints_every_case_and_ratio(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "tables.py"), "--quick", "--repeat", "2", "--workdir",
                           str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    number = r"[\d,]+(?:\.\d+)?"
    # each case backfilled twice (into fresh lakes, each checked value by value), the median reported
    assert len(re.findall(rf"backfill {number}, {number} s \(median {number} s\)", out)) == 4, out
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


def test_verify_checks_every_value_not_only_the_keys(tmp_path):
    """The bench's check of a backfilled lake fails on one wrong value (a run that is fast because it is wrong is no
    figure), and passes on the same rows in another order, read as the lake's types (base64 for binary)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    tables = bench_module("tables")
    (tmp_path / "final").mkdir()
    (tmp_path / "lake" / "warehouse").mkdir(parents=True)
    (tmp_path / "final" / "types.json").write_text(json.dumps({"t": {"id": "int", "amount": "decimal(5,2)",
                                                                    "blob": "binary"}}))
    catalog = SqlCatalog("lake", uri=f"sqlite:///{tmp_path / 'lake' / 'catalog.db'}",
                         warehouse=str(tmp_path / "lake" / "warehouse"))
    catalog.create_namespace("bench")
    lake_rows = pa.table({"id": pa.array([2, 1], pa.int32()), "amount": pa.array([None, 1.5], pa.float64()),
                          "blob": pa.array([b"\x00\xff", None], pa.binary())})
    lake_rows = lake_rows.set_column(1, "amount", pa.array([None, "1.50"]).cast(pa.decimal128(5, 2)))
    catalog.create_table(("bench", "t"), schema=lake_rows.schema).append(lake_rows)

    def upstream(amount: str) -> None:
        pq.write_table(pa.table({"id": ["1", "2"], "amount": [amount, None], "blob": [None, "AP8="]}),
                       tmp_path / "final" / "t.parquet")

    upstream("1.50")
    tables.verify(tmp_path)
    upstream("1.51")
    with pytest.raises(RuntimeError, match="not the same rows"):
        tables.verify(tmp_path)


def test_the_median_of_a_case_s_backfills_is_reported():
    tables = bench_module("tables")
    runs = [tables.Timing(s, m) for s, m in ((9.0, 100.0), (7.0, 300.0), (8.0, 200.0))]
    assert tables.median_timing(runs) == tables.Timing(8.0, 200.0)


def test_ratios_compare_the_runs_of_one_round_and_rounds_alternate_their_order():
    """A ratio is the median of each round's own ratio, not the ratio of medians that may come from different
    minutes of a drifting machine; the rounds run their cases in one order, then the reverse."""
    tables = bench_module("tables")
    runs = {"ddl": [tables.Timing(s, 0.0) for s in (10.0, 20.0, 11.0)],
            "many": [tables.Timing(s, 0.0) for s in (12.0, 22.0, 30.0)]}
    median, each = tables.paired_ratio(runs, "many", "ddl")
    assert each == [1.2, 1.1, 30.0 / 11.0] and median == 1.2  # the ratio of the medians would say 22/11 = 2.0
    names = ["ddl", "no_ddl", "many", "distinct"]
    assert tables.round_order(names, 0) == ["no_ddl", "ddl", "many", "distinct"]
    assert tables.round_order(names, 1) == ["distinct", "many", "ddl", "no_ddl"]
    assert tables.round_order(["steady_4"], 1) == ["steady_4"]
    calls = []

    def once(name):
        calls.append(name)
        return tables.Timing(float(len(calls)), 0.0)

    runs = tables.in_rounds({"many": "many", "ddl": "ddl"}, once, 2)
    assert calls == ["ddl", "many", "many", "ddl"]
    assert runs == {"many": [tables.Timing(2.0, 0.0), tables.Timing(3.0, 0.0)],
                    "ddl": [tables.Timing(1.0, 0.0), tables.Timing(4.0, 0.0)]}
    assert tables.ratio_text(runs, "many", "ddl") == "0.75x (rounds 2.00, 0.75)"


def test_a_transaction_limited_to_some_tables_changes_only_those():
    """The steady case of idle tables (``busy``) relies on it: its second half changes 4 tables of 204."""
    from ticdc_lakehouse.core.model import RowChange
    from ticdc_lakehouse.sim.workload import Workload

    workload = Workload(seed=3, partitions=3, schema="bench", keep_history=False, quick_pick=True)
    workload.create_sample_tables(12)
    workload.resolve(final=True)
    workload.new_events()
    busy = sorted(workload.tables)[:2]
    for _ in range(200):
        workload.transaction(4, busy)
    changed = {e.table for items in workload.new_events().values() for e in items if isinstance(e, RowChange)}
    assert changed == set(busy)
