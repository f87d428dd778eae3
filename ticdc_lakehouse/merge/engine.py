"""One merge run of a changefeed: landed segments -> Iceberg tables at the global resolved ts.

The driver only plans: it reads small aggregates (per-partition resolved ts, the DDL list, per-table row counts,
folded by the decode tasks themselves, see ``staged_stats``) and issues one MERGE per table and DDL barrier.
Decoding, collapsing and writing run in executors over the decoded events, cached there; no change set is ever
collected.

Order of work, following TiCDC's consumer:
1. decode the landed records after each partition's restart offset, once, into the executors' cache;
2. cut = min over all partitions of their resolved ts (capped by ``stop_ts``);
3. for each DDL <= cut in commit-ts order: merge the rows of the tables it touches below its ts, then apply it
   (atomically with its watermark); a DDL Iceberg cannot express halts only its table;
4. merge every table's remaining rows up to the cut, recording the cut in each snapshot;
5. write the checkpoint (cut, restart offsets, table snapshots) and tag the cut.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ticdc_lakehouse.config import Settings
from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.faults import fault_point
from ticdc_lakehouse.iceberg.commit import callback_session, ensure_callback_server
from ticdc_lakehouse.iceberg.java_api import JavaIceberg
from ticdc_lakehouse.iceberg.tables import (
    CREATED_FROM_PROPERTY,
    TargetTable,
    create_table,
    describe,
    schema_from_row_types,
)
from ticdc_lakehouse.local_frame import local_frame
from ticdc_lakehouse.merge import ddl_apply
from ticdc_lakehouse.merge.below_cut import find_and_record
from ticdc_lakehouse.merge.changes import table_rows
from ticdc_lakehouse.merge.decode_stage import decode_landed, source_unavailable_in, stats_accumulator
from ticdc_lakehouse.merge.flush import ChangeRange, FlushResult, flush_table
from ticdc_lakehouse.merge.plan import (
    DDLRecord,
    PartitionKey,
    RunPlan,
    TableKey,
    first_holds,
    latest_bootstraps,
    merge_resolved,
    order_ddls,
    plan_run,
    resolved_before_holds,
    restart_offsets,
    table_key,
    unapplied_with_holds,
)
from ticdc_lakehouse.merge.staged_stats import StagedStats, columns_sent, finish
from ticdc_lakehouse.merge.value_checks import is_invalid_value_failure, reason_of, set_aside_invalid
from ticdc_lakehouse.state import Checkpoint, StateStore

log = logging.getLogger(__name__)

#: protocols whose TiCDC output carries no resolved ts by default: applied up to the landed end, per-key order
PROTOCOLS_WITHOUT_RESOLVED_TS = {"avro"}
#: protocols some of whose row events carry no commit ts at all (see ``merge.made_up_ts``)
PROTOCOLS_WITH_MISSING_TS = {"avro"}


def uses_resolved_ts(protocol: str, setting: str) -> bool:
    """Whether a changefeed's cut is its global resolved ts (``auto``: unless the protocol has none by default)."""
    if setting not in ("auto", "required", "none"):
        raise ValueError(f"resolved_ts must be auto, required or none, not {setting!r}")
    if setting == "auto":
        return protocol not in PROTOCOLS_WITHOUT_RESOLVED_TS
    return setting == "required"


def no_resolved_hint(changefeed: str, protocol: str, partitions: list[str]) -> str:
    """One line for a stream that never carried a resolved event (so with ``resolved_ts`` auto/required nothing is
    ever applied): which partitions, and what to set."""
    sink = {"canal-json": "enable-tidb-extension=true", "debezium": "enable-tidb-extension=true",
            "avro": "enable-watermark=true"}.get(protocol)
    fix = f'set resolved_ts = "none" in [changefeeds.{changefeed}] (each key is then applied in commit-ts order)'
    if sink:
        fix += f", or add {sink} to the changefeed's sink URI so TiCDC sends resolved events"
    return (f"{changefeed}: no resolved event was ever seen in {', '.join(partitions)} ({protocol}): with "
            f"resolved_ts = auto nothing can be applied, and records stay pending. If the stream carries none, {fix}")


