"""Landing archived Kafka log directories: every codec, incremental growth, gaps, markers and corruption."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from ticdc_lakehouse.sim.archive_writer import (
    ArchiveRecord,
    append_control_batch,
    next_offset,
    write_archive,
    write_partition,
)
from ticdc_lakehouse.landing import (
    ArchiveCorruptError,
    DataLossError,
    LandingError,
    check_contiguous,
    known_partitions,
    list_segments,
)
from ticdc_lakehouse.landing.archive import iter_batches, land_from_archive, parse_partition_dir, scan_archive
from ticdc_lakehouse.landing.segments import read_partition_payload

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def rows(n: int, start: int = 0, partition: int = 0) -> list[tuple]:
    return [(b"k%d" % i, (b"p%d-row-%d;" % (partition, i)) * 8, [("table", b"orders"), ("nil", None)],
             1_700_000_000_000 + i) for i in range(start, start + n)]


def landed(root: Path, topic: str, partition: int, changefeed: str = "cf") -> list[tuple]:
    table = read_partition_payload(root, changefeed, topic, partition)
    return [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]], r["timestamp"])
            for r in table.to_pylist()]


def expected(records: list[tuple], first_offset: int = 0) -> list[tuple]:
    return [(first_offset + i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(records)]


def ranges(root: Path, changefeed: str = "cf") -> dict:
    return {k: [(s.start, s.end) for s in v] for k, v in list_segments(root, changefeed).items()}


def batch_positions(path: Path) -> list[int]:
    return [batch.position for batch in iter_batches(path)]


@pytest.mark.parametrize("codec", CODECS)
def test_archived_partitions_land_exactly_whatever_the_codec(tmp_path, codec):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    data = {0: rows(130), 1: rows(45, partition=1), 2: []}
    written = write_archive(archive, "ticdc-orders", data, compression=codec, records_per_batch=20,
                            batches_per_segment=3)
    assert len(written[0]) == 3 and len(written[1]) == 1 and written[2] == []
    codec_bits = {b.compression_type for p in written[0] for b in _raw_batches(p)}
    assert codec_bits == {CODECS.index(codec)}  # the batches really are compressed with the codec

    report = land_from_archive(archive, root, "cf")

    assert landed(root, "ticdc-orders", 0) == expected(data[0])
    assert landed(root, "ticdc-orders", 1) == expected(data[1])
    assert ranges(root) == {("ticdc-orders", 0): [(0, 130)], ("ticdc-orders", 1): [(0, 45)]}
    assert known_partitions(root, "cf", "ticdc-orders") == [0, 1, 2]
    assert report.records == 175 and report.source == f"archive:{archive}"


def _raw_batches(path: Path) -> list[DefaultRecordBatch]:
    data, batches, pos = path.read_bytes(), [], 0
    while pos < len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        batches.append(DefaultRecordBatch(data[pos : pos + 12 + length]))
        pos += 12 + length
    return batches


def test_growing_archive_lands_only_new_offsets(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    write_archive(archive, "a-b-c", {0: rows(50), 1: rows(10, partition=1)}, compression="zstd",
                  records_per_batch=7, batches_per_segment=2)
    land_from_archive(archive, root, "cf")
    write_partition(archive, "a-b-c", 0, rows(25, start=50), compression="lz4", records_per_batch=10)
    write_partition(archive, "a-b-c", 3, rows(5, partition=3))  # a partition appears

    report = land_from_archive(archive, root, "cf")

    assert ranges(root) == {("a-b-c", 0): [(0, 50), (50, 75)], ("a-b-c", 1): [(0, 10)], ("a-b-c", 3): [(0, 5)]}
    assert landed(root, "a-b-c", 0) == expected(rows(75))
    assert [(p.partition, p.start, p.end, p.records) for p in report.partitions] == [
        (0, 50, 75, 25), (1, 10, 10, 0), (3, 0, 5, 5)]
    assert known_partitions(root, "cf", "a-b-c") == [0, 1, 2, 3]
    assert land_from_archive(archive, root, "cf").records == 0
    assert len(list((root / "cf" / "a-b-c" / "0").iterdir())) == 2


def test_a_straddling_batch_lands_only_unlanded_records(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    write_partition(archive, "t", 0, rows(30), records_per_batch=30)
    land_from_archive(archive, root, "cf")
    # the landing zone was filled from Kafka up to 30; an archive taken later overlaps and extends it
    shutil.rmtree(archive)
    write_partition(archive, "t", 0, rows(40), records_per_batch=25, batches_per_segment=1)
    land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 30), (30, 40)]}
    assert landed(root, "t", 0) == expected(rows(40))


def test_markers_and_compaction_gaps_keep_ranges_contiguous(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    write_partition(archive, "t", 0, rows(5))
    marker = append_control_batch(archive, "t", 0, commit=True)
    compacted = [ArchiveRecord(b"k9", b"survivor", (), 1, offset=9), ArchiveRecord(b"k12", b"last", (), 2, offset=12)]
    write_partition(archive, "t", 0, compacted, records_per_batch=10)
    assert marker == 5 and next_offset(archive, "t", 0) == 13

    report = land_from_archive(archive, root, "cf")

    assert ranges(root) == {("t", 0): [(0, 13)]}
    assert [r[0] for r in landed(root, "t", 0)] == [0, 1, 2, 3, 4, 9, 12]
    assert any("[6, 9)" in w for w in report.warnings)  # offsets missing between files are reported
    append_control_batch(archive, "t", 0, commit=False)
    land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 13), (13, 14)]}  # a range of only a marker: a zero-row file
    assert check_contiguous(list_segments(root, "cf")[("t", 0)]) == []


def test_archive_layout_parsing_and_topic_selection(tmp_path):
    assert parse_partition_dir("ticdc-db-orders-12") == ("ticdc-db-orders", 12)
    assert parse_partition_dir("__consumer_offsets-7") == ("__consumer_offsets", 7)
    assert parse_partition_dir("cleaner-offset-checkpoint") is None
    archive, root = tmp_path / "archive", tmp_path / "landing"
    write_archive(archive, "one-topic", {0: rows(3)})
    write_archive(archive, "other", {0: rows(4)})
    (archive / "recovery-point-offset-checkpoint").write_text("0\n")
    (archive / "one-topic-0" / "leader-epoch-checkpoint").write_text("0\n")
    (archive / "one-topic-0" / "00000000000000000000.snapshot").write_bytes(b"\x00\x01")
    assert set(scan_archive(archive)) == {("one-topic", 0), ("other", 0)}

    land_from_archive(archive, root, "cf", topics=["one-topic"])
    assert ranges(root) == {("one-topic", 0): [(0, 3)]}
    with pytest.raises(LandingError, match="not found in archive"):
        land_from_archive(archive, root, "cf", topics=["missing"])
    with pytest.raises(LandingError, match="does not exist"):
        land_from_archive(tmp_path / "nope", root, "cf")


def test_a_flipped_byte_stops_at_the_damaged_batch_and_rerun_after_repair_continues(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    files = write_archive(archive, "t", {0: rows(100), 1: rows(20, partition=1)}, compression="gzip",
                          records_per_batch=10, batches_per_segment=4)[0]
    damaged = files[1]  # offsets 40..79, batches of 10
    good = damaged.read_bytes()
    position = batch_positions(damaged)[2]  # the batch holding offsets 60..69
    corrupt = bytearray(good)
    corrupt[position + 70] ^= 0xFF
    damaged.write_bytes(bytes(corrupt))

    with pytest.raises(ArchiveCorruptError) as failure:
        land_from_archive(archive, root, "cf")

    message = str(failure.value)
    assert str(damaged) in message and f"at byte {position}" in message and "CRC" in message
    assert "replace" in message and "intact copy" in message
    assert ranges(root) == {("t", 0): [(0, 60)], ("t", 1): [(0, 20)]}  # everything before it, every partition
    assert landed(root, "t", 0) == expected(rows(60))
    assert failure.value.report.partition("t", 0).end == 60

    damaged.write_bytes(good)
    land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 60), (60, 100)], ("t", 1): [(0, 20)]}
    assert landed(root, "t", 0) == expected(rows(100))


def test_a_truncated_file_is_reported_and_can_be_cut_back_to_continue(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    files = write_partition(archive, "t", 0, rows(60), compression="snappy", records_per_batch=10,
                            batches_per_segment=3)
    last = files[-1]  # offsets 30..59
    positions = batch_positions(last)
    last.write_bytes(last.read_bytes()[: positions[1] + 30])  # cut inside the second batch

    with pytest.raises(ArchiveCorruptError, match=rf"{last.name} is corrupt at byte {positions[1]}.*truncated"):
        land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 40)]}

    # the rest is lost for good: cut the file back to the damaged batch as the message says, add new data
    last.write_bytes(last.read_bytes()[: positions[1]])
    write_partition(archive, "t", 0, rows(5, start=60), start_offset=60)
    report = land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 40), (40, 65)]}
    assert [r[0] for r in landed(root, "t", 0)] == list(range(40)) + list(range(60, 65))
    assert any("[40, 60)" in w for w in report.warnings)


def test_bad_magic_and_impossible_lengths_are_corruption(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    [path] = write_partition(archive, "t", 0, rows(30), records_per_batch=10)
    second = batch_positions(path)[1]
    data = bytearray(path.read_bytes())
    data[second + 16] = 1  # magic v1
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveCorruptError, match=rf"at byte {second} .*bad magic byte 1"):
        land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 10)]}

    data[second + 16] = 2
    data[second + 8 : second + 12] = struct.pack(">i", 5)
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveCorruptError, match="impossible batch length 5"):
        land_from_archive(archive, root, "cf")


def test_an_archive_starting_after_the_landed_end_is_data_loss(tmp_path):
    archive, root = tmp_path / "archive", tmp_path / "landing"
    write_partition(archive, "t", 0, rows(10))
    land_from_archive(archive, root, "cf")
    shutil.rmtree(archive)
    write_partition(archive, "t", 0, rows(5, start=20), start_offset=20)
    with pytest.raises(DataLossError, match=r"t/0 offsets \[10, 20\) lost"):
        land_from_archive(archive, root, "cf")
    assert ranges(root) == {("t", 0): [(0, 10)]}
    land_from_archive(archive, root, "cf", allow_gap=True)
    assert ranges(root) == {("t", 0): [(0, 10), (10, 20), (20, 25)]}


record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3),
    st.integers(min_value=0, max_value=2**41),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record_strategy, min_size=1, max_size=30), st.sampled_from(CODECS), st.integers(1, 9))
def test_writer_and_reader_round_trip_any_records(tmp_path_factory, records, codec, per_batch):
    archive = tmp_path_factory.mktemp("archive")
    write_partition(archive, "t", 0, records, compression=codec, records_per_batch=per_batch, batches_per_segment=2)
    read = [(r.offset, r.key, r.value, r.headers, r.timestamp)
            for path in sorted((archive / "t-0").glob("*.log")) for batch in iter_batches(path)
            for r in batch.records]
    assert read == [(i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(records)]
