"""Write a Kafka log directory — what a broker keeps under ``log.dirs`` — from plain records.

The demo and the tests need archived topics byte-compatible with a real broker's files without running Kafka:
``<dir>/<topic>-<partition>/<20-digit base offset>.log``, each file a run of record batches (format v2) built
by kafka-python's own batch builder, several files per partition, any compression codec, optionally with
transaction markers and offset gaps (as compaction leaves them). Appending to an existing partition continues
at its next offset in new files, the way a broker rolls segments, so an archive can be grown and re-landed.

A record is ``(key, value, headers, timestamp)``, optionally with a fifth element, its offset (to leave gaps);
headers are ``[(str, bytes | None), ...]``; timestamps are milliseconds (None: now).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence, Union

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from ticdc_lakehouse.landing import codecs

Header = tuple[str, Optional[bytes]]
RecordTuple = Union[
    tuple[Optional[bytes], Optional[bytes], Sequence[Header], Optional[int]],
    tuple[Optional[bytes], Optional[bytes], Sequence[Header], Optional[int], int],
]

HEADER_SIZE = DefaultRecordBatch.HEADER_STRUCT.size
LOG_OVERHEAD = 12
#: no practical limit: the caller decides how many records go into a batch
_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class ArchiveRecord:
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Header] = ()
    timestamp: Optional[int] = None
    offset: Optional[int] = None  # None: the next offset


def _as_record(item: Union[ArchiveRecord, Sequence]) -> ArchiveRecord:
    if isinstance(item, ArchiveRecord):
        return item
    return ArchiveRecord(*item)


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def partition_dir(archive_dir: Path | str, topic: str, partition: int) -> Path:
    return Path(archive_dir) / f"{topic}-{int(partition)}"


def _finish(buf: bytearray, base_offset: int, extra_attributes: int = 0, codec: int = codecs.CODEC_NONE) -> bytes:
    """Set the base offset, optionally compress the records section ourselves and set extra attribute bits.

    The CRC covers attributes..end, so it is recomputed whenever those change; base offset, length and leader
    epoch are outside it, which is how a broker assigns offsets to a producer's batch.
    """
    if codec != codecs.CODEC_NONE:
        body = codecs.compress(codec, bytes(buf[HEADER_SIZE:]))
        buf = bytearray(buf[:HEADER_SIZE]) + body
        extra_attributes |= codec
    if extra_attributes:
        (attributes,) = struct.unpack_from(">h", buf, DefaultRecordBatch.ATTRIBUTES_OFFSET)
        struct.pack_into(">h", buf, DefaultRecordBatch.ATTRIBUTES_OFFSET, attributes | extra_attributes)
    if codec != codecs.CODEC_NONE or extra_attributes:
        struct.pack_into(">i", buf, 8, len(buf) - LOG_OVERHEAD)
        crc = calc_crc32c(memoryview(buf)[DefaultRecordBatch.ATTRIBUTES_OFFSET :])
        struct.pack_into(">I", buf, DefaultRecordBatch.CRC_OFFSET, crc)
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def build_batch(base_offset: int, records: Sequence[ArchiveRecord], compression: str = "none",
                offsets: Optional[Sequence[int]] = None) -> bytes:
    """One v2 record batch holding ``records`` at ``offsets`` (default: consecutive from ``base_offset``)."""
    codec = codecs.codec_id(compression)
    native = codecs.kafka_python_has(codec)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec if native else codecs.CODEC_NONE, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=_UNLIMITED,
    )
    offsets = list(offsets) if offsets is not None else [base_offset + i for i in range(len(records))]
    for record, offset in zip(records, offsets):
        if builder.append(offset - base_offset, record.timestamp, record.key, record.value,
                          list(record.headers)) is None:
            raise RuntimeError("record batch builder refused a record")
    return _finish(builder.build(), base_offset, codec=codecs.CODEC_NONE if native else codec)


def build_control_batch(offset: int, commit: bool = True, producer_id: int = 4242, producer_epoch: int = 0,
                        timestamp: Optional[int] = None) -> bytes:
    """A transaction marker batch (COMMIT or ABORT control record) at ``offset``, as a broker writes it."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codecs.CODEC_NONE, is_transactional=True, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=-1, batch_size=_UNLIMITED,
    )
    key = struct.pack(">hh", 0, 1 if commit else 0)  # version 0, type COMMIT=1 / ABORT=0
    value = struct.pack(">hi", 0, 0)  # version 0, coordinator epoch
    builder.append(0, timestamp, key, value, [])
    return _finish(builder.build(), offset, extra_attributes=DefaultRecordBatch.CONTROL_MASK)


