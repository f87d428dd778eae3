"""The decoded-event record batches (events_arrow.py): the hot column builder against the plain per-event one."""

from __future__ import annotations

import pyarrow as pa

from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA, event_to_row, events_to_batch
from ticdc_lakehouse.core.model import (
    ColumnSchema,
    DDLEvent,
    DecodeFailure,
    Position,
    ResolvedEvent,
    RowChange,
    TableSchema,
)


def mixed_events():
    schema = TableSchema("shop", "orders", (ColumnSchema("id", "bigint", False),), ("id",), version=3)
    return [
        RowChange("shop", "orders", 10, "I", {"id": "1", "note": None}, None, ("id",),
                  {"id": "bigint", "note": "varchar"}, Position("t", 0, 1)),
        ResolvedEvent(11, Position("t", 0, 2)),
        RowChange("shop", "orders", 12, "U", {"id": "1", "note": "é"}, {"id": "1", "note": None}, ("id",),
                  {"id": "bigint", "note": "varchar"}, Position("t", 0, 3, 1), schema_version=3),
        DDLEvent("shop", "orders", 13, "CREATE TABLE orders (id bigint primary key)", "CREATE_TABLE",
                 Position("t", 0, 4), table_schema=schema, is_bootstrap=True),
        DecodeFailure("bad", Position("t", 1, 5), key=b"k", value=b"\x00v"),
        RowChange("shop", "orders", 14, "D", None, {"id": "1"}, ("id",), {"id": "bigint"}, Position("t", 1, 6)),
    ]


def test_a_batch_mixing_every_kind_equals_the_per_event_rows():
    events = mixed_events()
    batch = events_to_batch(events)
    expected = pa.RecordBatch.from_pylist([event_to_row(e) for e in events], schema=EVENT_ARROW_SCHEMA)
    assert batch.schema == EVENT_ARROW_SCHEMA
    assert batch.to_pylist() == expected.to_pylist()
    assert [r["kind"] for r in batch.to_pylist()] == ["row", "resolved", "row", "ddl", "error", "row"]


def test_rows_only_and_empty_batches():
    rows = [e for e in mixed_events() if isinstance(e, RowChange)]
    assert events_to_batch(rows).to_pylist() == [event_to_row(e) for e in rows]
    assert events_to_batch([]).num_rows == 0


def test_only_enum_and_set_columns_sent_by_name_are_listed_per_row():
    def row(types):
        return RowChange("s", "t", 1, "I", {name: "1" for name in types}, None, ("id",), types, Position("t", 0, 1))

    by_name = {"id": "int", "e": "enum('a','b')", "s": "set('x')", "v": "varchar"}
    by_index = {"id": "int", "e": "enum", "s": "set"}
    shared = dict(by_name)  # decoders share one dict among a layout's rows: the cache must not mix them up
    batch = events_to_batch([row(by_name), row(by_index), row(shared), row(shared), row({})])
    assert batch.column("named_enums").to_pylist() == [["e", "s"], None, ["e", "s"], ["e", "s"], None]
    assert [event_to_row(row(t))["named_enums"] for t in (by_name, by_index)] == [["e", "s"], None]


def test_an_update_keeps_only_the_changed_columns_of_its_old_image():
    old = {"id": "1", "v": "a", "w": None, "x": "same"}
    update = RowChange("s", "t", 1, "U", {"id": "1", "v": "b", "w": "c", "x": "same"}, old, ("id",),
                       {"id": "int", "v": "varchar", "w": "varchar", "x": "varchar"}, Position("t", 0, 1))
    delete = RowChange("s", "t", 2, "D", None, old, ("id",), update.column_types, Position("t", 0, 2))
    rows = events_to_batch([update, delete]).to_pylist()
    assert dict(rows[0]["before"]) == {"v": "a", "w": None}  # what the update changed, a NULL included
    assert dict(rows[1]["before"]) == old  # a delete's image is its row
    assert update.before == old  # the event itself is left as decoded
