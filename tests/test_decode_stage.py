"""The decode task of the merge's first stage (merge/decode_stage.py), run as Spark runs it, without Spark."""

from __future__ import annotations

import gc

import pyarrow as pa

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA
from ticdc_lakehouse.landing.segments import LANDED_SCHEMA
from ticdc_lakehouse.merge.decode_stage import DECODE_GC_THRESHOLDS, decode_batches
from ticdc_lakehouse.core.model import Position, ResolvedEvent, RowChange


def landed_batch(count: int) -> pa.RecordBatch:
    return interleaved_landed_batch(count, ("t",), schema="s")


def interleaved_landed_batch(count: int, tables: tuple[str, ...], schema: str = "Shop") -> pa.RecordBatch:
    """``count`` inserts spread over ``tables`` round robin (as a partition interleaves its tables), then a
    resolved event and a record no decoder reads, as a landed segment holds them."""
    encoder = OpenProtocolEncoder()
    records = [encoder.encode(RowChange(schema, tables[i % len(tables)], 10 + i, "I", {"id": str(i)}, None, ("id",),
                                        {"id": "int"}, Position("k", 0, i))) for i in range(count)]
    records.append(encoder.encode(ResolvedEvent(10 + count, Position("k", 0, count))))
    records.append((b"not open protocol", b"{"))
    return pa.RecordBatch.from_pydict(
        {"topic": ["k"] * len(records), "partition": [0] * len(records), "offset": list(range(len(records))),
         "timestamp": [None] * len(records), "key": [k for k, _ in records], "value": [v for _, v in records],
         "headers": [[]] * len(records)},
        schema=LANDED_SCHEMA,
    )


def test_a_task_decodes_every_record_in_bounded_batches_and_restores_the_collector():
    default = gc.get_threshold()
    seen_thresholds = []
    run = decode_batches("open", DecoderOptions())
    batches = []
    for batch in run(iter([landed_batch(5000), landed_batch(10)])):
        seen_thresholds.append(gc.get_threshold())
        batches.append(batch)
    assert gc.get_threshold() == default
    assert set(seen_thresholds) == {DECODE_GC_THRESHOLDS}
    assert all(b.schema == EVENT_ARROW_SCHEMA and b.num_rows <= 4096 + 2 for b in batches)
    kinds = [k for b in batches for k in b.column("kind").to_pylist()]
    assert kinds.count("row") == 5010 and kinds.count("resolved") == 2 and kinds.count("error") == 2


def test_records_before_a_partitions_restart_offset_are_not_decoded_again():
    run = decode_batches("open", DecoderOptions(), start_offsets={("k", 0): 7, ("other", 0): 10_000})
    events = [e for b in run(iter([landed_batch(10)])) for e in b.to_pylist()]
    assert sorted(e["offset"] for e in events if e["kind"] == "row") == [7, 8, 9]
    assert [e["kind"] for e in events if e["offset"] >= 10] == ["resolved", "error"]


def test_a_local_segment_is_shared_out_by_row_group_and_one_on_object_storage_whole(tmp_path):
    import pyarrow.parquet as pq

    from ticdc_lakehouse.landing.quarantine import segment_problem
    from ticdc_lakehouse.landing.segments import Segment
    from ticdc_lakehouse.landing.storage import ObjectPath
    from ticdc_lakehouse.merge.decode_stage import SegmentPiece, read_pieces, segment_pieces

    local = tmp_path / "0-30.parquet"
    pq.write_table(pa.Table.from_batches([landed_batch(28)]), local, row_group_size=10)
    remote = ObjectPath("bucket/landing/0-30.parquet")
    counted: dict[str, int] = {}  # as the landing check counts them, reading each footer once
    assert segment_problem(Segment("k", 0, 0, 30, local), counted) is None
    pieces = segment_pieces([local, remote], counted)
    assert pieces == [SegmentPiece(local, (0,)), SegmentPiece(local, (1,)), SegmentPiece(local, (2,)),
                      SegmentPiece(remote)]
    assert segment_pieces([local], {}) == [SegmentPiece(local)]  # not counted: read whole
    numbers = pa.RecordBatch.from_pydict({"id": [2, 0, 1]})
    offsets = [o for b in read_pieces(pieces, iter([numbers])) for o in b.column("offset").to_pylist()]
    assert offsets == [*range(20, 30), *range(0, 20)]  # each task reads the row groups it got, whole


def test_a_segment_a_task_cannot_read_is_named_in_its_error(tmp_path):
    import pytest

    from ticdc_lakehouse.landing.quarantine import UNREADABLE_SEGMENT
    from ticdc_lakehouse.merge.decode_stage import SegmentPiece, read_pieces

    broken = tmp_path / "0-10.parquet"
    broken.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(OSError, match=f"^{UNREADABLE_SEGMENT} {broken}: "):
        list(read_pieces([SegmentPiece(broken)], iter([pa.RecordBatch.from_pydict({"id": [0]})])))


def _runs(names: list) -> list:
    """The names in the order their runs of equal neighbours come."""
    return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]


def test_a_task_hands_its_events_over_grouped_by_table_case_insensitively():
    """The run caches the decoded events as they come, and a change set skips the cached batches whose table
    names cannot match: each table's events come next to each other (names matched as TiDB does, without case),
    events of no table (resolved, undecodable) last, every event once, in batches of at most 4096."""
    tables = ("orders", "Customers", "ORDER_items", "customers_1")
    run = decode_batches("open", DecoderOptions())
    batches = list(run(iter([interleaved_landed_batch(9000, tables)])))
    assert all(b.schema == EVENT_ARROW_SCHEMA and b.num_rows <= 4096 for b in batches)
    events = [e for b in batches for e in b.to_pylist()]
    assert sorted(e["offset"] for e in events) == list(range(9002))
    names = [e["table_name"].lower() if e["table_name"] else None for e in events]
    assert _runs(names) == ["customers", "customers_1", "order_items", "orders", None]
    assert [e["kind"] for e in events[-2:]] == ["resolved", "error"]


def test_a_task_holds_a_bounded_number_of_events_to_group_them(monkeypatch):
    """A task groups at most ``GROUP_EVENTS`` events at a time: it hands them over before it reads on, so its memory
    does not grow with its segments; each group is grouped by table, and nothing is lost between groups."""
    from ticdc_lakehouse.merge import decode_stage

    monkeypatch.setattr(decode_stage, "GROUP_EVENTS", 4096)
    tables = ("a", "b", "c")
    consumed = []

    def landed():
        for n in range(4):
            consumed.append(n)
            yield interleaved_landed_batch(3000, tables)

    run = decode_batches("open", DecoderOptions())
    outputs = []
    for batch in run(landed()):
        outputs.append((len(consumed), batch))
    assert outputs[0][0] < 4  # the first events came out before the last segment was read
    events = [e for _, b in outputs for e in b.to_pylist()]
    assert len(events) == 4 * 3002
    assert len(_runs([e["table_name"] for e in events])) <= 4 * (len(tables) + 1) + len(tables)


def test_grouping_nothing_gives_one_empty_batch_of_the_event_schema():
    from ticdc_lakehouse.merge.decode_stage import grouped_by_table

    [batch] = list(grouped_by_table([]))
    assert batch.num_rows == 0 and batch.schema == EVENT_ARROW_SCHEMA
