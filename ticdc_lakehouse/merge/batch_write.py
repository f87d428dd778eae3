"""Many empty tables' changes written by one Spark job, each table committed by the driver in one snapshot.

Why: a backfill or a fresh changefeed creates its tables in the run, and most of them have a few changes. Applied
one by one, each pays a MERGE's chain of Spark jobs and catalog commits (about a second), so a run's cost grew
with its number of tables, not with its changes. A table whose lake copy holds no rows needs no join: its change
set (the same typed ``changes.change_set`` the MERGE reads, so every value conversion and check is Spark's)
collapsed to the last change per key, minus the keys whose last change is a delete, is exactly what a MERGE
would insert. So:

1. per table, the typed images go through ``mapInArrow`` to a task-side writer that writes Parquet files with
   the table's Iceberg field ids, one per (task, partition bucket), into the table's data location, and returns
   one small row per file (table, path, bucket);
2. the tables' file lists are unioned and run as one job: only file paths reach the driver, never rows;
3. the driver commits each table's files in one append whose snapshot carries the watermark and the run's
   summary (see ``table_commit``), tables in parallel.

The bucket of each row is Iceberg's own ``system.bucket`` function, evaluated by Spark, so files are split
exactly as Iceberg partitions. A crash between the job and a table's commit leaves only unreferenced files
(orphans, which ``lakehouse maintain`` removes); the rerun writes the table again, or skips it when its watermark
already reached the cut. A value the table cannot store fails the job before any commit: the caller then applies
each table the ordinary way, which sets the value aside (``value_checks``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

from ticdc_lakehouse.core.sql_names import quote
from ticdc_lakehouse.merge.changes import OP
from ticdc_lakehouse.merge.table_events import TABLE_INDEX

#: the column of a table's typed images holding its Iceberg partition bucket (absent: unpartitioned)
BUCKET = "_lakehouse_bucket"
#: at most this many frames (one per table layout, see ``table_commit.append_tables``) planned into one job: a
#: union of thousands of plans is slow to analyse
FRAMES_PER_JOB = 64
#: row events per shuffle partition of the write job (see ``write_files``)
EVENTS_PER_PARTITION = 50_000
#: the rows the writer job returns: one per data file written
FILE_SCHEMA = "table_index int, path string, bucket int, rows bigint, bytes bigint"


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


@dataclass(frozen=True)
class WrittenFile:
    """A data file the job wrote: not part of any table until the driver commits it."""

    table_index: int
    path: str
    bucket: Optional[int]
    rows: int = 0  # as the writer counted them
    bytes: int = 0  # the file's size


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
    return TableLayout(probe[: -len("probe")], tuple(columns), bucket, codec)


def images(source, catalog: str, target_columns: Sequence[str], layout: TableLayout):
    """The rows a MERGE would insert into an empty table: the last image of every key whose last change is not a
    delete, every column of the table in its order, the Iceberg bucket of the row (``BUCKET``), and the
    ``TABLE_INDEX`` of a several-table change set (``changes.tables_change_set``)."""
    from pyspark.sql import functions as F

    carried = [F.col(TABLE_INDEX)] if TABLE_INDEX in source.columns else []
    rows = source.filter(F.col(OP) != "D").select(*[F.col(quote(name)) for name in target_columns], *carried)
    if layout.bucket is not None:
        _, column, count = layout.bucket
        rows = rows.withColumn(BUCKET, F.expr(f"{quote(catalog)}.system.bucket({count}, {quote(column)})"))
    # each (table, bucket) to one task, so to one file: the collapse spread every bucket over all its tasks
    # (a file per task and bucket: thousands of tiny files for a run of many small tables)
    spread = carried + ([F.col(BUCKET)] if layout.bucket is not None else [])
    return rows.repartition(*spread) if spread else rows


def _local_path(location: str) -> str:
    """The file-system path of a data file location (``file:/...`` or a bare path); object storage never takes
    this path (``table_commit.appendable``)."""
    if location.startswith("file:"):
        location = location[len("file:"):]
        while location.startswith("//"):
            location = location[1:]
    return location


def file_writer(first_index: int, layouts: Sequence[TableLayout], names: Sequence[str]):
    """The ``mapInArrow`` function of one frame of images: writes the task's rows, one Parquet file per (table,
    bucket), and yields one ``FILE_SCHEMA`` row per file. Runs in the executors.

    ``layouts``: the frame's tables, all with the same columns; a frame of several tables carries
    ``TABLE_INDEX`` (the position in ``layouts``), and its files report ``first_index`` + that position.
    ``names``: the frame's column names; it reaches the writer with positional names (``write_files``), since
    Spark's ``mapInArrow`` cannot resolve a column name holding a backtick."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyarrow.fs import LocalFileSystem

        local = LocalFileSystem()
        directories: set[str] = set()  # created by this task already: one call per bucket directory, not per file
        writers: dict[tuple[int, Optional[int]], tuple[Any, str, Any]] = {}
        counts: dict[tuple[int, Optional[int]], int] = {}
        schema = None
        columns = [c.name for c in layouts[0].columns]
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                batch = pa.RecordBatch.from_arrays(batch.columns, names=list(names))
                if schema is None:
                    schema = _parquet_schema(batch.schema, layouts[0])
                for index, bucket, part in _split(batch, pc, len(layouts) > 1, layouts[0].bucket is not None):
                    layout = layouts[index]
                    if (index, bucket) not in writers:
                        directory = layout.data_dir
                        if layout.bucket is not None:
                            directory += f"{layout.bucket[0]}={bucket}/"
                        path = f"{directory}{uuid.uuid4().hex}-lakehouse.parquet"
                        inner = _local_path(path)
                        parent = inner.rsplit("/", 1)[0]
                        if parent not in directories:
                            local.create_dir(parent, recursive=True)
                            directories.add(parent)
                        stream = local.open_output_stream(inner)
                        writer = pq.ParquetWriter(stream, schema, compression=layout.compression,
                                                  store_decimal_as_integer=True, write_statistics=True)
                        writers[(index, bucket)] = (writer, path, stream)
                        counts[(index, bucket)] = 0
                    writers[(index, bucket)][0].write_table(
                        pa.Table.from_batches([part.select(columns)]).cast(schema))
                    counts[(index, bucket)] += part.num_rows
        finally:
            for writer, _, stream in writers.values():
                writer.close()
                stream.close()
        if writers:
            yield pa.RecordBatch.from_pylist(
                [{"table_index": first_index + index, "path": path, "bucket": bucket, "rows": counts[(index, bucket)],
                  "bytes": local.get_file_info(_local_path(path)).size}
                 for (index, bucket), (_, path, _) in writers.items()],
                schema=pa.schema([("table_index", pa.int32()), ("path", pa.string()), ("bucket", pa.int32()),
                                  ("rows", pa.int64()), ("bytes", pa.int64())]))

    return write