@dataclass
class MergeReport:
    changefeed: str
    run_id: str
    protocol: str
    previous_resolved_ts: int
    resolved_ts: int
    events_read: int = 0
    tables_merged: list[str] = field(default_factory=list)
    ddls_applied: list[str] = field(default_factory=list)
    halted: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: int = 0
    #: partitions held at an undecodable message (merge.on_undecodable = "hold"): topic, partition, offset, error
    held: list[dict[str, Any]] = field(default_factory=list)
    pending_tables: list[str] = field(default_factory=list)
    #: partitions with records but no resolved event ever (resolved_ts auto/required): nothing of them applies
    no_resolved_events: list[str] = field(default_factory=list)
    #: row changes newly landed with a commit ts at or below the committed cut (see merge.below_cut)
    below_cut: dict[str, Any] = field(default_factory=lambda: {"late": 0, "replay": 0, "tables": []})
    #: landed segments this run found unreadable and moved aside (see landing/quarantine.py)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    #: offsets that should be landed but are not ("topic/partition" -> [[start, end), ...]): the partition is
    #: merged up to the first of them only, until landing fills them (or records them as data loss)
    missing: dict[str, list[list[int]]] = field(default_factory=dict)
    seconds: float = 0.0
    #: per lake table: row events by op (``I``/``U``/``D``, as decoded) and the rows its applies wrote/removed
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: seconds per phase of the run (decode, ddl, apply, commit)
    phases: dict[str, float] = field(default_factory=dict)

    def count_apply(self, table: str, written: int, removed: int, seconds: float) -> None:
        entry = self.tables.setdefault(table, {})
        entry["written"] = entry.get("written", 0) + written
        entry["removed"] = entry.get("removed", 0) + removed
        entry["seconds"] = round(entry.get("seconds", 0.0) + seconds, 3)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunContext:
    """Everything the DDL and flush steps share during one run."""

    spark: Any
    settings: Settings
    changefeed: str
    ji: JavaIceberg
    state: StateStore
    events: Any  # staged event DataFrame
    run_id: str
    halted: dict[TableKey, int]
    row_stats: dict[TableKey, dict[str, Any]]
    range_checks: dict[tuple[TableKey, int, int], bool] = field(default_factory=dict)  # has_rows answers asked
    added_in_run: dict[TableKey, dict[str, int]] = field(default_factory=dict)  # see ddl_apply.deferrable
    gone: dict[TableKey, int] = field(default_factory=dict)  # dropped or renamed away in this run, at this ts
    removals: dict[TableKey, list] = field(default_factory=dict)  # this run's DROP/RENAME-away per table
    pending: set[TableKey] = field(default_factory=set)  # tables with rows but no schema yet (kept for later)
    tables: dict[TableKey, TargetTable] = field(default_factory=dict)
    report: Optional[MergeReport] = None
    resolved_mode: bool = True

    def summary(self, **extra: Any) -> dict[str, str]:
        values = {"tidb.changefeed": self.changefeed, "tidb.run-id": self.run_id}
        values.update({k: str(v) for k, v in extra.items()})
        return values

    def target(self, schema: str, table: str, refresh: bool = False) -> TargetTable:
        key = table_key(schema, table)
        if refresh or key not in self.tables:
            self.tables[key] = describe(self.ji, schema, table)
        return self.tables[key]

    def forget(self, schema: str, table: str) -> None:
        self.tables.pop(table_key(schema, table), None)

    def halt(self, schema: str, table: str, ts: int, query: str, reason: str) -> None:
        key = table_key(schema, table)
        log.error("halting %s.%s at commit ts %s: %s (DDL: %s)", schema, table, ts, reason, query)
        self.state.halt(self.changefeed, schema, table, ts, query, reason)
        self.halted[key] = min(ts, self.halted.get(key, ts))
        if self.report is not None:
            self.report.halted.append({"table": f"{schema}.{table}", "ddl_ts": ts, "query": query, "reason": reason})

    def change_range(self, schema: str, table: str, upto_ts: int,
                     create_missing: bool = True) -> Optional[ChangeRange]:
        """The table and range a flush of its rows below ``upto_ts`` (inclusive) applies, unless it is halted below
        that; None when there is no table to merge into.

        ``create_missing``: a table with rows but no CREATE TABLE seen is created from the rows' types (only for
        the final flush: before a DDL, a missing table is the one the DDL is about to create)."""
        key = table_key(schema, table)
        if key in self.halted and self.halted[key] <= upto_ts:
            upto_ts = self.halted[key] - 1
        target = self.target(schema, table)
        if not target.exists:
            if not create_missing:
                return None
            since = self.gone.get(key)
            if since is not None and not self.has_rows(key, since, upto_ts):
                return None  # its rows were merged before it was dropped or renamed away
            target = self.create_from_rows(schema, table, since or 0)
            if target is None:
                return None
        stats = self.row_stats.get(key)
        after_ts = None if self.resolved_mode else -1
        if stats and create_missing:  # the final flush: every DDL up to the cut is applied
            target = self.add_columns_rows_carry(schema, table, target, stats, upto_ts)
        lower = target.watermark if after_ts is None else after_ts
        has_rows = self.has_rows(key, lower, upto_ts) if stats else False
        names = (stats["schema"], stats["table"]) if stats else (schema, table)
        return ChangeRange(
            target, *names, upto_ts, has_rows, self.summary(), after_ts=after_ts,
            always_sent=columns_sent(stats["layouts"], self.added_in_run.get(key)) if stats else frozenset(),
            row_events=stats["rows"] if stats else None,
        )

    def flush(self, schema: str, table: str, upto_ts: int, create_missing: bool = True) -> Optional[FlushResult]:
        """Merge the table's rows below ``upto_ts`` (see ``change_range``); None when there is no table."""
        change = self.change_range(schema, table, upto_ts, create_missing)
        if change is None:
            return None

        def apply(events, change: ChangeRange):
            return flush_table(self.spark, self.ji, self.settings.catalog_name, events, change)

        started = time.monotonic()
        try:
            result = apply(self.events, change)
        except Exception as exc:  # a value the table cannot store exactly: nothing was committed
            if not is_invalid_value_failure(exc):
                raise
            log.warning("%s.%s: %s", schema, table, reason_of(exc))
            events, upto_ts = set_aside_invalid(self, change.upstream_schema, change.upstream_table,
                                                change.target, change.lower, change.upto_ts,
                                                _holding(self.settings))
            result = apply(events, change.with_range(upto_ts))
        self.record(result, table_key(schema, table), time.monotonic() - started)
        return result

    def record(self, result: FlushResult, key: TableKey, seconds: float) -> None:
        """Count a flush's rows in the run's report."""
        stats = self.row_stats.get(key)
        if result.merged and self.report is not None:
            if result.table not in self.report.tables_merged:
                self.report.tables_merged.append(result.table)
            self.report.count_apply(result.table, result.written, result.removed, seconds)
            if stats:
                self.report.tables[result.table]["events"] = dict(stats.get("ops") or {})

    def has_rows(self, key: TableKey, lower: int, upto_ts: int) -> bool:
        """Whether the table has rows with ``lower < commit_ts <= upto_ts``, so a DDL barrier with nothing before
        it costs no MERGE. The decode tasks' min/max ts answer most questions; a range cutting into them (a table
        with rows on both sides of a DDL) asks the cached events once."""
        stats = self.row_stats.get(key)
        if not stats or stats["max_ts"] <= lower or stats["min_ts"] > upto_ts:
            return False
        if lower < stats["min_ts"] and stats["max_ts"] <= upto_ts:
            return True
        question = (key, lower, upto_ts)
        if question not in self.range_checks:
            rows = table_rows(self.events, stats["schema"], stats["table"], lower, upto_ts)
            self.range_checks[question] = not rows.isEmpty()
        return self.range_checks[question]

    def create_from_rows(self, schema: str, table: str, since: int = 0) -> Optional[TargetTable]:
        """A table with rows but no CREATE TABLE seen: create it from the rows' column types, if they have them."""
        stats = self.row_stats.get(table_key(schema, table))
        if stats and not stats.get("defines_columns", True):
            # only key-only deletes (delete-only-output-handle-key-columns): they remove rows the lake never had,
            # and must not define the table (its later inserts would lose every other column)
            log.info("%s.%s: only key-only deletes so far; the table is created by its first insert", schema, table)
            return None
        if not stats or not stats.get("column_types"):
            if stats:
                self.pending.add(table_key(schema, table))
                if self.report is not None:
                    self.report.pending_tables.append(f"{schema}.{table}")
            return None
        table_schema = schema_from_row_types(stats["schema"], stats["table"], stats["column_types"],
                                             stats["key_columns"])
        return self.create(table_schema, since, self.summary(**{CREATED_FROM_PROPERTY: "row-types"}))

    def add_columns_rows_carry(self, schema: str, table: str, target: TargetTable,
                               stats: dict[str, Any], upto_ts: int) -> TargetTable:
        """Columns the table's rows in ``(watermark, upto_ts]`` carry but the table lacks (a table typed from
        earlier rows that did not carry them): added as nullable columns, like an ADD COLUMN DDL, in one commit whose
        snapshot keeps the watermark and says why (``tidb.ddl``). Without this their values would be dropped."""
        from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
        from ticdc_lakehouse.mysql_types import column_doc, iceberg_type, parse_type

        layouts = stats.get("layouts")
        if not layouts or not stats.get("defines_columns", True):
            return target
        above = set().union(*[names for names, ts in layouts.items() if target.watermark < ts <= upto_ts] or [set()])
        missing = [(name, descriptor) for name, descriptor in stats["column_types"]
                   if name.lower() in above and target.column(name) is None]
        if not missing:
            return target
        jtable = self.ji.load(target.namespace, target.name)
        tx = jtable.newTransaction()
        update = tx.updateSchema().caseSensitive(False)
        for name, descriptor in missing:
            mysql = parse_type(descriptor)
            update = update.addColumn(name, self.ji.type_of(iceberg_type(mysql)), column_doc(mysql, None))
        update.commit()
        names = ", ".join(name for name, _ in missing)
        self.ji.commit_marker(tx, self.summary(**{RESOLVED_TS_PROPERTY: target.watermark,
                                                  "tidb.ddl": f"ADD COLUMN {names} (carried by row images)"}))
        tx.commitTransaction()
        log.info("%s.%s: added column(s) %s that its row images carry", schema, table, names)
        return self.target(schema, table, refresh=True)

    def create(self, table_schema, watermark: int, summary: dict[str, str]) -> TargetTable:
        """Create a lake table with its configured write mode and bucketing, its first snapshot at ``watermark``."""
        schema, table = table_schema.schema, table_schema.table
        create_table(self.ji, table_schema, self.changefeed, watermark, *self.settings.table_layout(schema, table),
                     summary)
        return self.target(schema, table, refresh=True)


