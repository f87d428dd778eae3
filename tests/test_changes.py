"""The pure DataFrame transforms of a table's change set (merge/changes.py), on small frames."""

from __future__ import annotations

import re

import pytest

from ticdc_lakehouse.core.events_arrow import EVENT_SPARK_SCHEMA, event_to_row
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.changes import change_set, names_from_numbers_sql, typed_value
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, Position, RowChange

pytestmark = pytest.mark.spark

COLUMNS = [
    TargetColumn("id", "int", "int"),
    TargetColumn("price", "decimal(6,2)", "decimal(6,2)"),
    TargetColumn("state", "string", "enum('new','paid')"),
    TargetColumn("tags", "string", "set('a','b','c')"),
    TargetColumn("raw", "binary", "blob"),
    TargetColumn("at", "timestamp_ntz", "datetime"),
]
TYPES = {"id": "int", "price": "decimal", "state": "enum", "tags": "set", "raw": "blob", "at": "datetime"}


def event(ts, op, after=None, before=None, offset=0, partition=0, types=TYPES):
    return RowChange("s", "t", ts, op, after, before, ("id",), dict(types), Position("k", partition, offset))


def frame(spark, events):
    from pyspark.sql.types import _parse_datatype_string

    rows = []
    for e in events:
        row = event_to_row(e)
        for name in ("after", "before"):
            row[name] = dict(row[name]) if row[name] is not None else None
        rows.append(row)
    return spark.createDataFrame(rows, _parse_datatype_string(EVENT_SPARK_SCHEMA))


def rows(spark, events, after_ts=0, upto_ts=1000):
    keys = [COLUMNS[0]]
    out = change_set(frame(spark, events), "s", "t", after_ts, upto_ts, COLUMNS, keys)
    return {r["id"]: r.asDict() for r in out.collect()}


def test_last_change_per_key_wins_and_values_are_typed(spark):
    full = {"id": "1", "price": "1.50", "state": "2", "tags": "5", "raw": "AP8=", "at": "2026-01-02 03:04:05"}
    result = rows(spark, [
        event(10, INSERT, {**full, "price": "9.99"}, offset=1),
        event(20, UPDATE, full, {**full, "price": "9.99"}, offset=2),
        event(20, UPDATE, full, {**full, "price": "9.99"}, offset=3),  # a replay
        event(30, INSERT, {**full, "id": "2", "state": "0", "at": "0000-00-00 00:00:00"}, offset=4),
    ])
    one = result[1]
    assert one["_op"] == UPDATE and str(one["price"]) == "1.50" and one["state"] == "paid" and one["tags"] == "a,c"
    assert bytes(one["raw"]) == b"\x00\xff" and str(one["at"]) == "2026-01-02 03:04:05"
    assert result[2]["state"] == "" and result[2]["at"] is None  # enum index 0 and MySQL zero dates


def test_key_changing_update_becomes_delete_plus_insert(spark):
    old = {"id": "1", "price": "1.00", "state": "1", "tags": "0", "raw": None, "at": None}
    new = {**old, "id": "7"}
    result = rows(spark, [event(10, UPDATE, new, old)])
    assert result[1]["_op"] == DELETE
    assert result[7]["_op"] == UPDATE and str(result[7]["price"]) == "1.00"


def test_at_one_ts_a_write_beats_a_delete_of_the_same_key(spark):
    # row A moved to key 2 deletes key 1 while row B moves onto key 1, in one transaction, other partitions
    b_row = {"id": "1", "price": "2.00", "state": "1", "tags": "1", "raw": None, "at": None}
    result = rows(spark, [
        event(50, INSERT, b_row, partition=1, offset=9),
        event(50, DELETE, None, {"id": "1"}, partition=0, offset=3),
    ])
    assert result[1]["_op"] == INSERT and str(result[1]["price"]) == "2.00"


def test_names_in_the_wire_form_and_absent_columns_are_flagged(spark):
    named = {**TYPES, "state": "enum('new','paid')", "tags": "set('a','b','c')"}
    result = rows(spark, [event(5, UPDATE, {"id": "3", "state": "new", "tags": "b,c"}, types=named)])
    three = result[3]
    assert three["state"] == "new" and three["tags"] == "b,c"
    flags = {k: v for k, v in three.items() if k.startswith("_present_")}
    assert flags == {"_present_1": False, "_present_2": True, "_present_3": True, "_present_4": False,
                     "_present_5": False}


def test_only_the_range_after_the_watermark_is_taken(spark):
    base = {"id": "4", "price": "1.00", "state": "1", "tags": "0", "raw": None, "at": None}
    result = rows(spark, [event(10, INSERT, base), event(30, UPDATE, {**base, "price": "3.00"}, base)],
                  after_ts=10, upto_ts=20)
    assert result == {}


