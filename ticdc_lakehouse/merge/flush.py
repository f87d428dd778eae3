"""Merge one table's changes in one commit-ts range into its Iceberg table.

The MERGE and the new watermark (``tidb.resolved-ts`` in the snapshot summary) commit together, so after a crash
the table's own summary says exactly what it already holds and the rerun continues after it.

Two ways to apply a change set (the last change of each key):

* ``MERGE INTO`` (the general way): an outer join of the table with the change set, so every row of the table is
  read and shuffled to meet its change, whatever the number of changes.
* the staged way, when every change carries every column (so no update needs a value from the table) and the
  table holds at least ``merge.staged_min_rows`` rows: on a staging branch, delete the rows of every changed key
  (the change set's keys are broadcast: the table is only scanned, not shuffled), append the new images, then
  fast-forward ``main`` to the branch in one atomic catalog commit, watermark included. Readers never see the
  deletes without the appends; a crash before the fast-forward leaves ``main`` untouched, and the next flush of
  the table drops the stale branch (either way). It costs half a MERGE on a table of millions of rows. The
  broadcast keys pass through the driver, so only change sets of at most ``STAGED_MAX_EVENTS`` row events take
  it.
"""

from __future__ import annotations

import itertools
import re
import uuid
from typing import Mapping, Optional

from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.iceberg.commit import run_with_snapshot_properties
from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, JavaIceberg, watermark_of
from ticdc_lakehouse.iceberg.tables import TargetTable, table_records
from ticdc_lakehouse.merge.change_range import ChangeRange, FlushResult
from ticdc_lakehouse.merge.changes import OP, PRESENT, partial_positions
from ticdc_lakehouse.merge.read_check import (
    ChangesNotRead,
    Expected,
    ObservedChanges,
    check_read,
    not_read_line,
    observe,
)
from ticdc_lakehouse.merge.table_commit import append_tables, plan_append
from ticdc_lakehouse.merge.table_events import table_rows
from ticdc_lakehouse.core.sql_names import qualified, quote

_view_ids = itertools.count()

#: change sets of at most this many row events may be applied the staged way (their keys are broadcast)
STAGED_MAX_EVENTS = 1_000_000
#: name prefix of the staging branches (a crashed run's branch is removed by the next flush of the table)
STAGING_BRANCH_PREFIX = "lakehouse_stage_"


#: snapshot summary fields that count rows taken out of the table (position/equality deletes, deletion vectors
#: and copy-on-write rewrites report under one of these)
REMOVED_FIELDS = ("deleted-records", "added-position-deletes", "added-equality-deletes")
#: and the field that counts the positions of the delete files a snapshot replaced: a deletion vector of a data file
#: that had one already holds the old positions too (the old vector is removed), so they are not removed again
REPLACED_DELETES_FIELD = "removed-position-deletes"


def snapshot_changes(jtable, since_snapshot_id: Optional[int]) -> tuple[int, int]:
    """(rows written, rows removed) by the snapshots committed on ``main`` after ``since_snapshot_id``: what the
    catalog already knows about an apply, read from the snapshot summaries (no Spark job). Under merge-on-read an
    update counts once in each; copy-on-write counts the rows of rewritten files in both."""
    written = removed = 0
    snapshot = jtable.currentSnapshot()
    while snapshot is not None and snapshot.snapshotId() != since_snapshot_id:
        summary = snapshot.summary()
        written += int(summary.get("added-records") or 0)
        removed += sum(int(summary.get(name) or 0) for name in REMOVED_FIELDS)
        removed -= int(summary.get(REPLACED_DELETES_FIELD) or 0)
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return written, removed


def merge_sql(catalog: str, target: TargetTable, source_view: str,
              always_sent: Optional[frozenset[str]] = frozenset()) -> str:
    """The MERGE statement for a typed change set (see ``changes.merge_source``).

    An update keeps the target's value of a column its event did not carry (``CASE WHEN s._present_<i>``). For
    the columns every event of the run carried (``always_sent``, lower case; None when there are no updates at
    all) it takes the source value directly, so the MERGE does not read them from the target: the target scan
    shrinks to the key and the row position, which is most of a MERGE's cost on a large table."""
    table = f"{quote(catalog)}.{quote(target.namespace)}.{quote(target.name)}"
    equals = "=" if target.keys_required else "<=>"
    on = " AND ".join(f"t.{quote(k.name)} {equals} s.{quote(k.name)}" for k in target.keys)
    key_names = {k.name.lower() for k in target.keys}
    partial = set(partial_positions(target.columns, target.keys, always_sent))
    assignments = []
    for position, column in enumerate(target.columns):
        if column.name.lower() in key_names:
            continue
        name = quote(column.name)
        if position not in partial:
            assignments.append(f"t.{name} = s.{name}")
        else:
            assignments.append(
                f"t.{name} = CASE WHEN s.{quote(PRESENT + str(position))} THEN s.{name} ELSE t.{name} END")
    names = ", ".join(quote(c.name) for c in target.columns)
    values = ", ".join(f"s.{quote(c.name)}" for c in target.columns)
    update = f"WHEN MATCHED THEN UPDATE SET {', '.join(assignments)}\n" if assignments else ""
    return (
        f"MERGE INTO {table} AS t USING {quote(source_view)} AS s ON {on}\n"
        f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE\n"
        f"{update}"
        f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})"
    )


