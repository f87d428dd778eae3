"""Landed segments that cannot be read: found before a merge reads them, moved aside, re-landed or reported.

A segment is immutable once renamed into place (see :mod:`.segments`), so a file that no longer reads was damaged
afterwards: a disk or copy that cut it short, an operator's mistake. Reading it in the merge would fail the whole
run with a Spark stack trace, run after run. Instead the merge checks each segment it is about to read, cheaply
(:func:`segment_problem`: the Parquet footer, which a truncated file has lost, and the offsets its statistics
claim), and moves a bad one to ``{changefeed}/_quarantine/{topic}/{partition}/`` with an entry in
``{changefeed}/_quarantine.json`` (names starting with ``_`` are never topics or segments). Its offsets are then
*missing* (:func:`missing_ranges`): the merge reads that partition only up to the hole, so no cut passes records it
has not seen, and the next landing run re-lands the hole from Kafka when Kafka still holds the offsets, or reports
them as data loss when it does not. ``lakehouse status`` lists every quarantined segment and whether its range is
landed again.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Mapping, Optional, Sequence

import pyarrow.parquet as pq

from .segments import LANDED_SCHEMA, Segment, changefeed_dir, partition_segments, write_atomically
from .storage import Location, storage_of

QUARANTINE_DIR = "_quarantine"
QUARANTINE_FILE = "_quarantine.json"

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Quarantined:
    """A landed segment moved aside because it could not be read."""

    topic: str
    partition: int
    start: int
    end: int
    file: str  # where the damaged file is now
    reason: str
    at_ms: int
    relanded: bool = False  # set by the landing run that filled the range again: retention may delete it later


    def __str__(self) -> str:
        return f"{self.topic}/{self.partition} offsets [{self.start}, {self.end}): {self.reason}; moved to {self.file}"


def segment_problem(segment: Segment, row_groups: Optional[dict[str, int]] = None) -> Optional[str]:
    """Why the landed file cannot be what its name says, None when it looks whole (reads only its footer).
    ``row_groups``: where a whole file's row group count is noted, by ``str(path)``."""
    storage = storage_of(segment.path)
    try:
        metadata = pq.ParquetFile(storage.open_input(segment.path)).metadata
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...: all mean unreadable
        size = storage.size(segment.path)
        return f"unreadable Parquet file ({size} bytes: {str(exc).splitlines()[0][:160]})"
    names = metadata.schema.to_arrow_schema().names
    if names != LANDED_SCHEMA.names:
        return f"columns {names} are not a landed segment's"
    rows = metadata.num_rows
    if rows > segment.end - segment.start:
        return f"{rows} records in a file named for {segment.end - segment.start} offsets"
    column = metadata.schema.names.index("offset")  # leaf columns: the headers' key and value come last
    size = storage.size(segment.path)
    for index in range(metadata.num_row_groups):
        chunk = metadata.row_group(index).column(column)
        if chunk.file_offset > size or chunk.data_page_offset + chunk.total_compressed_size > size:
            return f"row group {index} lies beyond the end of the file ({size} bytes)"
        stats = chunk.statistics
        if stats is not None and stats.has_min_max and not (segment.start <= stats.min and stats.max < segment.end):
            return f"offsets {stats.min}..{stats.max} outside the file's range [{segment.start}, {segment.end})"
    if row_groups is not None:
        row_groups[str(segment.path)] = metadata.num_row_groups
    return None


def quarantine_path(landing_root: Location | str, changefeed: str) -> Location:
    return changefeed_dir(landing_root, changefeed) / QUARANTINE_FILE


def read_quarantined(landing_root: Location | str, changefeed: str) -> list[Quarantined]:
    """Every segment ever moved aside for the changefeed, oldest first."""
    path = quarantine_path(landing_root, changefeed)
    if not storage_of(path).exists(path):
        return []
    return [Quarantined(**entry) for entry in json.loads(storage_of(path).read(path))]


def quarantine(landing_root: Location | str, changefeed: str, segment: Segment, reason: str) -> Quarantined:
    """Move ``segment`` aside and record it; its offsets become missing until landed again."""
    now = int(time.time() * 1000)
    directory = changefeed_dir(landing_root, changefeed) / QUARANTINE_DIR / segment.topic / str(segment.partition)
    target = directory / f"{segment.path.name}.{now}"
    storage_of(target).move(segment.path, target)
    entry = Quarantined(segment.topic, segment.partition, segment.start, segment.end, str(target), reason, now)
    entries = [asdict(q) for q in read_quarantined(landing_root, changefeed)] + [asdict(entry)]
    write_atomically(quarantine_path(landing_root, changefeed), json.dumps(entries, indent=1).encode())
    return entry


