"""``lakehouse maintain`` on a lake built by the real pipeline: two merge runs (two consistent cuts), then a dry run
and a real run with a policy that keeps only the newest cut.

One lake per module (each backfill costs about a minute); the fixture records the lake before, after the dry run
and after the real run, and the tests compare those states the way an operator would check them.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

TABLES = ("shop.customers", "shop.order_items", "shop.orders")


def _capture(spark, settings, ji, cuts):
    """Everything maintenance may change, as plain data."""
    from ticdc_lakehouse.iceberg.java_api import watermark_of
    from ticdc_lakehouse.runtime.state import StateStore

    catalog = settings.catalog_name
    state: dict = {"rows": {}, "tag_rows": {}, "refs": {}, "snapshots": {}, "watermarks": {}, "files": {}}
    for name in TABLES:
        state["rows"][name] = sorted(map(repr, spark.table(f"{catalog}.{name}").collect()))
        jtable = ji.load(*name.split("."))
        state["watermarks"][name] = watermark_of(jtable)
        state["snapshots"][name] = sorted(int(s.snapshotId()) for s in jtable.snapshots())
        refs = jtable.refs()
        state["refs"][name] = {str(k): int(refs.get(k).snapshotId()) for k in list(refs.keySet())}
        summary = jtable.currentSnapshot().summary()
        state["files"][name] = (int(summary["total-data-files"]), int(summary["total-delete-files"]))
        for cut in cuts:
            if f"tso_{cut}" in state["refs"][name]:
                state["tag_rows"][(name, cut)] = sorted(
                    map(repr, spark.sql(f"SELECT * FROM {catalog}.{name} VERSION AS OF 'tso_{cut}'").collect())
                )
    checkpoints = StateStore(spark, catalog).checkpoints("default")
    state["checkpoints"] = [(c.resolved_ts, c.run_id, tuple(sorted(c.tables.items()))) for c in checkpoints]
    state["warehouse"] = sorted(
        (str(path), path.stat().st_size) for path in Path(settings.warehouse).rglob("*") if path.is_file()
    )
    return state


@pytest.fixture(scope="module")
def lake(spark_session, tmp_path_factory):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.commands.maintenance import maintain
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.commands.timetravel import tso_to_datetime
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    root = tmp_path_factory.mktemp("maintenance-lake")
    env = {
        "LAKEHOUSE_HOME": str(root / "home"),
        "LAKEHOUSE__CATALOG__NAME": "lake_maint",
        "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "2",
        "LAKEHOUSE__MAINTENANCE__RETAIN_LAST_CUTS": "1",
        "LAKEHOUSE__MAINTENANCE__RETAIN_CUTS_DAYS": "7",
        "LAKEHOUSE__MAINTENANCE__LANDING_RETENTION_HOURS": "1",
        # the second run MERGEs (small files, deletion vectors) for the compaction to have work: a table this small
        # would be rewritten whole, compact already
        "LAKEHOUSE__MERGE__REWRITE_MAX_ROWS": "0",
    }
    (root / "none.toml").write_text("")
    settings = load_settings(root / "none.toml", env=env)
    spark = spark_session
    use_catalog(spark, settings)

    w = Workload(seed=5)
    w.run_script(transactions=12)
    w.create_table("scratch", [("id", "int", False), ("note", "varchar(20)", True)], ("id",))
    for _ in range(4):
        w.transaction(4)
    w.resolve(final=True)
    archive = root / "archive"
    write_to_archive(w, archive, "ticdc", "open")
    backfill(settings, archive, protocol="open", spark=spark)
    first_cut = w.global_resolved_ts()
    scratch_drop = w.drop_table("scratch")  # between the cuts: only the first cut still reads it
    for _ in range(6):
        w.transaction(4)
    w.resolve(final=True)
    write_to_archive(w, archive, "ticdc", "open")
    backfill(settings, archive, protocol="open", spark=spark)
    second_cut = w.global_resolved_ts()
    cuts = (first_cut, second_cut)

    # the landed segments of both backfills, made two hours old: older than landing_retention_hours
    landed = sorted(p for p in settings.landing_path.rglob("*.parquet") if not p.name.startswith("."))
    for path in landed:
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    # a file a crashed write left behind, old enough to be an orphan
    orphan = Path(settings.warehouse) / "shop" / "orders" / "data" / "crashed-write-00000.parquet"
    orphan.write_bytes(b"PAR1 leftover of a crashed writer")
    os.utime(orphan, (1_500_000_000, 1_500_000_000))

    # cut ages count from "now": 30 days after the cuts both are older than retain_cuts_days, so only
    # retain_last_cuts = 1 keeps the newest
    now = tso_to_datetime(second_cut) + timedelta(days=30)
    ji = JavaIceberg(spark, settings.catalog_name)
    # the dropped table, as the first cut still reads it
    scratch_rows = spark.sql(f"SELECT count(*) FROM `{settings.catalog_name}`.`_lakehouse_dropped`."
                             f"`shop__scratch__{scratch_drop}` VERSION AS OF 'tso_{first_cut}'").collect()[0][0]
    before = _capture(spark, settings, ji, cuts)
    dry = maintain(settings, dry_run=True, spark=spark, now=now)
    after_dry = _capture(spark, settings, ji, cuts)
    real = maintain(settings, spark=spark, now=now)
    after = _capture(spark, settings, ji, cuts)
    return SimpleNamespace(settings=settings, spark=spark, ji=ji, w=w, cuts=cuts, now=now, orphan=orphan, landed=landed,
                           before=before, dry=dry, after_dry=after_dry, real=real, after=after,
                           scratch=f"_lakehouse_dropped.shop__scratch__{scratch_drop}", scratch_rows=scratch_rows)


def _use(lake):
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    use_catalog(lake.spark, lake.settings)


def _feed(result):
    return next(f for f in result["changefeeds"] if f["changefeed"] == "default")


def test_the_lake_has_two_tagged_cuts(lake):
    first, second = lake.cuts
    assert first < second
    assert [c[0] for c in lake.before["checkpoints"]] == [first, second]
    for name in TABLES:
        assert {f"tso_{first}", f"tso_{second}"} <= set(lake.before["refs"][name])


def test_dry_run_changes_nothing_and_reports_the_plan(lake):
    first, second = lake.cuts
    assert lake.after_dry == lake.before  # rows, refs, snapshots, checkpoints and every file of the warehouse
    assert str(lake.orphan) in {path for path, _ in lake.after_dry["warehouse"]}
    feed = _feed(lake.dry)
    assert lake.dry["dry_run"] is True
    assert feed["cuts"] == {"kept": [second], "dropped": [first]}
    assert [r["resolved_ts"] for r in feed["checkpoint_rows_deleted"]] == [first]
    orders = feed["tables"]["shop.orders"]
    assert orders["tags_dropped"] == [f"tso_{first}"]
    assert orders["expire_snapshots"]["snapshots_expiring"] > 0
    assert orders["remove_orphan_files"]["count"] == 1
    assert orders["remove_orphan_files"]["files"][0].endswith(lake.orphan.name)


def test_compaction_drops_data_files_and_keeps_data_identical(lake):
    assert lake.real["ok"], lake.real["problems"]
    assert lake.after["rows"] == lake.before["rows"]
    data_before = sum(files[0] for files in lake.before["files"].values())
    data_after = sum(files[0] for files in lake.after["files"].values())
    assert data_after < data_before
    deletes_before = sum(files[1] for files in lake.before["files"].values())
    deletes_after = sum(files[1] for files in lake.after["files"].values())
    assert deletes_after < deletes_before
    for name in TABLES:
        compaction = _feed(lake.real)["tables"][name]["compaction"]
        assert compaction["after"]["data_files"] == lake.after["files"][name][0]


def test_watermark_survives_compaction_and_expiry(lake):
    from ticdc_lakehouse.iceberg.java_api import watermark_of

    _use(lake)
    for name in TABLES:
        assert lake.before["watermarks"][name] == lake.cuts[1]
        assert lake.after["watermarks"][name] == lake.before["watermarks"][name]
        assert watermark_of(lake.ji.load(*name.split("."))) == lake.cuts[1]
        entry = _feed(lake.real)["tables"][name]
        assert entry["watermark_before"] == entry["watermark_after"] == lake.cuts[1]
        # compaction snapshots carry no watermark: the walk back to the merge's snapshot had to be retained
        if entry["compaction"]["rewrite_data_files"]["rewritten_data_files_count"]:
            assert entry["expire_snapshots"]["retain_last"] >= 2


def test_snapshots_expire_but_the_kept_cut_stays_readable(lake):
    from ticdc_lakehouse.commands.timetravel import as_of_sql

    _use(lake)
    second = lake.cuts[1]
    for name in TABLES:
        assert len(lake.after["snapshots"][name]) < len(lake.before["snapshots"][name])
        assert lake.after["tag_rows"][(name, second)] == lake.before["tag_rows"][(name, second)]
        sql = as_of_sql(lake.spark, lake.settings, f"SELECT * FROM {name}", second)
        assert sorted(map(repr, lake.spark.sql(sql).collect())) == lake.before["tag_rows"][(name, second)]


def test_dropped_cut_loses_its_tags_and_checkpoint_rows(lake):
    from ticdc_lakehouse.commands.maintenance import verify_cuts
    from ticdc_lakehouse.runtime.state import StateStore
    from ticdc_lakehouse.commands.timetravel import AsOfError, as_of_sql

    _use(lake)
    first, second = lake.cuts
    assert [c[0] for c in lake.after["checkpoints"]] == [second]
    assert lake.after["checkpoints"][0] == lake.before["checkpoints"][-1]  # the restart point is untouched
    for name in TABLES:
        assert f"tso_{first}" not in lake.after["refs"][name]
        assert (name, first) not in lake.after["tag_rows"]
    with pytest.raises(AsOfError, match="before the first applied cut"):
        as_of_sql(lake.spark, lake.settings, "SELECT * FROM shop.orders", first)
    assert verify_cuts(lake.ji, StateStore(lake.spark, lake.settings.catalog_name).checkpoints("default")) == []


def test_orphan_files_are_removed(lake):
    assert not lake.orphan.exists()
    assert _feed(lake.real)["tables"]["shop.orders"]["remove_orphan_files"]["count"] == 1
    assert "skipped" not in lake.real["control_tables"]
    assert set(lake.real["control_tables"]) == {"_lakehouse.checkpoints", "_lakehouse.dead_letters",
                                                "_lakehouse.halted", "_lakehouse.held"}


def test_landed_segments_every_merge_is_past_are_deleted_but_each_partitions_last_stays(lake):
    from ticdc_lakehouse.landing.segments import check_contiguous, list_segments

    planned = _feed(lake.dry)["landing_retention"]
    deleted = _feed(lake.real)["landing_retention"]
    assert planned["dry_run"] and planned["segments"] == deleted["segments"] and deleted["bytes"] > 0
    partitions = {path.parent for path in lake.landed}
    assert len(deleted["segments"]) == len(lake.landed) - len(partitions)  # two backfills: the first one's go
    left = list_segments(lake.settings.landing_path, "default")
    assert sum(len(items) for items in left.values()) == len(partitions)
    assert all(check_contiguous(items) == [] for items in left.values())
    assert all(not Path(path).exists() for path in deleted["segments"])


def test_maintenance_waits_for_no_merge(lake):
    from ticdc_lakehouse.runtime.locks import LockBusy, changefeed_lock
    from ticdc_lakehouse.commands.maintenance import maintain

    _use(lake)
    with changefeed_lock(lake.settings, "default"):
        with pytest.raises(LockBusy):
            maintain(lake.settings, changefeed="default", spark=lake.spark, now=lake.now)


# -- planning, without Spark --------------------------------------------------------------------------------
def _tso(moment: datetime) -> int:
    return int(moment.timestamp() * 1000) << 18


NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


@given(
    ages=st.lists(st.integers(min_value=0, max_value=60 * 24 * 40), min_size=0, max_size=30, unique=True),
    days=st.integers(min_value=0, max_value=30),
    keep_last=st.integers(min_value=0, max_value=12),
)
def test_plan_cuts_keeps_recent_and_newest(ages, days, keep_last):
    from ticdc_lakehouse.commands.maintenance import plan_cuts

    cuts = [_tso(NOW - timedelta(minutes=age)) for age in ages]
    kept, dropped = plan_cuts(cuts, NOW, days, keep_last)
    assert sorted(kept + dropped) == sorted(cuts) and not set(kept) & set(dropped)
    if cuts:
        assert max(cuts) in kept
        assert set(sorted(cuts)[-max(1, keep_last):]) <= set(kept)
    horizon = NOW - timedelta(days=days)
    for cut in cuts:
        recent = _tso(horizon) <= cut
        if recent:
            assert cut in kept
    for cut in dropped:
        assert cut < _tso(horizon)


def _state(snapshots, tags, current):
    from ticdc_lakehouse.commands.maintenance import SnapshotInfo, TableState, TagInfo

    infos = {sid: SnapshotInfo(sid, ts, parent, wm) for sid, (ts, parent, wm) in snapshots.items()}
    return TableState("shop.t", current, infos, {n: TagInfo(s, age) for n, (s, age) in tags.items()}, {"main": current})


def test_plan_table_protects_the_watermark_chain_and_kept_cuts():
    from ticdc_lakehouse.commands.maintenance import plan_table

    day = 86_400_000
    # 1 <- 2 <- 3 <- 4 (compaction, no watermark) <- 5 (delete rewrite, no watermark)
    snapshots = {1: (1 * day, None, 100), 2: (2 * day, 1, 200), 3: (3 * day, 2, 300), 4: (4 * day, 3, None),
                 5: (5 * day, 4, None)}
    tags = {"tso_200": (2, None), "tso_300": (3, 7 * day), "other": (1, None)}
    plan = plan_table(_state(snapshots, tags, 5), kept=[300], dropped=[200], wanted={300: 3}, now_ms=6 * day,
                      default_older_than_ms=0)
    assert plan.drop_tags == ["tso_200"]
    assert plan.set_tags == {}
    assert plan.retain_last == 3  # 5, 4 and 3, the newest snapshot with the watermark
    assert plan.older_than_ms == 3 * day
    assert plan.expire == [2]  # 1 is still tagged "other"
    assert plan.survivors == {1, 3, 4, 5}


def test_plan_table_tags_untagged_cuts_and_pins_lapsing_tags():
    from ticdc_lakehouse.commands.maintenance import plan_table

    day = 86_400_000
    snapshots = {1: (1 * day, None, 100), 2: (2 * day, 1, 200), 3: (3 * day, 2, 300)}
    # cut 200 has no tag (a protocol without resolved events); tso_300 would lapse under its 1-day age
    tags = {"tso_300": (3, 1 * day)}
    plan = plan_table(_state(snapshots, tags, 3), kept=[200, 300], dropped=[], wanted={200: 2, 300: 3},
                      now_ms=30 * day, default_older_than_ms=0)
    assert plan.set_tags == {"tso_200": 2, "tso_300": 3}
    assert plan.expire == [1]
    # a kept cut whose snapshot is already gone is reported, not tagged
    plan = plan_table(_state(snapshots, {}, 3), kept=[150, 300], dropped=[], wanted={150: 99, 300: 3},
                      now_ms=3 * day, default_older_than_ms=0)
    assert plan.unservable_cuts == [150] and "tso_150" not in plan.set_tags


def test_rows_to_delete_never_removes_the_latest_row():
    from ticdc_lakehouse.commands.maintenance import effective_rows, rows_to_delete
    from ticdc_lakehouse.runtime.state import Checkpoint

    t0 = datetime(2026, 1, 1)
    old = Checkpoint("cf", 100, "r1", tables={"shop.t": 1}, committed_at=t0)
    kept_stale = Checkpoint("cf", 200, "r2", tables={"shop.t": 2}, committed_at=t0 + timedelta(minutes=1))
    kept = Checkpoint("cf", 200, "r3", tables={"shop.t": 3}, committed_at=t0 + timedelta(minutes=2))
    latest = Checkpoint("cf", 300, "r4", tables={"shop.t": 9, "shop.gone": 5}, committed_at=t0 + timedelta(minutes=3))
    rows = [old, kept_stale, kept, latest]
    assert effective_rows(rows)[200] is kept
    doomed = rows_to_delete(rows, dropped=[100], survivors={"shop.t": {3, 4}}, latest=latest)
    assert doomed == [old, kept_stale]


def test_a_dropped_table_no_kept_cut_reads_is_purged_with_its_files(lake):
    assert lake.scratch_rows > 0  # the first cut could read the dropped table before maintenance
    assert _feed(lake.dry)["dropped_tables_purged"] == [lake.scratch]
    assert _feed(lake.real)["dropped_tables_purged"] == [lake.scratch]
    namespace, _, name = lake.scratch.partition(".")
    assert not lake.ji.table_exists(namespace, name)
    scratch_files = lambda state: [path for path, _ in state["warehouse"] if "/scratch/" in path]  # noqa: E731
    assert scratch_files(lake.after_dry) and not scratch_files(lake.after)


@pytest.mark.parametrize(
    "kept, halts, purged",
    [
        ([200, 300], [], ["a__t__100", "b__t__200"]),  # every kept cut is at or after these DROPs
        ([150, 300], [], ["a__t__100"]),  # the cut at 150 still contains b.t (dropped at 200)
        ([200, 300], [200], ["a__t__100"]),  # a halt at 200: a later run reads the DROP at 200 again
        ([], [], []),
    ],
)
def test_plan_graveyard_purge(kept, halts, purged):
    from ticdc_lakehouse.commands.maintenance import plan_graveyard_purge

    dropped = {"a__t__100": 100, "b__t__200": 200, "c__t__400": 400}
    assert plan_graveyard_purge(dropped, kept, halts) == purged