def can_stage(target: TargetTable, always_sent: Optional[frozenset[str]], row_events: Optional[int]) -> bool:
    """Whether a change set may be applied the staged way: keys that are never NULL (plain equality), every
    non-key column carried by every change (``always_sent``, see ``merge_sql``), and few enough events."""
    if not target.keys_required or row_events is None or row_events > STAGED_MAX_EVENTS:
        return False
    return not partial_positions(target.columns, target.keys, always_sent)


_STAGING_REF = re.compile(r"(?:^\{|, )(" + re.escape(STAGING_BRANCH_PREFIX) + r"[0-9a-z_]+)=")


def stale_branches(jtable) -> list[str]:
    """The staging branches of the table (runs that crashed before their fast-forward left them), read from the
    refs' text in one gateway call: a table has a tag per cut, hundreds after a while, and listing them one by
    one cost a round trip each."""
    refs = jtable.refs()
    found = _STAGING_REF.findall(str(refs.toString()))
    return [name for name in found if refs.get(name) is not None and refs.get(name).isBranch()]


def drop_stale_branches(jtable) -> None:
    """Remove the table's stale staging branches (one commit, none when there are none): a table that now takes
    a MERGE would keep them, and the snapshots they hold, for good."""
    stale = stale_branches(jtable)
    if stale:
        manage = jtable.manageSnapshots()
        for name in stale:
            manage = manage.removeBranch(name)
        manage.commit()


def _branch_head(jtable, branch: str):
    ref = jtable.refs().get(branch)
    return jtable.snapshot(ref.snapshotId()) if ref is not None else None


