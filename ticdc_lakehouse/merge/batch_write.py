"""Many empty tables' changes written by a few Spark jobs, each table committed by the driver in one snapshot.

Why: a backfill or a fresh changefeed creates its tables in the run, and most of them have a few changes. Applied
one by one, each pays a MERGE's chain of Spark jobs and catalog commits (about a second), so a run's cost grew
with its number of tables, not with its changes. A table whose lake copy holds no rows needs no join: its change
set (the same typed ``changes.change_set`` the MERGE reads, so every value conversion and check is Spark's)
collapsed to the last change per key, minus the keys whose last change is a delete, is exactly what a MERGE
would insert. So:

1. per table, the typed images go through ``mapInArrow`` to a task-side writer that writes Parquet files with
   the table's Iceberg field ids, one per (task, partition bucket), into the table's data location, and returns
   one small row per file (table, path, bucket);
2. the frames' file lists are collected by jobs run ``merge.parallel_tables`` side by side (see
   ``table_commit.append_tables``): only file paths reach the driver, never rows;
3. the driver commits each table's files in one append whose snapshot carries the watermark and the run's
   summary (see ``table_commit``), tables in parallel.

Small tables that hold rows take the same jobs (``batch_rewrite``): their frame is the tables' rows after their
change sets, which the writers write whole (counting the rows the changes wrote and removed), and each table's
commit replaces all its files.

The bucket of each row is Iceberg's own ``system.bucket`` function, evaluated by Spark, so files are split
exactly as Iceberg partitions. A crash between the job and a table's commit leaves only unreferenced files
(orphans, which ``lakehouse maintain`` removes); the rerun writes the table again, or skips it when its watermark
already reached the cut. A value the table cannot store fails its job before any commit: the caller then applies
each table the ordinary way, which sets the value aside (``value_checks``).
"""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

from ticdc_lakehouse.core.sql_names import quote
from ticdc_lakehouse.iceberg.file_appender import file_system_path
from ticdc_lakehouse.merge.frame_columns import DROPPED, LINEAGE_FIELD_IDS, OP, REMOVED, WRITTEN
from ticdc_lakehouse.merge.table_events import TABLE_INDEX
from ticdc_lakehouse.runtime.local_frame import row_schema

#: the column of a table's typed images holding its Iceberg partition bucket (absent: unpartitioned)
BUCKET = "_lakehouse_bucket"
#: at most this many frames (one per table layout, see ``table_commit.append_tables``) planned into one job. One:
#: a union of frames is analysed again as it grows (every frame reads the one cached relation, which the analyser
#: then de-duplicates), and each task of its last stage deserializes every frame's plan; measured on 204 tables of
#: distinct columns (20k transactions), 64 frames a job took 189 s, 12 or 4 about 90 s, and one 64-74 s
FRAMES_PER_JOB = 1
#: row events per shuffle partition of the write job (see ``write_files``)
EVENTS_PER_PARTITION = 50_000
#: the rows the writer job returns: one per data file written, and for a rewrite (``batch_rewrite``) one per table
#: and task with the rows its changes wrote and removed (no path)
FILE_SCHEMA = "table_index int, path string, bucket int, rows bigint, bytes bigint, written bigint, removed bigint"


@dataclass(frozen=True)
class ArrowColumn:
    """One Parquet column as the table's current Iceberg schema defines it."""

    name: str
    field_id: int
    required: bool


@dataclass(frozen=True)
class TableLayout:
    """Where and how one table's data files are written, read from the table on the driver."""

    data_dir: str  # the table's data location, ending with "/"
    columns: tuple[ArrowColumn, ...]
    #: (Iceberg partition field name, source column, bucket count) or None for an unpartitioned table
    bucket: Optional[tuple[str, str, int]]
    compression: str = "zstd"
    #: the table keeps row lineage (format v3): a rewritten row keeps its row id (``batch_rewrite``)
    row_lineage: bool = False


@dataclass(frozen=True)
class WrittenFile:
    """A data file the job wrote: not part of any table until the driver commits it."""

    table_index: int
    path: str
    bucket: Optional[int]
    rows: int = 0  # as the writer counted them
    bytes: int = 0  # the file's size


