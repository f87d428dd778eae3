"""Helpers for tests that compare lake tables with the simulated upstream (``ticdc_lakehouse.sim.workload``), and
for the tests of the benchmark scripts (``bench_module``)."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from ticdc_lakehouse.commands.output import json_value
from ticdc_lakehouse.sim.workload import Workload, write_to_archive


def archive_of_existing_tables(archive: Path, seed: int, partitions: int, transactions: int, size: int,
                               topic: str = "ticdc", protocol: str = "open") -> Workload:
    """The sample tables' changes as a changefeed started after the tables were created sees them, written to
    ``archive``: their CREATE TABLE (or Simple schema) events are never sent, then ``transactions`` transactions
    of ``size`` rows and a final resolved ts. Returns the workload (the simulated upstream)."""
    workload = Workload(seed=seed, partitions=partitions)
    workload.create_sample_tables()
    workload.new_events()  # the CREATE TABLE events happened before the changefeed started: never sent
    for _ in range(transactions):
        workload.transaction(size)
    workload.resolve(final=True)
    write_to_archive(workload, archive, topic, protocol)
    return workload


def lake_rows(spark, sql: str) -> list[dict[str, Any]]:
    """Rows of a Spark SQL query as ``lakehouse sql --format json`` prints them."""
    frame = spark.sql(sql)
    return [{c: json_value(v) for c, v in zip(frame.columns, row)} for row in frame.collect()]


def table_rows(spark, workload: Workload, name: str, cut: int, source: str = "") -> list[dict[str, Any]]:
    table = workload.state_at(cut)[name.split(".", 1)[1]]
    order = ", ".join(f"`{k}`" for k in table.primary_key)
    return lake_rows(spark, f"SELECT * FROM {source or name} ORDER BY {order}")


def assert_lake_equals_upstream(spark, workload: Workload, cut: int) -> None:
    """Every upstream table at ``cut`` exists in the lake with the same columns, in order, and the same rows."""
    expected = workload.expected_json(cut)
    assert expected, "the workload has no tables at this cut"
    for name, rows in expected.items():
        got = table_rows(spark, workload, name, cut)
        columns = [c.name for c in workload.state_at(cut)[name.split(".", 1)[1]].columns]
        assert spark.table(name).columns == columns, f"{name}: columns differ"
        assert got == rows, f"{name}: rows differ from upstream at {cut}"


def rows_and_scanned(frame, scan: str) -> tuple[list, int]:
    """The frame's rows, and the rows its scans (plan nodes whose name starts with ``scan``: ``InMemoryTableScan``
    of the cache, ``Scan parquet`` of files; 0 without such a node) read, planned without adaptive execution (whose
    stages hide the scans)."""
    from ticdc_lakehouse.runtime.spark_session import ADAPTIVE, session_conf

    with session_conf(frame.sparkSession, {ADAPTIVE: "false"}):
        rows = frame.collect()
        plan = frame._jdf.queryExecution().executedPlan()
    scans = [node for node in _plan_nodes(plan) if node.nodeName().startswith(scan)]
    return rows, sum(int(node.metrics().apply("numOutputRows").value()) for node in scans)


def _plan_nodes(plan):
    yield plan
    children = plan.children()
    for i in range(children.size()):
        yield from _plan_nodes(children.apply(i))


def snapshot_watermarks(spark, name: str) -> list[int]:
    rows = spark.sql(
        f"SELECT summary['tidb.resolved-ts'] AS ts FROM {name}.snapshots ORDER BY committed_at"
    ).collect()
    return [int(r["ts"]) for r in rows if r["ts"] is not None]


def create_app_table(at, table_sql: str = "CREATE TABLE app.a (id int PRIMARY KEY, v varchar(9), w varchar(9))"):
    """The DDL events that create database ``app`` and one table in it (commit ts 100 and 101)."""
    from ticdc_lakehouse.core.model import DDLEvent

    return [DDLEvent("app", "", 100, "CREATE DATABASE app", "CREATE_SCHEMA", at),
            DDLEvent("app", "a", 101, table_sql, "CREATE_TABLE", at)]


#: the column types of ``create_app_table``'s table, as its row events carry them
APP_TYPES = {"id": "int", "v": "varchar", "w": "varchar"}


def app_row(ts: int, op: str, values: dict, at=None):
    """A row event of ``create_app_table``'s table ``app.a`` (keyed by ``id``): an update's and a delete's old image
    is the key alone."""
    from ticdc_lakehouse.core.model import DELETE, UPDATE, Position, RowChange

    after = None if op == DELETE else values
    before = {"id": values["id"]} if op in (DELETE, UPDATE) else None
    return RowChange("app", "a", ts, op, after, before, ("id",), APP_TYPES, at or Position("t", 0, 0))


def backfill_open_protocol_runs(spark, settings, archive, *runs) -> list[dict[str, Any]]:
    """Each list of events appended to the archive (Open Protocol, partition 0), then backfilled: one merge run each."""
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
    from ticdc_lakehouse.commands.pipeline import backfill

    encoder = OpenProtocolEncoder()
    reports = []
    for events in runs:
        write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})
        reports.append(backfill(settings, archive, protocol="open", spark=spark))
    return reports


def record_write_frames(monkeypatch) -> list[Any]:
    """The ``batch_write.WriteFrame`` of every write job the run submits from now on (``table_commit.write_files``
    still writes them), so a test can say how many frames wrote its tables and of which kind."""
    from ticdc_lakehouse.merge import table_commit

    frames: list[Any] = []
    write_files = table_commit.write_files

    def recorded(job_frames):
        frames.extend(job_frames)
        return write_files(job_frames)

    monkeypatch.setattr(table_commit, "write_files", recorded)
    return frames


def run_concurrently(target: Callable[[int], None], count: int) -> None:
    """``target(0)`` ... ``target(count - 1)``, each in a thread of its own, all started before any is waited for."""
    threads = [threading.Thread(target=target, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def bench_module(name: str):
    """The benchmark script ``bench/<name>.py`` as a module, for its pure functions; the entries it adds to
    ``sys.path`` to run as a script (the repo, ``bench/``) are taken out again, so that no later test of the
    process imports a bench script by accident."""
    bench = str(Path(__file__).resolve().parents[1] / "bench")
    before = list(sys.path)
    sys.path.insert(0, bench)
    try:
        return importlib.import_module(name)
    finally:
        sys.path[:] = before