def test_partial_updates_of_a_key_add_up(spark):
    """Changes that each carry only some columns: every column takes its latest sent value, a NULL that was sent
    counts as sent, and a column no change sent stays flagged absent (the MERGE keeps the lake's value)."""
    result = rows(spark, [
        event(10, UPDATE, {"id": "1", "price": "1.00"}),
        event(20, UPDATE, {"id": "1", "state": "2"}),
        event(30, UPDATE, {"id": "1", "price": None}),
    ])
    one = result[1]
    assert one["_op"] == UPDATE and one["price"] is None and one["state"] == "paid"
    assert one["_present_1"] and one["_present_2"] and not one["_present_3"] and not one["_present_5"]


def test_a_key_inserted_in_the_run_keeps_what_its_partial_updates_did_not_send(spark):
    full = {"id": "2", "price": "5.00", "state": "1", "tags": "1", "raw": None, "at": "2026-01-02 03:04:05"}
    result = rows(spark, [event(10, INSERT, full, offset=1), event(20, UPDATE, {"id": "2", "price": "6.00"}, offset=2)])
    two = result[2]
    assert two["_op"] == UPDATE and str(two["price"]) == "6.00" and two["state"] == "new" and two["tags"] == "a"
    assert str(two["at"]) == "2026-01-02 03:04:05" and all(v for k, v in two.items() if k.startswith("_present_"))


def test_changes_before_a_delete_do_not_reach_the_row_inserted_after_it(spark):
    first = {"id": "3", "price": "1.00", "state": "1", "tags": "1", "raw": "AP8=", "at": None}
    again = {**first, "price": "2.00", "raw": None}
    result = rows(spark, [
        event(10, UPDATE, {"id": "3", "raw": "AP8=", "tags": "4"}),
        event(20, DELETE, None, first),
        event(30, INSERT, {k: v for k, v in again.items() if k != "tags"}),
        event(40, UPDATE, {"id": "3", "state": "2"}),
    ])
    three = result[3]
    assert str(three["price"]) == "2.00" and three["raw"] is None and three["state"] == "paid"
    assert not three["_present_3"] and three["tags"] is None  # the update before the delete sent it: not kept
    deleted = rows(spark, [event(10, UPDATE, {"id": "3", "tags": "4"}), event(20, DELETE, None, first)])
    assert deleted[3]["_op"] == DELETE


def test_an_old_image_without_the_key_is_not_a_key_change(spark):
    """TiCDC's only-output-updated-columns (and the decode stage, which keeps only changed columns of an old
    image) leave unchanged key columns out of ``before``: the update stays an update of its key."""
    full = {"id": "5", "price": "2.00", "state": "1", "tags": "0", "raw": None, "at": None}
    result = rows(spark, [event(10, UPDATE, full, {"price": "1.00"})])
    assert list(result) == [5] and result[5]["_op"] == UPDATE and str(result[5]["price"]) == "2.00"


def test_a_delete_is_judged_by_its_key_only(spark):
    """A delete writes no value: its old image's other columns are neither typed nor checked, so an old value the
    table could not store (a DECIMAL(6,2) given more digits) does not stop the row from going; a bad key still
    fails the change set (nothing silent)."""
    from ticdc_lakehouse.merge.value_checks import invalid_events
    from ticdc_lakehouse.merge.table_events import table_rows

    full = {"id": "4", "price": "1.00", "state": "1", "tags": "0", "raw": None, "at": None}
    wide = {**full, "price": "123456.789"}
    events = [event(10, INSERT, full, offset=1), event(20, DELETE, None, wide, offset=2)]
    result = rows(spark, events)
    assert result[4]["_op"] == DELETE and result[4]["price"] is None
    assert invalid_events(table_rows(frame(spark, events), "s", "t", 0, 1000), COLUMNS, [COLUMNS[0]]).count() == 0
    with pytest.raises(Exception, match="lakehouse-invalid-value: column id"):
        rows(spark, [event(20, DELETE, None, {**wide, "id": "x4"})])


@pytest.mark.parametrize("column, bad", [
    ("price", "123456.789"), ("state", "7"), ("tags", "8"), ("raw", "not*base64"), ("raw", "QUJDRA=a"),
    ("raw", "QUJDR"), ("at", "2026-13-01 00:00:00"),
    ("id", "x1"),
])
def test_a_value_its_column_cannot_store_fails_the_change_set_naming_it(spark, column, bad):
    """Each value is typed and checked in one projection and guarded in the next (``changes.CheckedValue``): a
    value its column cannot store exactly, in an insert or in an update's new image, fails the change set with
    the column and the value, never a NULL or a rounded number."""
    full = {"id": "1", "price": "1.00", "state": "1", "tags": "0", "raw": None, "at": None}
    for events in ([event(10, INSERT, {**full, column: bad})],
                   [event(10, INSERT, full, offset=1), event(20, UPDATE, {**full, column: bad}, full, offset=2)]):
        with pytest.raises(Exception, match=f"lakehouse-invalid-value: column {column} .*{re.escape(bad)}"):
            rows(spark, events)


