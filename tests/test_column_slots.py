"""Tables of different columns as slots of one frame (merge/column_slots.py): which column takes which slot, and
a frame of slots types, checks and collapses each table's changes exactly as the table's own change set does."""

from __future__ import annotations

import re

import pytest

from tests.test_changes import frame
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, RowChange
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.changes import change_set, tables_change_set
from ticdc_lakehouse.merge.column_slots import always_sent_slots, packed, slot_frame
from ticdc_lakehouse.merge.table_events import TABLE_INDEX, TableRange

KEY = TargetColumn("id", "int", "int", True)
#: three tables of their own columns: shared types (a DECIMAL in each of a and b, twice in b), an ENUM and a SET,
#: bytes, datetimes, and a name (``at``) of two types in two tables
TABLES = {
    "a": [KEY, TargetColumn("price", "decimal(6,2)", "decimal(6,2)"),
          TargetColumn("state", "string", "enum('new','paid')"), TargetColumn("tags", "string", "set('a','b','c')"), TargetColumn("raw", "binary", "blob"),
          TargetColumn("at", "timestamp_ntz", "datetime")],
    "b": [KEY, TargetColumn("note", "string", "varchar(9)"), TargetColumn("cost", "decimal(6,2)", "decimal(6,2)"),
          TargetColumn("other", "decimal(6,2)", "decimal(6,2)")],
    "c": [TargetColumn("at", "date", "date"), KEY, TargetColumn("n", "bigint", "bigint")],
}
TYPES = {"a": {"id": "int", "price": "decimal", "state": "enum", "tags": "set", "raw": "blob", "at": "datetime"},
         "b": {"id": "int", "note": "varchar", "cost": "decimal", "other": "decimal"},
         "c": {"at": "date", "id": "int", "n": "bigint"}}


def test_keys_take_the_first_slots_and_each_other_column_the_next_slot_of_its_type_in_its_table():
    slots = slot_frame([(TABLES["a"], [KEY]), (TABLES["b"], [KEY])])
    kinds = [(slot.spark_type, slot.mysql_type) for slot in slots.columns]
    assert kinds[0] == ("int", "int") and slots.keys == slots.columns[:1] and slots.keys[0].required
    # a's price and b's cost share the first decimal(6,2) slot; b's other takes a second one
    assert kinds.count(("decimal(6,2)", "decimal(6,2)")) == 2
    names = dict(zip(("a", "b"), slots.names))
    assert [n for n in names["a"] if n] == ["id", "price", "state", "tags", "raw", "at"]
    assert [n for n in names["b"] if n] == ["id", "cost", "note", "other"]  # slots first seen first
    assert names["a"].index("price") == names["b"].index("cost")
    assert len(slots.columns) == 8  # id, 2 decimals, enum, set, blob, datetime, varchar
    assert all(slot.name_from and slot.name != slot.name_from for slot in slots.columns)
    # each table's columns in its own order, by slot
    assert slots.slots_of(1, ["other", "id"]) == (slots.columns[names["b"].index("other")].name, slots.keys[0].name)
    with pytest.raises(ValueError, match="no slot"):
        slots.slots_of(1, ["price"])
    # plain strings share slots whatever their MySQL type (no text of them is ever a problem); members do not
    texts = slot_frame([([KEY, TargetColumn("note", "string", "varchar(9)")], [KEY]),
                        ([KEY, TargetColumn("body", "string", "text"), TargetColumn("e", "string", "enum('x')")],
                         [KEY])])
    assert len(texts.columns) == 3 and texts.names[0][1] == "note" and texts.names[1][1] == "body"
    with pytest.raises(ValueError, match="same signatures"):
        slot_frame([(TABLES["a"], [KEY]), (TABLES["c"], [TargetColumn("n", "bigint", "bigint", True)])])


def test_tables_of_varied_columns_are_cut_into_frames_of_few_slots_similar_tables_together():
    def table(*types):
        return [KEY, *[TargetColumn(f"c{i}", t, t) for i, t in enumerate(types)]], [KEY]

    tables = [table("int", "date"), table("double", "double", "double"), table("int", "int", "date"),
              table("double", "double"), table(*["bigint"] * 6), table("date", "int")]
    frames = packed(tables, max_slots=4)
    assert sorted(i for frame in frames for i in frame) == list(range(len(tables)))
    assert [4] in frames  # wider than the bound: a frame of its own
    for frame in frames:
        assert frame == [4] or len(slot_frame([tables[i] for i in frame]).columns) <= 4, frame
    together = {tuple(sorted(frame)) for frame in frames}
    assert (1, 3) in together and (0, 2, 5) in together  # the doubles' tables, the int-and-date ones
    assert [sorted(frame) for frame in packed(tables)] == [list(range(len(tables)))]  # the default bound: one


def event(table, ts, op, after=None, before=None, offset=0):
    return RowChange("s", table, ts, op, after, before, ("id",), dict(TYPES[table]), Position("k", offset % 2, offset))