@dataclass(frozen=True)
class TableCounts:
    """The rows a rewrite's changes wrote and removed in one table, as one write task counted them."""

    table_index: int
    written: int
    removed: int


def table_layout(ji, jtable) -> Optional[TableLayout]:
    """The layout of a table the append path can write, or None (a partition spec other than none or one
    ``bucket[N]`` of a column, or a column type the writer does not map). Read from the table's schema and spec
    in Iceberg's JSON form: a few gateway calls, not a few per column."""
    schema = json.loads(str(ji.java("org.apache.iceberg.SchemaParser").toJson(jtable.schema())))
    columns = []
    names: dict[int, str] = {}
    for field in schema.get("fields", []):
        if not isinstance(field["type"], str):  # a struct, list or map
            return None
        columns.append(ArrowColumn(str(field["name"]), int(field["id"]), bool(field.get("required"))))
        names[int(field["id"])] = str(field["name"])
    fields = json.loads(str(ji.java("org.apache.iceberg.PartitionSpecParser").toJson(jtable.spec()))).get("fields", [])
    bucket = None
    if len(fields) > 1:
        return None
    if fields:
        transform = str(fields[0]["transform"])
        if not transform.startswith("bucket[") or int(fields[0]["source-id"]) not in names:
            return None
        bucket = (str(fields[0]["name"]), names[int(fields[0]["source-id"])], int(transform[len("bucket["):-1]))
    probe = str(jtable.locationProvider().newDataLocation("probe"))
    codec = str(jtable.properties().getOrDefault("write.parquet.compression-codec", "zstd")).lower()
    lineage = int(ji.java("org.apache.iceberg.TableUtil").formatVersion(jtable)) >= 3
    return TableLayout(probe[: -len("probe")], tuple(columns), bucket, codec, lineage)


def images(source, catalog: str, target_columns: Sequence[str], layout: TableLayout,
           row_events: Optional[int] = None):
    """The rows a MERGE would insert into an empty table: the last image of every key whose last change is not a
    delete, every column of the table in its order, the Iceberg bucket of the row (``BUCKET``), and the
    ``TABLE_INDEX`` of a several-table change set (``changes.tables_change_set``), spread over write tasks
    (``spread``)."""
    from pyspark.sql import functions as F

    carried = [TABLE_INDEX] if TABLE_INDEX in source.columns else []
    rows = source.filter(F.col(OP) != "D").select(*[F.col(quote(name)) for name in target_columns],
                                                   *[F.col(c) for c in carried])
    return spread(rows, catalog, layout, carried, row_events)


def spread(rows, catalog: str, layout: TableLayout, carried: Sequence[str], row_events: Optional[int] = None):
    """``rows`` (the table's columns and ``carried`` ones) with the Iceberg bucket of each (``BUCKET``), each
    (table, bucket) sent to one write task, so to one file: spread over all tasks, every bucket would get a file
    per task (thousands of tiny files for a run of many small tables).

    ``row_events``: the frame's row events in the run (and lake rows, for a rewrite), when known: its rows go to
    one write task per ``EVENTS_PER_PARTITION`` of them. Each task is a round trip to a Python worker: a frame of
    8,000 rows spread over the job's shuffle partitions spent more on its tasks than on its files."""
    from pyspark.sql import functions as F

    if layout.bucket is not None:
        _, column, count = layout.bucket
        rows = rows.withColumn(BUCKET, F.expr(f"{quote(catalog)}.system.bucket({count}, {quote(column)})"))
    by = [F.col(TABLE_INDEX)] if TABLE_INDEX in carried else []
    by += [F.col(BUCKET)] if layout.bucket is not None else []
    if not by:
        return rows
    if row_events is None:
        return rows.repartition(*by)
    return rows.repartition(writer_tasks(row_events), *by)


