"""``lakehouse maintain``: compaction, delete-file rewrite, snapshot expiry and orphan cleanup, safely.

Every merge run leaves small data files, position-delete files (merge-on-read) and a snapshot per table; left
alone, reads slow down and the warehouse grows forever. Per table of a changefeed (the tables of its checkpoints)
and for the control tables (``_lakehouse.*``) this runs, in this order:

1. ``rewrite_data_files``: bin-packs small files and rewrites files that carry deletes, so the table is read
   without merging delete files;
2. ``rewrite_position_delete_files``: compacts the remaining delete files and drops dangling ones;
3. cut retention and ``expire_snapshots`` (below);
4. ``remove_orphan_files`` older than ``maintenance.orphan_older_than_hours`` (files a crashed write left);
5. dropped tables (kept in ``_lakehouse_dropped`` by a DROP TABLE, see ``ddl_apply``) that no kept cut can read
   any more are purged with their files (see ``plan_graveyard_purge``);
6. with ``maintenance.landing_retention_hours`` set, landed segments every merge is past
   (``landing/retention.py``).

**Format upgrade** (``upgrade_format=True``, ``lakehouse maintain --upgrade-format``), first of all: every table
of the changefeed still at Iceberg format v2 (made before this version) and the control tables are set to v3, so
their merge-on-read changes write deletion vectors from then on. Only table metadata changes: snapshots, refs and
files stay, so every ``tso_*`` tag reads as before (a v3 reader applies the v2 position deletes of old snapshots);
the compaction that follows folds the old position deletes into the rewritten data files. It is a flag, not
automatic, because it is one-way: readers that cannot read v3 (pyiceberg 0.12 with deletion vectors, engines on
Iceberg < 1.8) can no longer read an upgraded table.

**Which cuts survive.** Every merge run tags each table's snapshot at its cut ``tso_<ts>`` and records the cut in
the ``checkpoints`` control table. A cut is kept when its TSO (upstream wall-clock time) is within
``maintenance.retain_cuts_days`` of now, or when it is one of the newest ``maintenance.retain_last_cuts`` cuts;
the newest cut is always kept. Then, per table, snapshots older than the newest kept cut's snapshot are expired:
Iceberg keeps every snapshot a ref points to, so the kept ``tso_*`` tags keep their cuts readable with
``VERSION AS OF 'tso_<ts>'``.

**Checkpoint rows of dropped cuts are removed** (the choice this module makes): a dropped cut loses its
``tso_*`` tags *and* its checkpoint rows, in that order, so ``--as-of-tso`` (which picks a checkpoint row) can
never pick a cut whose snapshots are gone; asking for it says "before the first applied cut" instead. For every
kept cut the tag is made to point at exactly the snapshot the cut's checkpoint row names (for protocols without
resolved events, where the merge tags nothing, the tag is created here), and a tag that Iceberg itself would drop
for its ``RETAIN n DAYS`` age while policy keeps it is re-created without an age limit: the policy above, not the
tag's age, decides. Any other row whose snapshots would not survive (an older row of a kept cut that
``choose_cut`` never serves) is removed too. The latest checkpoint row (where the next merge restarts) is never
removed.

**The watermark survives.** The merge engine finds a table's watermark (``tidb.resolved-ts``) by walking the
current snapshot's ancestry back to the newest snapshot that has it; compaction snapshots do not carry it. So
``retain_last`` is set to the length of that walk: the newest watermark snapshot and every snapshot between it
and the current one survive, and ``java_api.watermark_of`` returns the same value afterwards (checked, and
reported as a problem if not).

Maintenance holds the changefeed's merge lock (a merge and a rewrite of the same files would conflict), and for
the control tables, which every changefeed writes, the locks of all known changefeeds; if a merge runs then,
that step is skipped and the result says so. ``dry_run`` changes nothing: it reports the files, the cuts and
rows that would go, the snapshots that would expire and the orphan files that would be deleted.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.iceberg import tables as iceberg_tables  # FORMAT_VERSION read at use: tests set it
from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, JavaIceberg, format_version, watermark_of
from ticdc_lakehouse.iceberg.tables import CHANGEFEED_PROPERTY
from ticdc_lakehouse.landing.retention import apply_landing_retention
from ticdc_lakehouse.runtime.locks import LockBusy, changefeed_lock
from ticdc_lakehouse.merge.ddl.apply import DROPPED_NAMESPACE
from ticdc_lakehouse.runtime.spark_session import get_spark
from ticdc_lakehouse.core.sql_names import qualified, quote
from ticdc_lakehouse.runtime.state import NAMESPACE as CONTROL_NAMESPACE
from ticdc_lakehouse.runtime.state import Checkpoint, StateStore
from ticdc_lakehouse.commands.timetravel import TAG_PREFIX, TSO_LOGICAL_BITS

log = logging.getLogger(__name__)

CONTROL_TABLES = ("checkpoints", "dead_letters", "halted", "held")
#: a tag Iceberg would drop within this margin counts as lapsing (expiry runs a little after planning)
LAPSE_MARGIN_MS = 3_600_000
#: the youngest a file may be to count as an orphan (Iceberg's procedure refuses less)
MIN_ORPHAN_HOURS = 24
#: compaction options: small tables have few files per partition, so two are worth a rewrite; any delete
#: file makes a data file worth rewriting (merge-on-read deletes otherwise pile up), and the delete files
#: whose rows were applied by the rewrite are removed with it
REWRITE_OPTIONS = {"min-input-files": "2", "delete-file-threshold": "1", "remove-dangling-deletes": "true"}

Progress = Optional[Callable[[str], None]]


@dataclass(frozen=True)
class RetentionPolicy:
    days: int
    keep_last: int
    orphan_hours: int

    @classmethod
    def from_settings(cls, settings: Settings) -> "RetentionPolicy":
        options = settings.maintenance
        return cls(options.retain_cuts_days, options.retain_last_cuts, options.orphan_older_than_hours)


# -- pure planning ------------------------------------------------------------------------------------------
def cut_of_tag(name: str) -> Optional[int]:
    """The TSO of a ``tso_<ts>`` tag, None for any other ref."""
    if not name.startswith(TAG_PREFIX):
        return None
    digits = name[len(TAG_PREFIX):]
    return int(digits) if digits.isdigit() else None


def _tso_millis(tso: int) -> int:
    """The physical part of a TSO: Unix milliseconds (see ``timetravel.tso_to_datetime``)."""
    return tso >> TSO_LOGICAL_BITS


def plan_cuts(cuts: Iterable[int], now: datetime, days: int, keep_last: int) -> tuple[list[int], list[int]]:
    """``(kept, dropped)`` cuts, each ascending: kept = within ``days`` of ``now`` by TSO time, or among the
    newest ``keep_last``; the newest cut is always kept."""
    ordered = sorted({c for c in cuts if c > 0})
    if not ordered:
        return [], []
    horizon = int((now - timedelta(days=days)).timestamp() * 1000)
    newest = set(ordered[-max(1, keep_last):])
    kept = [c for c in ordered if c in newest or _tso_millis(c) >= horizon]
    return kept, [c for c in ordered if c not in set(kept)]


def effective_rows(rows: Sequence[Checkpoint]) -> dict[int, Checkpoint]:
    """Per cut, the checkpoint row ``timetravel.choose_cut`` serves: the last committed one."""
    chosen: dict[int, Checkpoint] = {}
    for row in rows:
        current = chosen.get(row.resolved_ts)
        if current is None or (row.committed_at or datetime.min) >= (current.committed_at or datetime.min):
            chosen[row.resolved_ts] = row
    return chosen


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    timestamp_ms: int
    parent_id: Optional[int]
    watermark: Optional[int]


@dataclass(frozen=True)
class TagInfo:
    snapshot_id: int
    max_ref_age_ms: Optional[int]


@dataclass
class TableState:
    """What planning needs of one table, read once from its metadata."""

    name: str
    current: Optional[int]
    snapshots: dict[int, SnapshotInfo]
    tags: dict[str, TagInfo]
    other_refs: dict[str, int]  # branches and non-cut tags: name -> snapshot id (Iceberg keeps them)

    def watermark_chain(self) -> list[int]:
        """Snapshot ids from the current one back to the newest carrying the watermark (inclusive); just the
        current one when no ancestor has a watermark (control tables)."""
        chain: list[int] = []
        snapshot_id = self.current
        while snapshot_id is not None and snapshot_id in self.snapshots:
            chain.append(snapshot_id)
            info = self.snapshots[snapshot_id]
            if info.watermark is not None:
                return chain
            snapshot_id = info.parent_id
        return chain[:1]


@dataclass
class TablePlan:
    """Tag changes and the expiry for one table; ``survivors`` is every snapshot left after expiry."""

    drop_tags: list[str] = field(default_factory=list)
    set_tags: dict[str, int] = field(default_factory=dict)  # tag -> snapshot (created without an age limit)
    unservable_cuts: list[int] = field(default_factory=list)  # kept cuts whose snapshot is already gone
    older_than_ms: int = 0
    retain_last: int = 1
    expire: list[int] = field(default_factory=list)
    survivors: set[int] = field(default_factory=set)


def plan_table(state: TableState, kept: Sequence[int], dropped: Sequence[int], wanted: Mapping[int, int],
               now_ms: int, default_older_than_ms: int) -> TablePlan:
    """Which ``tso_*`` tags to drop or (re)point and which snapshots expiry removes (pure).

    ``wanted``: kept cut -> the snapshot its effective checkpoint row names for this table.
    """
    plan = TablePlan()
    dropped_set = set(dropped)
    for tag in state.tags:
        cut = cut_of_tag(tag)
        if cut is not None and cut in dropped_set:
            plan.drop_tags.append(tag)
    kept_targets: dict[int, int] = {}
    for cut in kept:
        tag = f"{TAG_PREFIX}{cut}"
        have = state.tags.get(tag)
        target = wanted.get(cut, have.snapshot_id if have is not None else None)
        if target is None:
            continue
        if target not in state.snapshots:
            plan.unservable_cuts.append(cut)
            if have is not None and have.snapshot_id in state.snapshots:
                kept_targets[cut] = have.snapshot_id
            continue
        kept_targets[cut] = target
        lapses = (
            have is not None and have.max_ref_age_ms is not None
            and now_ms + LAPSE_MARGIN_MS - state.snapshots[target].timestamp_ms > have.max_ref_age_ms
        )
        if have is None or have.snapshot_id != target or lapses:
            plan.set_tags[tag] = target
    chain = state.watermark_chain()
    plan.retain_last = max(1, len(chain))
    newest_kept = max(kept_targets) if kept_targets else None
    plan.older_than_ms = (
        state.snapshots[kept_targets[newest_kept]].timestamp_ms if newest_kept is not None else default_older_than_ms
    )
    protected = set(kept_targets.values()) | set(state.other_refs.values()) | set(chain)
    protected |= {t.snapshot_id for name, t in state.tags.items() if cut_of_tag(name) is None}
    if state.current is not None:
        protected.add(state.current)
    plan.expire = sorted(
        s.snapshot_id for s in state.snapshots.values()
        if s.timestamp_ms < plan.older_than_ms and s.snapshot_id not in protected
    )
    plan.survivors = set(state.snapshots) - set(plan.expire)
    return plan


def rows_to_delete(rows: Sequence[Checkpoint], dropped: Sequence[int], survivors: Mapping[str, set[int]],
                   latest: Optional[Checkpoint]) -> list[Checkpoint]:
    """Checkpoint rows that must go so no as-of read points at an expired snapshot (pure).

    A row goes when its cut is dropped, or when a snapshot it names (of a table still there) will not survive;
    the latest row never goes. ``survivors``: table -> snapshot ids left after expiry (existing tables only).
    """
    dropped_set = set(dropped)
    doomed = []
    for row in rows:
        if latest is not None and row is latest:
            continue
        unservable = any(
            snapshot is not None and table in survivors and int(snapshot) not in survivors[table]
            for table, snapshot in row.tables.items()
        )
        if row.resolved_ts in dropped_set or unservable:
            doomed.append(row)
    return doomed


def orphan_horizon_ms(clock: datetime, policy: RetentionPolicy) -> int:
    """Files older than this may be deleted as orphans. Never less than a day: a younger file may belong to a
    write still in progress (Iceberg's procedure refuses shorter intervals for that reason)."""
    hours = max(MIN_ORPHAN_HOURS, policy.orphan_hours)
    return int((clock - timedelta(hours=hours)).timestamp() * 1000)


# -- reading and acting -------------------------------------------------------------------------------------
def read_table_state(ji: JavaIceberg, name: str) -> TableState:
    namespace, _, table = name.partition(".")
    jtable = ji.load(namespace, table)
    snapshots = {}
    for snapshot in jtable.snapshots():
        value = snapshot.summary().get(RESOLVED_TS_PROPERTY)
        parent = snapshot.parentId()
        snapshots[int(snapshot.snapshotId())] = SnapshotInfo(
            int(snapshot.snapshotId()), int(snapshot.timestampMillis()), int(parent) if parent is not None else None,
            int(value) if value else None,
        )
    tags, others = {}, {}
    refs = jtable.refs()
    for ref_name in list(refs.keySet()):
        ref = refs.get(ref_name)
        age = ref.maxRefAgeMs()
        if ref.isTag() and cut_of_tag(str(ref_name)) is not None:
            tags[str(ref_name)] = TagInfo(int(ref.snapshotId()), int(age) if age is not None else None)
        else:
            others[str(ref_name)] = int(ref.snapshotId())
    current = jtable.currentSnapshot()
    return TableState(name, int(current.snapshotId()) if current is not None else None, snapshots, tags, others)


def apply_tags(ji: JavaIceberg, name: str, state: TableState, plan: TablePlan) -> None:
    """Drop and (re)point the planned tags in one atomic metadata commit."""
    if not plan.drop_tags and not plan.set_tags:
        return
    namespace, _, table = name.partition(".")
    manage = ji.load(namespace, table).manageSnapshots()
    for tag in plan.drop_tags:
        manage = manage.removeTag(tag)
    for tag, snapshot in sorted(plan.set_tags.items()):
        if tag in state.tags:
            manage = manage.removeTag(tag)
        manage = manage.createTag(tag, int(snapshot))
    manage.commit()


def _ident(name: str) -> str:
    """The procedure's ``table`` argument: a quoted multipart identifier inside a SQL string literal."""
    namespace, _, table = name.partition(".")
    return (quote(namespace) + "." + quote(table)).replace("\\", "\\\\").replace("'", "\\'")


def _timestamp(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return f"TIMESTAMP '{moment:%Y-%m-%d %H:%M:%S.%f}'"


def _call(spark, catalog: str, procedure: str, args: str) -> list[dict[str, Any]]:
    rows = spark.sql(f"CALL {quote(catalog)}.system.{procedure}({args})").collect()
    return [row.asDict() for row in rows]


def _options(values: Mapping[str, str]) -> str:
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in values.items()) + ")"


def _file_counts(ji: JavaIceberg, name: str) -> dict[str, Optional[int]]:
    namespace, _, table = name.partition(".")
    current = ji.load(namespace, table).currentSnapshot()
    summary = dict(current.summary()) if current is not None else {}

    def number(key: str) -> Optional[int]:
        return int(summary[key]) if key in summary else (0 if current is None else None)

    return {"data_files": number("total-data-files"), "delete_files": number("total-delete-files"),
            "records": number("total-records")}


def compact(spark, ji: JavaIceberg, settings: Settings, name: str, dry_run: bool) -> dict[str, Any]:
    """``rewrite_data_files`` then ``rewrite_position_delete_files`` (or, dry, the file counts only)."""
    before = _file_counts(ji, name)
    result: dict[str, Any] = {"before": before}
    if dry_run:
        result["would_run"] = ["rewrite_data_files", "rewrite_position_delete_files"]
        return result
    options = dict(REWRITE_OPTIONS)
    options["target-file-size-bytes"] = str(settings.merge.target_file_size_bytes)
    ident = _ident(name)
    rewritten = _call(spark, settings.catalog_name, "rewrite_data_files",
                      f"table => '{ident}', options => {_options(options)}")
    result["rewrite_data_files"] = rewritten[0] if rewritten else {}
    deletes = _call(spark, settings.catalog_name, "rewrite_position_delete_files",
                    f"table => '{ident}', options => {_options({'min-input-files': '2'})}")
    result["rewrite_position_delete_files"] = deletes[0] if deletes else {}
    result["after"] = _file_counts(ji, name)
    return result


def upgrade_format(spark, ji: JavaIceberg, catalog: str, name: str, dry_run: bool) -> dict[str, int]:
    """Set a table below the format new tables get (``tables.FORMAT_VERSION``) to it (metadata only, one commit;
    see the module doc)."""
    namespace, _, table = name.partition(".")
    before = format_version(ji.load(namespace, table))
    if before >= iceberg_tables.FORMAT_VERSION:
        return {"before": before, "after": before}
    if dry_run:
        return {"before": before, "would_set": iceberg_tables.FORMAT_VERSION}
    spark.sql(f"ALTER TABLE {qualified(catalog, namespace, table)} SET TBLPROPERTIES "
              f"('format-version'='{iceberg_tables.FORMAT_VERSION}')")
    return {"before": before, "after": format_version(ji.load(namespace, table))}


def expire(spark, settings: Settings, name: str, plan: TablePlan, dry_run: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "older_than": datetime.fromtimestamp(plan.older_than_ms / 1000, tz=timezone.utc).isoformat(),
        "retain_last": plan.retain_last,
        "snapshots_expiring": len(plan.expire),
    }
    if not dry_run:
        rows = _call(spark, settings.catalog_name, "expire_snapshots",
                     f"table => '{_ident(name)}', older_than => {_timestamp(plan.older_than_ms)}, "
                     f"retain_last => {int(plan.retain_last)}")
        result["result"] = rows[0] if rows else {}
    return result


def remove_orphans(spark, settings: Settings, name: str, older_than_ms: int, dry_run: bool) -> dict[str, Any]:
    rows = _call(spark, settings.catalog_name, "remove_orphan_files",
                 f"table => '{_ident(name)}', older_than => {_timestamp(older_than_ms)}, "
                 f"dry_run => {'true' if dry_run else 'false'}")
    files = [r["orphan_file_location"] for r in rows]
    return {"older_than": datetime.fromtimestamp(older_than_ms / 1000, tz=timezone.utc).isoformat(),
            "count": len(files), "files": files[:100]}


# -- one changefeed -----------------------------------------------------------------------------------------
def _existing(ji: JavaIceberg, names: Iterable[str]) -> list[str]:
    found = []
    for name in sorted({n.lower() for n in names}):
        namespace, _, table = name.partition(".")
        if table and ji.table_exists(namespace, table):
            found.append(name)
    return found


def _delete_rows(spark, state: StateStore, changefeed: str, rows: Sequence[Checkpoint]) -> None:
    if not rows:
        return
    escape = lambda text: text.replace("\\", "\\\\").replace("'", "\\'")  # noqa: E731
    keys = " OR ".join(f"(resolved_ts = {int(r.resolved_ts)} AND run_id = '{escape(r.run_id)}')" for r in rows)
    spark.sql(f"DELETE FROM {state.table('checkpoints')} WHERE changefeed = '{escape(changefeed)}' AND ({keys})")


def maintain_changefeed(spark, settings: Settings, changefeed: str, dry_run: bool, say: Callable[[str], None],
                        now: datetime, policy: RetentionPolicy, upgrade: bool = False) -> dict[str, Any]:
    """Maintain the tables of one changefeed; the caller holds its merge lock (unless dry).

    ``now`` is what cut ages count from; tag ages and the orphan horizon always use the real clock, because
    Iceberg measures them with it."""
    ji = JavaIceberg(spark, settings.catalog_name)
    state = StateStore(spark, settings.catalog_name)
    # never create the control tables here: a dry run changes nothing, and without them there is nothing to do
    rows = state.checkpoints(changefeed) if ji.table_exists(CONTROL_NAMESPACE, "checkpoints") else []
    latest = max(rows, key=lambda r: (r.resolved_ts, r.committed_at or datetime.min)) if rows else None
    report: dict[str, Any] = {"changefeed": changefeed, "tables": {}, "problems": []}
    if latest is None:
        say(f"{changefeed}: no checkpoint yet, nothing to maintain")
        return report
    names = _existing(ji, [t for row in rows for t in row.tables])
    watermarks = {}
    for name in names:
        namespace, _, table = name.partition(".")
        watermarks[name] = watermark_of(ji.load(namespace, table))
        report["tables"][name] = {"watermark_before": watermarks[name]}
        if upgrade:
            say(f"{changefeed}: {name}: {'planning' if dry_run else 'running'} the format upgrade")
            report["tables"][name]["format_version"] = upgrade_format(spark, ji, settings.catalog_name, name, dry_run)
        say(f"{changefeed}: {name}: {'planning compaction' if dry_run else 'compacting'}")
        report["tables"][name]["compaction"] = compact(spark, ji, settings, name, dry_run)
    states = {name: read_table_state(ji, name) for name in names}
    cuts = {r.resolved_ts for r in rows} | {c for s in states.values() for c in map(cut_of_tag, s.tags) if c}
    kept, dropped = plan_cuts(cuts, now, policy.days, policy.keep_last)
    report["cuts"] = {"kept": kept, "dropped": dropped}
    serving = effective_rows(rows)
    clock = datetime.now(timezone.utc)
    now_ms = int(clock.timestamp() * 1000)
    default_older = int((clock - timedelta(days=policy.days)).timestamp() * 1000)
    plans = {}
    for name in names:
        wanted = {
            cut: int(serving[cut].tables[name]) for cut in kept
            if cut in serving and serving[cut].tables.get(name) is not None
        }
        plans[name] = plan_table(states[name], kept, dropped, wanted, now_ms, default_older)
    doomed = rows_to_delete(rows, dropped, {n: p.survivors for n, p in plans.items()}, latest)
    report["checkpoint_rows_deleted"] = [{"resolved_ts": r.resolved_ts, "run_id": r.run_id} for r in doomed]
    for name in names:
        plan = plans[name]
        entry = report["tables"][name]
        entry["tags_dropped"] = sorted(plan.drop_tags)
        entry["tags_set"] = {tag: snapshot for tag, snapshot in sorted(plan.set_tags.items())}
        if plan.unservable_cuts:
            report["problems"].append(f"{name}: snapshots of cut(s) {plan.unservable_cuts} are already gone")
        if not dry_run:
            apply_tags(ji, name, states[name], plan)
    # the rows go before the snapshots they name: a reader never finds a row whose snapshot is gone
    if not dry_run:
        _delete_rows(spark, state, changefeed, doomed)
    orphan_ms = orphan_horizon_ms(clock, policy)
    for name in names:
        entry = report["tables"][name]
        say(f"{changefeed}: {name}: {'planning' if dry_run else 'running'} snapshot expiry and orphan cleanup")
        entry["expire_snapshots"] = expire(spark, settings, name, plans[name], dry_run)
        entry["remove_orphan_files"] = remove_orphans(spark, settings, name, orphan_ms, dry_run)
        namespace, _, table = name.partition(".")
        jtable = ji.load(namespace, table)
        entry["watermark_after"] = watermark_of(jtable)
        entry["snapshots_after"] = sum(1 for _ in jtable.snapshots())
        if entry["watermark_after"] != watermarks[name]:
            report["problems"].append(
                f"{name}: watermark changed from {watermarks[name]} to {entry['watermark_after']} during maintenance"
            )
    say(f"{changefeed}: {'planning' if dry_run else 'running'} the purge of dropped tables")
    report["dropped_tables_purged"] = purge_graveyard(spark, settings, ji, changefeed, kept, dry_run)
    hours = settings.maintenance.landing_retention_hours
    if hours > 0:
        say(f"{changefeed}: {'planning' if dry_run else 'running'} landing-zone retention ({hours:g} h)")
        report["landing_retention"] = apply_landing_retention(
            settings.landing_path, changefeed, latest.restart_offsets, time.time() - hours * 3600, dry_run)
    if not dry_run:
        report["problems"] += verify_cuts(ji, state.checkpoints(changefeed))
    return report


def plan_graveyard_purge(dropped_tables: Mapping[str, int], kept: Sequence[int], halted_ts: Iterable[int]) -> list[str]:
    """Which dropped tables (graveyard name -> the DROP's commit ts) may be purged.

    A DROP keeps the table in the graveyard for two readers: the cuts before the DROP (their ``tso_*`` tags stay on
    the renamed table) and a rerun that reads the DROP again (the graveyard proves it was applied). A table may go
    once every kept cut is at or after its DROP (no kept cut contains it; the newest cut, always kept, is then
    past the DROP too), and no unresolved halt is at or before the DROP (a halted table holds the restart
    offsets back to its DDL, so a later run reads the DDLs after it again)."""
    if not kept:
        return []
    horizon = min(kept)
    halt = min(halted_ts, default=None)
    return sorted(name for name, ts in dropped_tables.items() if ts <= horizon and (halt is None or ts < halt))


def graveyard_of(ji: JavaIceberg, changefeed: str) -> dict[str, int]:
    """The changefeed's dropped tables: graveyard name -> the DROP's commit ts (from ``dropped_name``)."""
    found = {}
    for name in ji.list_tables(DROPPED_NAMESPACE):
        ts = name.rsplit("__", 1)[-1]
        if "__" in name and ts.isdigit():
            owner = ji.load(DROPPED_NAMESPACE, name).properties().get(CHANGEFEED_PROPERTY)
            if owner == changefeed:
                found[name] = int(ts)
    return found


def purge_graveyard(spark, settings: Settings, ji: JavaIceberg, changefeed: str, kept: Sequence[int],
                    dry_run: bool) -> list[str]:
    """Purge (table and files) the dropped tables ``plan_graveyard_purge`` allows; returns their names."""
    halts = []
    if ji.table_exists(CONTROL_NAMESPACE, "halted"):
        halts = [h.ddl_ts for h in StateStore(spark, settings.catalog_name).halted(changefeed)]
    doomed = plan_graveyard_purge(graveyard_of(ji, changefeed), kept, halts)
    if not dry_run:
        for name in doomed:
            spark.sql(f"DROP TABLE {qualified(settings.catalog_name, DROPPED_NAMESPACE, name)} PURGE")
    return [f"{DROPPED_NAMESPACE}.{name}" for name in doomed]


def verify_cuts(ji: JavaIceberg, rows: Sequence[Checkpoint]) -> list[str]:
    """Problems: checkpoint rows naming a snapshot that no longer exists in an existing table."""
    problems = []
    cache: dict[str, Optional[set[int]]] = {}
    for row in rows:
        for name, snapshot in row.tables.items():
            if snapshot is None:
                continue
            if name not in cache:
                namespace, _, table = name.partition(".")
                cache[name] = (
                    {int(s.snapshotId()) for s in ji.load(namespace, table).snapshots()}
                    if ji.table_exists(namespace, table) else None
                )
            if cache[name] is not None and int(snapshot) not in cache[name]:
                problems.append(f"checkpoint {row.resolved_ts} ({row.run_id}) names expired snapshot {snapshot} "
                                f"of {name}")
    return problems


def maintain_control_tables(spark, settings: Settings, dry_run: bool, say: Callable[[str], None],
                            policy: RetentionPolicy, upgrade: bool = False) -> dict[str, Any]:
    """The control tables: compaction, expiry beyond the cut retention (keeping the last snapshot), orphans."""
    ji = JavaIceberg(spark, settings.catalog_name)
    report: dict[str, Any] = {}
    now = datetime.now(timezone.utc)
    older = int((now - timedelta(days=policy.days)).timestamp() * 1000)
    orphan_ms = orphan_horizon_ms(now, policy)
    for table in CONTROL_TABLES:
        if not ji.table_exists(CONTROL_NAMESPACE, table):
            continue
        name = f"{CONTROL_NAMESPACE}.{table}"
        say(f"control table {name}: {'planning' if dry_run else 'running'} maintenance")
        entry: dict[str, Any] = {}
        if upgrade:
            entry["format_version"] = upgrade_format(spark, ji, settings.catalog_name, name, dry_run)
        entry["compaction"] = compact(spark, ji, settings, name, dry_run)
        state = read_table_state(ji, name)
        plan = plan_table(state, [], [], {}, int(now.timestamp() * 1000), older)
        entry["expire_snapshots"] = expire(spark, settings, name, plan, dry_run)
        entry["remove_orphan_files"] = remove_orphans(spark, settings, name, orphan_ms, dry_run)
        report[name] = entry
    return report


# -- entry point --------------------------------------------------------------------------------------------
def _known_changefeeds(spark, settings: Settings) -> list[str]:
    names = list(settings.changefeeds) or ["default"]
    ji = JavaIceberg(spark, settings.catalog_name)
    if ji.table_exists(CONTROL_NAMESPACE, "checkpoints"):
        table = StateStore(spark, settings.catalog_name).table("checkpoints")
        names += sorted(r[0] for r in spark.table(table).select("changefeed").distinct().collect() if r[0] not in names)
    return names


def maintain(settings: Settings, changefeed: Optional[str] = None, dry_run: bool = False, progress: Progress = None,
             spark=None, now: Optional[datetime] = None, upgrade_format: bool = False) -> dict[str, Any]:
    """Maintain one changefeed's tables (or every known changefeed's) and the control tables (see module doc).

    ``upgrade_format``: first set tables still at format v2 to v3 (see module doc, Format upgrade).
    ``now``: the wall-clock time cut ages are measured from (default: the current time); snapshot and orphan
    ages always use the real clock.
    Raises ``locks.LockBusy`` when the changefeed is being merged (nothing was changed then).
    """
    started = time.monotonic()
    say = progress or (lambda message: log.info(message))
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    if spark is None:
        spark = get_spark(settings, "lakehouse-maintain")
    policy = RetentionPolicy.from_settings(settings)
    names = [settings.changefeed(changefeed).name] if changefeed else _known_changefeeds(spark, settings)
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "now": now.isoformat(timespec="seconds"),
        "policy": {"retain_cuts_days": policy.days, "retain_last_cuts": policy.keep_last,
                   "orphan_older_than_hours": policy.orphan_hours},
        "changefeeds": [],
    }
    for name in names:
        with ExitStack() as stack:
            if not dry_run:
                stack.enter_context(changefeed_lock(settings, name, spark, purpose="maintenance"))
            result["changefeeds"].append(maintain_changefeed(spark, settings, name, dry_run, say, now, policy,
                                                             upgrade_format))
    everyone = _known_changefeeds(spark, settings)
    try:
        with ExitStack() as stack:
            if not dry_run:
                for name in everyone:
                    stack.enter_context(changefeed_lock(settings, name, spark, purpose="maintenance"))
            result["control_tables"] = maintain_control_tables(spark, settings, dry_run, say, policy, upgrade_format)
    except LockBusy as exc:
        result["control_tables"] = {"skipped": str(exc)}
        say(f"control tables skipped: {exc}")
    result["problems"] = [p for feed in result["changefeeds"] for p in feed["problems"]]
    result["ok"] = not result["problems"]
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
