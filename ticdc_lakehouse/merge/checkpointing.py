"""Step 4 of a run: write the checkpoint (the cut, each live table's snapshot, where to read next) and tag the cut.

Written after every table is flushed: a crash before it leaves the previous checkpoint, and the rerun continues
from each table's own watermark. The restart offsets never pass an event this run did not apply (above the safe
bound, held, or pending its table's schema), so nothing is skipped.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from pyspark.sql import functions as F

from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.runtime.parallel import map_at_most
from ticdc_lakehouse.merge.plan import PartitionKey, restart_offsets, unapplied_with_holds
from ticdc_lakehouse.merge.run_state import CutPlan, DecodedRun, RunContext
from ticdc_lakehouse.runtime.state import Checkpoint
from ticdc_lakehouse.commands.timetravel import tag_cut


def write_checkpoint(ctx: RunContext, run: DecodedRun, cut: CutPlan, tables: Iterable[str],
                     say: Callable[[str], None]) -> None:
    """Record the cut for ``tables`` (``schema.table``, with every table the run touched) and tag it."""
    checkpoint = run.checkpoint
    loaded: dict[str, Any] = {}
    cut_tables = table_snapshots(ctx, set(tables) | {f"{k[0]}.{k[1]}" for k in ctx.tables}, loaded)
    # where to read next time: the first event of each partition not applied yet
    bound = cut.plan.safe_bound(ctx.halted) if cut.resolved_mode else cut.cut
    unapplied = _first_unapplied(run.events, ctx, bound, run.stats.max_commit_ts)
    new_restart = restart_offsets(checkpoint.restart_offsets, run.landed_end, unapplied_with_holds(unapplied, cut.holds))
    resolved_ts = max(cut.cut, checkpoint.resolved_ts)
    fault_point("merge.before_checkpoint")
    ctx.state.write_checkpoint(
        Checkpoint(
            changefeed=run.changefeed, resolved_ts=resolved_ts, run_id=ctx.run_id,
            restart_offsets=new_restart, partition_resolved=cut.partition_resolved, tables=cut_tables,
            landed_end=run.landed_end, protocol=run.protocol,
        )
    )
    fault_point("merge.after_checkpoint")
    if cut.resolved_mode and cut.cut > checkpoint.resolved_ts:
        tag_cut(ctx.spark, ctx.settings, cut.cut, cut_tables, loaded)
    say(f"{run.changefeed}: committed cut {resolved_ts} to {len(cut_tables)} table(s)")


def table_snapshots(ctx: RunContext, names: Iterable[str], loaded: Optional[dict[str, Any]] = None
                    ) -> dict[str, Optional[int]]:
    """The cut: every live table of the changefeed (``schema.table``) and its current snapshot. Read
    ``merge.parallel_tables`` tables at a time: each is a few catalog round trips, and a changefeed has hundreds.
    ``loaded``: filled with each table as loaded (lake name -> Java table), so tagging the cut loads none again."""

    def snapshot_of(name: str) -> Optional[tuple[str, Optional[int]]]:
        schema, _, table = name.partition(".")
        namespace, tname = ctx.ji.resolve(schema, table)
        if not ctx.ji.listed(namespace, tname):
            return None
        jtable = ctx.ji.load(namespace, tname)
        if loaded is not None:
            loaded[f"{namespace}.{tname}"] = jtable
        snapshot = jtable.currentSnapshot()
        return f"{namespace}.{tname}", snapshot.snapshotId() if snapshot is not None else None

    found = map_at_most(snapshot_of, sorted(names), ctx.settings.merge.parallel_tables, "cut")
    return dict(table for table in found if table is not None)


def _first_unapplied(events, ctx: RunContext, bound: int, max_commit_ts: int) -> dict[PartitionKey, int]:
    """Per partition, the smallest offset of a row or DDL not applied by this run: above the safe bound, or
    kept pending because its table's schema is still unknown (Simple DML before its schema arrives).

    ``max_commit_ts``: the greatest commit ts of the run's rows and DDLs (the decode tasks' aggregate). When
    nothing is above the bound or pending, no event is unapplied and no Spark job is needed to say so."""
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
