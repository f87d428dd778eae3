"""The planner's aggregates folded by the decode tasks (merge/staged_stats.py), without Spark."""

from __future__ import annotations

import pickle

from ticdc_lakehouse.merge.staged_stats import StatsFolder, StatsParam, StatsPart, columns_sent, finish
from ticdc_lakehouse.core.model import DDLEvent, DecodeFailure, Position, ResolvedEvent, RowChange


def row(schema, table, ts, after, types, partition=0, offset=0, op="I", before=None):
    return RowChange(schema, table, ts, op, after, before, ("id",), types, Position("t", partition, offset))


def task_part(events) -> StatsPart:
    folder = StatsFolder()
    folder.add(events[: len(events) // 2])
    folder.add(events[len(events) // 2:])
    return pickle.loads(pickle.dumps(folder.finish()))  # as the accumulator ships it


def test_two_tasks_fold_into_what_the_planner_needs():
    narrow = {"id": "bigint", "price": "decimal"}
    wide = {"id": "bigint", "price": "decimal", "note": "varchar"}
    first = task_part([
        row("Shop", "Orders", 20, {"id": "1", "price": "1.50"}, narrow, offset=1),
        ResolvedEvent(25, Position("t", 0, 2)),
        DDLEvent("shop", "orders", 30, "ALTER TABLE orders ADD note varchar(9)", "ADD_COLUMN", Position("t", 0, 3)),
        row("shop", "orders", 40, {"id": "2", "price": "2.125", "note": "x"}, wide, offset=4),
        DecodeFailure("bad bytes", Position("t", 0, 5)),
    ])
    second = task_part([
        row("shop", "ORDERS", 10, None, {"id": "bigint"}, partition=1, offset=7, op="D", before={"id": "9"}),
        DDLEvent("shop", "orders", 30, "ALTER TABLE orders ADD note varchar(9)", "ADD_COLUMN", Position("t", 1, 8)),
        ResolvedEvent(35, Position("t", 1, 9)),
        ResolvedEvent(33, Position("t", 1, 10)),
        row("shop", "items", 50, {"id": "5"}, {"id": "int"}, partition=1, offset=11),
    ])
    param = StatsParam()
    stats = finish(param.addInPlace(param.addInPlace(param.zero(StatsPart()), first), second))

    assert stats.events == 10 and stats.failures == 1 and stats.max_commit_ts == 50
    assert stats.resolved == {("t", 0): 25, ("t", 1): 35}
    assert sorted(stats.rows) == [("shop", "items"), ("shop", "orders")]
    orders = stats.rows[("shop", "orders")]
    assert (orders.rows, orders.min_ts, orders.max_ts) == (3, 10, 40)
    # the widest column types seen, in upstream order, DECIMAL scale from that event's value
    assert orders.column_types == [("id", "bigint"), ("price", "decimal(38,3)"), ("note", "varchar")]
    assert orders.key_columns == ["id"]
    # the first image had no note (the delete does not count)
    assert columns_sent(orders.layouts) == {"id", "price"}
    assert [(d.partition, d.offset) for d in stats.ddls] == [(0, 3), (1, 8)]
    assert stats.ddls[0].query.startswith("ALTER TABLE") and stats.ddls[0].is_bootstrap is False


def test_a_rerun_task_adds_nothing_the_planner_reads_twice():
    events = [
        row("s", "t", 5, {"id": "1"}, {"id": "int"}),
        DDLEvent("s", "t", 6, "TRUNCATE TABLE t", "TRUNCATE_TABLE", Position("t", 0, 1)),
        ResolvedEvent(7, Position("t", 0, 2)),
    ]
    param = StatsParam()
    once = finish(param.addInPlace(StatsPart(), task_part(events)))
    twice = finish(param.addInPlace(param.addInPlace(StatsPart(), task_part(events)), task_part(events)))
    assert twice.resolved == once.resolved and twice.ddls == once.ddls and twice.max_commit_ts == once.max_commit_ts
    for key in ("min_ts", "max_ts", "column_types", "key_columns", "layouts"):
        assert getattr(twice.rows[("s", "t")], key) == getattr(once.rows[("s", "t")], key)
    assert twice.events == 2 * once.events  # counts are only reported


def test_columns_every_insert_and_update_image_carried():
    full = {"ID": "int", "v": "varchar", "w": "varchar"}
    shared = dict(full)  # one layout's rows share their types dict, as the decoders do
    narrow = {"id": "int", "v": "varchar"}

    def sent(*parts, added=None):
        param = StatsParam()
        merged = StatsPart()
        for part in parts:
            merged = param.addInPlace(merged, part)
        return columns_sent(finish(merged).rows[("s", "t")].layouts, added)

    only_deletes = task_part([row("s", "t", 1, None, {"id": "int"}, op="D", before={"id": "1"})])
    assert sent(only_deletes) is None  # no update: nothing to keep
    one_layout = task_part([row("s", "t", 5 + i, {"ID": "1", "v": "a", "w": "b"}, shared, offset=i) for i in range(3)])
    assert sent(one_layout) == {"id", "v", "w"}
    with_narrow = task_part([row("s", "t", 2, {"id": "2", "v": "c"}, narrow, op="U", before={"id": "2"})])
    assert sent(one_layout, with_narrow) == {"id", "v"}  # w is kept from the target where not sent
    # ... unless w was added in this run after every image without it (ts 2 < 3): the table holds NULL there
    assert sent(one_layout, with_narrow, added={"w": 3}) == {"id", "v", "w"}
    assert sent(one_layout, with_narrow, added={"w": 2}) == {"id", "v"}  # an image at the DDL's ts lacks it
    # an image without a value for one of its typed columns: nothing is known to be always sent
    partial = task_part([row("s", "t", 3, {"id": "3"}, full)])
    assert sent(partial, one_layout) == frozenset()


def test_a_key_only_delete_never_defines_the_table_when_an_insert_image_exists():
    """``delete-only-output-handle-key-columns``: whichever task saw it, a delete's key-only image loses to any
    other image (a whole deleted row still counts as the widest); a table seen only through such deletes is marked
    as not defining its columns."""
    key_only = row("s", "t", 10, None, {"id": "int"}, op="D", before={"id": "1"})
    full_delete = row("s", "t", 11, None, {"id": "int", "a": "int", "b": "int"}, op="D",
                      before={"id": "2", "a": "1", "b": "2"})
    insert = row("s", "t", 12, {"id": "3", "a": "4"}, {"id": "int", "a": "int"})
    param = StatsParam()
    both = finish(param.addInPlace(task_part([key_only, full_delete]), task_part([insert])))
    assert both.rows[("s", "t")].column_types == [("id", "int"), ("a", "int"), ("b", "int")]
    assert finish(task_part([key_only, insert])).rows[("s", "t")].column_types == [("id", "int"), ("a", "int")]
    assert both.rows[("s", "t")].defines_columns
    alone = finish(task_part([key_only]))
    assert not alone.rows[("s", "t")].defines_columns
    assert finish(task_part([full_delete])).rows[("s", "t")].defines_columns


def test_the_columns_updates_changed_tell_whether_a_key_may_have_moved():
    """Only an update whose old image changed a key column moves its row: the merge explodes such updates into
    a delete of the old key and a write of the new one, and skips that work for a table none of whose updates
    did (TiCDC splits key-changing updates itself by default). Names are merged case-insensitively, across tasks,
    and a column renamed in the run counts under each of its names."""
    from ticdc_lakehouse.iceberg.columns import TargetColumn
    from ticdc_lakehouse.merge.changes import key_changes_possible

    types = {"id": "int", "Price": "decimal", "note": "varchar"}
    full = {"id": "1", "Price": "1.00", "note": "a"}
    first = task_part([
        row("s", "t", 10, full, types),
        row("s", "t", 20, {**full, "Price": "2.00"}, types, op="U", before=full),  # the price changed
        row("s", "t", 30, None, types, op="D", before=full),  # a delete's image is no change
        row("s", "moved", 10, {**full, "id": "2"}, types, op="U", before=full),  # the key changed
    ])
    second = task_part([row("s", "t", 40, {**full, "note": "b"}, types, op="U", before={**full, "note": "a"})])
    param = StatsParam()
    stats = finish(param.addInPlace(param.addInPlace(param.zero(StatsPart()), first), second))
    assert stats.rows[("s", "t")].changed_by_updates == {"price", "note"}
    assert stats.rows[("s", "moved")].changed_by_updates == {"id"}

    keys = [TargetColumn("ID", "int", "int")]
    assert not key_changes_possible(keys, stats.rows[("s", "t")].changed_by_updates)
    assert key_changes_possible(keys, stats.rows[("s", "moved")].changed_by_updates)
    assert key_changes_possible(keys, None)  # not known: the merge checks every update
    # the key was called "ref" and then "code" before it became "id": a change of "ref" moved a row
    renames = [(5, "ref", "code"), (6, "code", "id")]
    assert key_changes_possible(keys, frozenset({"ref"}), renames)
    assert not key_changes_possible(keys, frozenset({"note"}), renames)