def _ddl_records(rows) -> list[DDLRecord]:
    return [
        DDLRecord(
            commit_ts=r["commit_ts"], schema=r["schema_name"] or "", table=r["table_name"] or "",
            query=r["ddl_query"] or "", ddl_type=r["ddl_type"] or "", topic=r["topic"], partition=r["partition"],
            offset=r["offset"], seq=r["seq"] or 0, table_schema=r["table_schema"], is_bootstrap=bool(r["is_bootstrap"]),
        )
        for r in rows
    ]


def run_merge(
    spark,
    settings: Settings,
    changefeed: Optional[str] = None,
    protocol: Optional[str] = None,
    stop_ts: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    take_lock: bool = True,
) -> MergeReport:
    """Merge everything landed for ``changefeed`` up to its global resolved ts (see module doc).

    ``take_lock=False`` when the caller already holds the changefeed lock (taken before Spark starts, so a
    second merge fails in a second, not after a JVM start); the driver lock is taken here either way, before any
    state is read (``locks.driver_lock``: a killed run's JVM may still be committing)."""
    from ticdc_lakehouse.landing.quarantine import (
        SegmentQuarantined,
        check_landed,
        quarantine,
        unreadable_segment_in,
    )
    from ticdc_lakehouse.landing.segments import known_partitions, landed_topics, list_segments
    from ticdc_lakehouse.locks import changefeed_lock, driver_lock

    started = time.monotonic()
    cf = settings.changefeed(changefeed)
    protocol = protocol or cf.protocol
    say = progress or (lambda message: log.info(message))
    lock = changefeed_lock(settings, cf.name, spark) if take_lock else driver_lock(spark, settings, cf.name)
    with lock, callback_session(spark):
        state = StateStore(spark, settings.catalog_name)
        checkpoint = state.latest_checkpoint(cf.name)
        run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        report = MergeReport(cf.name, run_id, protocol, checkpoint.resolved_ts, checkpoint.resolved_ts)
        start = checkpoint.restart_offsets
        # damaged segments are moved aside before Spark reads any; each partition is read up to its first hole
        landed = check_landed(settings.landing_path, cf.name, list_segments(settings.landing_path, cf.name), start)
        _report_landed_check(landed, report, say)
        segments = landed.segments
        partitions = {
            (topic, p) for topic in landed_topics(settings.landing_path, cf.name)
            for p in known_partitions(settings.landing_path, cf.name, topic)
        } | set(segments)
        landed_end = {key: segs[-1].end for key, segs in segments.items() if segs}
        paths = [
            seg.path for key, segs in segments.items() for seg in segs if seg.end > start.get(key, 0)
        ]
        if not paths:
            say(f"{cf.name}: nothing landed after the last checkpoint (cut {checkpoint.resolved_ts})")
            report.seconds = time.monotonic() - started
            return report
        options = DecoderOptions(
            schema_registry_url=cf.schema_registry_url or None, schema_registry_config=dict(cf.schema_registry),
            large_messages=cf.large_messages,
        )
        say(f"{cf.name}: decoding {len(paths)} landed segment(s) with protocol {protocol}")
        from pyspark import StorageLevel

        from ticdc_lakehouse.progress import spark_tasks

        # Decoded once in the executors and kept there (spilling to disk) for every later pass: the stats, the
        # DDL list, one MERGE per table and barrier. Nothing of it goes through the driver.
        collected = stats_accumulator(spark)
        events = decode_landed(spark, paths, start, protocol, options, collected)
        if protocol in PROTOCOLS_WITH_MISSING_TS:
            from ticdc_lakehouse.merge.made_up_ts import fill_made_up_ts

            # with resolved events, a ts at or below the cut would read as applied: the first ts above it
            resolved = uses_resolved_ts(protocol, cf.resolved_ts)
            events = fill_made_up_ts(events, checkpoint.resolved_ts + 1 if resolved else 0)
        events = events.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            try:
                phase = time.monotonic()
                with spark_tasks(spark, progress, "decoding"):
                    events.count()  # decodes into the cache; the tasks' aggregates arrive in ``collected``
                report.phases["decode"] = round(time.monotonic() - phase, 3)
            except Exception as exc:
                unavailable = source_unavailable_in(exc)  # e.g. the schema registry is down: nothing committed
                if unavailable is not None:
                    raise unavailable from None
                damaged = unreadable_segment_in(str(exc), (s for segs in segments.values() for s in segs))
                if damaged is not None:  # a page the footer check cannot see: moved aside, nothing committed
                    raise SegmentQuarantined(quarantine(settings.landing_path, cf.name, *damaged)) from None
                raise
            stats = finish(collected.value)
            say(f"{cf.name}: decoded {stats.events:,} event(s) in {report.phases['decode']:.1f} s "
                f"({stats.events / max(report.phases['decode'], 1e-3):,.0f} events/s)")
            _merge_staged(spark, settings, cf.name, protocol, state, checkpoint, events, stats, partitions,
                          landed_end, report, stop_ts, say)
        finally:
            events.unpersist()
    report.seconds = time.monotonic() - started
    return report