def _batch_next_offsets(path: Path) -> Optional[int]:
    """The next offset after the last batch of a log file (header walk only), None when it holds none."""
    result = None
    with open(path, "rb") as handle:
        while True:
            head = handle.read(HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                return result
            header = DefaultRecordBatch.HEADER_STRUCT.unpack(head)
            result = header[0] + header[6] + 1
            handle.seek(header[1] + LOG_OVERHEAD - HEADER_SIZE, 1)


def next_offset(archive_dir: Path | str, topic: str, partition: int) -> int:
    """The offset the next appended record gets: after the partition's last batch, 0 for a new partition."""
    directory = partition_dir(archive_dir, topic, partition)
    if not directory.is_dir():
        return 0
    logs = sorted(p for p in directory.iterdir() if p.name.endswith(".log") and p.name[:-4].isdigit())
    for path in reversed(logs):
        found = _batch_next_offsets(path)
        if found is not None:
            return found
    return int(logs[-1].name[:-4]) if logs else 0


def _write_log_file(directory: Path, batches: Sequence[tuple[int, bytes]]) -> Path:
    path = directory / log_file_name(batches[0][0])
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    with open(path, "wb") as handle:
        for _, data in batches:
            handle.write(data)
    # a broker keeps index files beside each log; readers must ignore them
    (directory / f"{batches[0][0]:020d}.index").write_bytes(b"")
    (directory / f"{batches[0][0]:020d}.timeindex").write_bytes(b"")
    return path


def write_partition(
    archive_dir: Path | str,
    topic: str,
    partition: int,
    records: Iterable[Union[ArchiveRecord, Sequence]],
    *,
    compression: str = "none",
    records_per_batch: int = 50,
    batches_per_segment: int = 4,
    start_offset: Optional[int] = None,
) -> list[Path]:
    """Append ``records`` to a partition's log as new segment files; returns the ``.log`` files written.

    Offsets continue after the partition's existing batches (or start at ``start_offset``); a record with an
    explicit offset leaves a gap before it, like compaction does.
    """
    directory = partition_dir(archive_dir, topic, partition)
    directory.mkdir(parents=True, exist_ok=True)
    offset = next_offset(archive_dir, topic, partition) if start_offset is None else start_offset
    items = [_as_record(r) for r in records]
    batches: list[tuple[int, bytes]] = []
    for i in range(0, len(items), max(1, records_per_batch)):
        chunk = items[i : i + records_per_batch]
        offsets = []
        for record in chunk:
            if record.offset is not None:
                if record.offset < offset:
                    raise ValueError(f"record offset {record.offset} is below the next offset {offset}")
                offset = record.offset
            offsets.append(offset)
            offset += 1
        batches.append((offsets[0], build_batch(offsets[0], chunk, compression, offsets)))
    written = []
    for i in range(0, len(batches), max(1, batches_per_segment)):
        written.append(_write_log_file(directory, batches[i : i + batches_per_segment]))
    return written


def append_control_batch(archive_dir: Path | str, topic: str, partition: int, commit: bool = True) -> int:
    """Append a transaction marker as its own segment file; returns its offset."""
    directory = partition_dir(archive_dir, topic, partition)
    directory.mkdir(parents=True, exist_ok=True)
    offset = next_offset(archive_dir, topic, partition)
    _write_log_file(directory, [(offset, build_control_batch(offset, commit))])
    return offset


def write_archive(
    archive_dir: Path | str,
    topic: str,
    partitions: Mapping[int, Iterable[Union[ArchiveRecord, Sequence]]],
    **options: object,
) -> dict[int, list[Path]]:
    """Write (or grow) several partitions of a topic; ``options`` as for :func:`write_partition`.

    A partition given an empty record list still gets its directory (a partition that never received data).
    """
    written = {}
    for partition, records in sorted(partitions.items()):
        partition_dir(archive_dir, topic, partition).mkdir(parents=True, exist_ok=True)
        written[partition] = write_partition(archive_dir, topic, partition, records,
                                             **options)  # type: ignore[arg-type]
    return written
