"""Decode landed segments in Spark executors.

Landed Parquet files are read by Spark (segments on S3: by pyarrow in the executors, :func:`object_records`) and
decoded with ``mapInArrow``, so decoding scales with the executors and no message ever passes through the driver. Each task builds its decoder once and streams record batches, and
folds the planner's aggregates over its events on the way (``staged_stats``), handed over by an accumulator.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator
from pyspark.sql import functions as F

from ticdc_lakehouse.decode import DecoderOptions, decode_safely, make_decoder
from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA, EVENT_SPARK_SCHEMA, events_to_batch
from ticdc_lakehouse.landing.segments import LANDED_SCHEMA, LANDED_SPARK_SCHEMA
from ticdc_lakehouse.landing.storage import Location, ObjectPath, storage_of
from ticdc_lakehouse.merge.staged_stats import StatsFolder, StatsPart, StatsParam
from ticdc_lakehouse.core.model import Message, SourceUnavailable

#: decoded events per output batch: bounds executor memory whatever the segment size
OUTPUT_BATCH_EVENTS = 4096
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


def decode_batches(protocol: str, options: DecoderOptions, stats: Optional[Accumulator] = None):
    """A ``mapInArrow`` function decoding landed records of ``protocol`` into the event schema; with ``stats``
    (an accumulator of ``StatsPart``), each task also adds the aggregates of the events it decoded."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with relaxed_gc():
            yield from decode_task(batches)

    def decode_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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
        else:
            yield pa.RecordBatch.from_pylist([], schema=EVENT_ARROW_SCHEMA)

    return run


def object_records(spark, paths: list[ObjectPath]):
    """The records of landed segments on S3, read by pyarrow's S3 filesystem in the executors (a DataFrame).

    Why not Spark's own Parquet reader: for ``s3://`` it needs Hadoop's S3A connector (``hadoop-aws``, its AWS SDK
    and its own credential settings) next to the S3FileIO the warehouse already uses; pyarrow's S3 filesystem is in
    every Python worker already and takes the same ``[s3]`` settings as landing. Each task reads its share of the
    segments (one index range of ``spark.range``); only the paths go from the driver to the executors.
    """
    slices = max(1, min(len(paths), spark.sparkContext.defaultParallelism * 4))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                path = paths[index]
                try:
                    for records in pq.ParquetFile(storage_of(path).open_input(path)).iter_batches(65536):
                        yield records.cast(LANDED_SCHEMA)
                except Exception as exc:  # noqa: BLE001 - named with its segment: the merge quarantines it
                    raise OSError(f"cannot read landed segment {path}: {str(exc).splitlines()[0][:200]}") from None

    return spark.range(0, len(paths), numPartitions=slices).mapInArrow(read, LANDED_SPARK_SCHEMA)


def landed_records(spark, paths: list[Location], start_offsets: Mapping[tuple[str, int], int]):
    """The landed records at or after each partition's restart offset (a DataFrame, never collected)."""
    if paths and isinstance(paths[0], ObjectPath):
        frame = object_records(spark, paths)
    else:  # a known schema: no schema-inference job
        frame = spark.read.schema(LANDED_SPARK_SCHEMA).parquet(*map(str, paths))
    if start_offsets:
        condition = None
        for (topic, partition), offset in start_offsets.items():
            clause = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < offset)
            condition = clause if condition is None else condition | clause
        frame = frame.filter(~condition)
    return frame


def decode_landed(spark, paths: list[Location], start_offsets: Mapping[tuple[str, int], int], protocol: str,
                  options: DecoderOptions, stats: Optional[Accumulator] = None):
    """Landed segments -> decoded event DataFrame with ``EVENT_SPARK_SCHEMA`` (see ``decode_batches``)."""
    records = landed_records(spark, paths, start_offsets)
    return records.mapInArrow(decode_batches(protocol, options, stats), EVENT_SPARK_SCHEMA)


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