def _report_landed_check(landed, report: MergeReport, say) -> None:
    from dataclasses import asdict

    for entry in landed.quarantined:
        report.quarantined.append(asdict(entry))
        say(f"QUARANTINED landed segment {entry}; the next landing run lands these offsets again from Kafka")
    for (topic, partition), ranges in sorted(landed.missing.items()):
        report.missing[f"{topic}/{partition}"] = [list(r) for r in ranges]
        first = ranges[0]
        say(f"{topic}/{partition}: offsets [{first[0]}, {first[1]}) are not landed: merging this partition up to "
            f"offset {first[0]} only; `lakehouse land` lands them again (or reports them as data loss)")


def _merge_staged(spark, settings, changefeed, protocol, state, checkpoint, events, stats: StagedStats, partitions,
                  landed_end, report, stop_ts, say) -> None:
    from pyspark.sql import functions as F

    resolved_mode = uses_resolved_ts(protocol, settings.changefeed(changefeed).resolved_ts)
    report.events_read = stats.events
    holds: dict[PartitionKey, int] = {}
    if _holding(settings):
        if stats.failures:
            holds = _holds(events, state, changefeed, report, say)
        else:
            state.resolve_holds(changefeed, "passed")  # what held the partitions decodes now
    seen = resolved_before_holds(stats.resolved, _resolved_before(events, holds), holds) if holds else stats.resolved
    partition_resolved = merge_resolved(checkpoint.partition_resolved, seen)
    records = _ddl_records(stats.ddls)
    if resolved_mode:
        plan = plan_run(partitions, partition_resolved, records, stop_ts)
        silent = sorted(f"{topic}/{partition}" for (topic, partition), end in landed_end.items()
                        if end > checkpoint.restart_offsets.get((topic, partition), 0)
                        and not partition_resolved.get((topic, partition)))
        if silent and stats.events:
            report.no_resolved_events = silent
            say(no_resolved_hint(changefeed, protocol, silent))
    elif holds:
        # without resolved events nothing orders the held message against the other partitions' rows: apply
        # nothing new until it decodes or is skipped
        plan = RunPlan(resolved_ts=checkpoint.resolved_ts)
    else:
        # no resolved events: everything landed is applied, each key in commit-ts order
        max_ts = stats.max_commit_ts
        upto = min(max_ts, stop_ts) if stop_ts is not None else max_ts
        plan = RunPlan(resolved_ts=upto, ddls=order_ddls(records, upto), bootstraps=latest_bootstraps(records))
    cut = plan.resolved_ts
    report.resolved_ts = max(cut, checkpoint.resolved_ts)
    report.dead_letters = stats.failures
    if report.dead_letters:
        failures = events.filter(F.col("kind") == "error")
        if _holding(settings):  # held and later messages are not dead letters: only those the operator skipped
            failures = failures.join(_skipped_frame(spark, state, changefeed), ["topic", "partition", "offset"],
                                     "left_semi")
            report.dead_letters = failures.count()
        if report.dead_letters:
            state.record_dead_letters(changefeed, failures, report.run_id)
            say(f"{changefeed}: {report.dead_letters} undecodable message(s) sent to the dead-letter table")
    halts = state.halted(changefeed, include_resolved=True)
    halted = {table_key(h.schema, h.table): h.ddl_ts for h in halts if not h.resolution}
    ctx = RunContext(
        spark=spark, settings=settings, changefeed=changefeed, ji=JavaIceberg(spark, settings.catalog_name),
        state=state, events=events, run_id=report.run_id, halted=halted, row_stats=stats.rows,
        report=report, resolved_mode=resolved_mode,
    )
    if resolved_mode:  # before any flush moves a watermark: what is below the committed cut stays below it
        below = find_and_record(ctx, checkpoint, {key: rows["min_ts"] for key, rows in ctx.row_stats.items()}, say)
        if below is not None:
            report.below_cut = below.as_dict()
    ctx.removals = ddl_apply.removals(plan.ddls)
    ddl_apply.apply_resolutions(ctx, [h for h in halts if h.resolution])
    for bootstrap in plan.bootstraps:
        ddl_apply.apply_bootstrap(ctx, bootstrap)
    say(f"{changefeed}: cut at resolved ts {cut}; {len(plan.ddls)} DDL(s); {len(ctx.row_stats)} table(s) with rows")
    phase = time.monotonic()
    for record in plan.ddls:
        for schema, table in ddl_apply.tables_blocked(ctx, record):
            ctx.flush(schema, table, record.commit_ts - 1, create_missing=False)
        ddl_apply.apply_ddl(ctx, record)
        fault_point("merge.after_ddl")
    report.phases["ddl"] = round(time.monotonic() - phase, 3)
    tables = set(checkpoint.tables) | {f"{s}.{t}" for s, t in ctx.row_stats}
    final = [(stats["schema"], stats["table"]) for _, stats in sorted(ctx.row_stats.items())]
    for name in sorted(tables):
        schema, _, table = name.partition(".")
        if table_key(schema, table) not in ctx.row_stats and ctx.target(schema, table).exists:
            final.append((schema, table))  # no rows: only its watermark moves to the cut
    ensure_callback_server(spark)  # started here, not raced by the first MERGEs of several threads
    phase = time.monotonic()
    from ticdc_lakehouse.merge.batch_flush import flush_empty_tables

    final = flush_empty_tables(ctx, final, cut, int(settings.merge["parallel_tables"]), say)
    flush_concurrently(ctx, final, cut, int(settings.merge["parallel_tables"]), say)
    report.phases["apply"] = round(time.monotonic() - phase, 3)
    phase = time.monotonic()
    # the cut: every live table of the changefeed and its snapshot
    cut_tables: dict[str, Optional[int]] = {}
    for name in sorted(tables | {f"{k[0]}.{k[1]}" for k in ctx.tables}):
        schema, _, table = name.partition(".")
        namespace, tname = ctx.ji.resolve(schema, table)
        if ctx.ji.table_exists(namespace, tname):
            snapshot = ctx.ji.load(namespace, tname).currentSnapshot()
            cut_tables[f"{namespace}.{tname}"] = snapshot.snapshotId() if snapshot is not None else None
    # where to read next time: the first event of each partition not applied yet
    bound = plan.safe_bound(ctx.halted) if resolved_mode else cut
    unapplied = _first_unapplied(events, ctx, bound, stats.max_commit_ts)
    new_restart = restart_offsets(checkpoint.restart_offsets, landed_end, unapplied_with_holds(unapplied, holds))
    fault_point("merge.before_checkpoint")
    state.write_checkpoint(
        Checkpoint(
            changefeed=changefeed, resolved_ts=max(cut, checkpoint.resolved_ts), run_id=report.run_id,
            restart_offsets=new_restart, partition_resolved=partition_resolved, tables=cut_tables,
            landed_end=landed_end, protocol=protocol,
        )
    )
    fault_point("merge.after_checkpoint")
    if resolved_mode and cut > checkpoint.resolved_ts:
        from ticdc_lakehouse.timetravel import tag_cut

        tag_cut(spark, settings, cut, cut_tables)
    report.phases["commit"] = round(time.monotonic() - phase, 3)
    report.resolved_ts = max(cut, checkpoint.resolved_ts)
    say(f"{changefeed}: committed cut {report.resolved_ts} to {len(cut_tables)} table(s)")


