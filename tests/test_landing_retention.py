"""Landing-zone retention (landing/retention.py): which landed segments may be deleted, and deleting them.

Maintenance's use of it on a real lake is in test_maintenance.py."""

from __future__ import annotations

import os
from pathlib import Path

from ticdc_lakehouse.landing.retention import apply_landing_retention, plan_landing_retention
from ticdc_lakehouse.landing.segments import Segment, check_contiguous, list_segments, segment_path

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def _segments(key, bounds):
    return [Segment(key[0], key[1], start, end, Path(f"/x/{key[0]}/{key[1]}/{start}-{end}")) for start, end in bounds]


def test_only_old_segments_every_merge_is_past_go_and_never_a_partitions_last():
    segments = {A: _segments(A, [(0, 10), (10, 20), (20, 30)]), B: _segments(B, [(0, 5), (5, 9)]),
                C: _segments(C, [(0, 4), (4, 8)])}
    ages = {("t", 0, 10): 50.0}  # the second segment of A is young

    def mtime(segment):
        return ages.get((segment.topic, segment.partition, segment.start), 10.0)

    doomed = plan_landing_retention(segments, {A: 30, B: 9}, older_than_s=20.0, mtime=mtime)
    # A: the young second segment stops the deletions (they stay at the front); B: its last segment stays
    # although the merge is past it; C: no restart offset (never merged), nothing goes
    assert [(s.topic, s.partition, s.start) for s in doomed] == [("t", 0, 0), ("t", 1, 0)]
    assert plan_landing_retention(segments, {A: 15, B: 4}, 20.0, lambda s: 0.0) == [segments[A][0]]


def test_deleting_keeps_each_partition_contiguous_and_its_landed_end(tmp_path):
    for start, end in [(0, 10), (10, 20), (20, 25)]:
        path = segment_path(tmp_path, "cf", "t", 0, start, end)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 7)
        os.utime(path, (1_000, 1_000))
    dry = apply_landing_retention(tmp_path, "cf", {A: 22}, older_than_s=2_000, dry_run=True)
    assert len(dry["segments"]) == 2 and dry["bytes"] == 14 and len(list_segments(tmp_path, "cf")[A]) == 3
    real = apply_landing_retention(tmp_path, "cf", {A: 22}, older_than_s=2_000, dry_run=False)
    assert real["segments"] == dry["segments"]
    left = list_segments(tmp_path, "cf")[A]
    assert [(s.start, s.end) for s in left] == [(20, 25)] and check_contiguous(left) == []


def test_missing_ranges_are_holes_between_segments_and_uncovered_quarantined_offsets():
    from ticdc_lakehouse.landing.quarantine import missing_ranges, readable_prefix

    segments = _segments(A, [(10, 20), (25, 30), (30, 40)])
    # a hole between segments, and a quarantined first segment [0, 10) no segment covers any more
    assert missing_ranges(segments, [(0, 10)]) == [(0, 10), (20, 25)]
    assert missing_ranges(segments, [(10, 20)]) == [(20, 25)]  # landed again: covered
    assert readable_prefix(segments, [(20, 25)]) == segments[:1]
    assert readable_prefix(segments, [(0, 10)]) == [] and readable_prefix(segments, []) == segments


def test_a_quarantined_range_landed_again_is_no_hole_after_retention_deletes_it(tmp_path):
    from ticdc_lakehouse.landing.quarantine import mark_relanded, quarantine, quarantined_ranges, read_quarantined

    def land(start, end):
        path = segment_path(tmp_path, "cf", "t", 0, start, end)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        return Segment("t", 0, start, end, path)

    first = land(0, 10)
    land(10, 20)
    quarantine(tmp_path, "cf", first, "unreadable")
    assert not first.path.exists() and quarantined_ranges(tmp_path, "cf") == {A: [(0, 10)]}
    assert mark_relanded(tmp_path, "cf") == []  # not landed again yet: still a hole
    land(0, 10)
    assert [q.start for q in mark_relanded(tmp_path, "cf")] == [0]
    assert read_quarantined(tmp_path, "cf")[0].relanded
    first.path.unlink()  # retention, once every merge is past it
    assert quarantined_ranges(tmp_path, "cf") == {}