def test_a_key_change_is_told_from_the_old_image_and_types_both_keys(spark):
    """An update whose old image holds the key moved its row (the decode stage keeps only the changed columns of
    an old image); both keys are typed and checked, the old one even when the update is the last change."""
    old = {"id": "8", "price": "1.00", "state": "1", "tags": "0", "raw": None, "at": None}
    moved = rows(spark, [event(10, INSERT, old, offset=1), event(20, UPDATE, {**old, "id": "9"}, old, offset=2),
                         event(30, UPDATE, {**old, "id": "9", "price": "3.00"}, {**old, "id": "9"}, offset=3)])
    assert moved[8]["_op"] == DELETE and moved[9]["_op"] == UPDATE and str(moved[9]["price"]) == "3.00"
    with pytest.raises(Exception, match="lakehouse-invalid-value: column id"):
        rows(spark, [event(20, UPDATE, {**old, "id": "9"}, {**old, "id": "eight"})])


def test_columns_every_event_carried_get_no_presence_flag(spark):
    """Full row images (TiCDC's default): no column needs the MERGE's keep-the-lake's-value branch, so the change
    set carries no flag for them (each would cost a map lookup per event); the others keep theirs."""
    full = {"id": "5", "price": "2.50", "state": "2", "tags": "1", "raw": None, "at": "2026-01-02 03:04:05"}
    events = frame(spark, [event(10, INSERT, full), event(20, UPDATE, {**full, "price": "3.00"}, full)])
    every = frozenset(c.name for c in COLUMNS)
    out = change_set(events, "s", "t", 0, 1000, COLUMNS, [COLUMNS[0]], every)
    assert not [c for c in out.columns if c.startswith("_present_")]
    [five] = out.collect()
    assert five["_op"] == UPDATE and str(five["price"]) == "3.00" and five["state"] == "paid"
    some = change_set(events, "s", "t", 0, 1000, COLUMNS, [COLUMNS[0]], every - {"tags"})
    assert [c for c in some.columns if c.startswith("_present_")] == ["_present_3"]


@pytest.mark.parametrize("descriptor, names", [
    ("enum('new','pa''id')", ["", "new", "pa'id", None, None, None, "paid", "a,b", "", None]),
    ("set('a','b','c')", ["", "a", "b", "a,b", "a,c", "a,b", "paid", "a,b", "", None]),
])
def test_enum_indexes_and_set_bitmasks_become_names_and_names_stay(spark, descriptor, names):
    """One rule for the merge's typing (``typed_value``) and the rewrite of stored numbers (``lakehouse
    create-tables``): index 0 is "", a bitmask its bits' names, an index past the members NULL (the merge fails on
    it instead, naming it: never a silent NULL); a value that is
    not a number, or that the event sent as a name, is kept."""
    from pyspark.sql import functions as F

    raw = ["0", "1", "2", "3", "5", "99", "paid", "a,b", "", None]
    frame = spark.createDataFrame([({"v": v}, flag) for v, flag in zip(raw, [None] * len(raw))],
                                  "m map<string,string>, named array<string>")
    column = TargetColumn("v", "string", descriptor)
    limit = 2 if descriptor.startswith("enum") else 7  # the greatest index / bitmask of the members
    past = [v is not None and v.isdigit() and int(v) > limit for v in raw]  # past the members
    kept = frame.filter(~F.col("m")["v"].isin([v for v, p in zip(raw, past) if p]) | F.col("m")["v"].isNull())
    typed = kept.select(typed_value("m", F.col("named"), column).alias("v")).collect()
    assert [r["v"] for r in typed] == [name for name, p in zip(names, past) if not p]
    for value in [v for v, p in zip(raw, past) if p]:  # never a silent NULL: the merge fails, naming the value
        with pytest.raises(Exception, match=f"lakehouse-invalid-value: column v .*value {value} "):
            frame.filter(F.col("m")["v"] == value).select(typed_value("m", F.col("named"), column)).collect()
    named = frame.select(typed_value("m", F.array(F.lit("v")), column).alias("v")).collect()
    assert [r["v"] for r in named] == raw  # sent as names (Simple, Canal-JSON...): never read as numbers
    base, _, _ = descriptor.partition("(")
    members = ["new", "pa'id"] if base == "enum" else ["a", "b", "c"]
    rewritten = frame.select(F.expr(names_from_numbers_sql("m['v']", base, members)).alias("v")).collect()
    assert [r["v"] for r in rewritten] == names