def writer_tasks(row_events: int) -> int:
    """The write tasks (shuffle partitions) for ``row_events`` row events: one per ``EVENTS_PER_PARTITION``."""
    return max(1, -(-row_events // EVENTS_PER_PARTITION))


def file_writer(first_index: int, layouts: Sequence[TableLayout], names: Sequence[str],
                slots: Optional[Sequence[Sequence[str]]] = None):
    """The ``mapInArrow`` function of one frame of images: writes the task's rows, one Parquet file per (table,
    bucket), and yields one ``FILE_SCHEMA`` row per file. Runs in the executors.

    ``layouts``: the frame's tables, all with the same columns unless ``slots``; a frame of several tables carries
    ``TABLE_INDEX`` (the position in ``layouts``), and its files report ``first_index`` + that position.
    ``names``: the frame's column names; it reaches the writer with positional names (``write_files``), since
    Spark's ``mapInArrow`` cannot resolve a column name holding a backtick. ``slots``: for a frame of tables of
    different columns (``column_slots``), per table the frame column of each of its layout's columns, in order.

    Each batch is typed and ordered by (table, bucket) once, and each file gets its rows as slices of it, held
    until the file has ``WRITE_ROWS`` rows or the task ``WRITE_BYTES`` (then written as one row group). A task of
    a run of many small tables writes hundreds of files of a few rows: filtering every batch once per table and
    bucket, a row group per slice and a directory per bucket doubled its time (1,087 files: 2.0 s, now 0.9 s)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyarrow.fs import LocalFileSystem

        files = _TaskFiles(LocalFileSystem(), layouts)
        schema = None
        schemas: dict[int, Any] = {}  # per table of a slot frame: its files' schema
        lineage = [name for name in LINEAGE_FIELD_IDS if name in names]  # a rewrite's, see ``batch_rewrite``
        columns = [*(c.name for c in layouts[0].columns), *lineage]

        def own_columns(index: int, part):
            """A slot frame's rows of one table: its slots under its own column names (and a rewrite's lineage
            fields), typed as its files."""
            layout = layouts[index]
            own = [c.name for c in layout.columns]
            part = part.select([*slots[index], *lineage]).rename_columns([*own, *lineage])
            if index not in schemas:
                schemas[index] = _parquet_schema(part.schema, layout)
            return part.cast(schemas[index])

        counts: dict[int, list[int]] = {}  # a rewrite's: table index -> [written, removed]
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                batch = pa.RecordBatch.from_arrays(batch.columns, names=list(names))
                if WRITTEN in names:
                    batch = _counted(batch, counts)
                    if batch.num_rows == 0:
                        continue
                by_table, by_bucket = len(layouts) > 1, layouts[0].bucket is not None
                if slots is not None:
                    for key, part in _parts(batch, batch, by_table, by_bucket):
                        files.add(key, own_columns(key[0], part))
                    continue
                if schema is None:
                    schema = _parquet_schema(batch.schema, layouts[0])
                for key, part in _parts(batch, batch.select(columns).cast(schema), by_table, by_bucket):
                    files.add(key, part)
            files.flush_all(last=True)
        finally:
            files.close()
        out = [{"table_index": first_index + index, "path": path, "bucket": bucket, "rows": rows, "bytes": size}
               for (index, bucket), (path, rows, size) in files.written.items()]
        out += [{"table_index": first_index + index, "written": written, "removed": removed}
                for index, (written, removed) in counts.items()]
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=pa.schema([
                ("table_index", pa.int32()), ("path", pa.string()), ("bucket", pa.int32()), ("rows", pa.int64()),
                ("bytes", pa.int64()), ("written", pa.int64()), ("removed", pa.int64())]))

    return write


#: a file's pending rows are written (one row group) once it holds this many; every file's once the task
#: holds ``WRITE_BYTES`` of them
WRITE_ROWS = 100_000
WRITE_BYTES = 64 << 20
#: a file written whole at the end of its task with fewer rows than this is not compressed: zstd sets up a
#: context per column chunk, which was half the cost of writing a file of a few dozen rows (0.43 vs 0.18 ms; a
#: run of 204 small tables writes 3,264 such files), to save a few hundred bytes. Readers take the codec from
#: each file's footer, not from the table's ``write.parquet.compression-codec``.
SMALL_FILE_ROWS = 1_000


class _TaskFiles:
    """The data files one write task is writing: one per (table index, bucket), each opened at its first
    write, its rows held as Arrow slices until then (see ``file_writer``)."""

    def __init__(self, local, layouts: Sequence[TableLayout]):
        self.local = local
        self.layouts = layouts
        self.directories: set[str] = set()  # created by this task already: one call per directory, not per file
        self.pending: dict[tuple[int, Optional[int]], list[Any]] = {}  # the slices not written yet
        self.held_bytes = 0  # theirs, over every file
        self.open: dict[tuple[int, Optional[int]], tuple[Any, Any, str]] = {}  # writer, stream, path
        self.rows: dict[tuple[int, Optional[int]], int] = {}
        #: the files closed: (table index, bucket) -> (path, rows, bytes)
        self.written: dict[tuple[int, Optional[int]], tuple[str, int, int]] = {}

    def add(self, key: tuple[int, Optional[int]], part) -> None:
        parts = self.pending.setdefault(key, [])
        parts.append(part)
        self.held_bytes += part.nbytes
        if sum(p.num_rows for p in parts) >= WRITE_ROWS:
            self._flush(key)
        elif self.held_bytes >= WRITE_BYTES:
            self.flush_all()

    def flush_all(self, last: bool = False) -> None:
        """Write every file's pending rows; ``last``: the task has no more rows (each file is then whole)."""
        for key in list(self.pending):
            self._flush(key, last)

    def _flush(self, key: tuple[int, Optional[int]], last: bool = False) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts = self.pending.pop(key)
        self.held_bytes -= sum(part.nbytes for part in parts)
        rows = sum(part.num_rows for part in parts)
        if key not in self.open:
            index, bucket = key
            layout = self.layouts[index]
            # every file of the table in its data directory, the bucket in the file's name: Iceberg records each
            # file's partition itself, and a directory per bucket cost a directory creation per file
            prefix = f"{layout.bucket[0]}={bucket}-" if layout.bucket is not None else ""
            path = f"{layout.data_dir}{prefix}{uuid.uuid4().hex}-lakehouse.parquet"
            inner = file_system_path(path)  # object storage never comes here (``table_commit.plan_write``)
            parent = inner.rsplit("/", 1)[0]
            if parent not in self.directories:
                self.local.create_dir(parent, recursive=True)
                self.directories.add(parent)
            stream = self.local.open_output_stream(inner)
            small = last and rows < SMALL_FILE_ROWS  # the whole file, and small (see SMALL_FILE_ROWS)
            writer = pq.ParquetWriter(stream, parts[0].schema, compression="none" if small else layout.compression,
                                      store_decimal_as_integer=True, write_statistics=True)
            self.open[key] = (writer, stream, path)
            self.rows[key] = 0
        self.open[key][0].write_table(pa.Table.from_batches(parts))
        self.rows[key] += rows

    def close(self) -> None:
        """Close every open file (also after a failure: no file handle outlives the task)."""
        for key, (writer, stream, path) in self.open.items():
            writer.close()  # writes the footer to the stream
            size = stream.tell()
            stream.close()
            self.written[key] = (path, self.rows[key], size)
        self.open.clear()


def _parts(batch, rows, by_table: bool, by_bucket: bool) -> Iterator[tuple[tuple[int, Optional[int]], Any]]:
    """The ``rows`` (a batch of images, or its columns typed as the files) for each (table index, bucket) the
    ``batch`` holds: ordered by (table, bucket) once, each part a zero-copy slice."""
    import numpy as np
    import pyarrow as pa

    if not by_table and not by_bucket:
        yield (0, None), rows
        return

    def ints(column: str, present: bool):
        return (batch.column(column).to_numpy(zero_copy_only=False).astype(np.int64) if present
                else np.zeros(batch.num_rows, np.int64))

    keys = (ints(TABLE_INDEX, by_table) << 32) | ints(BUCKET, by_bucket)  # both small and never negative
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    rows = rows.take(pa.array(order))
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    ends = np.append(starts[1:], len(keys))
    for start, end in zip(starts.tolist(), ends.tolist()):
        key = int(keys[start])
        yield (key >> 32, key & 0xFFFFFFFF if by_bucket else None), rows.slice(start, end - start)


def _counted(batch, counts: dict[int, list[int]]):
    """Add a batch of a rewrite's rows (``batch_rewrite.rewritten_rows``) to ``counts`` (table index -> rows
    written, rows removed) and return the rows to write (those a delete removed are only counted)."""
    import numpy as np
    import pyarrow.compute as pc

    tables = batch.column(TABLE_INDEX).to_numpy(zero_copy_only=False).astype(np.int64)
    size = int(tables.max()) + 1
    written = np.bincount(tables, batch.column(WRITTEN).to_numpy(zero_copy_only=False), size)
    removed = np.bincount(tables, batch.column(REMOVED).to_numpy(zero_copy_only=False), size)
    for index in np.unique(tables).tolist():
        entry = counts.setdefault(index, [0, 0])
        entry[0] += int(written[index])
        entry[1] += int(removed[index])
    return batch.filter(pc.invert(batch.column(DROPPED)))


def _with_lineage(columns: Sequence[ArrowColumn], arrow_schema) -> list[ArrowColumn]:
    """The table's columns, and the row-lineage fields where the rows carry them (a rewrite of a v3 table)."""
    return [*columns, *[ArrowColumn(name, field_id, False) for name, field_id in LINEAGE_FIELD_IDS.items()
                        if arrow_schema.get_field_index(name) >= 0]]


def _parquet_schema(arrow_schema, layout: TableLayout):
    """The Arrow schema of the written files: the table's columns in order, each with its Iceberg field id and
    its required flag (Spark's own Arrow types: ``timestamp_ntz`` has no zone, ``timestamp`` is UTC)."""
    import pyarrow as pa

    fields = []
    for column in _with_lineage(layout.columns, arrow_schema):
        source = arrow_schema.field(column.name)
        kind = source.type
        if pa.types.is_large_string(kind):
            kind = pa.string()
        elif pa.types.is_large_binary(kind):
            kind = pa.binary()
        fields.append(pa.field(column.name, kind, nullable=not column.required,
                               metadata={b"PARQUET:field_id": str(column.field_id).encode()}))
    return pa.schema(fields)


@dataclass(frozen=True)
class WriteFrame:
    """A frame of rows to write (``images``, or a rewrite's rows: ``batch_rewrite``), the layouts of its tables,
    and for a frame of tables of different columns each table's slots (see ``file_writer``)."""

    rows: Any
    layouts: Sequence[TableLayout]
    slots: Optional[Sequence[Sequence[str]]] = None


def write_files(frames: Sequence[WriteFrame]) -> tuple[list[WrittenFile], list[TableCounts]]:
    """Write every frame in one Spark job, under ``write_job_settings``; the files written and a rewrite's counts,
    per table index (tables numbered across ``frames`` in order). Nothing is committed."""
    if not frames:
        return [], []
    union = None
    first = 0
    for frame in frames:
        layouts = frame.layouts
        names = list(frame.rows.columns)
        positional = frame.rows.toDF(*[f"_c{i}" for i in range(len(names))])
        files = positional.mapInArrow(file_writer(first, layouts, names, frame.slots), row_schema(FILE_SCHEMA))
        union = files if union is None else union.unionAll(files)
        first += len(layouts)
    rows = union.collect()  # a row per file and per (task, rewritten table): never a table row
    files = [WrittenFile(int(r["table_index"]), str(r["path"]), None if r["bucket"] is None else int(r["bucket"]),
                         int(r["rows"]), int(r["bytes"])) for r in rows if r["path"] is not None]
    counts = [TableCounts(int(r["table_index"]), int(r["written"]), int(r["removed"]))
              for r in rows if r["path"] is None]
    return files, counts


@contextmanager
def write_job_settings(spark, row_events: Optional[int]) -> Iterator[None]:
    """The session's settings for the write jobs of a run, set once around all of them (they run side by side,
    and these settings are the session's).

    Adaptive execution is off: it re-plans a job's whole union after each of its shuffle stages, which grows
    with the square of the frames (measured: most of a 204-table run's driver time). Without it nothing
    coalesces small shuffles, so the shuffles get one partition per ``EVENTS_PER_PARTITION`` of the run's
    ``row_events`` (at most the session's ``spark.sql.shuffle.partitions``)."""
    from ticdc_lakehouse.runtime.spark_session import ADAPTIVE, session_conf

    values = {ADAPTIVE: "false"}
    if row_events is not None:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        values["spark.sql.shuffle.partitions"] = str(min(partitions, writer_tasks(row_events)))
    with session_conf(spark, values):
        yield
