"""The landed-segment layout: names, listing, contiguity, partition counts and atomic streaming writes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ticdc_lakehouse.landing import LandingBusyError
from ticdc_lakehouse.landing.lock import landing_lock
from ticdc_lakehouse.landing.segments import (
    LANDED_SCHEMA,
    LANDED_SPARK_SCHEMA,
    Segment,
    SegmentWriter,
    check_contiguous,
    clean_temp_files,
    known_partitions,
    landed_end,
    landed_topics,
    list_segments,
    parse_segment_name,
    read_partition_count,
    read_partition_payload,
    read_segment,
    segment_path,
    segments_end,
    write_partition_count,
)


def land(root: Path, topic: str, partition: int, start: int, end: int, offsets=()) -> Segment:
    with SegmentWriter(root, "cf", topic, partition, start) as writer:
        for offset in offsets:
            writer.append(offset, 1_700_000_000_000 + offset, b"k%d" % offset, b"v%d" % offset, [("h", b"x")])
        segment = writer.commit(end)
    assert segment is not None
    return segment


def test_segment_path_is_the_documented_layout(tmp_path):
    path = segment_path(tmp_path, "orders", "ticdc-orders", 3, 120, 4567)
    assert path == tmp_path / "orders" / "ticdc-orders" / "3" / "00000000000000000120-00000000000000004567.parquet"
    assert parse_segment_name(path.name) == (120, 4567)
    assert parse_segment_name(".00000000000000000120-00000000000000004567.parquet.tmp") is None
    assert parse_segment_name("_partitions.json") is None


def test_written_segment_has_the_landed_schema_and_records(tmp_path):
    segment = land(tmp_path, "t", 0, 10, 13, offsets=[10, 12])
    assert segment.path == segment_path(tmp_path, "cf", "t", 0, 10, 13)
    table = pq.read_table(segment.path)
    assert table.schema.equals(LANDED_SCHEMA)
    assert pq.ParquetFile(segment.path).metadata.row_group(0).column(0).compression == "ZSTD"
    assert table.to_pylist() == [
        {"topic": "t", "partition": 0, "offset": 10, "timestamp": 1_700_000_000_010, "key": b"k10",
         "value": b"v10", "headers": [{"key": "h", "value": b"x"}]},
        {"topic": "t", "partition": 0, "offset": 12, "timestamp": 1_700_000_000_012, "key": b"k12",
         "value": b"v12", "headers": [{"key": "h", "value": b"x"}]},
    ]


@pytest.mark.spark
def test_spark_reads_segments_with_the_declared_schema_as_it_would_infer_it(spark, tmp_path):
    """The merge passes ``LANDED_SPARK_SCHEMA`` instead of letting Spark infer it (a job of its own): it must
    be exactly what Spark infers, and read the same records, headers and null timestamps included."""
    full = land(tmp_path, "t", 0, 10, 13, offsets=[10, 12])
    with SegmentWriter(tmp_path, "cf", "t", 1, 0) as writer:
        writer.append(0, None, None, None, None)
        bare = writer.commit(1)
    paths = [str(full.path), str(bare.path)]
    inferred = spark.read.parquet(*paths)
    declared = spark.read.schema(LANDED_SPARK_SCHEMA).parquet(*paths)
    assert [(f.name, f.dataType) for f in declared.schema] == [(f.name, f.dataType) for f in inferred.schema]
    rows = sorted(declared.collect(), key=lambda r: (r.partition, r.offset))
    assert rows == sorted(inferred.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.offset, r.timestamp, r.key, [tuple(h) for h in r.headers or []]) for r in rows] == [
        (10, 1_700_000_000_010, b"k10", [("h", b"x")]), (12, 1_700_000_000_012, b"k12", [("h", b"x")]),
        (0, None, None, [])]


def test_nulls_and_no_headers_round_trip(tmp_path):
    with SegmentWriter(tmp_path, "cf", "t", 0, 0) as writer:
        writer.append(0, None, None, None, None)
        writer.append(1, 5, b"", b"", [("empty", None)])
        segment = writer.commit(2)
    rows = read_segment(segment.path).to_pylist()
    assert rows[0] == {"topic": "t", "partition": 0, "offset": 0, "timestamp": None, "key": None, "value": None,
                       "headers": []}
    assert rows[1]["key"] == b"" and rows[1]["headers"] == [{"key": "empty", "value": None}]


def test_a_range_without_records_gets_a_zero_row_file(tmp_path):
    segment = land(tmp_path, "t", 0, 5, 9)
    assert segment.path.is_file()
    table = read_segment(segment.path)
    assert table.num_rows == 0 and table.schema.equals(LANDED_SCHEMA)


def test_an_empty_range_writes_nothing(tmp_path):
    with SegmentWriter(tmp_path, "cf", "t", 0, 7) as writer:
        assert writer.commit(7) is None
    assert list_segments(tmp_path, "cf") == {}
    assert [p.name for p in (tmp_path / "cf" / "t" / "0").iterdir()] == []


def test_large_partitions_stream_in_row_groups(tmp_path):
    with SegmentWriter(tmp_path, "cf", "t", 0, 0, row_group_records=100, row_group_bytes=10**9) as writer:
        for offset in range(250):
            writer.append(offset, offset, None, b"x" * 10)
        segment = writer.commit(250)
    meta = pq.ParquetFile(segment.path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [100, 100, 50]
    with SegmentWriter(tmp_path, "cf", "t", 1, 0, row_group_records=10**9, row_group_bytes=1000) as writer:
        for offset in range(10):
            writer.append(offset, offset, None, b"x" * 500)
        segment = writer.commit(10)
    assert pq.ParquetFile(segment.path).metadata.num_row_groups == 5


def test_nothing_is_visible_before_commit_and_abort_leaves_nothing(tmp_path):
    writer = SegmentWriter(tmp_path, "cf", "t", 0, 0, row_group_records=1, expected_end=3)
    writer.append(0, 1, b"k", b"v")
    assert writer.tmp_path.name == ".00000000000000000000-00000000000000000003.parquet.tmp"
    assert writer.tmp_path.is_file()
    assert list_segments(tmp_path, "cf") == {}
    writer.abort()
    assert not writer.tmp_path.exists()
    with pytest.raises(RuntimeError):
        with SegmentWriter(tmp_path, "cf", "t", 0, 0) as failing:
            failing.append(0, 1, b"k", b"v")
            raise RuntimeError("crash while reading")
    assert not any((tmp_path / "cf" / "t" / "0").iterdir())


def test_appends_must_increase_and_stay_below_end(tmp_path):
    with SegmentWriter(tmp_path, "cf", "t", 0, 10) as writer:
        with pytest.raises(ValueError):
            writer.append(9, 1, None, b"v")
        writer.append(10, 1, None, b"v")
        with pytest.raises(ValueError):
            writer.append(10, 1, None, b"v")
        with pytest.raises(ValueError):
            writer.commit(10)


def test_list_segments_ignores_temp_files_and_markers(tmp_path):
    a = land(tmp_path, "ticdc-orders", 0, 0, 3, [0, 1, 2])
    b = land(tmp_path, "ticdc-orders", 0, 3, 5, [4])
    c = land(tmp_path, "ticdc-orders", 2, 0, 1, [0])
    write_partition_count(tmp_path, "cf", "ticdc-orders", 4)
    (a.path.parent / ".00000000000000000005-00000000000000000009.parquet.tmp").write_bytes(b"partial")
    (a.path.parent / "notes.txt").write_text("not a segment")
    (tmp_path / "cf" / ".landing.lock").write_text("")
    segments = list_segments(tmp_path, "cf")
    assert segments == {("ticdc-orders", 0): [a, b], ("ticdc-orders", 2): [c]}
    assert landed_end(tmp_path, "cf", "ticdc-orders", 0) == 5
    assert landed_end(tmp_path, "cf", "ticdc-orders", 1) is None
    assert segments_end(segments[("ticdc-orders", 2)]) == 1
    assert landed_topics(tmp_path, "cf") == ["ticdc-orders"]
    assert read_partition_payload(tmp_path, "cf", "ticdc-orders", 0).column("offset").to_pylist() == [0, 1, 2, 4]


def test_temp_files_of_a_crashed_run_are_cleaned(tmp_path):
    land(tmp_path, "t", 0, 0, 2, [0, 1])
    crashed = SegmentWriter(tmp_path, "cf", "t", 0, 2, row_group_records=1, expected_end=4)
    crashed.append(2, 1, None, b"v")  # the process dies here: the temp file stays
    removed = clean_temp_files(tmp_path, "cf")
    assert removed == [crashed.tmp_path]
    assert [s.end for s in list_segments(tmp_path, "cf")[("t", 0)]] == [2]


def test_check_contiguous_reports_gaps_and_overlaps(tmp_path):
    def seg(start, end, partition=0):
        return Segment("t", partition, start, end, segment_path(tmp_path, "cf", "t", partition, start, end))

    assert check_contiguous([seg(0, 5), seg(5, 9), seg(9, 10), seg(3, 4, partition=1)]) == []
    problems = check_contiguous([seg(0, 5), seg(7, 9), seg(8, 12), seg(0, 2, partition=1)])
    assert len(problems) == 2
    assert "t/0: gap [5, 7)" in problems[0]
    assert "t/0: overlap [8, 9)" in problems[1]
    assert check_contiguous([seg(0, 5), seg(0, 5)]) == [f"t/0: overlap [0, 5) between {seg(0, 5).path.name} "
                                                        f"and {seg(0, 5).path.name}"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=12), st.integers(0, 10**6),
       st.data())
def test_contiguous_ranges_have_no_problems_and_any_shift_is_found(lengths, first, data):
    bounds = [first]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    segments = [Segment("t", 0, a, b, Path(f"{a}-{b}")) for a, b in zip(bounds, bounds[1:])]
    shuffled = data.draw(st.permutations(segments))
    assert check_contiguous(shuffled) == []
    if len(segments) > 1:
        index = data.draw(st.integers(1, len(segments) - 1))
        shift = data.draw(st.integers(-3, 3).filter(lambda x: x != 0))
        moved = segments[index]
        segments[index] = Segment("t", 0, moved.start + shift, max(moved.end, moved.start + shift + 1), moved.path)
        assert check_contiguous(segments) != []


def test_partition_count_is_recorded_atomically_and_never_lowered(tmp_path):
    assert known_partitions(tmp_path, "cf", "t") == []
    assert write_partition_count(tmp_path, "cf", "t", 3) == 3
    path = tmp_path / "cf" / "t" / "_partitions.json"
    assert json.loads(path.read_text()) == {"partitions": 3}
    assert write_partition_count(tmp_path, "cf", "t", 2) == 3
    assert read_partition_count(tmp_path, "cf", "t") == 3
    land(tmp_path, "t", 5, 0, 1, [0])  # a partition directory beyond the recorded count still counts
    assert known_partitions(tmp_path, "cf", "t") == [0, 1, 2, 5]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_one_landing_run_per_changefeed(tmp_path):
    with landing_lock(tmp_path, "cf"):
        with pytest.raises(LandingBusyError, match="another landing run"):
            with landing_lock(tmp_path, "cf"):
                pass
        with landing_lock(tmp_path, "other"):
            pass
    with landing_lock(tmp_path, "cf"):
        pass



def test_background_writes_give_the_same_segment_and_abort_waits_for_them(tmp_path):
    from ticdc_lakehouse.landing.segments import BackgroundWrites

    with BackgroundWrites(max_pending=2) as background:
        with SegmentWriter(tmp_path, "cf", "t", 0, 0, row_group_records=10, background=background) as writer:
            for offset in range(35):
                writer.append(offset, offset, b"k", b"v%d" % offset)
            future = writer.commit_async(40)
        segment = future.result()
        aborted = SegmentWriter(tmp_path, "cf", "t", 1, 0, row_group_records=5, background=background)
        for offset in range(12):
            aborted.append(offset, offset, None, b"x")
        aborted.abort()
    assert (segment.start, segment.end) == (0, 40)
    meta = pq.ParquetFile(segment.path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 10, 5]
    assert read_segment(segment.path).column("value").to_pylist() == [b"v%d" % i for i in range(35)]
    assert list_segments(tmp_path, "cf") == {("t", 0): [segment]}
    assert not list(tmp_path.rglob("*.tmp"))


def test_background_writes_keep_each_segments_order_and_write_segments_in_parallel():
    import threading

    from ticdc_lakehouse.landing.segments import BackgroundWrites

    release = threading.Event()
    events: list[str] = []

    def job(name: str, block: bool = False) -> str:
        events.append(f"start {name}")
        if block:
            assert release.wait(10)
        events.append(f"end {name}")
        return name

    background = BackgroundWrites(max_pending=4, workers=2)
    a1 = background.submit(job, "a1", True)
    a2 = background.submit(job, "a2", after=a1)
    b1 = background.submit(job, "b1")
    assert b1.result(timeout=10) == "b1"  # another segment's job runs while a1 is still busy
    assert not a2.done() and "start a2" not in events  # a2 waits for a1
    release.set()
    background.close()  # waits for a2, which was not even queued when close began
    assert a2.result() == "a2"
    assert events.index("end a1") < events.index("start a2")


def test_constant_and_header_columns_match_the_generic_conversion():
    from ticdc_lakehouse.landing.segments import _constant, _headers_array

    headers_type = LANDED_SCHEMA.field("headers").type
    assert _constant("topic-x", pa.string(), 3).equals(pa.array(["topic-x"] * 3, pa.string()))
    assert _constant(7, pa.int32(), 0).equals(pa.array([], pa.int32()))
    no_headers = [None, [], None]
    assert _headers_array(no_headers).equals(pa.array([[], [], []], headers_type))
    mixed = [None, [("a", b"1"), ("b", None)], []]
    assert _headers_array(mixed).equals(pa.array([[], [("a", b"1"), ("b", None)], []], headers_type))