def flush_concurrently(ctx: RunContext, tables: list[tuple[str, str]], upto_ts: int, parallelism: int,
                       say: Optional[Callable[[str], None]] = None) -> None:
    """The final flush of every table up to the cut, ``parallelism`` tables at a time.

    Why: a table's apply is a handful of small Spark jobs and catalog commits whose driver-side latency (planning,
    manifest writes, the commit itself) leaves the executors idle; tables are independent (each commits its own
    snapshot and watermark, the DDL barriers are already behind), so overlapping them fills those gaps. Each
    table's flush stays one sequential unit. Every table is attempted even when one fails (one broken table must
    not hold the others back); the first failure is raised afterwards, before the checkpoint, and the rerun
    continues from each table's own watermark. The py4j callback server must already run (see ``commit``).
    ``say`` hears each table whose rows were merged as it finishes (rows written/removed, from the report) and,
    meanwhile, Spark's task counts."""
    import itertools

    from ticdc_lakehouse.progress import spark_tasks

    total = len(tables)
    finished = itertools.count(1)  # next() is atomic under the GIL: the flush threads share it

    def attempt(name: tuple[str, str]) -> Optional[Exception]:
        try:
            result = ctx.flush(name[0], name[1], upto_ts)
        except Exception as exc:  # noqa: BLE001 - raised below, after the other tables
            log.error("flushing %s.%s failed: %s", name[0], name[1], exc)
            return exc
        number = next(finished)
        counts = ctx.report.tables.get(result.table) if result is not None and ctx.report is not None else None
        if say is not None and result is not None and result.merged and counts is not None:
            say(f"applied {result.table} ({number}/{total}): {counts['written']:,} row(s) written, "
                f"{counts['removed']:,} removed in {counts['seconds']:.1f} s")
        return None

    with spark_tasks(getattr(ctx, "spark", None), say, f"applying {total} table(s)"):
        if parallelism <= 1 or total <= 1:
            outcomes = [attempt(name) for name in tables]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(parallelism, total), thread_name_prefix="flush") as pool:
                outcomes = list(pool.map(attempt, tables))
    errors = [error for error in outcomes if error is not None]
    if errors:
        raise errors[0]


