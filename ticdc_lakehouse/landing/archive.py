"""Land an archived Kafka log directory (a copy of a broker's ``log.dirs``) into segments.

The archive holds Kafka's on-disk layout, ``<topic>-<partition>/<20-digit base offset>.log``, each file a
sequence of record batches (format v2: ``baseOffset int64, length int32, partitionLeaderEpoch int32, magic int8,
crc uint32, ...``). Topic names may contain ``-``, so the partition is what follows the *last* ``-``. Index files
and checkpoints are ignored.

Landing is incremental like Kafka landing: per partition only offsets at or after the landed end are written,
as one new segment whose end is the next offset of the last batch read. Files are read batch by batch, so an
archive of any size needs memory for one batch at a time. A damaged batch (bad CRC, bad magic, truncated file,
undecodable records) stops that partition *after* the records before it have landed, and the run ends with an
:class:`ArchiveCorruptError` naming the file and byte position; after the file is repaired a rerun continues.
"""

from __future__ import annotations

import logging
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Sequence

from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch

from . import codecs
from .errors import ArchiveCorruptError, DataLossError, LandingError
from .lock import landing_lock
from .progress import DataLoss, LandingReport, PartitionLanding, ProgressFn, notify
from .quarantine import mark_relanded, missing_ranges, quarantined_ranges
from .storage import landing_location
from .segments import SegmentWriter, clean_temp_files, landed_end, partition_segments, write_partition_count

log = logging.getLogger("ticdc_lakehouse.landing.archive")

_LOG_FILE = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")

HEADER = DefaultRecordBatch.HEADER_STRUCT  # the 61-byte v2 batch header, record count included
LOG_OVERHEAD = 12  # baseOffset + length: what precedes the part ``length`` counts
MAGIC_POS = 16
ATTRIBUTES_POS = DefaultRecordBatch.ATTRIBUTES_OFFSET
MIN_BATCH_LENGTH = HEADER.size - LOG_OVERHEAD
#: a length beyond this is a damaged header, not a batch (Kafka's own limit is far lower by default)
MAX_BATCH_LENGTH = 1 << 30
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class LogFile:
    """One ``.log`` segment file of an archived partition."""

    topic: str
    partition: int
    base_offset: int
    path: Path


@dataclass(frozen=True)
class ArchivedRecord:
    offset: int
    timestamp: Optional[int]
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list[tuple[str, Optional[bytes]]]


@dataclass(frozen=True)
class ArchivedBatch:
    """A record batch read from a log file; ``records`` is empty for control batches (transaction markers)."""

    path: Path
    position: int  # byte position of the batch in the file
    base_offset: int
    next_offset: int
    is_control: bool
    records: list[ArchivedRecord]


def parse_partition_dir(name: str) -> Optional[tuple[str, int]]:
    """``"ticdc-orders-2"`` -> ``("ticdc-orders", 2)``: split on the last ``-``; None for other names."""
    match = _PARTITION_DIR.match(name)
    if not match:
        return None
    return match.group(1), int(match.group(2))


def scan_archive(archive_dir: Path | str,
                 topics: Optional[Sequence[str]] = None) -> dict[tuple[str, int], list[LogFile]]:
    """The ``.log`` files of every ``(topic, partition)`` in the archive, each list ordered by base offset."""
    root = Path(archive_dir)
    if not root.is_dir():
        raise LandingError(f"archive directory {root} does not exist")
    wanted = set(topics) if topics else None
    found: dict[tuple[str, int], list[LogFile]] = {}
    for entry in sorted(root.iterdir()):
        parsed = parse_partition_dir(entry.name) if entry.is_dir() else None
        if parsed is None or (wanted is not None and parsed[0] not in wanted):
            continue
        files = []
        for item in entry.iterdir():
            match = _LOG_FILE.match(item.name)
            if match and item.is_file():
                files.append(LogFile(parsed[0], parsed[1], int(match.group(1)), item))
        found[parsed] = sorted(files, key=lambda f: f.base_offset)
    return found


def _corrupt(path: Path, position: int, reason: str, base_offset: Optional[int] = None) -> ArchiveCorruptError:
    batch = f" (record batch with base offset {base_offset})" if base_offset is not None else ""
    return ArchiveCorruptError(
        f"archive file {path} is corrupt at byte {position}{batch}: {reason}. The records before it have landed. "
        f"To fix: replace {path.name} with an intact copy (from the broker or a backup) and run again; if the "
        f"data is lost for good, truncate the file to {position} bytes and run again (the offsets from this batch "
        "to the end of the file are then skipped)"
    )


def _plain_batch(data: bytes, codec: int) -> DefaultRecordBatch:
    """The batch with its records section decompressed, so kafka-python's reader needs no codec library."""
    if codec == codecs.CODEC_NONE:
        return DefaultRecordBatch(data)
    header = bytearray(data[: HEADER.size])
    (attributes,) = struct.unpack_from(">h", header, ATTRIBUTES_POS)
    struct.pack_into(">h", header, ATTRIBUTES_POS, attributes & ~DefaultRecordBatch.CODEC_MASK)
    return DefaultRecordBatch(bytes(header) + codecs.decompress(codec, memoryview(data)[HEADER.size :]))