def missing_ranges(segments: Sequence[Segment], quarantined: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Offset ranges of one partition that should be landed but are not (pure), in order.

    Holes between consecutive segments, and the parts of quarantined ranges that no segment covers (a moved
    first segment leaves no hole between segments, only before them).
    """
    ordered = sorted(segments, key=lambda s: (s.start, s.end))
    covered: list[tuple[int, int]] = []
    for segment in ordered:
        if covered and segment.start <= covered[-1][1]:
            covered[-1] = (covered[-1][0], max(covered[-1][1], segment.end))
        else:
            covered.append((segment.start, segment.end))
    holes = {(a[1], b[0]) for a, b in zip(covered, covered[1:])}
    for start, end in quarantined:
        position = start
        for low, high in covered:
            if high <= position or low >= end:
                continue
            if low > position:
                holes.add((position, low))
            position = max(position, high)
        if position < end:
            holes.add((position, end))
    return sorted(holes)


def readable_prefix(segments: Sequence[Segment], missing: Sequence[tuple[int, int]]) -> list[Segment]:
    """The segments before the partition's first missing range (pure): a merge reads no further."""
    if not missing:
        return list(segments)
    first = min(start for start, _ in missing)
    return [s for s in segments if s.end <= first]


@dataclass
class LandedCheck:
    """What a merge may read, after checking the landing zone."""

    segments: dict[PartitionKey, list[Segment]]
    quarantined: list[Quarantined]  # moved aside by this check
    missing: dict[PartitionKey, list[tuple[int, int]]]  # what the merge waits for, per partition
    #: the row groups of each segment whose footer the check read, by ``str(path)``: the decode shares the
    #: segments out by row group without reading their footers again
    row_groups: dict[str, int] = field(default_factory=dict)


def quarantined_ranges(landing_root: Location | str, changefeed: str) -> dict[PartitionKey, list[tuple[int, int]]]:
    """The quarantined ranges not landed again yet, per partition."""
    ranges: dict[PartitionKey, list[tuple[int, int]]] = {}
    for entry in read_quarantined(landing_root, changefeed):
        if not entry.relanded:
            ranges.setdefault((entry.topic, entry.partition), []).append((entry.start, entry.end))
    return ranges


def mark_relanded(landing_root: Location | str, changefeed: str) -> list[Quarantined]:
    """Record which quarantined ranges a landing run filled (call it holding the landing lock); returns them.

    Once recorded, a range is no longer a hole even after landing retention deletes the segments over it."""
    entries = read_quarantined(landing_root, changefeed)
    done = []
    for index, entry in enumerate(entries):
        if entry.relanded:
            continue
        segments = partition_segments(landing_root, changefeed, entry.topic, entry.partition)
        if segments and not missing_ranges(segments, [(entry.start, entry.end)]):
            entries[index] = replace(entry, relanded=True)
            done.append(entries[index])
    if done:
        write_atomically(quarantine_path(landing_root, changefeed),
                         json.dumps([asdict(q) for q in entries], indent=1).encode())
    return done


def check_landed(landing_root: Location | str, changefeed: str, segments: Mapping[PartitionKey, Sequence[Segment]],
                 restart: Mapping[PartitionKey, int]) -> LandedCheck:
    """Check every segment a merge would read (ending after the partition's restart offset), quarantine the bad
    ones, and cut each partition at its first missing range."""
    moved: list[Quarantined] = []
    kept: dict[PartitionKey, list[Segment]] = {}
    row_groups: dict[str, int] = {}
    for key, items in segments.items():
        kept[key] = []
        for segment in items:
            problem = segment_problem(segment, row_groups) if segment.end > restart.get(key, 0) else None
            if problem is None:
                kept[key].append(segment)
            else:
                moved.append(quarantine(landing_root, changefeed, segment, problem))
    holes = quarantined_ranges(landing_root, changefeed)
    missing: dict[PartitionKey, list[tuple[int, int]]] = {}
    result: dict[PartitionKey, list[Segment]] = {}
    for key in set(kept) | set(holes):
        gaps = [g for g in missing_ranges(kept.get(key, []), holes.get(key, [])) if g[1] > restart.get(key, 0)]
        if gaps:
            missing[key] = gaps
        prefix = readable_prefix(kept.get(key, []), gaps)
        if prefix:
            result[key] = prefix
    return LandedCheck(result, moved, missing, row_groups)


class SegmentQuarantined(RuntimeError):
    """A decode task could not read a landed segment that looked whole (a damaged page, not a lost footer): the
    merge moved it aside and committed nothing; the next landing run lands its offsets again."""

    def __init__(self, entry: Quarantined) -> None:
        super().__init__(f"landed segment {entry}; nothing was committed: the next `lakehouse run` (or `lakehouse "
                         "land`) lands these offsets again from Kafka")
        self.entry = entry


#: how a decode task's error for a landed segment it cannot read begins, the segment's path after it
#: (``merge.decode_stage.read_pieces``)
UNREADABLE_SEGMENT = "cannot read landed segment"


def unreadable_segment_in(error_text: str, segments: Iterable[Segment]) -> Optional[tuple[Segment, str]]:
    """The landed segment a failed decode could not read (``merge.decode_stage.read_pieces`` names it), with the
    reader's own words (not Spark's wrapper), if any."""
    for segment in segments:
        marker = f"{UNREADABLE_SEGMENT} {segment.path}: "
        if marker in error_text:
            return segment, f"could not read it: {error_text.split(marker, 1)[1].splitlines()[0][:200]}"
    return None
