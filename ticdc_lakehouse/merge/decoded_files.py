"""A run's decoded events as Parquet files the decode tasks write, read by each later pass of the run.

Why: the run reads its decoded events again for every table (or layout) it writes, for its dead letters and its
checks. Kept in Spark's cache, every event crossed from the decode task's Arrow batches into a JVM row and then
into the cache's column batches: half the decode stage's CPU (a 275k-event, four-table backfill on 2 cores: the
decode job 3.5 s with the cache, 1.9 s with files), all of it in the JVM. Written by the task's own Python worker
with pyarrow, the events never enter the JVM until a pass reads them, and each pass reads only its tables' row
groups: each task orders its events by table, a group at a time (``decode_stage.ordered_by_table``), every row
group holds one table's events or a few small tables' (``write_grouped``) and carries the least and greatest
``STAGED_KEY``, so Parquet's filter push-down skips the others'. That backfill took 10.2-10.5 s instead of 10.8-11.4 s end to end.

Where: ``<landing root>/<changefeed>/_decoded/<run id>/`` (``run_directory``), beside the landed segments that
every executor reads already (a shared file system on a cluster; the landing layout skips names starting with
``_``). A run removes its own files when it ends and any left by a killed run of its changefeed before it decodes
(it holds the changefeed's lock: no other run of it is decoding), in either setting. A task writes ``part-<partition>.parquet``
through a hidden temporary name and renames it whole, so a retried or speculative attempt replaces the file
instead of adding its events twice, and Spark's listing never sees a torn file (it skips names starting with
``.``).

Where not (``uses_files``): landing on object storage (Spark would need Hadoop's S3A connector to read the files
back), protocols whose made-up commit timestamps Spark fills over the whole run (``fill_made_up_ts``: a window
each pass would compute again), and ``merge.decoded_events = "cache"``. Those runs keep Spark's cache.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator

from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA, EVENT_SPARK_SCHEMA
from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.landing.segments import changefeed_dir
from ticdc_lakehouse.landing.storage import Location
from ticdc_lakehouse.merge.decode_stage import (
    decode_groups, decode_tasks, ordered_by_table, read_pieces, segment_pieces,
)
from ticdc_lakehouse.merge.table_events import KEY_SEPARATOR, STAGED_KEY
from ticdc_lakehouse.runtime.local_frame import row_schema

#: the setting's two values (``merge.decoded_events``)
FILES = "files"
CACHE = "cache"
DECODED_EVENTS_MODES = (FILES, CACHE)
#: the folder of a changefeed's landing directory holding its runs' decoded events
DECODED_FOLDER = "_decoded"
#: the decoded events with their table's ``table_events.STAGED_KEY``, as the files hold them
STAGED_ARROW_SCHEMA = EVENT_ARROW_SCHEMA.append(pa.field(STAGED_KEY, pa.string()))
STAGED_SPARK_SCHEMA = f"{EVENT_SPARK_SCHEMA}, {STAGED_KEY} string"
#: events per row group: small enough that a table's events fill whole row groups (only its own are read), large
#: enough for Parquet's per-group costs (measured on a four-table backfill: 2-4k best, 64k 1.5 s slower)
ROW_GROUP_EVENTS = 4096


def uses_files(mode: str, landing_root: Location, fills_made_up_ts: bool) -> bool:
    """Whether a run keeps its decoded events as files (see the module doc for when it cannot)."""
    if mode not in DECODED_EVENTS_MODES:
        raise ValueError(f"merge.decoded_events must be one of {', '.join(DECODED_EVENTS_MODES)}, not {mode!r}")
    return mode == FILES and isinstance(landing_root, Path) and not fills_made_up_ts


def decoded_root(landing_root: Location, changefeed: str) -> Path:
    """The folder of a changefeed's runs' decoded events (a local or shared file system: ``uses_files``)."""
    root = changefeed_dir(landing_root, changefeed)
    assert isinstance(root, Path), "decoded events are kept as files on a file system only"
    return root / DECODED_FOLDER


def run_directory(landing_root: Location, changefeed: str, run_id: str) -> Path:
    """The folder of one run's decoded events."""
    return decoded_root(landing_root, changefeed) / run_id


def remove_decoded(landing_root: Location, changefeed: str) -> None:
    """Remove every decoded event file of the changefeed's runs: a finished run's, or what a killed run left (a
    run calls it before it decodes, under the changefeed's lock, whether or not it keeps its events as files)."""
    if isinstance(landing_root, Path):
        shutil.rmtree(decoded_root(landing_root, changefeed), ignore_errors=True)