def _read_exact(handle: BinaryIO, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        chunk = handle.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def iter_batches(path: Path | str, min_offset: int = 0, file_base: Optional[int] = None) -> Iterator[ArchivedBatch]:
    """The record batches of one ``.log`` file, validated; batches wholly below ``min_offset`` are only framed.

    ``file_base`` (the offset in the file's name) is the lowest offset a batch of the file may start at.
    Raises :class:`ArchiveCorruptError` at the first damaged batch, after yielding every batch before it.
    """
    path = Path(path)
    position = 0
    previous_next: Optional[int] = file_base
    with open(path, "rb") as handle:
        while True:
            head = _read_exact(handle, LOG_OVERHEAD)
            if not head:
                return
            if len(head) < LOG_OVERHEAD:
                raise _corrupt(path, position, f"the file ends inside a batch header ({len(head)} of "
                                               f"{LOG_OVERHEAD} bytes present; the file is truncated)")
            base_offset, length = struct.unpack(">qi", head)
            if length < MIN_BATCH_LENGTH or length > MAX_BATCH_LENGTH:
                raise _corrupt(path, position, f"impossible batch length {length}", base_offset)
            body = _read_exact(handle, length)
            if len(body) < length:
                raise _corrupt(path, position, f"the file ends inside the batch ({LOG_OVERHEAD + len(body)} of "
                                               f"{LOG_OVERHEAD + length} bytes present; the file is truncated)",
                               base_offset)
            data = head + body
            magic = data[MAGIC_POS]
            if magic != 2:
                raise _corrupt(path, position, f"bad magic byte {magic} (only record batch format v2 is "
                                               "supported; v0/v1 message sets mean a pre-0.11 log)", base_offset)
            header = HEADER.unpack_from(data)
            attributes, last_offset_delta, count = header[5], header[6], header[12]
            next_offset = base_offset + last_offset_delta + 1
            if base_offset < 0 or last_offset_delta < 0 or count < 0:
                raise _corrupt(path, position, "negative offset or record count in the batch header", base_offset)
            if previous_next is not None and base_offset < previous_next:
                raise _corrupt(path, position, f"offsets go backwards: the batch starts at {base_offset}, below "
                                               f"{previous_next} (the previous batch's next offset or the file's "
                                               "base offset)", base_offset)
            previous_next = next_offset
            is_control = bool(attributes & DefaultRecordBatch.CONTROL_MASK)
            if next_offset <= min_offset:
                position += len(data)
                continue
            batch = DefaultRecordBatch(data)
            if not batch.validate_crc():
                raise _corrupt(path, position, "CRC-32C mismatch (the batch's bytes were altered)", base_offset)
            records: list[ArchivedRecord] = []
            if not is_control:
                try:
                    plain = _plain_batch(data, attributes & DefaultRecordBatch.CODEC_MASK)
                    for record in plain:
                        ts = record.timestamp
                        records.append(ArchivedRecord(record.offset, None if ts == NO_TIMESTAMP else ts,
                                                      record.key, record.value, list(record.headers)))
                except (CorruptRecordError, ValueError, OSError, EOFError, IndexError, struct.error) as exc:
                    raise _corrupt(path, position, f"undecodable records ({exc})", base_offset) from None
                except Exception as exc:  # noqa: BLE001 - codec libraries raise their own error types
                    raise _corrupt(path, position, f"undecodable records ({type(exc).__name__}: {exc})",
                                   base_offset) from None
                if len(records) != count:
                    raise _corrupt(path, position, f"{len(records)} records decoded, header says {count}",
                                   base_offset)
            yield ArchivedBatch(path, position, base_offset, next_offset, is_control, records)
            position += len(data)


def _files_from(files: Sequence[LogFile], start: int) -> list[LogFile]:
    """Drop the files that lie wholly below ``start`` (the next file begins at or before it)."""
    keep = []
    for i, item in enumerate(files):
        following = files[i + 1].base_offset if i + 1 < len(files) else None
        if following is not None and following <= start:
            continue
        keep.append(item)
    return keep


def _land_partition(files: Sequence[LogFile], landing_root: Path, changefeed: str, topic: str, partition: int,
                    start: int, report: LandingReport, stop: Optional[int] = None
                    ) -> tuple[PartitionLanding, Optional[ArchiveCorruptError]]:
    """Land ``[start, ...)`` (``[start, stop)`` when filling a hole) of one archived partition; a corruption ends
    the segment before the bad batch."""
    began = time.monotonic()
    item = PartitionLanding(topic, partition, start, start)
    failure: Optional[ArchiveCorruptError] = None
    end = start
    limit = stop if stop is not None else float("inf")
    with SegmentWriter(landing_root, changefeed, topic, partition, start) as writer:
        try:
            for log_file in _files_from(files, start):
                if end >= limit:
                    break
                if log_file.base_offset > end:
                    report.warnings.append(
                        f"{topic}/{partition}: offsets [{end}, {log_file.base_offset}) are in no archived file "
                        f"before {log_file.path.name} (compacted away, or a file is missing)"
                    )
                for batch in iter_batches(log_file.path, min_offset=end, file_base=log_file.base_offset):
                    for record in batch.records:
                        if end <= record.offset < limit:
                            writer.append(record.offset, record.timestamp, record.key, record.value,
                                          record.headers)
                    end = int(min(max(end, batch.next_offset), limit))
                    if end >= limit:
                        break
        except ArchiveCorruptError as exc:
            failure = exc
        segment = writer.commit(end)
        item.end, item.records, item.bytes = end, writer.records, writer.bytes
        item.path = str(segment.path) if segment else None
    item.seconds = time.monotonic() - began
    return item, failure


def land_from_archive(
    archive_dir: Path | str,
    landing_root: Path | str,
    changefeed_name: str,
    topics: Optional[Sequence[str]] = None,
    progress: Optional[ProgressFn] = None,
    *,
    allow_gap: bool = False,
) -> LandingReport:
    """Land every archived partition's offsets at or after its landed end.

    ``topics`` restricts the run to those topics (each must be in the archive). ``allow_gap``: as for Kafka
    landing, accept that the archive starts after the landed end. Raises :class:`ArchiveCorruptError` (after
    landing everything readable, in every partition) when a batch is damaged.
    """
    archive_dir, landing_root = Path(archive_dir), landing_location(landing_root)
    began = time.monotonic()
    report = LandingReport(changefeed_name, f"archive:{archive_dir}")
    layout = scan_archive(archive_dir, topics)
    missing = sorted(set(topics or ()) - {topic for topic, _ in layout})
    if missing:
        raise LandingError(f"topic(s) {', '.join(missing)} not found in archive {archive_dir} (it needs directories "
                           "named <topic>-<partition>)", report)
    if not any(layout.values()):
        raise LandingError(f"no Kafka log files found in archive {archive_dir}: nothing to land. It needs Kafka's "
                           "on-disk layout, <topic>-<partition>/<20-digit base offset>.log (a copy of a broker's "
                           "log.dirs)", report)
    failures: list[ArchiveCorruptError] = []
    with landing_lock(landing_root, changefeed_name):
        report.removed_temp_files = [str(p) for p in clean_temp_files(landing_root, changefeed_name)]
        counts: dict[str, int] = {}
        for topic, partition in layout:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        for topic, count in sorted(counts.items()):
            write_partition_count(landing_root, changefeed_name, topic, count)
        quarantined = quarantined_ranges(landing_root, changefeed_name)
        holes: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for (topic, partition), files in sorted(layout.items()):
            if not files:
                continue  # a partition directory without log files: nothing archived yet
            landed = landed_end(landing_root, changefeed_name, topic, partition)
            if landed is not None:  # holes below the landed end (a quarantined or deleted segment)
                holes[(topic, partition)] = [
                    (a, b) for a, b in missing_ranges(partition_segments(landing_root, changefeed_name, topic,
                                                                         partition),
                                                      quarantined.get((topic, partition), [])) if b <= landed]
            # Kafka names a log file after the first offset it holds: the partition's earliest archived offset
            first = files[0].base_offset
            start = first if landed is None else landed
            if landed is not None and landed < first:
                loss = DataLoss(topic, partition, landed, first,
                                f"the archive starts at offset {first}, after the landed end")
                report.data_loss.append(loss)
                if not allow_gap:
                    continue
                with SegmentWriter(landing_root, changefeed_name, topic, partition, landed) as marker:
                    marker.commit(first)
                start = first
            for hole_start, hole_end in holes.get((topic, partition), []):
                if hole_start < first:
                    report.data_loss.append(DataLoss(
                        topic, partition, hole_start, min(hole_end, first),
                        f"a landed segment of these offsets was unreadable or deleted and the archive starts at "
                        f"{first}"))
                    continue
                refill, failure = _land_partition(files, landing_root, changefeed_name, topic, partition,
                                                  hole_start, report, stop=hole_end)
                report.partitions.append(refill)
                notify(progress, refill)
                if failure is not None:
                    failures.append(failure)
            item, failure = _land_partition(files, landing_root, changefeed_name, topic, partition, start, report)
            report.partitions.append(item)
            notify(progress, item)
            if failure is not None:
                failures.append(failure)
        mark_relanded(landing_root, changefeed_name)
    report.seconds = time.monotonic() - began
    if failures:
        more = f" ({len(failures) - 1} more damaged file(s): " + ", ".join(
            str(f) for f in failures[1:]) + ")" if len(failures) > 1 else ""
        raise ArchiveCorruptError(f"{failures[0]}{more}", report)
    if report.data_loss and not allow_gap:
        raise DataLossError("data loss: " + "; ".join(str(d) for d in report.data_loss)
                            + ". Those partitions were not landed; rerun with allow_gap=True to accept it", report)
    return report
