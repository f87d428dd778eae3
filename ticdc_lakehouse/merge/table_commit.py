"""The driver's side of the append path (``batch_write``): which tables may take it, and one commit per table.

A table's written files and its new watermark go into the catalog in one append snapshot (the watermark and the
run's summary set on that same commit), so a reader sees all of a table's rows of the run or none, and the
table's summary still says exactly what it holds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.iceberg.java_api import JavaIceberg, watermark_of
from ticdc_lakehouse.merge.batch_write import TABLES_PER_JOB, TableLayout, WrittenFile, images, table_layout, write_files
from ticdc_lakehouse.merge.change_range import ChangeRange, FlushResult


def holds_no_rows(jtable) -> bool:
    """Whether the table's current snapshot references no data file (created in this run, or emptied by a
    TRUNCATE): then a MERGE into it only inserts. Read from the snapshot summary, no Spark job."""
    snapshot = jtable.currentSnapshot()
    if snapshot is None:
        return True
    summary = snapshot.summary()
    return int(summary.get("total-data-files") or 0) == 0 and int(summary.get("total-records") or 0) == 0


def appendable(jtable, change: ChangeRange) -> Optional[TableLayout]:
    """The table's layout when its change range may take the append path: rows to apply, a key that is never
    NULL, no rows in the lake yet, and a layout the writer handles; else None."""
    if not change.has_rows or not change.target.keys_required or not holds_no_rows(jtable):
        return None
    layout = table_layout(jtable)
    if layout is None or on_object_storage(layout.data_dir):
        return None  # the task-side writer's uploads to an S3 API are not verified yet: MERGE there
    return layout


def on_object_storage(location: str) -> bool:
    """Whether a table location is on object storage (``s3://``, ``gs://``...) rather than a file system."""
    scheme, found, _ = location.partition("://")
    return bool(found) and scheme not in ("file", "hdfs")


def commit_appends(ji: JavaIceberg, change: ChangeRange, snapshot_id: Optional[int],
                   files: Sequence[WrittenFile]) -> FlushResult:
    """Commit one table's written files with its watermark in one append snapshot.

    ``snapshot_id``: the table's snapshot when it was judged empty; a table changed since (nothing else writes
    it while the run holds its lock) fails rather than have its rows appended twice. A table whose watermark
    already reached ``upto_ts`` (a rerun after this very commit) is left alone: the files are then orphans."""
    target = change.target
    label = f"{target.namespace}.{target.name}"
    jtable = ji.load(target.namespace, target.name)
    if change.after_ts is None and watermark_of(jtable) >= change.upto_ts:
        return FlushResult(label, change.lower, change.upto_ts, False)
    current = jtable.currentSnapshot()
    if (current.snapshotId() if current is not None else None) != snapshot_id:
        raise RuntimeError(f"{label} changed while its rows were written (snapshot {snapshot_id} -> "
                           f"{current.snapshotId()}); nothing was committed: run the merge again")
    jvm = ji.jvm
    spec, io = jtable.spec(), jtable.io()
    config = jvm.org.apache.iceberg.MetricsConfig.forTable(jtable)
    partition_name = str(spec.fields()[0].name()) if spec.isPartitioned() else None
    append = jtable.newFastAppend()
    written = 0
    for file in files:
        input_file = io.newInputFile(file.path)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(input_file, config)
        builder = (jvm.org.apache.iceberg.DataFiles.builder(spec).withPath(file.path)
                   .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
                   .withFileSizeInBytes(input_file.getLength()).withMetrics(metrics))
        if partition_name is not None:
            builder = builder.withPartitionPath(f"{partition_name}={file.bucket}")
        append = append.appendFile(builder.build())
        written += int(metrics.recordCount())
    for key, value in change.properties().items():
        append = append.set(key, str(value))
    append.commit()
    target.watermark = max(target.watermark, change.upto_ts)
    fault_point("merge.after_table_commit")
    return FlushResult(label, change.lower, change.upto_ts, True, written, 0)


def append_tables(spark, ji: JavaIceberg, catalog: str, events, changes: Sequence[ChangeRange],
                  parallelism: int = 1) -> list[FlushResult]:
    """Write the change ranges of tables that hold no rows (each must pass ``appendable``) with one Spark job per
    ``TABLES_PER_JOB`` tables, then commit each table, ``parallelism`` at a time. A failure of the job (a value
    a table cannot store) raises before any commit."""
    planned = []
    for change in changes:
        jtable = ji.load(change.target.namespace, change.target.name)
        layout = appendable(jtable, change)
        if layout is None:
            raise ValueError(f"{change.target.namespace}.{change.target.name} cannot take the append path")
        snapshot = jtable.currentSnapshot()
        frame = images(change.source(events), catalog, [c.name for c in change.target.columns], layout)
        planned.append((change, snapshot.snapshotId() if snapshot is not None else None, frame, layout))
    files: list[list[WrittenFile]] = [[] for _ in planned]
    for start in range(0, len(planned), TABLES_PER_JOB):
        chunk = planned[start:start + TABLES_PER_JOB]
        for file in write_files([(frame, layout) for _, _, frame, layout in chunk]):
            files[start + file.table_index].append(file)
    fault_point("merge.before_append_commits")

    def commit(index: int) -> FlushResult:
        change, snapshot_id, _, _ = planned[index]
        return commit_appends(ji, change, snapshot_id, files[index])

    if parallelism <= 1 or len(planned) <= 1:
        return [commit(i) for i in range(len(planned))]
    with ThreadPoolExecutor(max_workers=min(parallelism, len(planned)), thread_name_prefix="commit") as pool:
        return list(pool.map(commit, range(len(planned))))
