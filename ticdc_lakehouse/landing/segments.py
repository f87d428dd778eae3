"""The landed-segment layout: immutable Parquet files of raw Kafka records, one per offset range.

Layout (the merge engine reads exactly this)::

    {landing_root}/{changefeed}/{topic}/_partitions.json            {"partitions": N}
    {landing_root}/{changefeed}/{topic}/{partition}/{start:020d}-{end:020d}.parquet
    {landing_root}/{changefeed}/{topic}/_data_loss.json             offsets Kafka lost before they landed
    {landing_root}/{changefeed}/_quarantine.json, _quarantine/     unreadable segments moved aside (quarantine.py)
    {landing_root}/{changefeed}/.landing.lock                       held while a landing run writes

Offsets are half-open ``[start, end)`` and contiguous per partition: each segment starts where the previous one
ended, so "what has landed" is simply the last segment's ``end`` and a rerun can never read a record twice. A
range that holds no records (compacted away, transaction markers) still gets a zero-row file, otherwise the next
segment would look like it follows a gap.

The landing root is a local path or ``s3://bucket/prefix``; every read and write goes through :mod:`.storage`. Locally
files are written to ``.{name}.tmp`` beside the final name, fsynced, renamed with ``os.replace`` and the directory
fsynced; on S3 each segment is uploaded whole under its final name. Either way a reader sees a whole segment or
none, and a crash leaves only a temp file that the next run deletes. Names starting with ``.`` or ``_`` are never
segments.
"""

from __future__ import annotations

import json
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .storage import TMP_SUFFIX, Location, fsync_dir, landing_location, storage_of  # noqa: F401  (re-exported)

#: the schema of every landed segment
LANDED_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64()),  # milliseconds since the epoch; null when Kafka has none
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field(
            "headers",
            pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
        ),
    ]
)

#: ``LANDED_SCHEMA`` as a Spark DDL string: readers that pass it skip Spark's footer-reading job that infers it
LANDED_SPARK_SCHEMA = ("topic string, partition int, offset bigint, timestamp bigint, key binary, value binary, "
                       "headers array<struct<key: string, value: binary>>")

PARTITIONS_FILE = "_partitions.json"
SEGMENT_SUFFIX = ".parquet"
_SEGMENT_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")

