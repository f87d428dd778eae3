"""One merge run of a changefeed: landed segments -> Iceberg tables at the global resolved ts.

The driver only plans: it reads small aggregates (per-partition resolved ts, the DDL list, per-table row counts,
folded by the decode tasks themselves, see ``staged_stats``) and issues one MERGE per table and DDL barrier.
Decoding, collapsing and writing run in executors over the decoded events, kept as files the decode tasks write or
in the executors' cache; no change set is ever collected.

Order of work, following TiCDC's consumer (each step a function over the run's typed values, ``run_state``):
1. decode the landed records after each partition's restart offset, once, into Parquet files beside the landed
   segments (``decoded_files``) or the executors' cache (``decode_stage``; the decode tasks fold the planner's
   aggregates, ``staged_stats``);
2. plan the run: cut = min over all partitions of their resolved ts (capped by ``stop_ts``), its DDLs, holds
   and dead letters (``planning``, over the pure rules of ``plan``);
3. for each DDL <= cut in commit-ts order: merge the rows of the tables it touches below its ts, then apply it
   (atomically with its watermark); a DDL Iceberg cannot express halts only its table (``apply_barriers``,
   ``ddl_apply``);
4. merge every table's remaining rows up to the cut, recording the cut in each snapshot (``flush_concurrently``;
   one table's work is ``table_work``);
5. write the checkpoint (cut, restart offsets, table snapshots) and tag the cut (``checkpointing``).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from dataclasses import asdict
from typing import Callable, Optional

from pyspark import StorageLevel

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.decode.protocols import PROTOCOLS_WITH_MISSING_TS, resolved_ts_sink_option, uses_resolved_ts
from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.runtime.parallel import commits_at_once, map_at_most
from ticdc_lakehouse.runtime.spark_session import ADAPTIVE, session_conf
from ticdc_lakehouse.iceberg.commit import callback_session, ensure_callback_server
from ticdc_lakehouse.iceberg.java_api import JavaIceberg
from ticdc_lakehouse.landing.quarantine import SegmentQuarantined, check_landed, quarantine, unreadable_segment_in
from ticdc_lakehouse.landing.segments import known_partitions, landed_topics, list_segments
from ticdc_lakehouse.runtime.locks import changefeed_lock, driver_lock
from ticdc_lakehouse.merge import table_work
from ticdc_lakehouse.merge.ddl import apply as ddl_apply
from ticdc_lakehouse.merge.batch_flush import flush_in_write_jobs
from ticdc_lakehouse.merge.below_cut import find_and_record
from ticdc_lakehouse.merge.checkpointing import write_checkpoint
from ticdc_lakehouse.merge.decode_stage import decode_landed, source_unavailable_in, stats_accumulator
from ticdc_lakehouse.merge.decoded_files import (
    decode_to_files, remove_decoded, run_directory, unwritable_in, uses_files,
)
from ticdc_lakehouse.merge.change_range import FlushResult
from ticdc_lakehouse.merge.made_up_ts import fill_made_up_ts
from ticdc_lakehouse.merge.plan import RunPlan, table_key
from ticdc_lakehouse.merge.planning import plan_cut, record_dead_letters
from ticdc_lakehouse.merge.run_state import DecodedRun, MergeReport, RunContext
from ticdc_lakehouse.merge.staged_stats import finish
from ticdc_lakehouse.merge.table_events import clustered_by_table, with_table_key
from ticdc_lakehouse.commands.progress import spark_tasks
from ticdc_lakehouse.runtime.state import HaltedTable, StateStore

__all__ = ["MergeReport", "flush_concurrently", "no_resolved_hint", "run_merge", "uses_resolved_ts"]

log = logging.getLogger(__name__)


def no_resolved_hint(changefeed: str, protocol: str, partitions: list[str]) -> str:
    """One line for a stream that never carried a resolved event (so with ``resolved_ts`` auto/required nothing is
    ever applied): which partitions, and what to set."""
    sink = resolved_ts_sink_option(protocol)
    fix = f'set resolved_ts = "none" in [changefeeds.{changefeed}] (each key is then applied in commit-ts order)'
    if sink:
        fix += f", or add {sink} to the changefeed's sink URI so TiCDC sends resolved events"
    return (f"{changefeed}: no resolved event was ever seen in {', '.join(partitions)} ({protocol}): with "
            f"resolved_ts = auto nothing can be applied, and records stay pending. If the stream carries none, {fix}")




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
        resolved_mode = uses_resolved_ts(protocol, cf.resolved_ts)
        say(f"{cf.name}: decoding {len(paths)} landed segment(s) with protocol {protocol}")
        # Decoded once, in the executors, and kept for every later pass (the stats, the DDL list, each table's change
        # set): as Parquet files the decode tasks write (``decoded_files``), or in Spark's cache. Nothing of it goes
        # through the driver.
        collected = stats_accumulator(spark)
        fills_ts = protocol in PROTOCOLS_WITH_MISSING_TS
        in_files = uses_files(settings.merge.decoded_events, settings.landing_path, fills_ts)
        remove_decoded(settings.landing_path, cf.name)  # what a killed run left (this run holds the lock)
        directory = run_directory(settings.landing_path, cf.name, run_id) if in_files else None
        events = None
        try:
            try:
                phase = time.monotonic()
                with spark_tasks(spark, progress, "decoding"):
                    if directory is not None:
                        events = decode_to_files(spark, paths, start, protocol, options, collected,
                                                 landed.row_groups, directory)
                    else:
                        events = _decode_into_cache(spark, paths, start, protocol, options, collected, landed,
                                                    fills_ts, resolved_mode, checkpoint.resolved_ts)
                report.phases["decode"] = round(time.monotonic() - phase, 3)
            except Exception as exc:
                unavailable = source_unavailable_in(exc)  # e.g. the schema registry is down: nothing committed
                if unavailable is not None:
                    raise unavailable from None
                unwritable = unwritable_in(exc)
                if unwritable is not None:
                    raise unwritable from None
                damaged = unreadable_segment_in(str(exc), (s for segs in segments.values() for s in segs))
                if damaged is not None:  # a page the footer check cannot see: moved aside, nothing committed
                    raise SegmentQuarantined(quarantine(settings.landing_path, cf.name, *damaged)) from None
                raise
            stats = finish(collected.value)
            say(f"{cf.name}: decoded {stats.events:,} event(s) in {report.phases['decode']:.1f} s "
                f"({stats.events / max(report.phases['decode'], 1e-3):,.0f} events/s)")
            run = DecodedRun(cf.name, protocol, checkpoint, scanned(spark, events), stats, partitions, landed_end,
                             stop_ts)
            _merge_decoded(spark, settings, state, run, resolved_mode, report, say)
        finally:
            if directory is not None:
                remove_decoded(settings.landing_path, cf.name)  # the run's files (no other run's are left: above)
            elif events is not None:
                events.unpersist()
    report.seconds = time.monotonic() - started
    return report


def _decode_into_cache(spark, paths, start, protocol: str, options: DecoderOptions, collected, landed,
                       fills_ts: bool, resolved_mode: bool, resolved_ts: int):
    """Decode the landed ``paths`` into Spark's cache in the executors (spilling to disk), in one job, and return
    the cached events, where they are not kept as files (``decoded_files.uses_files``)."""
    events = decode_landed(spark, paths, start, protocol, options, collected, landed.row_groups)
    if fills_ts:
        # with resolved events, a ts at or below the cut would read as applied: the first ts above it
        events = fill_made_up_ts(events, resolved_ts + 1 if resolved_mode else 0)
        events = clustered_by_table(events)  # the fill's window reorders the events by partition
    else:
        events = with_table_key(events)  # grouped by table by the decode tasks
    # Kept as Spark's column batches, not serialized: pyspark's MEMORY_AND_DISK is its serialized level, which
    # Java-serialized and LZ4-compressed every batch into the cache and undid both in every pass over it (a
    # tenth of the executors' time in a 275k-event run). Batches that do not fit in memory still go to disk.
    events = events.persist(StorageLevel.MEMORY_AND_DISK_DESER)
    try:
        # one job: adaptive execution would fill the cache in a job of its own, then scan it again to count
        with session_conf(spark, {ADAPTIVE: "false"}):
            events.count()  # decodes into the cache; the tasks' aggregates arrive in ``collected``
    except BaseException:
        events.unpersist()
        raise
    return events


def scanned(spark, events):
    """The decoded events (files or cache) as every later pass reads them: in one task per core of the session, not
    one per decode task (the decode splits the landed segments finer, ``DECODE_TASKS_PER_CORE`` tasks a core, to
    even out their work).

    Why: every task of a pass builds its operators' generated code again (the typing projection of a change set
    is large: about 35 ms a task, a quarter of the executors' time in the write jobs of a 275k-event run) and
    fetches and deserializes the job's closures; a task per core gives the same parallelism for a fraction of
    that."""
    return events.coalesce(max(1, spark.sparkContext.defaultParallelism))


def _report_landed_check(landed, report: MergeReport, say) -> None:
    for entry in landed.quarantined:
        report.quarantined.append(asdict(entry))
        say(f"QUARANTINED landed segment {entry}; the next landing run lands these offsets again from Kafka")
    for (topic, partition), ranges in sorted(landed.missing.items()):
        report.missing[f"{topic}/{partition}"] = [list(r) for r in ranges]
        first = ranges[0]
        say(f"{topic}/{partition}: offsets [{first[0]}, {first[1]}) are not landed: merging this partition up to "
            f"offset {first[0]} only; `lakehouse land` lands them again (or reports them as data loss)")


def _merge_decoded(spark, settings: Settings, state: StateStore, run: DecodedRun, resolved_mode: bool,
                   report: MergeReport, say: Callable[[str], None]) -> None:
    """The steps after decoding: plan the run -> apply the DDL barriers -> flush every table -> write the
    checkpoint. Each step reads the run's typed values (``run_state``); none calls back into this module."""
    # 1. plan the run: the cut, its DDLs, holds and dead letters
    cut = plan_cut(settings, state, run, resolved_mode, report, say)
    if report.no_resolved_events:
        say(no_resolved_hint(run.changefeed, run.protocol, report.no_resolved_events))
    record_dead_letters(spark, settings, state, run, report, say)
    halts = state.halted(run.changefeed, include_resolved=True)
    ctx = RunContext(
        spark=spark, settings=settings, changefeed=run.changefeed, ji=JavaIceberg(spark, settings.catalog_name),
        state=state, events=run.events, run_id=report.run_id,
        halted={table_key(h.schema, h.table): h.ddl_ts for h in halts if not h.resolution},
        row_stats=run.stats.rows, report=report, resolved_mode=resolved_mode,
    )
    if resolved_mode:  # before any flush moves a watermark: what is below the committed cut stays below it
        below = find_and_record(ctx, run.checkpoint, {key: rows.min_ts for key, rows in ctx.row_stats.items()}, say)
        if below is not None:
            report.below_cut = below.as_dict()
    # 2. the DDL barriers, in commit-ts order
    apply_barriers(ctx, cut.plan, [h for h in halts if h.resolution], say)
    # 3. every table up to the cut
    tables = set(run.checkpoint.tables) | {f"{s}.{t}" for s, t in ctx.row_stats}
    ensure_callback_server(spark)  # started here, not raced by the first MERGEs of several threads
    phase = time.monotonic()
    # tables new to the lake and small ones first: a few write jobs for all of them (``batch_flush``); the rest
    # one by one
    final = flush_in_write_jobs(ctx, final_flush_tables(ctx, tables), cut.cut, settings.merge.parallel_tables, say)
    flush_concurrently(lambda schema, table, upto: table_work.flush(ctx, schema, table, upto),
                       final, cut.cut, settings.merge.parallel_tables, say, report, spark)
    ctx.ji.commit_all_staged()  # tables created in the run with no rows to commit them (``table_work.create``)
    report.phases["apply"] = round(time.monotonic() - phase, 3)
    # 4. the checkpoint
    phase = time.monotonic()
    write_checkpoint(ctx, run, cut, tables, say)
    report.phases["commit"] = round(time.monotonic() - phase, 3)
    report.resolved_ts = max(cut.cut, run.checkpoint.resolved_ts)


