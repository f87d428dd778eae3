"""Crash anywhere, rerun, same tables: the fault-injection suite.

For each named step boundary of landing and merging (``ticdc_lakehouse.runtime.faults.POINTS``), a real
``lakehouse backfill`` subprocess is killed with SIGKILL exactly there; then a rerun (no fault) must leave every
table equal to the upstream at the cut (which is what a fault-free run produces, as the merge tests show), with
each table's newest snapshot recording the cut, and the landed offsets contiguous, without duplicates or gaps.
It prints the table: fault point, runs, equal to the fault-free result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.lake_helpers import snapshot_watermarks, table_rows
from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.landing.segments import check_contiguous, list_segments
from ticdc_lakehouse.commands.pipeline import backfill
from ticdc_lakehouse.runtime.spark_session import use_catalog
from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]

# (point, which pass of it to die at)
FAULTS = [
    ("land.before_rename", 2),
    ("land.after_rename", 1),
    ("backfill.after_landing", 1),
    ("merge.after_table_commit", 2),
    ("merge.before_fast_forward", 1),  # a staged change set on its branch, main not moved yet
    ("merge.before_append_commits", 1),  # the tables new to the lake: files written, nothing committed
    ("merge.after_ddl", 3),  # two of the three new tables created (they are created at once)
    ("merge.after_ddl", 5),  # the nullable ADD COLUMN, applied ahead of the rows below it (no barrier)
    ("merge.after_ddl", 6),  # the RENAME TABLE, after the barrier merged the rows below it
    ("merge.before_checkpoint", 1),
    ("merge.after_checkpoint", 1),
]
#: the settings a point needs to be reached: the staged way is for tables of at least ``merge.staged_min_rows``
#: rows that take a MERGE (more than ``merge.rewrite_max_rows``), and the sample tables hold a few
POINT_SETTINGS = {"merge.before_fast_forward": {"LAKEHOUSE__MERGE__STAGED_MIN_ROWS": "0",
                                                "LAKEHOUSE__MERGE__REWRITE_MAX_ROWS": "0"}}


def _workload() -> Workload:
    workload = Workload(seed=77, partitions=3)
    workload.create_sample_tables()
    workload.resolve(final=True)
    for i in range(10):
        workload.transaction(3)
        if i == 5:
            workload.add_column("orders", "discount", "decimal(5,2)")
            workload.rename_table("order_items", "order_lines")
        if i % 3 == 2:
            workload.resolve()
    workload.replay_tail(0, 3)
    workload.resolve()
    return workload


def _killed_backfill(env: dict, archive: Path, point: str, hit: int) -> int:
    env = dict(env, LAKEHOUSE_FAULT_POINT=point, LAKEHOUSE_FAULT_HIT=str(hit))
    result = subprocess.run(
        [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive", str(archive), "--protocol", "open"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    return result.returncode


def _equal_to_fault_free(spark, settings, workload: Workload, cut: int, records: int) -> bool:
    for name, expected in workload.expected_json(cut).items():
        if table_rows(spark, workload, name, cut) != expected:
            return False
        if snapshot_watermarks(spark, name)[-1] != cut:
            return False
    segments = list_segments(settings.landing_path, "default")
    if any(check_contiguous(segs) for segs in segments.values()):
        return False
    offsets = []
    for segs in segments.values():
        for seg in segs:
            table = pq.read_table(seg.path, columns=["partition", "offset"])
            offsets += list(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist()))
    return len(offsets) == len(set(offsets)) == records


#: killed backfills run this many at a time, beside the reruns in the test's own session: each is a fresh JVM of
#: its own deployment, so they share nothing; one after the other they were the slowest test of the suite (191 s
#: on a slow 2-core machine)
KILLED_AT_ONCE = 2


def test_a_crash_at_any_step_boundary_then_a_rerun_gives_the_fault_free_tables(spark_session, tmp_path, capsys):
    from concurrent.futures import ThreadPoolExecutor

    workload = _workload()
    archive = tmp_path / "archive"
    records = write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    deployments = [{"LAKEHOUSE_HOME": str(tmp_path / f"home-{index}"), "LAKEHOUSE__CATALOG__NAME": f"crash{index}",
                    **POINT_SETTINGS.get(point, {})} for index, (point, _) in enumerate(FAULTS)]
    results = []
    with ThreadPoolExecutor(KILLED_AT_ONCE) as pool:
        killed = [pool.submit(_killed_backfill, {**env, **deployment}, archive, point, hit)
                  for deployment, (point, hit) in zip(deployments, FAULTS)]
        for deployment, (point, hit), run in zip(deployments, FAULTS, killed):
            code = run.result()
            settings = load_settings(env=deployment)
            use_catalog(spark_session, settings)
            backfill(settings, archive, protocol="open", spark=spark_session)
            equal = _equal_to_fault_free(spark_session, settings, workload, cut, records)
            results.append((point, hit, code, equal))
    with capsys.disabled():
        print("\n\nfault point                    hit  killed  runs  equal to fault-free")
        for point, hit, code, equal in results:
            print(f"{point:<30} {hit:>3}  {'yes' if code == -9 else 'NO':>6}  {2:>4}  {'yes' if equal else 'NO'}")
    assert all(code == -9 for _, _, code, _ in results), "every run must have been killed at its fault point"
    assert all(equal for *_, equal in results)