#: flush a row group after this many records or this many payload bytes, whichever comes first: bounds memory
#: for large topics while keeping row groups big enough for efficient scans
ROW_GROUP_RECORDS = 100_000
ROW_GROUP_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, order=True)
class Segment:
    """One landed file: records of ``topic``/``partition`` with offsets in ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int
    path: Location


def changefeed_dir(landing_root: Location | str, changefeed: str) -> Location:
    return landing_location(landing_root) / changefeed


def topic_dir(landing_root: Location | str, changefeed: str, topic: str) -> Location:
    return changefeed_dir(landing_root, changefeed) / topic


def partition_dir(landing_root: Location | str, changefeed: str, topic: str, partition: int) -> Location:
    return topic_dir(landing_root, changefeed, topic) / str(int(partition))


def segment_name(start: int, end: int) -> str:
    """``{start:020d}-{end:020d}.parquet``: zero padded so names sort like offsets."""
    if start < 0 or end < start:
        raise ValueError(f"bad segment range [{start}, {end})")
    return f"{start:020d}-{end:020d}{SEGMENT_SUFFIX}"


def segment_path(landing_root: Location | str, changefeed: str, topic: str, partition: int, start: int,
                 end: int) -> Location:
    """Where the segment holding offsets ``[start, end)`` of ``topic``/``partition`` lives."""
    return partition_dir(landing_root, changefeed, topic, partition) / segment_name(start, end)


def parse_segment_name(name: str) -> Optional[tuple[int, int]]:
    """``(start, end)`` for a segment file name, None for anything else (temp files, markers)."""
    match = _SEGMENT_NAME.match(name)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2))


def _partition_names(directory: Location) -> list[str]:
    return [name for name, is_dir in storage_of(directory).list(directory) if is_dir and name.isdigit()]


def _topic_names(directory: Location) -> list[str]:
    return sorted(name for name, is_dir in storage_of(directory).list(directory)
                  if is_dir and not name.startswith((".", "_")))


def partition_segments(landing_root: Location | str, changefeed: str, topic: str, partition: int) -> list[Segment]:
    """The segments of one partition, ordered by start offset."""
    directory = partition_dir(landing_root, changefeed, topic, partition)
    found = []
    for name, is_dir in storage_of(directory).list(directory):
        parsed = None if is_dir else parse_segment_name(name)
        if parsed is not None:
            found.append(Segment(topic, int(partition), parsed[0], parsed[1], directory / name))
    return sorted(found, key=lambda s: (s.start, s.end))


def list_segments(landing_root: Location | str, changefeed: str) -> dict[tuple[str, int], list[Segment]]:
    """Every landed segment of a changefeed, by ``(topic, partition)``, each list ordered by start offset."""
    root = changefeed_dir(landing_root, changefeed)
    result: dict[tuple[str, int], list[Segment]] = {}
    for topic in _topic_names(root):
        for partition in sorted(int(p) for p in _partition_names(root / topic)):
            segments = partition_segments(landing_root, changefeed, topic, partition)
            if segments:
                result[(topic, partition)] = segments
    return result


def landed_topics(landing_root: Location | str, changefeed: str) -> list[str]:
    """Topics that have a directory (segments or a partitions file) under the changefeed."""
    return _topic_names(changefeed_dir(landing_root, changefeed))


def segments_end(segments: Sequence[Segment]) -> Optional[int]:
    """The end offset of the last segment (pure), None when there is none."""
    return max((s.end for s in segments), default=None)


def landed_end(landing_root: Location | str, changefeed: str, topic: str, partition: int) -> Optional[int]:
    """The next offset to land for a partition: the end of its last segment, None when nothing has landed."""
    return segments_end(partition_segments(landing_root, changefeed, topic, partition))


def check_contiguous(segments: Iterable[Segment]) -> list[str]:
    """Problems in one or several partitions' segments: gaps, overlaps, empty or inverted ranges.

    An empty list means each partition's segments tile ``[first start, last end)`` exactly.
    """
    by_partition: dict[tuple[str, int], list[Segment]] = {}
    for segment in segments:
        by_partition.setdefault((segment.topic, segment.partition), []).append(segment)
    problems: list[str] = []
    for (topic, partition), items in sorted(by_partition.items()):
        items.sort(key=lambda s: (s.start, s.end))
        previous: Optional[Segment] = None
        for segment in items:
            where = f"{topic}/{partition}"
            if segment.end <= segment.start:
                problems.append(f"{where}: segment {segment.path.name} has an empty or inverted range")
            if previous is not None:
                if segment.start > previous.end:
                    problems.append(
                        f"{where}: gap [{previous.end}, {segment.start}) between "
                        f"{previous.path.name} and {segment.path.name}"
                    )
                elif segment.start < previous.end:
                    problems.append(
                        f"{where}: overlap [{segment.start}, {min(previous.end, segment.end)}) between "
                        f"{previous.path.name} and {segment.path.name}"
                    )
            if previous is None or segment.end > previous.end:
                previous = segment
    return problems


def partitions_file(landing_root: Location | str, changefeed: str, topic: str) -> Location:
    return topic_dir(landing_root, changefeed, topic) / PARTITIONS_FILE


def read_partition_count(landing_root: Location | str, changefeed: str, topic: str) -> Optional[int]:
    """The partition count recorded in ``_partitions.json``, None when the file does not exist."""
    path = partitions_file(landing_root, changefeed, topic)
    if not storage_of(path).exists(path):
        return None
    return int(json.loads(storage_of(path).read(path))["partitions"])


def known_partitions(landing_root: Location | str, changefeed: str, topic: str) -> list[int]:
    """Every partition of a topic the merge engine must account for, including ones that never sent anything.

    The union of ``range(_partitions.json count)`` and the partition directories present.
    """
    count = read_partition_count(landing_root, changefeed, topic) or 0
    partitions = set(range(count))
    partitions.update(int(p) for p in _partition_names(topic_dir(landing_root, changefeed, topic)))
    return sorted(partitions)


def write_atomically(final: Location, data: bytes) -> None:
    """Write a small file so that readers see the old or the new content, never a torn one."""
    storage_of(final).write_whole(final, data)


def write_partition_count(landing_root: Location | str, changefeed: str, topic: str, count: int) -> int:
    """Record the topic's partition count; never lowers it (Kafka partitions are only ever added).

    Returns the count now recorded.
    """
    current = read_partition_count(landing_root, changefeed, topic)
    if current is not None and current >= count:
        return current
    path = partitions_file(landing_root, changefeed, topic)
    write_atomically(path, json.dumps({"partitions": int(count)}).encode())
    return int(count)


def clean_temp_files(landing_root: Location | str, changefeed: str) -> list[Location]:
    """Delete the ``.*.tmp`` files a crashed run left behind; returns what was removed.

    Only call while holding the changefeed's landing lock: a running writer's temp file looks the same.
    """
    root = changefeed_dir(landing_root, changefeed)
    removed = storage_of(root).temp_files(root)
    for path in removed:
        storage_of(path).delete(path)
    return removed


def empty_table() -> pa.Table:
    return LANDED_SCHEMA.empty_table()


_HEADERS_TYPE: pa.ListType = LANDED_SCHEMA.field("headers").type
_NO_HEADER_ITEMS = pa.array([], _HEADERS_TYPE.value_type)


def _zeros(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(0, pa.int32()), n)


def _constant(value: Any, type_: pa.DataType, n: int) -> pa.Array:
    """``n`` copies of ``value`` (the topic and partition columns).

    Taken from a one-element array in C++: ``pa.repeat`` of a string scalar costs ~1.5 us a row, which made the
    topic column the most expensive one to build.
    """
    return pa.array([value], type_).take(_zeros(n))


def _headers_array(headers: Sequence[Optional[Sequence[tuple[str, Optional[bytes]]]]]) -> pa.Array:
    """The headers column: a record without headers gets an empty list (not null).

    TiCDC sends no Kafka headers, so the common case is a batch without any: its column is only zero offsets,
    built without converting a Python empty list per record.
    """
    if not any(headers):
        return pa.ListArray.from_arrays(_zeros(len(headers) + 1), _NO_HEADER_ITEMS, type=_HEADERS_TYPE)
    return pa.array([h or [] for h in headers], _HEADERS_TYPE)


def _writer_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class BackgroundWrites:
    """Worker threads that encode, compress and write row groups while the caller keeps consuming.

    Parquet encoding, zstd (most of landing's CPU) and fsync release the GIL, so they overlap with the consume
    loop and librdkafka's fetches (the Arrow arrays are built by the caller: that part needs the GIL). Jobs
    submitted with ``after`` (a segment's previous job) start only once it is done, so each segment's row groups
    are appended in order and its commit comes last, while different segments are written in parallel: Kafka
    hands over a backlog partition by partition, so the next partition's row groups compress on another core
    while the previous one's are still being written. At most ``max_pending`` jobs are pending at a time
    (submitting blocks beyond that), which bounds the memory held by row groups not yet written.
    """

    def __init__(self, max_pending: int = 8, workers: Optional[int] = None, per_segment: int = 3) -> None:
        self.per_segment = per_segment
        self._executor = ThreadPoolExecutor(max_workers=workers or _writer_threads(),
                                            thread_name_prefix="landing-writer")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._lock = threading.Lock()
        self._pending: set[Future] = set()

    def submit(self, fn: Callable[..., Any], *args: Any, after: Optional[Future] = None) -> Future:
        """Run ``fn(*args)`` on a worker once ``after`` (if any) is done, whatever its outcome."""
        self._slots.acquire()
        job: Future = Future()
        with self._lock:
            self._pending.add(job)

        def run() -> None:
            try:
                if job.set_running_or_notify_cancel():
                    try:
                        job.set_result(fn(*args))
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                        job.set_exception(exc)
            finally:
                with self._lock:
                    self._pending.discard(job)
                self._slots.release()

        def start(_: Any = None) -> None:
            try:
                self._executor.submit(run)
            except BaseException as exc:  # noqa: BLE001 - e.g. interpreter shutdown: fail the job, free its slot
                with self._lock:
                    self._pending.discard(job)
                self._slots.release()
                if job.set_running_or_notify_cancel():
                    job.set_exception(exc)

        if after is None:
            start()
        else:
            after.add_done_callback(start)  # runs at once when ``after`` is already done
        return job

    def close(self) -> None:
        """Wait for every submitted job (including ones still waiting for their predecessor), then stop."""
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                break
            wait(pending)
        self._executor.shutdown(wait=True)

    def __enter__(self) -> "BackgroundWrites":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_Columns = tuple[list, list, list, list, list]


class SegmentWriter:
    """Streams one partition's records into a new segment, row group by row group.

    Records are buffered column-wise and flushed as a row group every ``row_group_records`` records or
    ``row_group_bytes`` payload bytes, so landing a large partition needs bounded memory. Nothing is visible
    under the final name until :meth:`commit`, which needs the range's ``end`` (known only when reading stops
    for archives). :meth:`abort` deletes the temp file; leaving the ``with`` block on an exception aborts.
    With ``background``, row groups and the commit are written by that worker (:meth:`commit_async`).
    """

    def __init__(
        self,
        landing_root: Location | str,
        changefeed: str,
        topic: str,
        partition: int,
        start: int,
        *,
        row_group_records: int = ROW_GROUP_RECORDS,
        row_group_bytes: int = ROW_GROUP_BYTES,
        expected_end: Optional[int] = None,
        background: Optional[BackgroundWrites] = None,
    ) -> None:
        self.landing_root = landing_location(landing_root)
        self.changefeed = changefeed
        self.topic = topic
        self.partition = int(partition)
        self.start = int(start)
        self.row_group_records = row_group_records
        self.row_group_bytes = row_group_bytes
        self.records = 0
        self.bytes = 0
        self.last_offset: Optional[int] = None
        self.directory = partition_dir(self.landing_root, changefeed, topic, self.partition)
        self._storage = storage_of(self.directory)
        # ``.<final name>.tmp`` when the end is known up front (Kafka), else a name that cannot be a segment
        final_name = segment_name(self.start, expected_end) if expected_end is not None else None
        self.tmp_path = self._storage.spool(self.directory, final_name or f"{self.start:020d}-open{SEGMENT_SUFFIX}")
        self._writer: Optional[pq.ParquetWriter] = None
        self._background = background
        self._jobs: list[Future] = []
        self._closed = False
        self._reset_buffer()

    def _reset_buffer(self) -> None:
        self._offsets: list[int] = []
        self._timestamps: list[Optional[int]] = []
        self._keys: list[Optional[bytes]] = []
        self._values: list[Optional[bytes]] = []
        self._headers: list[Optional[Sequence[tuple[str, Optional[bytes]]]]] = []  # None: no headers
        self._buffered_bytes = 0

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._closed:
            self.abort()

    def append(
        self,
        offset: int,
        timestamp: Optional[int],
        key: Optional[bytes],
        value: Optional[bytes],
        headers: Optional[Sequence[tuple[str, Optional[bytes]]]] = None,
    ) -> None:
        """Add one record; offsets must increase and lie at or after ``start``."""
        self.extend([offset], [timestamp], [key], [value], [headers])

    def extend(
        self,
        offsets: list[int],
        timestamps: list[Optional[int]],
        keys: list[Optional[bytes]],
        values: list[Optional[bytes]],
        headers: list[Optional[Sequence[tuple[str, Optional[bytes]]]]],
    ) -> None:
        """Add a run of records given column-wise (the fast path: one call per consumed batch).

        Offsets must increase; as Kafka delivers a partition in order only the run's ends are checked.
        """
        if not offsets:
            return
        first, last = offsets[0], offsets[-1]
        if first < self.start or last < first or (self.last_offset is not None and first <= self.last_offset):
            raise ValueError(
                f"{self.topic}/{self.partition}: offsets {first}..{last} out of order "
                f"(segment start {self.start}, last offset {self.last_offset})"
            )
        size = sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
        self._offsets.extend(offsets)
        self._timestamps.extend(timestamps)
        self._keys.extend(keys)
        self._values.extend(values)
        self._headers.extend(headers)
        self._buffered_bytes += size
        self.bytes += size
        self.records += len(offsets)
        self.last_offset = last
        if len(self._offsets) >= self.row_group_records or self._buffered_bytes >= self.row_group_bytes:
            self.flush()

    def _table(self, columns: _Columns) -> pa.Table:
        offsets, timestamps, keys, values, headers = columns
        n = len(offsets)
        return pa.Table.from_arrays(
            [
                _constant(self.topic, pa.string(), n),
                _constant(self.partition, pa.int32(), n),
                pa.array(offsets, pa.int64()),
                pa.array(timestamps, pa.int64()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                _headers_array(headers),
            ],
            schema=LANDED_SCHEMA,
        )

    def _open(self) -> pq.ParquetWriter:
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self.tmp_path, LANDED_SCHEMA, compression="zstd", use_dictionary=["topic", "partition"],
                # offset/timestamp min-max let readers prune; stats over payload bytes would only cost time
                write_statistics=["topic", "partition", "offset", "timestamp"],
            )
        return self._writer

    def _write(self, table: pa.Table) -> None:
        self._open().write_table(table, row_group_size=table.num_rows)

    def _run(self, fn: Callable[..., Any], *args: Any) -> Future:
        if self._background is None:
            done: Future = Future()
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                done.set_exception(exc)
            return done
        lane = self._background.per_segment
        if len(self._jobs) >= lane:
            wait([self._jobs[-lane]])  # this segment already has ``lane`` jobs pending
        job = self._background.submit(fn, *args, after=self._jobs[-1] if self._jobs else None)
        self._jobs.append(job)
        return job

    def flush(self) -> None:
        """Write the buffered records as one row group (in the background worker when there is one)."""
        if not self._offsets:
            return
        # Arrow arrays are built here: that needs the GIL, and doing it in the worker would make the two threads
        # trade the GIL back and forth; encoding and compression, which release it, go to the worker
        table = self._table((self._offsets, self._timestamps, self._keys, self._values, self._headers))
        self._reset_buffer()
        job = self._run(self._write, table)
        if self._background is None:
            job.result()

    def commit(self, end: int) -> Optional[Segment]:
        """Make the segment ``[start, end)`` durable under its final name; None when ``start == end``.

        Every appended offset must be below ``end``.
        """
        return self.commit_async(end).result()

    def commit_async(self, end: int) -> Future:
        """:meth:`commit` as a future (resolved at once without a background worker)."""
        if self._closed:
            raise RuntimeError("segment writer already closed")
        if end < self.start:
            raise ValueError(f"{self.topic}/{self.partition}: end {end} before start {self.start}")
        if self.last_offset is not None and self.last_offset >= end:
            raise ValueError(f"{self.topic}/{self.partition}: offset {self.last_offset} is not below end {end}")
        if end == self.start:
            self.abort()
            done: Future = Future()
            done.set_result(None)
            return done
        self.flush()
        self._closed = True
        return self._run(self._commit_now, end, list(self._jobs))

    def _commit_now(self, end: int, jobs: Sequence[Future]) -> Segment:
        try:
            for job in jobs:
                job.result()  # a failed row group write fails the commit
            writer = self._open()  # a range with no records still gets a (zero-row) file
            writer.close()
            self._writer = None
            final = self.directory / segment_name(self.start, end)
            self._storage.publish(self.tmp_path, final)
        except BaseException:
            self._discard()
            raise
        return Segment(self.topic, self.partition, self.start, end, final)

    def abort(self) -> None:
        """Drop everything written so far; the final name is never created.

        Waits for this writer's background jobs first, so no worker writes the temp file after it is deleted
        (a commit already under way completes: its segment is whole and next in line, so it may stay).
        """
        self._closed = True
        self._reset_buffer()
        for job in self._jobs:
            try:
                job.result()
            except BaseException:  # noqa: BLE001 - we are discarding the file anyway
                pass
        self._discard()

    def _discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - we are discarding the file anyway
                pass
            self._writer = None
        try:
            self.tmp_path.unlink()
        except FileNotFoundError:
            pass


def read_segment(path: Location | str) -> pa.Table:
    """A landed segment as an Arrow table (for tests and tools)."""
    location = landing_location(path)
    return pq.read_table(storage_of(location).open_input(location), schema=LANDED_SCHEMA)


def read_partition_payload(landing_root: Location | str, changefeed: str, topic: str, partition: int) -> pa.Table:
    """All landed records of a partition, in offset order (for tests and tools; reads every file)."""
    tables = [read_segment(s.path) for s in partition_segments(landing_root, changefeed, topic, partition)]
    return pa.concat_tables(tables) if tables else empty_table()


def describe_segments(segments: Mapping[tuple[str, int], Sequence[Segment]]) -> dict[str, Any]:
    """A JSON-friendly summary: per partition the landed range and file count."""
    return {
        f"{topic}/{partition}": {"start": items[0].start, "end": items[-1].end, "files": len(items)}
        for (topic, partition), items in sorted(segments.items())
        if items
    }