#: each table's changes: inserts, an update, a replay, a delete, zero dates and enum indexes
EVENTS = [
    event("a", 10, INSERT, {"id": "1", "price": "9.99", "state": "2", "tags": "5", "raw": "AP8=",
                            "at": "2026-01-02 03:04:05"}, offset=1),
    event("a", 20, UPDATE, {"id": "1", "price": "1.50", "state": "1", "tags": "0", "raw": None, "at": None},
          {"price": "9.99", "state": "2"}, offset=2),
    event("a", 30, INSERT, {"id": "2", "price": "0.01", "state": "0", "tags": "7", "raw": "",
                            "at": "0000-00-00 00:00:00"}, offset=3),
    event("b", 11, INSERT, {"id": "1", "note": "x", "cost": "10.00", "other": "-3.5"}, offset=4),
    event("b", 12, INSERT, {"id": "2", "note": None, "cost": "2", "other": "0"}, offset=5),
    event("b", 21, DELETE, None, {"id": "2", "note": None, "cost": "2", "other": "0"}, offset=6),
    event("b", 21, UPDATE, {"id": "1", "note": "y", "cost": "10.00", "other": "-3.5"}, {"note": "x"}, offset=7),
    event("b", 21, UPDATE, {"id": "1", "note": "y", "cost": "10.00", "other": "-3.5"}, {"note": "x"}, offset=7),
    event("c", 15, INSERT, {"at": "2026-02-03", "id": "1", "n": "9223372036854775807"}, offset=8),
    event("c", 16, INSERT, {"at": "0000-00-00", "id": "3", "n": "-1"}, offset=9),
]


def _slot_rows(spark, events, tables=("a", "b", "c"), always_sent=None) -> dict[str, list[dict]]:
    """Each table's rows of one frame of slots over ``events``, under its own column names (``always_sent``: per
    table, see ``changes.partial_positions``; default: no updates carried only some columns)."""
    slots = slot_frame([(TABLES[t], [KEY]) for t in tables])
    ranges = [TableRange("s", t, 0, 1000, slots.names[i]) for i, t in enumerate(tables)]
    sent = always_sent_slots(slots, [(always_sent or {}).get(t) for t in tables])
    out = tables_change_set(frame(spark, events), ranges, slots.columns, slots.keys, sent, False, 2)
    result = {}
    for i, t in enumerate(tables):
        names = [c.name for c in TABLES[t]]
        own = out.filter(out[TABLE_INDEX] == i).select(
            "_op", "_commit_ts", *[out[s].alias(n) for s, n in zip(slots.slots_of(i, names), names)])
        result[t] = sorted((r.asDict() for r in own.collect()), key=lambda r: r["id"])
    return result


def _own_rows(spark, events, table, always_sent=None) -> list[dict]:
    out = change_set(frame(spark, events), "s", table, 0, 1000, TABLES[table], [KEY], always_sent, keys_move=False)
    out = out.select("_op", "_commit_ts", *[c.name for c in TABLES[table]])
    return sorted((r.asDict() for r in out.collect()), key=lambda r: r["id"])


@pytest.mark.spark
def test_a_frame_of_slots_gives_each_table_exactly_its_own_change_set(spark):
    slotted = _slot_rows(spark, EVENTS)
    for table in TABLES:
        assert slotted[table] == _own_rows(spark, EVENTS, table), table
    assert [r["_op"] for r in slotted["b"]] == [UPDATE, DELETE] and slotted["b"][0]["note"] == "y"
    assert slotted["a"][0]["state"] == "new" and slotted["a"][1]["at"] is None and slotted["c"][1]["at"] is None


@pytest.mark.spark
def test_updates_that_carry_some_columns_add_up_in_a_frame_of_slots_as_in_their_table_s_own(spark):
    """Partial images (a protocol sending only the changed columns): a key's later updates carry forward the
    columns its earlier changes sent, in each table, whichever slots the other tables use."""
    partial = [
        event("a", 40, UPDATE, {"id": "1", "price": "2.00"}, {"price": "1.50"}, offset=30),
        event("a", 41, UPDATE, {"id": "1", "state": "2"}, {"state": "1"}, offset=31),
        event("a", 42, INSERT, {"id": "5", "price": "3.00", "state": "1", "tags": "1", "raw": None, "at": None},
              offset=32),
        event("a", 43, UPDATE, {"id": "5", "tags": "2"}, {"tags": "1"}, offset=33),
        event("b", 44, UPDATE, {"id": "1", "other": "7"}, {"other": "-3.5"}, offset=34),
    ]
    sent = {"a": frozenset({"id"}), "b": frozenset({"id", "other"}), "c": None}
    slotted = _slot_rows(spark, EVENTS + partial, always_sent=sent)
    for table in TABLES:
        assert slotted[table] == _own_rows(spark, EVENTS + partial, table, sent[table]), table
    five = next(r for r in slotted["a"] if r["id"] == 5)
    assert five["state"] == "new" and five["tags"] == "b" and str(five["price"]) == "3.00"


@pytest.mark.spark
@pytest.mark.parametrize("table, column, bad", [("b", "other", "123456.789"), ("a", "state", "7"),
                                                ("c", "n", "9223372036854775808"), ("c", "id", "x1"),
                                                ("c", "at", "2026-02-30")])
def test_a_value_a_table_cannot_store_fails_the_frame_naming_the_table_s_column(spark, table, column, bad):
    """The failure names the table's own column and type (the flush then sets the value aside table by table),
    never the slot; a NULL in a slot the table does not use is no NULL key."""
    good = next(e for e in EVENTS if e.table == table and e.op == INSERT)
    broken = [*EVENTS, event(table, 40, INSERT, {**good.after, "id": "9", column: bad}, offset=20)]
    described = next(c.mysql_type for c in TABLES[table] if c.name == column)
    with pytest.raises(Exception, match=rf"lakehouse-invalid-value: column {column} \({re.escape(described)}"
                                        rf"\): value {re.escape(bad)}"):
        _slot_rows(spark, broken)
