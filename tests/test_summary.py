"""What a long command tells a person: progress while it runs (Spark task counts on a terminal, JSON lines
otherwise) and a short summary at the end (``--format json``: the full report)."""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from tests.test_cli import cli_env, run  # noqa: F401 - cli_env: the fixture


def _batch(workload, transactions: int):
    for _ in range(transactions):
        workload.transaction(4)
    workload.resolve(final=True)


def _row_events(workload, table: str, since: dict) -> dict[str, int]:
    """Row events of ``table`` sent after ``since`` (events per partition already counted), by op."""
    from ticdc_lakehouse.core.model import RowChange

    counts: dict[str, int] = {}
    for partition, events in workload.sent.items():
        for event in events[since.get(partition, 0):]:
            if isinstance(event, RowChange) and event.table == table:
                counts[event.op] = counts.get(event.op, 0) + 1
    return counts


@pytest.mark.spark
def test_backfill_ends_with_a_summary_and_json_keeps_the_full_report(cli_env, tmp_path):
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=21, partitions=2)
    workload.create_sample_tables()
    _batch(workload, 10)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    result = run(["backfill", "--archive", str(archive), "--protocol", "open", "--format", "text"], cli_env)
    out = result.stdout
    cut = workload.global_resolved_ts()
    assert re.search(rf"consistent up to TSO {cut} \(20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d\d\d UTC\)", out), out
    assert re.search(r"\d[\d,]* event\(s\) merged in [\d.]+ s \([\d,]+ events/s\)", out), out
    assert re.search(r"table\s+inserts\s+updates\s+deletes\s+rows written\s+rows removed", out), out
    assert re.search(r"^\s+shop\.orders\s+\d", out, re.M), out
    ddls = int(re.search(r"DDL applied: (\d+)", out).group(1))
    assert ddls >= 3 and "CREATE TABLE" in out  # the sample tables' CREATE TABLE statements
    assert "dead letters: 0" in out
    assert re.search(r"time: land [\d.]+ s, decode [\d.]+ s, DDL [\d.]+ s, apply [\d.]+ s, commit [\d.]+ s "
                     r"\(total [\d.]+ s\)", out), out
    assert not out.lstrip().startswith("{")
    # progress on stderr (not a terminal): one JSON object per line, with the decode rate and each table's apply
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    messages = [r["message"] for r in records]
    assert any(re.search(r"decoded [\d,]+ event\(s\) in [\d.]+ s \([\d,]+ events/s\)", m) for m in messages)
    assert any(m.startswith("applied shop.orders (") and "row(s) written" in m for m in messages), messages

    before = {partition: len(events) for partition, events in workload.sent.items()}
    rows_before = len(workload.state_at(cut)["orders"].rows)
    _batch(workload, 10)
    write_to_archive(workload, archive, "ticdc", "open")
    out = run(["backfill", "--archive", str(archive), "--protocol", "open", "--format", "json"], cli_env).stdout
    report = json.loads(out)["merge"]
    second = workload.global_resolved_ts()
    assert report["resolved_ts"] == second
    orders = report["tables"]["shop.orders"]
    assert orders["events"] == _row_events(workload, "orders", before)  # every row event, by kind
    # merge-on-read: a row written per insert/update image, a row removed per update/delete of a live row
    assert orders["written"] - orders["removed"] == len(workload.state_at(second)["orders"].rows) - rows_before
    assert set(report["phases"]) == {"decode", "ddl", "apply", "commit"}


def test_the_terminal_reporter_rewrites_one_live_line_and_clears_it():
    from ticdc_lakehouse.commands.progress import Reporter

    stream = io.StringIO()
    reporter = Reporter("backfill", human=True, stream=stream)
    reporter.live("decoding: 1/4 Spark tasks done")
    reporter.live("decoding: 3/4 Spark tasks done")
    reporter("decoded 10 event(s)")
    assert stream.getvalue() == ("\r\x1b[Kdecoding: 1/4 Spark tasks done\r\x1b[Kdecoding: 3/4 Spark tasks done"
                                 "\r\x1b[Kdecoded 10 event(s)\n")


@pytest.mark.spark
def test_spark_task_counts_are_shown_while_a_step_runs(spark, monkeypatch):
    from ticdc_lakehouse.commands import progress
    from ticdc_lakehouse.commands.progress import Reporter, spark_tasks

    def slow(x):
        import time as t

        t.sleep(1.5)
        return x

    terminal = io.StringIO()
    with spark_tasks(spark, Reporter("merge", human=True, stream=terminal), "decoding"):
        spark.sparkContext.parallelize(range(4), 4).map(slow).count()
    assert re.search(r"decoding: \d/4 Spark tasks done, \d running \(1 stage, \d+ s\)", terminal.getvalue())
    assert terminal.getvalue().endswith("\r\x1b[K")  # the live line is gone when the step ends

    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)
    logged = io.StringIO()
    with spark_tasks(spark, Reporter("merge", human=False, stream=logged), "applying 2 table(s)"):
        spark.sparkContext.parallelize(range(2), 2).map(slow).count()
    records = [json.loads(line) for line in logged.getvalue().splitlines()]
    assert records and all(r["live"] is True and r["command"] == "merge" for r in records)
    assert re.search(r"applying 2 table\(s\): \d/2 Spark tasks done", records[0]["message"])


def test_summary_names_what_stopped_and_what_to_do():
    from ticdc_lakehouse.commands.summary import render_summary

    text = render_summary({"merge": {
        "changefeed": "shop", "resolved_ts": 449016815353282561, "previous_resolved_ts": 0, "events_read": 0,
        "seconds": 2.0, "halted": [{"table": "shop.orders", "ddl_ts": 5, "reason": "cannot narrow a column"}],
        "held": [{"topic": "t", "partition": 0, "offset": 7, "error": "bad JSON"}], "dead_letters": 2,
        "ddls_applied": [f"{i}: ALTER TABLE t ADD c{i} int" for i in range(12)], "phases": {}}})
    assert "HALTED shop.orders at DDL ts 5: cannot narrow a column (lakehouse resume shop.orders" in text
    assert "HELD t/0 at offset 7: bad JSON (lakehouse skip-message t/0/7)" in text
    assert "dead letters: 2  (lakehouse status lists them)" in text
    assert "DDL applied: 12" in text and "... 2 more (--format json lists them)" in text
    assert "no table changed" in text
    assert "shop: consistent up to TSO 449016815353282561 (2024-04-" in text and text.count(" UTC)") == 1
