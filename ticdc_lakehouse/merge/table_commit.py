"""The driver's side of the append path (``batch_write``): which tables may take it, and one commit per table.

A table's written files and its new watermark go into the catalog in one append snapshot (the watermark and the
run's summary set on that same commit), so a reader sees all of a table's rows of the run or none, and the
table's summary still says exactly what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.runtime.parallel import commits_at_once, map_at_most
from ticdc_lakehouse.iceberg.file_appender import FileEntry, add_files
from ticdc_lakehouse.iceberg.java_api import JavaIceberg, watermark_of
from ticdc_lakehouse.merge.batch_write import (
    FRAMES_PER_JOB,
    TableLayout,
    WrittenFile,
    images,
    table_layout,
    write_files,
    write_job_settings,
)
from ticdc_lakehouse.merge.change_range import ChangeRange, FlushResult
from ticdc_lakehouse.merge.changes import tables_change_set
from ticdc_lakehouse.merge.table_events import TableRange


#: files of at least this many rows are committed with Iceberg's column metrics (read back from their footers,
#: about 10 ms a file); smaller ones with their row count only: a reader then cannot skip them by value range,
#: which costs nothing for files this small, and a run of many small tables writes thousands of them
FULL_METRICS_ROWS = 10_000


def holds_no_rows(jtable) -> bool:
    """Whether the table's current snapshot references no data file (created in this run, or emptied by a
    TRUNCATE): then a MERGE into it only inserts. Read from the snapshot summary, no Spark job."""
    snapshot = jtable.currentSnapshot()
    if snapshot is None:
        return True
    return int(snapshot.summary().get("total-data-files") or 0) == 0 and table_records(snapshot) == 0


def table_records(snapshot) -> int:
    """The rows in a snapshot's data files (its summary's ``total-records``; deleted rows still count), 0 for
    none: what a MERGE reads of the table."""
    if snapshot is None:
        return 0
    return int(snapshot.summary().get("total-records") or 0)


@dataclass(frozen=True)
class AppendPlan:
    """A change range that takes the append path: its table's layout, and its snapshot when judged empty."""

    change: ChangeRange
    snapshot_id: Optional[int]
    layout: TableLayout


def plan_append(ji: JavaIceberg, change: ChangeRange) -> Optional[AppendPlan]:
    """The append plan of a change range, or None when it must take a MERGE (see ``appendable``)."""
    if not change.has_rows:
        return None
    jtable = ji.read_view(change.target.namespace, change.target.name)
    layout = appendable(ji, jtable, change)
    if layout is None:
        return None
    snapshot = jtable.currentSnapshot()
    return AppendPlan(change, snapshot.snapshotId() if snapshot is not None else None, layout)


def appendable(ji: JavaIceberg, jtable, change: ChangeRange) -> Optional[TableLayout]:
    """The table's layout when its change range may take the append path: rows to apply, a key that is never
    NULL, no rows in the lake yet, and a layout the writer handles; else None."""
    if not change.has_rows or not change.target.keys_required or not holds_no_rows(jtable):
        return None
    layout = table_layout(ji, jtable)
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
    jtable = ji.read_view(target.namespace, target.name)  # a table created in this run: commits with its rows
    if change.after_ts is None and watermark_of(jtable) >= change.upto_ts:
        return FlushResult(label, change.lower, change.upto_ts, False)
    current = jtable.currentSnapshot()
    if (current.snapshotId() if current is not None else None) != snapshot_id:
        raise RuntimeError(f"{label} changed while its rows were written (snapshot {snapshot_id} -> "
                           f"{current.snapshotId()}); nothing was committed: run the merge again")
    spec = jtable.spec()
    partition_name = str(spec.fields()[0].name()) if spec.isPartitioned() else None
    append = ji.in_calling_thread(jtable.newFastAppend())
    add_files(ji.jvm, append, jtable, [
        FileEntry(file.path, file.bytes, file.rows,
                  f"{partition_name}={file.bucket}" if partition_name is not None else None,
                  file.rows >= FULL_METRICS_ROWS)
        for file in files])
    written = sum(file.rows for file in files)
    for key, value in change.properties().items():
        append = append.set(key, str(value))
    append.commit()
    ji.commit_staged(target.namespace, target.name)
    target.watermark = max(target.watermark, change.upto_ts)
    fault_point("merge.after_table_commit")
    return FlushResult(label, change.lower, change.upto_ts, True, written, 0)


