"""A range the planner counted rows in, applied with none of them, fails the run naming the table and commits
nothing of it; the rerun applies it (merge/read_check.py). The bug is simulated where such bugs live: the change
sets' filter of the cached events misses every row, while the decode's aggregates still count them."""

from __future__ import annotations

import pytest

from tests.lake_helpers import app_row as row
from tests.lake_helpers import assert_lake_equals_upstream, backfill_open_protocol_runs, create_app_table, lake_rows
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, ResolvedEvent
from ticdc_lakehouse.merge.read_check import ChangesNotRead, Expected, not_read_line

AT = Position("t", 0, 0)
FIRST = [*create_app_table(AT), row(110, INSERT, {"id": "1", "v": "a", "w": "b"}),
         row(111, INSERT, {"id": "2", "v": "c", "w": "d"}), ResolvedEvent(200, AT)]
SECOND = [row(210, UPDATE, {"id": "1", "v": "a2", "w": "b2"}), row(211, DELETE, {"id": "2"}),
          row(212, INSERT, {"id": "3", "v": "e", "w": "f"}), ResolvedEvent(300, AT)]
AFTER_FIRST = [{"id": 1, "v": "a", "w": "b"}, {"id": 2, "v": "c", "w": "d"}]
AFTER_SECOND = [{"id": 1, "v": "a2", "w": "b2"}, {"id": 3, "v": "e", "w": "f"}]


def test_the_failure_names_the_table_its_range_and_what_to_do_in_one_line():
    line = not_read_line([Expected("app.a", "app.a", 200, 300), Expected("app.b", "app.b", 0, 300)])
    assert "\n" not in line
    assert line.startswith("app.a: the run counted row events of app.a in commit ts (200, 300] but its change set "
                           "read none (and 1 more table(s): app.b)")
    assert "nothing of it was committed" in line and "report it" in line and "retries" in line


def _lose_every_change(monkeypatch, optimized_away: bool = False) -> None:
    """The change sets' filter misses every row. ``optimized_away``: so plainly that Spark's optimizer removes the
    change set's plan (its observation then reports an empty row), else a condition only the tasks find false."""
    from ticdc_lakehouse.merge import changes, flush

    def lost(real):
        def rows(*args, **kwargs):
            frame = real(*args, **kwargs)
            return frame.limit(0) if optimized_away else frame.where("commit_ts < 0")
        return rows

    monkeypatch.setattr(changes, "table_rows", lost(changes.table_rows))
    monkeypatch.setattr(changes, "tables_rows", lost(changes.tables_rows))
    monkeypatch.setattr(flush, "table_rows", lost(flush.table_rows))  # a keyless table's, before they net out


def _watermarks(spark, name: str) -> list[str]:
    return [r["ts"] for r in lake_rows(spark, f"SELECT s.summary['tidb.resolved-ts'] AS ts FROM {name}.history h "
                                              f"JOIN {name}.snapshots s ON h.snapshot_id = s.snapshot_id "
                                              "WHERE h.is_current_ancestor ORDER BY h.made_current_at")]


@pytest.mark.spark
def test_new_tables_written_by_the_write_jobs_are_not_committed_and_the_rerun_writes_them(
        spark, settings, tmp_path, monkeypatch):
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.state import StateStore
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=3, partitions=2)
    workload.create_sample_tables()
    for _ in range(20):
        workload.transaction(3)
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()
    with monkeypatch.context() as patched:
        _lose_every_change(patched)
        with pytest.raises(ChangesNotRead, match=r"^\w+\.\w+: the run counted row events of .* but its change set "
                                                 r"read none \(and \d+ more table"):
            backfill(settings, archive, protocol="open", spark=spark)
    for name in workload.expected_json(cut):
        if spark.catalog.tableExists(name):
            assert spark.table(name).count() == 0, f"{name}: nothing of the failed run is committed"
    assert StateStore(spark, settings.catalog_name).latest_checkpoint("default").resolved_ts == 0
    backfill(settings, archive, protocol="open", spark=spark)  # the rerun, from the same checkpoint
    assert_lake_equals_upstream(spark, workload, cut)