def apply_barriers(ctx: RunContext, plan: RunPlan, resolutions: list[HaltedTable], say: Callable[[str], None]
                   ) -> None:
    """Operator resolutions and bootstraps first, then each DDL at or below the cut in commit-ts order: the rows
    of the tables it blocks are merged below its ts (a barrier flush), then it is applied (timed as the run's
    ``ddl`` phase). Most column changes and TRUNCATE block nothing (``ddl_apply.carried``): a table is then
    written once in the run, after its schema changes."""
    ctx.removals = ddl_apply.removals(plan.ddls)
    ctx.run_columns = ddl_apply.columns_by_table(plan.ddls)
    ddl_apply.apply_resolutions(ctx, resolutions)
    for bootstrap in plan.bootstraps:
        ddl_apply.apply_bootstrap(ctx, bootstrap)
    say(f"{ctx.changefeed}: cut at resolved ts {plan.resolved_ts}; {len(plan.ddls)} DDL(s); "
        f"{len(ctx.row_stats)} table(s) with rows")
    phase = time.monotonic()
    position = 0
    while position < len(plan.ddls):
        creates = ddl_apply.independent_creates(plan.ddls, position)
        if len(creates) > 1:  # a run of new tables (a backfill, a new changefeed): created at once
            ddl_apply.apply_creates(ctx, creates, ctx.settings.merge.parallel_tables)
            position += len(creates)
            continue
        record = plan.ddls[position]
        carried = ddl_apply.carried(ctx, record)
        for schema, table in ddl_apply.tables_blocked(ctx, record, carried):
            table_work.flush(ctx, schema, table, record.commit_ts - 1, create_missing=False)
        ddl_apply.apply_ddl(ctx, record, carried)
        position += 1
        fault_point("merge.after_ddl")
    if ctx.report is not None:
        ctx.report.phases["ddl"] = round(time.monotonic() - phase, 3)