def append_tables(spark, ji: JavaIceberg, catalog: str, events, plans: Sequence[AppendPlan],
                  parallelism: int = 1) -> list[FlushResult]:
    """Write the change ranges of tables that hold no rows (``plan_append``), then commit each table, twice
    ``parallelism`` at a time. A failure of the write (a value a table cannot store) raises before any commit.

    Tables with the same layout (columns, keys, columns every change sent, partitioning) share one change set
    (``changes.tables_change_set``): the driver plans one frame per layout, not one per table. The frames are
    shared out over at most ``parallelism`` Spark jobs (``FRAMES_PER_JOB`` at most each) that run side by side,
    each planning its frames and submitting itself: the first job starts once its own frames are planned (each
    layout's plan is a chain of DataFrame calls the JVM analyses one by one, about half a second), and the other
    jobs' plans are analysed while it runs, instead of every plan before one job."""
    groups: dict[tuple, list[int]] = {}
    for index, plan in enumerate(plans):
        groups.setdefault(_shape(plan), []).append(index)

    def row_events(indexes: Sequence[int]) -> Optional[int]:
        """The row events of these tables in the run, None when one of them is not known."""
        counts = [plans[i].change.row_events for i in indexes]
        return None if None in counts else sum(counts)

    def frame_of(members: list[int]) -> tuple[list[int], Any, list[TableLayout]]:
        first = plans[members[0]].change
        target = first.target
        if len(members) == 1:
            source = first.source(events)
        else:
            ranges = [TableRange(plans[i].change.upstream_schema, plans[i].change.upstream_table,
                                 plans[i].change.lower, plans[i].change.upto_ts) for i in members]
            source = tables_change_set(events, ranges, target.columns, target.keys, first.always_sent)
        frame = images(source, catalog, [c.name for c in target.columns], plans[members[0]].layout,
                       row_events(members))
        return members, frame, [plans[i].layout for i in members]

    shares = list(groups.values())
    per_job = min(FRAMES_PER_JOB, max(1, -(-len(shares) // max(1, parallelism))))

    def write_job(job: list[list[int]]) -> list[tuple[int, WrittenFile]]:
        frames = [frame_of(members) for members in job]
        order = [index for members, _, _ in frames for index in members]
        return [(order[file.table_index], file) for file in write_files([(f, layouts) for _, f, layouts in frames])]

    files: list[list[WrittenFile]] = [[] for _ in plans]
    with write_job_settings(spark, row_events(range(len(plans)))):
        jobs = map_at_most(write_job, [shares[i:i + per_job] for i in range(0, len(shares), per_job)],
                           parallelism, "write")
    for job_files in jobs:
        for index, file in job_files:
            files[index].append(file)
    fault_point("merge.before_append_commits")

    def commit(index: int) -> FlushResult:
        return commit_appends(ji, plans[index].change, plans[index].snapshot_id, files[index])

    return map_at_most(commit, range(len(plans)), commits_at_once(parallelism), "commit")


def _shape(plan: AppendPlan) -> tuple:
    """What tables must share to be typed and written by one frame: their columns (names, types, MySQL types),
    keys, the columns every change sent, and their files' columns and partitioning (not their location)."""
    target, layout = plan.change.target, plan.layout
    alone = (plan.change.label,) if plan.change.renames else ()  # its own change set (``carry_renames``)
    return (tuple(target.columns), tuple(target.keys), plan.change.always_sent, layout.columns, layout.bucket,
            layout.compression, *alone)