@pytest.mark.spark
@pytest.mark.parametrize("staged", [False, True], ids=["merge", "staged"])
def test_a_table_with_rows_keeps_its_snapshot_and_the_rerun_applies_the_range(spark, tmp_path, monkeypatch, staged):
    """A MERGE commits itself: the table is rolled back to its snapshot before it. The staged way checks before
    its fast-forward: main never moves and its branch is removed. (The staged case loses its changes so plainly
    that Spark's optimizer removes the change set's plan: its observation is then an empty row, read as none.)"""
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.config import load_settings

    # never rewritten whole (the write jobs): the MERGE, or the staged way however few the rows
    (tmp_path / "none.toml").write_text(f"[merge]\nrewrite_max_rows = 0\nstaged_min_rows = {0 if staged else 10**6}\n")
    settings = load_settings()
    archive = tmp_path / "archive"
    backfill_open_protocol_runs(spark, settings, archive, FIRST)
    with monkeypatch.context() as patched:
        _lose_every_change(patched, optimized_away=staged)
        with pytest.raises(ChangesNotRead, match=r"^app\.a: the run counted row events of app\.a in commit ts "
                                                 r"\(200, 300\] but its change set read none"
                                                 + (r".*$" if staged else r".*\(its MERGE was rolled back\)$")):
            backfill_open_protocol_runs(spark, settings, archive, SECOND)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == AFTER_FIRST
    assert _watermarks(spark, "app.a")[-1] == "200"
    assert [r["name"] for r in lake_rows(spark, "SELECT name FROM app.a.refs WHERE type = 'BRANCH'")] == ["main"]
    backfill(settings, archive, protocol="open", spark=spark)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == AFTER_SECOND
    assert _watermarks(spark, "app.a")[-1] == "300"


@pytest.mark.spark
def test_a_keyless_table_is_checked_before_its_changes_net_out(spark, settings, tmp_path, monkeypatch):
    """A keyless table's changes net into row counts: an insert and a delete of one row leave nothing to write,
    which is no failure; losing its row events is."""
    from tests.test_trust_edges import KEYLESS, MS, T0, at, backfill, canal_archive
    from tests.test_trust_edges import row as canal_row

    archive = tmp_path / "archive"
    canal_archive(archive, [canal_row("k", T0, INSERT, {"a": "1", "b": "x"}, None, [], KEYLESS, 0),
                            ResolvedEvent(T0 + 5 * MS, at(1))])
    assert backfill(settings, archive, "canal-json", spark)["ok"]
    ts = T0 + 10 * MS
    canal_archive(archive, [canal_row("k", ts, INSERT, {"a": "3", "b": "z"}, None, [], KEYLESS, 2),
                            canal_row("k", ts + 1, DELETE, None, {"a": "3", "b": "z"}, [], KEYLESS, 3),
                            canal_row("k", ts + 2, INSERT, {"a": "4", "b": "w"}, None, [], KEYLESS, 4),
                            ResolvedEvent(ts + 5 * MS, at(5))])
    with monkeypatch.context() as patched:
        _lose_every_change(patched)
        with pytest.raises(ChangesNotRead, match=r"^app\.k: the run counted row events of app\.k"):
            backfill(settings, archive, "canal-json", spark)
    assert lake_rows(spark, "SELECT * FROM app.k ORDER BY a") == [{"a": 1, "b": "x"}]
    assert [r["name"] for r in lake_rows(spark, "SELECT name FROM app.k.refs WHERE type = 'BRANCH'")] == ["main"]
    assert backfill(settings, archive, "canal-json", spark)["ok"]
    assert lake_rows(spark, "SELECT * FROM app.k ORDER BY a") == [{"a": 1, "b": "x"}, {"a": 4, "b": "w"}]
    ts += 10 * MS  # a run whose changes net out entirely: nothing to write, and no failure
    canal_archive(archive, [canal_row("k", ts, INSERT, {"a": "5", "b": "q"}, None, [], KEYLESS, 6),
                            canal_row("k", ts + 1, DELETE, None, {"a": "5", "b": "q"}, [], KEYLESS, 7),
                            ResolvedEvent(ts + 5 * MS, at(8))])
    assert backfill(settings, archive, "canal-json", spark)["ok"]
    assert lake_rows(spark, "SELECT * FROM app.k ORDER BY a") == [{"a": 1, "b": "x"}, {"a": 4, "b": "w"}]