def _holding(settings: Settings) -> bool:
    mode = str(settings.merge.get("on_undecodable", "dead-letter"))
    if mode not in ("dead-letter", "hold"):
        raise ValueError(f"merge.on_undecodable must be 'dead-letter' or 'hold', not {mode!r}")
    return mode == "hold"


def _skipped_frame(spark, state: StateStore, changefeed: str):
    """(topic, partition, offset) of the held messages the operator chose to skip (to the dead-letter table)."""
    rows = [(h["topic"], h["partition"], h["offset"]) for h in state.holds(changefeed, resolution="skipped")]
    return local_frame(spark, rows, "topic string, partition int, offset bigint")


def _holds(events, state: StateStore, changefeed: str, report: MergeReport, say) -> dict[PartitionKey, int]:
    """Hold each partition at its first undecodable message the operator did not skip (see ``plan``); record the
    holds, and mark earlier ones that now decode as passed. Only the failures' positions reach the driver."""
    from pyspark.sql import functions as F

    failures = events.filter(F.col("kind") == "error")
    positions = [((r["topic"], r["partition"]), r["offset"])
                 for r in failures.select("topic", "partition", "offset").distinct().collect()]
    skipped = [((h["topic"], h["partition"]), h["offset"]) for h in state.holds(changefeed, resolution="skipped")]
    holds = first_holds(positions, skipped)
    held = [(topic, partition, offset) for (topic, partition), offset in sorted(holds.items())]
    if held:
        condition = None
        for topic, partition, offset in held:
            at = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") == offset)
            condition = at if condition is None else (condition | at)
        state.record_holds(changefeed, failures.filter(condition))
    state.resolve_holds(changefeed, "passed", keep=held)
    errors = {(r["topic"], r["partition"], r["offset"]): r["error"] for r in state.holds(changefeed)}
    report.held = [{"topic": t, "partition": p, "offset": o, "error": errors.get((t, p, o), "")} for t, p, o in held]
    for item in report.held:
        say(f"{changefeed}: partition {item['topic']}/{item['partition']} held at offset {item['offset']} "
            f"(undecodable: {item['error']})")
    return holds