def _split(batch, pc, by_table: bool, by_bucket: bool) -> Iterator[tuple[int, Optional[int], Any]]:
    """The parts of a batch of images, one per (table index, bucket) it holds."""
    tables = pc.unique(batch.column(TABLE_INDEX)).to_pylist() if by_table else [0]
    for index in tables:
        rows = batch.filter(pc.equal(batch.column(TABLE_INDEX), index)) if by_table else batch
        buckets = pc.unique(rows.column(BUCKET)).to_pylist() if by_bucket else [None]
        for bucket in buckets:
            yield index, bucket, rows if bucket is None else rows.filter(pc.equal(rows.column(BUCKET), bucket))


def _parquet_schema(arrow_schema, layout: TableLayout):
    """The Arrow schema of the written files: the table's columns in order, each with its Iceberg field id and
    its required flag (Spark's own Arrow types: ``timestamp_ntz`` has no zone, ``timestamp`` is UTC)."""
    import pyarrow as pa

    fields = []
    for column in layout.columns:
        source = arrow_schema.field(column.name)
        kind = source.type
        if pa.types.is_large_string(kind):
            kind = pa.string()
        elif pa.types.is_large_binary(kind):
            kind = pa.binary()
        fields.append(pa.field(column.name, kind, nullable=not column.required,
                               metadata={b"PARQUET:field_id": str(column.field_id).encode()}))
    return pa.schema(fields)


def write_files(frames: Sequence[tuple[Any, Sequence[TableLayout]]], row_events: Optional[int] = None
                ) -> list[WrittenFile]:
    """Write every frame of images (``images``; a frame holds the tables of its layouts) in one Spark job; the
    files written, per table index (tables numbered across ``frames`` in order). Nothing is committed.

    Adaptive execution is off for the job: it re-plans the whole union after each of its shuffle stages, which
    grows with the square of the frames (measured: most of a 204-table run's driver time). Without it nothing
    coalesces small shuffles, so the job's shuffles get one partition per ``EVENTS_PER_PARTITION`` of its
    ``row_events`` (at most the session's ``spark.sql.shuffle.partitions``)."""
    if not frames:
        return []
    union = None
    first = 0
    for frame, layouts in frames:
        names = list(frame.columns)
        positional = frame.toDF(*[f"_c{i}" for i in range(len(names))])
        files = positional.mapInArrow(file_writer(first, layouts, names), FILE_SCHEMA)
        union = files if union is None else union.unionAll(files)
        first += len(layouts)
    spark = union.sparkSession
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    if row_events is not None:
        wanted = max(1, min(int(partitions), -(-row_events // EVENTS_PER_PARTITION)))
        spark.conf.set("spark.sql.shuffle.partitions", str(wanted))
    try:
        rows = union.collect()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    return [WrittenFile(int(r["table_index"]), str(r["path"]), None if r["bucket"] is None else int(r["bucket"]),
                        int(r["rows"]), int(r["bytes"])) for r in rows]
