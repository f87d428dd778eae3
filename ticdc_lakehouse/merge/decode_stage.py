"""Decode landed segments in Spark executors.

Each decode task reads its share of the landed Parquet segments with pyarrow, in its Python worker, and decodes
them there (``mapInArrow`` over piece numbers): no message passes through the driver, and none through the JVM on
its way to the decoder. Spark's own Parquet reader would assemble every record into a JVM row and convert it back
to Arrow for the worker (measured: 0.7 s of a warm JVM for 110 MB of messages, pyarrow 0.25 s), and for S3 it
would need Hadoop's S3A connector beside the S3FileIO the warehouse uses. Local segments are split by row group
(counted by the landing check, which reads every footer before a merge), so tasks get even shares; segments on
object storage are read whole (each task reading a row group would read the footer again: a request). Each task
builds its decoder once, streams record batches, and folds the planner's aggregates over its events on the way
(``staged_stats``), handed over by an accumulator.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator

from ticdc_lakehouse.decode import DecoderOptions, decode_safely, make_decoder
from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA, EVENT_SPARK_SCHEMA, events_to_batch
from ticdc_lakehouse.landing.quarantine import UNREADABLE_SEGMENT
from ticdc_lakehouse.landing.segments import LANDED_SCHEMA
from ticdc_lakehouse.landing.storage import Location, ObjectPath, storage_of
from ticdc_lakehouse.runtime.local_frame import row_schema
from ticdc_lakehouse.merge.staged_stats import StatsFolder, StatsPart, StatsParam
from ticdc_lakehouse.core.model import Message, SourceUnavailable

#: decoded events per output batch: bounds executor memory whatever the segment size
OUTPUT_BATCH_EVENTS = 4096
#: decoded events a task holds (as Arrow batches, about 25 MB) to hand them over grouped by table (see
#: ``grouped_by_table``): a task of at most this many events hands them over fully grouped
GROUP_EVENTS = 65_536
#: decode tasks per core of the session, each reading its share of the landed pieces: two even out the pieces'
#: sizes (a task that finishes early takes another); four cost each task's start again for nothing (a 275k-event
#: backfill, side by side: 0.97x CPU with two, in three of three pairs, and no slower decode alone)
DECODE_TASKS_PER_CORE = 2
#: collector thresholds while a task decodes (Python's default is (700, 10, 10))
DECODE_GC_THRESHOLDS = (50_000, 50, 100)


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Run the cyclic garbage collector rarely while decoding.

    Decoding allocates millions of small acyclic objects (events, value dicts) that reference counting frees; with
    the default thresholds the collector still walks the young ones every 700 allocations, a fifth of a task's
    time. Cycles (rare: an exception kept with its traceback) are still collected, only less often."""
    previous = gc.get_threshold()
    gc.set_threshold(*DECODE_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def decode_batches(protocol: str, options: DecoderOptions, stats: Optional[Accumulator] = None,
                   start_offsets: Optional[Mapping[tuple[str, int], int]] = None):
    """A function decoding batches of landed records of ``protocol`` into batches of the event schema, each group
    of them (``decode_groups``) grouped by table (``grouped_by_table``)."""
    groups = decode_groups(protocol, options, stats, start_offsets)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for held in groups(batches):
            yield from grouped_by_table(held)

    return run


def decode_groups(protocol: str, options: DecoderOptions, stats: Optional[Accumulator] = None,
                  start_offsets: Optional[Mapping[tuple[str, int], int]] = None):
    """A function decoding batches of landed records of ``protocol`` into groups of batches of the event schema,
    ``GROUP_EVENTS`` events or a few more a group (the last may be empty), for the caller to order by table: a task
    holds one group at a time. With ``stats`` (an accumulator of ``StatsPart``), each task also adds the aggregates
    of the events it decoded. ``start_offsets``: per (topic, partition), the first offset to decode (the records
    before it are skipped)."""
    starts = dict(start_offsets or {})

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[list[pa.RecordBatch]]:
        with relaxed_gc():
            held: list[pa.RecordBatch] = []
            for batch in decoded_batches(batches):
                held.append(batch)
                if sum(b.num_rows for b in held) >= GROUP_EVENTS:
                    yield held
                    held = []
            yield held

    def decoded_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = make_decoder(protocol, options)
        folder = StatsFolder() if stats is not None else None
        pending = []
        for batch in batches:
            data = batch.to_pydict()
            headers_column = data.get("headers") or [None] * batch.num_rows
            for topic, partition, offset, timestamp, key, value, headers in zip(
                data["topic"], data["partition"], data["offset"], data["timestamp"], data["key"], data["value"],
                headers_column,
            ):
                if starts and offset < starts.get((topic, partition), 0):
                    continue  # applied by an earlier run
                pairs = tuple((h["key"], h["value"]) for h in headers) if headers else ()
                message = Message(topic, partition, offset, key, value, pairs, timestamp)
                pending.extend(decode_safely(decoder, message))
                if len(pending) >= OUTPUT_BATCH_EVENTS:
                    if folder is not None:
                        folder.add(pending)
                    yield events_to_batch(pending)
                    pending = []
        if folder is not None:
            # before the last yield: code after it may never run if the consumer stops at the last batch
            folder.add(pending)
            stats.add(folder.finish())
        if pending:
            yield events_to_batch(pending)

    return run


def grouped_by_table(batches: Sequence[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` of decoded events again, each table's events next to each other (ordered by lower-cased schema
    and table name, events of no table last), in batches of ``OUTPUT_BATCH_EVENTS``; one empty batch for none.

    Why: the run caches the decoded events in column batches, and each change set finds its tables' events by the
    least and greatest table name of each batch (``table_events.TABLE_KEY``): batches holding few tables
    each spare every change set the others' events. Spark sorted each decode task's output by table for that: a
    sort of every event with its string maps, a sixth of the decode stage (0.55 s of 3.7 s for 275k events, a
    warm session). Arrow sorts a task's batches by their two name columns in a few milliseconds. Python's and
    Spark's lower-casing may differ for a few letters outside ASCII: such a table's events may then lie in two
    groups, which costs a scan a batch more, never an event (the scans filter on Spark's own key)."""
    if not batches:
        yield pa.RecordBatch.from_pylist([], schema=EVENT_ARROW_SCHEMA)
        return
    yield from ordered_by_table(batches).to_batches(max_chunksize=OUTPUT_BATCH_EVENTS)


def ordered_by_table(batches: Sequence[pa.RecordBatch]) -> pa.Table:
    """``batches`` of decoded events as one table, ordered by lower-cased schema and table name, events of no table
    last (see ``grouped_by_table``)."""
    events = pa.Table.from_batches(batches, schema=EVENT_ARROW_SCHEMA)
    names = pa.table({"schema": pc.utf8_lower(events.column("schema_name")),
                      "table": pc.utf8_lower(events.column("table_name"))})
    order = pc.sort_indices(names, sort_keys=[("schema", "ascending", "at_end"), ("table", "ascending", "at_end")])
    return events.take(order)


@dataclass(frozen=True)
class SegmentPiece:
    """The part of a landed segment one decode task reads: some of its row groups, or all of it."""

    path: Location
    row_groups: Optional[tuple[int, ...]] = None  # None: the whole file


def segment_pieces(paths: Sequence[Location], row_groups: Mapping[str, int]) -> list[SegmentPiece]:
    """The pieces the decode tasks share: a local segment one per row group (``row_groups``: the counts the
    landing check read from the footers, by ``str(path)``), a segment on object storage or of unknown row groups
    whole."""
    pieces: list[SegmentPiece] = []
    for path in paths:
        groups = 0 if isinstance(path, ObjectPath) else row_groups.get(str(path), 0)
        pieces.extend([SegmentPiece(path, (group,)) for group in range(groups)] if groups else [SegmentPiece(path)])
    return pieces


def read_pieces(pieces: Sequence[SegmentPiece], numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The landed records of the pieces a task got (``numbers``: batches of piece indexes), in landed order. Runs
    in the executors. A segment that cannot be read raises ``OSError`` naming it (``landing.quarantine`` moves it
    aside)."""
    for batch in numbers:
        for index in batch.column(0).to_pylist():
            piece = pieces[index]
            try:
                source = pq.ParquetFile(storage_of(piece.path).open_input(piece.path))
                for records in source.iter_batches(65536, row_groups=piece.row_groups):
                    yield records.cast(LANDED_SCHEMA)
            except Exception as exc:  # noqa: BLE001 - named with its segment: the merge quarantines it
                raise OSError(f"{UNREADABLE_SEGMENT} {piece.path}: {str(exc).splitlines()[0][:200]}") from None


def decode_landed(spark, paths: list[Location], start_offsets: Mapping[tuple[str, int], int], protocol: str,
                  options: DecoderOptions, stats: Optional[Accumulator] = None,
                  row_groups: Optional[Mapping[str, int]] = None):
    """Landed segments -> decoded event DataFrame with ``EVENT_SPARK_SCHEMA`` (see the module doc): the records at
    or after each partition's restart offset, never collected. ``row_groups``: see ``segment_pieces``."""
    pieces = segment_pieces(paths, row_groups or {})
    decode = decode_batches(protocol, options, stats, start_offsets)

    def run(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from decode(read_pieces(pieces, numbers))

    return spark.range(0, len(pieces), numPartitions=decode_tasks(spark, len(pieces))).mapInArrow(
        run, row_schema(EVENT_SPARK_SCHEMA))


def decode_tasks(spark, pieces: int) -> int:
    """The decode job's task count for ``pieces`` pieces (``DECODE_TASKS_PER_CORE``)."""
    return max(1, min(pieces, spark.sparkContext.defaultParallelism * DECODE_TASKS_PER_CORE))


def warm_decode_workers(context, protocol: str) -> None:
    """Start the Python workers of the session being created on ``context`` (its ``SparkContext``), one per core,
    with ``protocol``'s decoder built (the daemon they fork from has imported the rest, ``runtime.python_daemon``).

    Why: a fresh driver's first Python tasks wait for pyspark's daemon to start and import pyarrow, pandas, the
    decode stage and the decoders (0.7-0.9 s of the decode's first tasks, in every run). The context exists about
    a second and a half before the session (the session extensions, Scala's reflection, the catalog), and a job of
    the RDD API needs no session: run then, the workers start beside the session's creation and the decode finds
    them ready (Spark reuses an idle worker for the next task). Measured, interleaved: 0.5-0.6 s a run.

    SQL's Python tasks (``mapInArrow``) take workers of the same daemon only when their environment is the same:
    Spark keys its worker daemons by the tasks' environment variables, and adds ``SPARK_SIMPLIFIED_TRACEBACK=1``
    to those of SQL's tasks; our sessions give it to every Python task (``spark.executorEnv.``, see
    ``spark_session.spark_plan``). A warm-up: its caller (``SparkStart``'s ``on_context``) only logs what it
    raises, and the decode meets and reports any real failure itself."""
    def warm(numbers: Iterator[int]) -> Iterator[int]:
        make_decoder(protocol)
        return iter(())

    cores = max(1, context.defaultParallelism)
    context.parallelize(range(cores), cores).mapPartitions(warm).collect()


def stats_accumulator(spark) -> Accumulator:
    """A fresh accumulator for the aggregates of one decode (read ``.value`` after the decoding action)."""
    return spark.sparkContext.accumulator(StatsPart(), StatsParam())


def source_unavailable_in(error: BaseException) -> Optional[SourceUnavailable]:
    """The ``SourceUnavailable`` a decode task raised, out of the Spark error that carries it (as the text of the
    executor's Python traceback), so the user sees its one clear line instead of a JVM stack; None otherwise."""
    marker = SourceUnavailable.__name__ + ": "
    for line in str(error).splitlines():
        if marker in line:
            return SourceUnavailable(line.split(marker, 1)[1].strip())
    return None