def _resolved_before(events, holds: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
    """Per held partition, the greatest resolved ts of an event before its hold (one small aggregate)."""
    from pyspark.sql import functions as F

    if not holds:
        return {}
    condition = None
    for (topic, partition), offset in holds.items():
        before = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < offset)
        condition = before if condition is None else (condition | before)
    rows = (events.filter((F.col("kind") == "resolved") & condition)
            .groupBy("topic", "partition").agg(F.max("commit_ts").alias("ts")).collect())
    return {(r["topic"], r["partition"]): int(r["ts"]) for r in rows if r["ts"] is not None}


def _first_unapplied(events, ctx: RunContext, bound: int, max_commit_ts: int) -> dict:
    """Per partition, the smallest offset of a row or DDL not applied by this run: above the safe bound, or
    kept pending because its table's schema is still unknown (Simple DML before its schema arrives).

    ``max_commit_ts``: the greatest commit ts of the run's rows and DDLs (the decode tasks' aggregate). When
    nothing is above the bound or pending, no event is unapplied and no Spark job is needed to say so."""
    from pyspark.sql import functions as F

    if max_commit_ts <= bound and not ctx.pending:
        return {}

    unapplied = F.col("commit_ts") > bound
    for schema, table in sorted(ctx.pending):
        unapplied = unapplied | (
            (F.col("kind") == "row") & (F.lower("schema_name") == schema) & (F.lower("table_name") == table)
        )
    frame = events.filter(F.col("kind").isin("row", "ddl") & unapplied)
    grouped = frame.groupBy("topic", "partition").agg(F.min("offset").alias("first"))
    return {(r["topic"], r["partition"]): r["first"] for r in grouped.collect()}