def staged_keys(events: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    """``table_events.STAGED_KEY`` of each decoded event."""
    schema, table = events.column("schema_name"), events.column("table_name")
    joined = pc.binary_join_element_wise(pc.ascii_lower(schema), pc.ascii_lower(table), KEY_SEPARATOR)
    ascii_names = pc.and_(pc.string_is_ascii(schema), pc.string_is_ascii(table))
    of_table = pc.and_(pc.is_valid(schema), pc.is_valid(table))
    return pc.if_else(of_table, pc.if_else(ascii_names, joined, pa.scalar(None, pa.string())), "")


def write_grouped(writer: pq.ParquetWriter, events: pa.Table, group: int = ROW_GROUP_EVENTS) -> None:
    """Write events ordered by table so that a table's events fill row groups of their own where they are many
    (``group`` or more, ``ROW_GROUP_EVENTS``), and share one with their neighbours' where they are few: a pass
    then reads about its own tables' events, and a run of hundreds of small tables not thousands of tiny row groups
    (each costs its reader a footer entry and a read per column)."""
    def write(first: int, end: int) -> None:
        if end > first:
            writer.write_table(events.slice(first, end - first), row_group_size=group)

    keys = events.column(STAGED_KEY).combine_chunks()
    start = previous = 0  # the row group being gathered: the tables' events from ``start`` to ``previous``
    for end in pc.run_end_encode(keys).run_ends.to_pylist() if len(keys) else []:
        if end - previous >= group:  # a table of many events: the gathered ones, then its own row groups
            write(start, previous)
            write(previous, end)
            start = end
        elif end - start > group:  # no room for this table beside the gathered ones
            write(start, previous)
            start = previous
        previous = end
    write(start, previous)


def file_writer(pieces, decode, directory: str, group: int = ROW_GROUP_EVENTS):
    """The decode task: decodes its pieces (``decode``: ``decode_stage.decode_groups``) into one Parquet file of
    ``directory`` named by its partition, each group ordered by table (row groups: ``write_grouped``), and returns
    its event count. Runs in the executors."""
    from pyspark import TaskContext

    def run(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        name = f"part-{TaskContext.get().partitionId():05d}.parquet"
        temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        writer = _open(temporary)
        total = 0
        try:
            for held in decode(read_pieces(pieces, numbers)):
                if held:
                    events = ordered_by_table(held)
                    write_grouped(writer, events.append_column(STAGED_KEY, staged_keys(events)), group)
                    total += events.num_rows
            writer.close()
            os.replace(temporary, os.path.join(directory, name))
        finally:
            writer.close()
            if os.path.exists(temporary):
                os.remove(temporary)
        yield pa.RecordBatch.from_pydict({"events": [total]}, schema=_COUNT_SCHEMA)

    return run


_COUNT_SCHEMA = pa.schema([("events", pa.int64())])


class DecodedEventsUnwritable(OSError):
    """The decode tasks cannot write the run's decoded events where they keep them: nothing was committed."""


#: how the failure of a task that could not write its file starts (``unwritable_in`` finds it in Spark's error)
UNWRITABLE = "cannot write the run's decoded events into "


def _open(path: str) -> pq.ParquetWriter:
    """A Parquet writer of the decoded events at ``path``, or an error saying where and what to do."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return pq.ParquetWriter(path, STAGED_ARROW_SCHEMA, compression="none")
    except OSError as exc:
        raise _unwritable(os.path.dirname(path), exc) from None


def _unwritable(directory: str, error: OSError) -> DecodedEventsUnwritable:
    return DecodedEventsUnwritable(f"{UNWRITABLE}{directory} ({type(error).__name__}: {error.strerror or error}): let "
                                   f"the executors write there, or set merge.decoded_events = \"cache\"")


def unwritable_in(error: BaseException) -> Optional[DecodedEventsUnwritable]:
    """The ``DecodedEventsUnwritable`` a decode task raised, out of the Spark error that carries it (the text of the
    executor's Python traceback), so the user sees its one line; None otherwise."""
    for line in str(error).splitlines():
        if UNWRITABLE in line:
            return DecodedEventsUnwritable(UNWRITABLE + line.split(UNWRITABLE, 1)[1].strip())
    return None


def decode_to_files(spark, paths: list[Location], start_offsets: Mapping[tuple[str, int], int], protocol: str,
                    options: DecoderOptions, stats: Optional[Accumulator], row_groups: Optional[Mapping[str, int]],
                    directory: Path, group: int = ROW_GROUP_EVENTS):
    """Decode the landed ``paths`` into Parquet files in ``directory`` (one Spark job: the decode), and return the
    events as a DataFrame of ``STAGED_SPARK_SCHEMA`` reading them. ``stats``, ``row_groups``: see
    ``decode_stage.decode_landed``; ``group``: see ``write_grouped``."""
    try:  # by the driver first: a folder no one can make fails the run before any Spark job
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(str(directory), exc) from None
    pieces: Sequence = segment_pieces(paths, row_groups or {})
    decode = decode_groups(protocol, options, stats, start_offsets)
    tasks = decode_tasks(spark, len(pieces))
    spark.range(0, len(pieces), numPartitions=tasks).mapInArrow(
        file_writer(pieces, decode, str(directory), group), row_schema("events bigint")).collect()
    return spark.read.schema(STAGED_SPARK_SCHEMA).parquet(directory.as_uri())