def test_set_bitmasks_past_bigint_and_enum_indexes_past_int_under_ansi(spark):
    """A SET of 64 members has bitmasks up to 2^64-1 (past BIGINT): every bit is read, the top one too, with no
    ANSI cast error; an ENUM index too long for INT is past the members like any other: refused by name (it
    becomes a dead letter), never a silent NULL."""
    from pyspark.sql import functions as F

    members = [f"m{i}" for i in range(64)]
    frame = spark.createDataFrame([({"v": str(2 ** 63)},), ({"v": str(2 ** 64 - 1)},), ({"v": str(2 ** 63 + 5)},)],
                                  "m map<string,string>")
    column = TargetColumn("v", "string", "set(" + ",".join(f"'{m}'" for m in members) + ")")
    typed = [r["v"] for r in frame.select(typed_value("m", F.array(), column).alias("v")).collect()]
    assert typed == ["m63", ",".join(members), "m0,m2,m63"]
    enum = TargetColumn("v", "string", "enum('a','b')")
    huge = spark.createDataFrame([({"v": "99999999999999999999"},)], "m map<string,string>")
    with pytest.raises(Exception, match="lakehouse-invalid-value: column v .*99999999999999999999"):
        huge.select(typed_value("m", F.array(), enum).alias("v")).collect()


def test_a_column_renamed_ahead_of_older_rows_reads_their_values_under_its_new_name(spark):
    """``change_set(renames=...)``: events below a RENAME COLUMN applied ahead of them hold the column under its
    old name (``Old``, any case); they are typed by the new name, later events as they are."""
    renamed = [TargetColumn("id", "int", "int"), TargetColumn("note", "string", "varchar(9)")]
    events = [
        event(10, INSERT, {"id": "1", "Old": "a"}, types={"id": "int", "Old": "varchar"}),
        event(11, INSERT, {"id": "2", "Old": "b"}, types={"id": "int", "Old": "varchar"}),
        event(30, UPDATE, {"id": "2", "note": "b2"}, {"id": "2", "note": "b"}, types={"id": "int", "note": "varchar"}),
        event(31, INSERT, {"id": "3", "note": "c"}, types={"id": "int", "note": "varchar"}),
    ]
    out = change_set(frame(spark, events), "s", "t", 0, 100, renamed, renamed[:1], renames=((20, "old", "note"),))
    assert {r["id"]: r["note"] for r in out.collect()} == {1: "a", 2: "b2", 3: "c"}


def test_a_change_set_without_key_changes_is_the_same_without_the_key_change_step(spark):
    """``keys_move=False`` (no update of the run changed a key column, see ``staged_stats``) skips reading and
    exploding old keys: the change set is the same as with it."""
    full = {"id": "1", "price": "1.00", "state": "1", "tags": "0", "raw": "AP8=", "at": None}
    events = frame(spark, [
        event(10, INSERT, full, offset=1),
        event(20, UPDATE, {**full, "price": "2.00"}, {"price": "1.00"}, offset=2),
        event(30, INSERT, {**full, "id": "2"}, offset=3),
        event(40, DELETE, None, {**full, "id": "2"}, offset=4),
        event(50, INSERT, {**full, "id": "3", "tags": "3"}, offset=5),
    ])
    keys = [COLUMNS[0]]

    def collected(keys_move):
        out = change_set(events, "s", "t", 0, 1000, COLUMNS, keys, keys_move=keys_move)
        return sorted((tuple(r) for r in out.collect()), key=lambda r: str(r))

    assert collected(False) == collected(True)
    assert len(collected(False)) == 3


def test_the_parser_warm_up_parses_what_a_change_set_types_with(spark):
    """``warm_sql_parser`` (run beside a fresh driver's worker start) parses the typing's and the checks' SQL of
    its column types with the session's own parser, and only parses."""
    from ticdc_lakehouse.merge import changes

    parsed = []
    parser = spark._jsparkSession.sessionState().sqlParser()

    class Recording:
        def __init__(self, session):
            self._session = session

        def sessionState(self):
            return self

        def sqlParser(self):
            return self

        def parseExpression(self, text):
            parsed.append(text)
            return parser.parseExpression(text)  # Spark's own parser accepts every text

    class Session:
        _jsparkSession = Recording(spark)

    changes.warm_sql_parser(Session())
    # the texts the typing of those columns is built from (``checked_text``) are among them
    from ticdc_lakehouse.merge.value_checks import raw_sql, text_problem_sql, try_cast_sql

    for column in changes._WARM_COLUMNS:
        raw = raw_sql("after", column)
        assert {raw, try_cast_sql(raw, column.spark_type), text_problem_sql(raw, column)} <= set(parsed)
    assert any("element_at" in text for text in parsed)  # the ENUM's names from numbers
    changes.warm_sql_parser(spark)  # and on the session itself
