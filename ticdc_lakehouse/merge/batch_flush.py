"""The final flush's first step: every table whose lake copy holds no rows or few, written by a few Spark jobs.

Why: see ``batch_write`` (tables new to the lake) and ``batch_rewrite`` (small tables, rewritten whole). The run's
other tables (more than ``merge.rewrite_max_rows`` rows, keyless, only a watermark to move) keep the per-table
flush (``engine.flush_concurrently``) after this step.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from ticdc_lakehouse.runtime.parallel import map_at_most
from ticdc_lakehouse.merge import table_work
from ticdc_lakehouse.merge.plan import table_key
from ticdc_lakehouse.merge.table_commit import AppendPlan, append_tables, plan_write
from ticdc_lakehouse.merge.value_checks import failed_tables, is_invalid_value_failure, reason_of

log = logging.getLogger(__name__)


def flush_in_write_jobs(ctx, tables: list[tuple[str, str]], upto_ts: int, parallelism: int,
                       say: Optional[Callable[[str], None]] = None) -> list[tuple[str, str]]:
    """Apply, up to ``upto_ts``, the rows of every table of ``tables`` that holds none in the lake yet or at most
    ``merge.rewrite_max_rows`` (see ``table_commit.plan_write``) with a few write jobs and one commit per table;
    returns the tables left for the per-table flush. When a write job fails on a value a table cannot store, nothing
    is committed: the table the failure names (``value_checks.failed_tables``) is left to the per-table flush, which
    sets the value aside, and the others are written again (a failure naming no table leaves every table to it)."""
    with_rows = [name for name in tables if table_key(*name) in ctx.row_stats]
    if len(with_rows) < 2:
        return tables  # one table: its own flush takes the append path just as well

    def plan(name: tuple[str, str]) -> Optional[AppendPlan]:
        change = table_work.change_range(ctx, name[0], name[1], upto_ts)
        if change is None or (change.after_ts is None and change.upto_ts <= change.target.watermark):
            return None
        return plan_write(ctx.ji, change, ctx.settings.merge.rewrite_max_rows)

    planned = map_at_most(plan, with_rows, parallelism, "plan")
    chosen = {name: change for name, change in zip(with_rows, planned) if change is not None}
    started = time.monotonic()
    while True:
        if not chosen:
            return tables
        try:
            results = append_tables(ctx.spark, ctx.ji, ctx.settings.catalog_name, ctx.events,
                                    list(chosen.values()), parallelism)
            break
        except Exception as exc:
            if not is_invalid_value_failure(exc):
                raise
            failed = failed_tables(exc, [(plan.change.upstream_schema, plan.change.upstream_table)
                                         for plan in chosen.values()])
            if not failed:
                log.warning("writing %d table(s) in write jobs failed on a value (%s): applying them one by one",
                            len(chosen), reason_of(exc))
                return tables
            # nothing was committed: the others are written again without the table(s) the value is in, which
            # take their own flush (it sets the value aside), instead of every table taking its own
            log.warning("writing %d table(s) in write jobs failed on a value (%s): writing the others again, "
                        "applying %s on its own", len(chosen), reason_of(exc), ", ".join(".".join(f) for f in failed))
            chosen = {name: plan for name, plan in chosen.items()
                      if (plan.change.upstream_schema, plan.change.upstream_table) not in failed}
    seconds = time.monotonic() - started
    for name, result in zip(chosen, results):
        table_work.record(ctx, result, table_key(*name), seconds / len(chosen))
    if say is not None:
        for number, result in enumerate(results, 1):  # the lines the per-table flush says too
            say(f"applied {result.table} ({number}/{len(results)}): {result.written:,} row(s) written, "
                f"{result.removed:,} removed in {seconds / len(chosen):.1f} s")
        rows = sum(result.written for result in results)
        say(f"applied {len(chosen)} table(s) by task-side writers: {rows:,} row(s) in {seconds:.1f} s")
    return [name for name in tables if name not in chosen]
