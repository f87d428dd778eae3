"""The driver's side of the write jobs (``batch_write``): which tables may take them, and one commit per table.

Two kinds of table take them: a table that holds no rows yet (its change set's images are appended), and a small
table that does (``batch_rewrite``: rewritten whole, its files replaced in one overwrite). A table's written files
and its new watermark go into the catalog in one snapshot (the watermark and the run's summary set on that same
commit), so a reader sees all of a table's rows of the run or none, and the table's summary still says exactly
what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Sequence

from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.runtime.parallel import commits_at_once, map_at_most
from ticdc_lakehouse.iceberg.file_appender import FileEntry, add_files, replace_all_files
from ticdc_lakehouse.iceberg.java_api import JavaIceberg, watermark_of
from ticdc_lakehouse.iceberg.tables import table_records
from ticdc_lakehouse.merge.batch_write import (
    EVENTS_PER_PARTITION,
    FRAMES_PER_JOB,
    TableCounts,
    TableLayout,
    WriteFrame,
    WrittenFile,
    images,
    spread,
    table_layout,
    write_files,
    write_job_settings,
    writer_tasks,
)
from ticdc_lakehouse.merge.batch_rewrite import CARRIED, LakeTable, lake_rows_sql, rewritten_rows
from ticdc_lakehouse.merge.change_range import ChangeRange, FlushResult
from ticdc_lakehouse.merge.changes import partial_positions, tables_change_set
from ticdc_lakehouse.merge.column_slots import SlotFrame, always_sent_slots, key_signatures, packed, slot_frame
from ticdc_lakehouse.merge.read_check import ObservedChanges, check_read, observe
from ticdc_lakehouse.merge.table_events import TABLE_INDEX, TableRange


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


@dataclass(frozen=True)
class AppendPlan:
    """A change range that takes the write jobs: its table's layout, and its snapshot when planned; with
    ``lake_rows``, the table holds that many rows and is rewritten whole (read at that snapshot)."""

    change: ChangeRange
    snapshot_id: Optional[int]
    layout: TableLayout
    lake_rows: Optional[int] = None

    @property
    def rewrite(self) -> bool:
        return self.lake_rows is not None


def plan_append(ji: JavaIceberg, change: ChangeRange) -> Optional[AppendPlan]:
    """The append plan of a change range into a table that holds no rows, or None (see ``plan_write``)."""
    return plan_write(ji, change, rewrite_max_rows=0)


def plan_write(ji: JavaIceberg, change: ChangeRange, rewrite_max_rows: int) -> Optional[AppendPlan]:
    """How the write jobs apply a change range, or None when it must take a MERGE: appended when its table holds no
    rows, rewritten whole when it holds at most ``rewrite_max_rows`` (``merge.rewrite_max_rows``; its snapshot's
    ``total-records``). Either needs rows to apply, a key that is never NULL, and a layout the writers handle on a
    file system. The table is loaded once."""
    if not change.has_rows or not change.target.keys_required:
        return None
    jtable = ji.read_view(change.target.namespace, change.target.name)
    snapshot = jtable.currentSnapshot()
    snapshot_id = snapshot.snapshotId() if snapshot is not None else None
    rows = None if holds_no_rows(jtable) else table_records(snapshot)
    if rows is not None and (rewrite_max_rows <= 0 or rows > rewrite_max_rows):
        return None  # 0 or less: never rewritten, however few its rows
    layout = table_layout(ji, jtable)
    if layout is None or on_object_storage(layout.data_dir):
        return None  # the task-side writer's uploads to an S3 API are not verified yet: MERGE there
    return AppendPlan(change, snapshot_id, layout, rows)


def on_object_storage(location: str) -> bool:
    """Whether a table location is on object storage (``s3://``, ``gs://``...) rather than a file system."""
    scheme, found, _ = location.partition("://")
    return bool(found) and scheme not in ("file", "hdfs")


def commit_written(ji: JavaIceberg, plan: AppendPlan, files: Sequence[WrittenFile],
                   counts: Sequence[TableCounts]) -> FlushResult:
    """Commit one table's written files with its watermark in one snapshot: an append of its images to a table that
    held no rows, or for a rewrite (``batch_rewrite``) an overwrite replacing every file the table referenced at the
    plan's snapshot, data and delete files (see ``_table_to_commit`` for the guards). ``counts``: a rewrite's rows
    its changes wrote and removed, as the writers counted them."""
    change = plan.change
    jtable = _table_to_commit(ji, change, plan.snapshot_id,
                              "it was rewritten" if plan.rewrite else "its rows were written")
    if jtable is None:
        return FlushResult(change.label, change.lower, change.upto_ts, False)
    entries = _entries(jtable, files)
    if plan.rewrite:
        update = ji.in_calling_thread(jtable.newOverwrite())
        replace_all_files(ji.jvm, update, jtable, entries)
        written, removed = sum(c.written for c in counts), sum(c.removed for c in counts)
    else:
        update = ji.in_calling_thread(jtable.newFastAppend())
        add_files(ji.jvm, update, jtable, entries)
        written, removed = sum(file.rows for file in files), 0
    _commit_with_watermark(ji, update, change)
    return FlushResult(change.label, change.lower, change.upto_ts, True, written, removed)


def _table_to_commit(ji: JavaIceberg, change: ChangeRange, snapshot_id: Optional[int], doing: str):
    """The table to commit ``change``'s written files to; None when a rerun finds them committed already (its
    watermark reached ``upto_ts``: the files are then orphans). A table changed since ``snapshot_id`` (nothing else
    writes it while the run holds its lock) fails rather than take the rows twice or lose a change."""
    jtable = ji.read_view(change.target.namespace, change.target.name)  # created in this run: commits with its rows
    if change.after_ts is None and watermark_of(jtable) >= change.upto_ts:
        return None
    current = jtable.currentSnapshot()
    current_id = current.snapshotId() if current is not None else None
    if current_id != snapshot_id:
        raise RuntimeError(f"{change.label} changed while {doing} (snapshot {snapshot_id} -> {current_id}); nothing "
                           f"was committed: run the merge again")
    return jtable


def _entries(jtable, files: Sequence[WrittenFile]) -> list[FileEntry]:
    """The written files as the catalog gets them: each with its partition (bucket) path."""
    spec = jtable.spec()
    partition_name = str(spec.fields()[0].name()) if spec.isPartitioned() else None
    return [FileEntry(file.path, file.bytes, file.rows,
                      f"{partition_name}={file.bucket}" if partition_name is not None else None,
                      file.rows >= FULL_METRICS_ROWS)
            for file in files]


def _commit_with_watermark(ji: JavaIceberg, update, change: ChangeRange) -> None:
    """Commit ``update`` (an append or overwrite of the change's table) with the range's watermark and the run's
    summary on its snapshot, then the table's staged create if it has one (a table created in this run commits with
    its rows), and move the watermark the run knows."""
    for key, value in change.properties().items():
        update = update.set(key, str(value))
    update.commit()
    ji.commit_staged(change.target.namespace, change.target.name)
    change.target.watermark = max(change.target.watermark, change.upto_ts)
    fault_point("merge.after_table_commit")


def append_tables(spark, ji: JavaIceberg, catalog: str, events, plans: Sequence[AppendPlan],
                  parallelism: int = 1) -> list[FlushResult]:
    """Write the change ranges of tables that hold no rows or few (``plan_write``), then commit
    each table, twice ``parallelism`` at a time. A failure of the write (a value a table cannot store) raises before
    any commit, and so does a range whose change set read none of the rows its plan counted (``read_check``).

    Tables with the same layout (columns, keys, columns every change sent, partitioning) share one change set
    (``changes.tables_change_set``): the driver plans one frame per layout, not one per table; small tables of
    different columns whose keys have the same types share one frame of slots (``column_slots``, see
    ``_slot_group``): one plan for hundreds of tables of their own columns. The frames go to
    Spark jobs of ``FRAMES_PER_JOB`` at most, ``parallelism`` of them side by side, each planning its frames and
    submitting itself: the first job starts once its own frames are planned (each layout's plan is a chain of
    DataFrame calls the JVM analyses one by one, a few tenths of a second), and the other jobs' plans are analysed
    while it runs, instead of every plan before one job. A frame's collapse takes one shuffle partition per
    ``batch_write.EVENTS_PER_PARTITION`` of its own row events, so a small table is written by one task, to one
    file."""
    def row_events(indexes: Sequence[int]) -> Optional[int]:
        """The row events of these tables in the run and the rows a rewrite reads of them, None when one of them
        is not known."""
        counts = [plans[i].change.row_events for i in indexes]
        return None if None in counts else sum(counts) + sum(plans[i].lake_rows or 0 for i in indexes)

    def frame_of(members: list[int], in_slots: bool, session_partitions: int
                 ) -> tuple[list[int], WriteFrame, ObservedChanges]:
        first = plans[members[0]].change
        target = first.target
        events_in_frame = row_events(members)
        # a frame of a few tables' changes in a task or two, not in every one of the session's shuffle partitions
        partitions = None if events_in_frame is None else min(session_partitions, writer_tasks(events_in_frame))
        layouts = [plans[i].layout for i in members]
        if in_slots:
            return (members, *_slot_write_frame(spark, events, catalog, [plans[i] for i in members], partitions,
                                                events_in_frame))
        if len(members) == 1:
            source = first.source(events, partitions)
        else:
            ranges = [TableRange(plans[i].change.upstream_schema, plans[i].change.upstream_table,
                                 plans[i].change.lower, plans[i].change.upto_ts) for i in members]
            source = tables_change_set(events, ranges, target.columns, target.keys, first.always_sent,
                                       any(plans[i].change.keys_move for i in members), partitions)
        source, observed = observe(source, [plans[i].change.label for i in members])
        layout = plans[members[0]].layout
        if plans[members[0]].rewrite:
            frame = spread(rewritten_frame(spark, catalog, [plans[i] for i in members], source), catalog, layout,
                           CARRIED, events_in_frame)
        else:
            frame = images(source, catalog, [c.name for c in target.columns], layout, events_in_frame)
        return members, WriteFrame(frame, layouts), observed

    shares = _frames(plans)
    per_job = min(FRAMES_PER_JOB, max(1, -(-len(shares) // max(1, parallelism))))

    def write_job(job: list[tuple[list[int], bool]]
                  ) -> tuple[list[tuple[int, WrittenFile]], list[tuple[int, TableCounts]], list[ObservedChanges]]:
        frames = [frame_of(members, in_slots, session_partitions) for members, in_slots in job]
        order = [index for members, _, _ in frames for index in members]
        written, counted = write_files([frame for _, frame, _ in frames])
        return ([(order[file.table_index], file) for file in written],
                [(order[count.table_index], count) for count in counted],
                [observed for _, _, observed in frames])

    files: list[list[WrittenFile]] = [[] for _ in plans]
    counts: list[list[TableCounts]] = [[] for _ in plans]
    with write_job_settings(spark, row_events(range(len(plans)))):
        session_partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        jobs = map_at_most(write_job, [shares[i:i + per_job] for i in range(0, len(shares), per_job)],
                           parallelism, "write")
    for job_files, job_counts, _ in jobs:
        for index, file in job_files:
            files[index].append(file)
        for index, count in job_counts:
            counts[index].append(count)
    # before any commit: a table the planner counted rows for must have had changes read (``read_check``)
    check_read([observed for _, _, job_observed in jobs for observed in job_observed],
               [expected for expected in (plan.change.expected() for plan in plans) if expected is not None])
    fault_point("merge.before_append_commits")

    def commit(index: int) -> FlushResult:
        return commit_written(ji, plans[index], files[index], counts[index])

    return map_at_most(commit, range(len(plans)), commits_at_once(parallelism), "commit")


def _frames(plans: Sequence[AppendPlan]) -> list[tuple[list[int], bool]]:
    """The write jobs' frames, as positions in ``plans``, each with whether it is a frame of slots: small tables
    of different columns in frames of slots (``_slot_group``, ``column_slots.packed``), the others a frame per
    layout (``_shape``: tables of one layout keep their shared frame)."""
    slotted: dict[tuple, list[int]] = {}
    for index, plan in enumerate(plans):
        kind = _slot_group(plan)
        if kind is not None:
            slotted.setdefault(kind, []).append(index)
    slot_frames = []
    for members in slotted.values():
        if len({_shape(plans[i]) for i in members}) > 1:
            targets = [plans[i].change.target for i in members]
            slot_frames += [[members[i] for i in frame] for frame in packed([(t.columns, t.keys) for t in targets])]
    in_slots = {index for members in slot_frames for index in members}
    layouts: dict[tuple, list[int]] = {}
    for index, plan in enumerate(plans):
        if index not in in_slots:
            layouts.setdefault(_shape(plan), []).append(index)
    return [*[(members, True) for members in slot_frames], *[(members, False) for members in layouts.values()]]


#: a table of fewer row events than this in the run may share a frame of slots with tables of other columns
#: (``column_slots``); a bigger one keeps a plan of its own, whose planning is small beside its rows, and which
#: types only its own columns (a slot frame's rows carry every slot of its tables)
SLOT_MAX_EVENTS = EVENTS_PER_PARTITION


def _slot_group(plan: AppendPlan) -> Optional[tuple]:
    """What tables must share to be written by one frame of slots (``column_slots``), or None when the table
    cannot: a small table (``SLOT_MAX_EVENTS``) with a key, no column renamed in the run, and its files' columns
    its columns, bucketed (if at all) by its first key. Shared: the keys' signatures, the buckets, and whether the
    tables are appended to or rewritten (and keep row lineage)."""
    change, layout, target = plan.change, plan.layout, plan.change.target
    if change.renames or not target.keys:
        return None
    if change.row_events is None or change.row_events >= SLOT_MAX_EVENTS:
        return None
    if layout.bucket is not None and layout.bucket[1] != target.keys[0].name:
        return None
    if [c.name for c in layout.columns] != [c.name for c in target.columns]:
        return None
    return (key_signatures(target.keys), None if layout.bucket is None else layout.bucket[2], plan.rewrite,
            layout.row_lineage)


def _slot_write_frame(spark, events, catalog: str, plans: Sequence[AppendPlan], partitions: Optional[int],
                      row_events: Optional[int]) -> tuple[WriteFrame, ObservedChanges]:
    """The images, or rewritten rows, of tables of different columns (one ``_slot_group``) as one frame of slots,
    and the observation of their change set (``read_check``): one plan types and collapses their changes, and the
    writers take each table's slots back under its column names."""
    slots = slot_frame([(p.change.target.columns, p.change.target.keys) for p in plans])
    ranges = [TableRange(p.change.upstream_schema, p.change.upstream_table, p.change.lower, p.change.upto_ts,
                         slots.names[n]) for n, p in enumerate(plans)]
    always_sent = always_sent_slots(slots, [p.change.always_sent for p in plans])
    source = tables_change_set(events, ranges, slots.columns, slots.keys, always_sent,
                               any(p.change.keys_move for p in plans), partitions)
    source, observed = observe(source, [p.change.label for p in plans])
    layout = plans[0].layout
    if layout.bucket is not None:  # every table's bucket of its first key: the first key slot
        layout = replace(layout, bucket=(layout.bucket[0], slots.keys[0].name, layout.bucket[2]))
    if plans[0].rewrite:
        frame = spread(rewritten_frame(spark, catalog, plans, source, slots), catalog, layout, CARRIED, row_events)
    else:
        frame = images(source, catalog, [slot.name for slot in slots.columns], layout, row_events)
    return WriteFrame(frame, [p.layout for p in plans],
                      [slots.slots_of(n, [c.name for c in p.layout.columns]) for n, p in enumerate(plans)]), observed


def rewritten_frame(spark, catalog: str, plans: Sequence[AppendPlan], source, slots: Optional[SlotFrame] = None):
    """The rows of the ``plans``' tables (all rewrites of one layout, or of one ``_slot_group`` with their
    ``slots``) after their change set ``source`` (of several tables, or of the one table without
    ``TABLE_INDEX``): see ``batch_rewrite``. Each table is read at the snapshot its plan saw, which its commit
    checks is still current."""
    from pyspark.sql import functions as F

    change = plans[0].change
    target = change.target
    if TABLE_INDEX not in source.columns:
        source = source.withColumn(TABLE_INDEX, F.lit(0).cast("int"))
    columns, keys, always_sent = ((target.columns, target.keys, change.always_sent) if slots is None else
                                  (slots.columns, slots.keys,
                                   always_sent_slots(slots, [p.change.always_sent for p in plans])))
    names = [tuple(c.name for c in target.columns)] * len(plans) if slots is None else slots.names
    lake = spark.sql(lake_rows_sql([LakeTable(catalog, p.change.target.namespace, p.change.target.name,
                                              p.snapshot_id, tuple(own)) for p, own in zip(plans, names)],
                                   columns, plans[0].layout.row_lineage))
    # a task per table reads a few rows: several tables a task (read one after the other) cost less in tasks
    lake = lake.coalesce(max(1, spark.sparkContext.defaultParallelism))
    return rewritten_rows(lake, source, columns, keys, partial_positions(columns, keys, always_sent))


def _shape(plan: AppendPlan) -> tuple:
    """What tables must share to be typed and written by one frame: their columns (names, types, MySQL types),
    keys, the columns every change sent, and their files' columns and partitioning (not their location), and
    whether they are appended to or rewritten."""
    target, layout = plan.change.target, plan.layout
    alone = (plan.change.label,) if plan.change.renames else ()  # its own change set (``carry_renames``)
    return (tuple(target.columns), tuple(target.keys), plan.change.always_sent, layout.columns, layout.bucket,
            layout.compression, layout.row_lineage, plan.rewrite, *alone)