def apply_staged(spark, ji: JavaIceberg, catalog: str, target: TargetTable, source,
                 properties: Mapping[str, str], keyless: bool = False, expected: Optional[Expected] = None) -> bool:
    """Apply a change set (``changes.merge_source``) the staged way (see the module doc); False when the table
    has no snapshot to branch from (the caller then MERGEs).

    ``keyless``: a table keyed by its whole row (``merge.keyless``): rows match with null-safe equality, and the
    changed images are joined, not broadcast (there is no bound on their number). ``expected``: the change set
    must read changes (``read_check``), checked before the fast-forward: if it read none, the branch is removed
    and ``main`` never moved."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    jtable = ji.load(target.namespace, target.name)
    head = jtable.currentSnapshot()
    if head is None:
        return False
    manage = jtable.manageSnapshots()
    for name in stale_branches(jtable):
        manage = manage.removeBranch(name)  # left by a run that crashed before its fast-forward
    branch = STAGING_BRANCH_PREFIX + uuid.uuid4().hex[:12]
    manage.createBranch(branch, head.snapshotId()).commit()
    staged = f"{qualified(catalog, target.namespace, target.name)}.{quote('branch_' + branch)}"
    # read twice (its keys, then its new images); deserialized: see the decoded events' cache (``engine``)
    source = source.persist(StorageLevel.MEMORY_AND_DISK_DESER)
    view = f"_lakehouse_changed_keys_{next(_view_ids)}"
    try:
        changed = source.select(*[quote(k.name) for k in target.keys])
        if expected is not None:  # every change has its key: the keys read are the changes read
            changed, observed = observe(changed, [expected.label])
        (changed if keyless else F.broadcast(changed)).createOrReplaceTempView(view)
        equals = "<=>" if keyless else "="
        on = " AND ".join(f"t.{quote(k.name)} {equals} s.{quote(k.name)}" for k in target.keys)
        spark.sql(f"MERGE INTO {staged} AS t USING {quote(view)} AS s ON {on} WHEN MATCHED THEN DELETE")
        images = source.filter(F.col(OP) != "D").select(*[F.col(quote(c.name)) for c in target.columns])
        writer = images.writeTo(staged)
        for key, value in properties.items():
            writer = writer.option(f"snapshot-property.{key}", str(value))
        writer.append()
    finally:
        spark.catalog.dropTempView(view)
        source.unpersist()
    if expected is not None:
        try:
            check_read([observed], [expected])
        except ChangesNotRead:
            ji.load(target.namespace, target.name).manageSnapshots().removeBranch(branch).commit()
            raise
    jtable = ji.load(target.namespace, target.name)
    last = _branch_head(jtable, branch)
    if last is None or last.summary().get(RESOLVED_TS_PROPERTY) != properties[RESOLVED_TS_PROPERTY]:
        append = jtable.newAppend().toBranch(branch)  # nothing to append: the watermark still goes in
        for key, value in properties.items():
            append = append.set(key, str(value))
        append.commit()  # refreshes ``jtable``: the fast-forward below sees the branch as committed
    fault_point("merge.before_fast_forward")
    jtable.manageSnapshots().fastForwardBranch("main", branch).removeBranch(branch).commit()
    return True


def _apply_keyless(spark, ji: JavaIceberg, catalog: str, events, change: ChangeRange,
                   properties: Mapping[str, str]) -> None:
    """A table without a usable key: row counts, applied the staged way (see ``merge.keyless``).

    Its row events are checked before anything is written (``read_check``), with a job of their own: they net out
    into counts (an insert and a delete of one row leave no change to observe), and the counts are read twice by
    the apply (``keyless_source``), where Spark may skip computing one of the copies."""
    from ticdc_lakehouse.merge.keyless import keyless_deltas, keyless_source

    target, lower, upto_ts = change.target, change.lower, change.upto_ts
    rows = table_rows(events, change.upstream_schema, change.upstream_table, lower, upto_ts)
    expected = change.expected()
    if expected is not None and rows.isEmpty():
        raise ChangesNotRead(not_read_line([expected]))
    deltas = keyless_deltas(events, change.upstream_schema, change.upstream_table, lower, upto_ts, target.columns,
                            rows)
    lake = spark.table(qualified(catalog, target.namespace, target.name))
    source = keyless_source(lake, deltas, target.columns)
    if not apply_staged(spark, ji, catalog, target, source, properties, keyless=True):
        raise RuntimeError(f"{target.namespace}.{target.name} has no snapshot to apply its changes to")


def _undo_unless_read(ji: JavaIceberg, target: TargetTable, head, observed: ObservedChanges,
                      expected: Expected) -> None:
    """After a MERGE (which commits itself): if its change set read no change (``read_check``), set the table back
    to ``head``, its snapshot before the MERGE (one catalog commit; the MERGE's files become orphans for
    ``lakehouse maintain``), and raise."""
    try:
        check_read([observed], [expected])
    except ChangesNotRead as exc:
        jtable = ji.load(target.namespace, target.name)
        current = jtable.currentSnapshot()
        if head is not None and current is not None and current.snapshotId() != head.snapshotId():
            jtable.manageSnapshots().rollbackTo(head.snapshotId()).commit()
        raise ChangesNotRead(f"{exc} (its MERGE was rolled back)") from None


def flush_table(spark, ji: JavaIceberg, catalog: str, events, change: ChangeRange, staged_min_rows: int,
                parallelism: int = 1) -> FlushResult:
    """Apply the table's row events in ``change``'s range and record its ``upto_ts`` as the watermark.

    A table whose lake copy holds no rows takes the append path (``table_commit``: one Spark job, one commit);
    others a MERGE or the staged apply; keyless tables ``merge.keyless``.

    ``staged_min_rows`` (``merge.staged_min_rows``): a table holding fewer rows (its snapshot's ``total-records``)
    takes a MERGE even when it could be staged. The staged way's fixed cost (a branch created, deleted into,
    appended to and fast-forwarded: four catalog commits and two statements, against one and one) is more than it
    saves where shuffling the table costs little: an incremental run into 40 tables of about 60 rows each, apply
    18.6 / 20.5 s with MERGEs vs 26.5 / 28.3 s staged (interleaved)."""
    target = change.target
    lower, upto_ts, label = change.lower, change.upto_ts, change.label
    if change.after_ts is None and upto_ts <= target.watermark:
        return FlushResult(label, lower, upto_ts, False)
    properties = change.properties()
    merged = False
    head = loaded = None
    if change.has_rows:
        plan = plan_append(ji, change)
        if plan is not None:
            return append_tables(spark, ji, catalog, events, [plan], parallelism)[0]
        loaded = ji.load(target.namespace, target.name)
        head = loaded.currentSnapshot()
    if change.has_rows and not target.keys_required:
        _apply_keyless(spark, ji, catalog, events, change, properties)
        merged = True
    elif change.has_rows:
        source = change.source(events)
        always_sent = change.always_sent
        expected = change.expected()
        staged = (can_stage(target, always_sent, change.row_events) and table_records(head) >= staged_min_rows
                  and apply_staged(spark, ji, catalog, target, source, properties, expected=expected))
        if not staged:
            drop_stale_branches(loaded)
            observed = None
            if expected is not None:
                source, observed = observe(source, [expected.label])
            view = f"_lakehouse_changes_{next(_view_ids)}"
            source.createOrReplaceTempView(view)
            statement = merge_sql(catalog, target, view, always_sent)
            try:
                run_with_snapshot_properties(spark, properties, lambda: spark.sql(statement))
            finally:
                spark.catalog.dropTempView(view)
            if observed is not None:
                _undo_unless_read(ji, target, head, observed, expected)
        merged = True
    jtable = ji.load(target.namespace, target.name)
    if watermark_of(jtable) < upto_ts:
        # Nothing changed (or the MERGE wrote no file): an empty snapshot still records the watermark.
        ji.commit_marker(jtable, properties)
    target.watermark = max(target.watermark, upto_ts)
    fault_point("merge.after_table_commit")
    written, removed = snapshot_changes(jtable, head.snapshotId() if head is not None else None) if merged else (0, 0)
    return FlushResult(label, lower, upto_ts, merged, written, removed)