def final_flush_tables(ctx: RunContext, tables: set[str]) -> list[tuple[str, str]]:
    """The tables the final flush visits: every table with rows (under its upstream names), then each other
    existing table of the changefeed (no rows: only its watermark moves to the cut).

    The others are described (loaded from the catalog, kept for their flush) several at a time: most tables of a
    scheduled run of a big changefeed have no rows, and one after the other their loads were a third of what
    such a run spent on them (1,000 tables: 4.5 s of the main thread)."""
    final = [(stats.schema, stats.table) for _, stats in sorted(ctx.row_stats.items())]
    idle = [(schema, table) for schema, _, table in (name.partition(".") for name in sorted(tables))
            if table_key(schema, table) not in ctx.row_stats]
    described = map_at_most(lambda name: ctx.target(*name), idle, commits_at_once(ctx.settings.merge.parallel_tables),
                            "describe")
    return final + [name for name, target in zip(idle, described) if target.exists]


def flush_concurrently(flush: Callable[[str, str, int], Optional[FlushResult]], tables: list[tuple[str, str]],
                       upto_ts: int, parallelism: int, say: Optional[Callable[[str], None]] = None,
                       report: Optional[MergeReport] = None, spark=None) -> None:
    """The final flush of every table up to the cut (``flush(schema, table, upto_ts)``), ``parallelism`` tables
    at a time.

    Why: a table's apply is a handful of small Spark jobs and catalog commits whose driver-side latency (planning,
    manifest writes, the commit itself) leaves the executors idle; tables are independent (each commits its own
    snapshot and watermark, the DDL barriers are already behind), so overlapping them fills those gaps. Each
    table's flush stays one sequential unit. Every table is attempted even when one fails (one broken table must
    not hold the others back); the first failure is raised afterwards, before the checkpoint, and the rerun
    continues from each table's own watermark. The py4j callback server must already run (see ``commit``).
    ``say`` hears each table whose rows were merged as it finishes (rows written/removed, from ``report``) and,
    meanwhile, ``spark``'s task counts."""
    total = len(tables)
    finished = itertools.count(1)  # next() is atomic under the GIL: the flush threads share it

    def attempt(name: tuple[str, str]) -> Optional[Exception]:
        try:
            result = flush(name[0], name[1], upto_ts)
        except Exception as exc:  # noqa: BLE001 - raised below, after the other tables
            log.error("flushing %s.%s failed: %s", name[0], name[1], exc)
            return exc
        number = next(finished)
        counts = report.tables.get(result.table) if result is not None and report is not None else None
        if say is not None and result is not None and result.merged and counts is not None:
            say(f"applied {result.table} ({number}/{total}): {counts['written']:,} row(s) written, "
                f"{counts['removed']:,} removed in {counts['seconds']:.1f} s")
        return None

    with spark_tasks(spark, say, f"applying {total} table(s)"):
        outcomes = map_at_most(attempt, tables, parallelism, "flush")
    errors = [error for error in outcomes if error is not None]
    if errors:
        raise errors[0]
