"""Step 1 of a run: plan it. Where the cut is, which DDLs and bootstraps lie at or below it, which partitions are
held at an undecodable message, and which undecodable messages are dead letters.

The rules themselves are pure functions in ``plan``; this step gathers their inputs from the decode tasks'
aggregates and, for the rare holds, from small Spark aggregates over the cached events (only positions reach
the driver).
"""

from __future__ import annotations

from typing import Callable, Mapping

from pyspark.sql import functions as F

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.runtime.local_frame import local_frame
from ticdc_lakehouse.merge.plan import (
    PartitionKey,
    RunPlan,
    first_holds,
    latest_bootstraps,
    merge_resolved,
    order_ddls,
    plan_run,
    resolved_before_holds,
)
from ticdc_lakehouse.merge.run_state import CutPlan, DecodedRun, MergeReport, holding
from ticdc_lakehouse.runtime.state import StateStore


def plan_cut(settings: Settings, state: StateStore, run: DecodedRun, resolved_mode: bool, report: MergeReport,
             say: Callable[[str], None]) -> CutPlan:
    """The cut (the global resolved ts, or everything landed without resolved events) and its DDLs.

    Also records the holds (``merge.on_undecodable = "hold"``) and, in ``report.no_resolved_events``, the
    partitions with records but no resolved event ever (nothing of them can apply)."""
    stats, checkpoint = run.stats, run.checkpoint
    report.events_read = stats.events
    holds: dict[PartitionKey, int] = {}
    if holding(settings):
        if stats.failures:
            holds = _holds(run.events, state, run.changefeed, report, say)
        else:
            state.resolve_holds(run.changefeed, "passed")  # what held the partitions decodes now
    seen = (resolved_before_holds(stats.resolved, _resolved_before(run.events, holds), holds) if holds
            else stats.resolved)
    partition_resolved = merge_resolved(checkpoint.partition_resolved, seen)
    records = stats.ddls
    if resolved_mode:
        plan = plan_run(run.partitions, partition_resolved, records, run.stop_ts)
        silent = sorted(f"{topic}/{partition}" for (topic, partition), end in run.landed_end.items()
                        if end > checkpoint.restart_offsets.get((topic, partition), 0)
                        and not partition_resolved.get((topic, partition)))
        if silent and stats.events:
            report.no_resolved_events = silent
    elif holds:
        # without resolved events nothing orders the held message against the other partitions' rows: apply
        # nothing new until it decodes or is skipped
        plan = RunPlan(resolved_ts=checkpoint.resolved_ts)
    else:
        # no resolved events: everything landed is applied, each key in commit-ts order
        max_ts = stats.max_commit_ts
        upto = min(max_ts, run.stop_ts) if run.stop_ts is not None else max_ts
        plan = RunPlan(resolved_ts=upto, ddls=order_ddls(records, upto), bootstraps=latest_bootstraps(records))
    report.resolved_ts = max(plan.resolved_ts, checkpoint.resolved_ts)
    return CutPlan(plan, resolved_mode, partition_resolved, holds)


def record_dead_letters(spark, settings: Settings, state: StateStore, run: DecodedRun, report: MergeReport,
                        say: Callable[[str], None]) -> None:
    """The run's undecodable messages to the dead-letter table; in hold mode only those the operator skipped
    (held and later messages are not dead letters)."""
    report.dead_letters = run.stats.failures
    if not report.dead_letters:
        return
    failures = run.events.filter(F.col("kind") == "error")
    if holding(settings):
        failures = failures.join(_skipped_frame(spark, state, run.changefeed), ["topic", "partition", "offset"],
                                 "left_semi")
        report.dead_letters = failures.count()
    if report.dead_letters:
        state.record_dead_letters(run.changefeed, failures, report.run_id)
        say(f"{run.changefeed}: {report.dead_letters} undecodable message(s) sent to the dead-letter table")


def _skipped_frame(spark, state: StateStore, changefeed: str):
    """(topic, partition, offset) of the held messages the operator chose to skip (to the dead-letter table)."""
    rows = [(h["topic"], h["partition"], h["offset"]) for h in state.holds(changefeed, resolution="skipped")]
    return local_frame(spark, rows, "topic string, partition int, offset bigint")


def _holds(events, state: StateStore, changefeed: str, report: MergeReport, say) -> dict[PartitionKey, int]:
    """Hold each partition at its first undecodable message the operator did not skip (see ``plan``); record the
    holds, and mark earlier ones that now decode as passed. Only the failures' positions reach the driver."""
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
    if not holds:
        return {}
    condition = None
    for (topic, partition), offset in holds.items():
        before = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < offset)
        condition = before if condition is None else (condition | before)
    rows = (events.filter((F.col("kind") == "resolved") & condition)
            .groupBy("topic", "partition").agg(F.max("commit_ts").alias("ts")).collect())
    return {(r["topic"], r["partition"]): int(r["ts"]) for r in rows if r["ts"] is not None}
