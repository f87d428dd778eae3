"""One table's work in a run: merge its rows up to a ts, and create it when the stream never did.

``flush`` is the only caller of ``flush.flush_table``: the DDL barriers (rows below a DDL), the final flush (rows
up to the cut) and an ALTER of a table the lake does not hold yet (``ddl_apply``) all come through it. A table
with rows but no CREATE TABLE seen is created from its rows' types (``create_from_rows``); columns its rows carry
but the table lacks are added first (``add_columns_rows_carry``), so no value is dropped.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
from ticdc_lakehouse.iceberg.tables import (
    CREATED_FROM_PROPERTY,
    TargetTable,
    add_buckets,
    buckets_for,
    create_table,
    schema_from_row_types,
)
from ticdc_lakehouse.merge.table_events import table_rows
from ticdc_lakehouse.merge.change_range import ChangeRange, FlushResult
from ticdc_lakehouse.merge.changes import key_changes_possible
from ticdc_lakehouse.merge.flush import flush_table
from ticdc_lakehouse.merge.plan import TableKey, table_key
from ticdc_lakehouse.merge.run_state import RunContext, holding
from ticdc_lakehouse.merge.staged_stats import TableStats, columns_sent
from ticdc_lakehouse.merge.value_checks import is_invalid_value_failure, reason_of, set_aside_invalid
from ticdc_lakehouse.core.model import TableSchema
from ticdc_lakehouse.core.mysql_types import column_doc, iceberg_type, parse_type

log = logging.getLogger(__name__)


def change_range(ctx: RunContext, schema: str, table: str, upto_ts: int, create_missing: bool = True
                 ) -> Optional[ChangeRange]:
    """The table and range a flush of its rows below ``upto_ts`` (inclusive) applies, unless it is halted below
    that; None when there is no table to merge into.

    ``create_missing``: a table with rows but no CREATE TABLE seen is created from the rows' types (only for
    the final flush: before a DDL, a missing table is the one the DDL is about to create)."""
    key = table_key(schema, table)
    if key in ctx.halted and ctx.halted[key] <= upto_ts:
        upto_ts = ctx.halted[key] - 1
    target = ctx.target(schema, table)
    if not target.exists:
        if not create_missing:
            return None
        since = ctx.gone.get(key)
        if since is not None and not has_rows(ctx, key, since, upto_ts):
            return None  # its rows were merged before it was dropped or renamed away
        target = create_from_rows(ctx, schema, table, since or 0)
        if target is None:
            return None
    stats = ctx.row_stats.get(key)
    after_ts = None if ctx.resolved_mode else -1
    if stats and create_missing:  # the final flush: every DDL up to the cut is applied
        target = add_columns_rows_carry(ctx, schema, table, target, stats, upto_ts)
    if stats:
        target = bucket_when_grown(ctx, schema, table, target, stats.rows)
    lower = target.watermark if after_ts is None else after_ts
    rows_in_range = has_rows(ctx, key, lower, upto_ts) if stats else False
    names = (stats.schema, stats.table) if stats else (schema, table)
    renames = tuple(ctx.renamed_in_run.get(key, ()))
    return ChangeRange(
        target, *names, upto_ts, rows_in_range, ctx.summary(), after_ts=after_ts,
        always_sent=columns_sent(stats.layouts, ctx.added_in_run.get(key)) if stats else frozenset(),
        row_events=stats.rows if stats else None, renames=renames,
        keys_move=key_changes_possible(target.keys, stats.changed_by_updates if stats else None, renames),
    )


def flush(ctx: RunContext, schema: str, table: str, upto_ts: int, create_missing: bool = True
          ) -> Optional[FlushResult]:
    """Merge the table's rows below ``upto_ts`` (see ``change_range``); None when there is no table."""
    change = change_range(ctx, schema, table, upto_ts, create_missing)
    if change is None:
        return None
    started = time.monotonic()
    try:
        result = flush_table(ctx.spark, ctx.ji, ctx.settings.catalog_name, ctx.events, change,
                             ctx.settings.merge.staged_min_rows)
    except Exception as exc:  # a value the table cannot store exactly: nothing was committed
        if not is_invalid_value_failure(exc):
            raise
        log.warning("%s.%s: %s", schema, table, reason_of(exc))
        events, upto = set_aside_invalid(ctx, change.upstream_schema, change.upstream_table, change.target,
                                         change.lower, change.upto_ts, holding(ctx.settings), change.renames)
        result = flush_table(ctx.spark, ctx.ji, ctx.settings.catalog_name, events, change.set_aside_to(upto),
                             ctx.settings.merge.staged_min_rows)
    record(ctx, result, table_key(schema, table), time.monotonic() - started)
    return result


def record(ctx: RunContext, result: FlushResult, key: TableKey, seconds: float) -> None:
    """Count a flush's rows in the run's report."""
    stats = ctx.row_stats.get(key)
    if result.merged and ctx.report is not None:
        if result.table not in ctx.report.tables_merged:
            ctx.report.tables_merged.append(result.table)
        ctx.report.count_apply(result.table, result.written, result.removed, seconds)
        if stats:
            ctx.report.tables[result.table]["events"] = dict(stats.ops)


def has_rows(ctx: RunContext, key: TableKey, lower: int, upto_ts: int) -> bool:
    """Whether the table has rows with ``lower < commit_ts <= upto_ts``, so a DDL barrier with nothing before
    it costs no MERGE. The decode tasks' min/max ts answer most questions: none in the range, or the first or
    the last of them in it (a TRUNCATE or column DDL mid-run: the rows above it include the last). Only a range
    strictly inside them asks the cached events, once. A ts the decoder made up is 0 until the merge fills it
    (``made_up_ts``): a table with such rows is not answered from its 0."""
    stats = ctx.row_stats.get(key)
    if not stats or stats.max_ts <= lower or stats.min_ts > upto_ts:
        return False
    if lower < stats.min_ts and stats.max_ts <= upto_ts:
        return True
    if stats.min_ts > 0 and (lower < stats.min_ts <= upto_ts or lower < stats.max_ts <= upto_ts):
        return True
    question = (key, lower, upto_ts)
    if question not in ctx.range_checks:
        rows = table_rows(ctx.events, stats.schema, stats.table, lower, upto_ts)
        ctx.range_checks[question] = not rows.isEmpty()
    return ctx.range_checks[question]


def create_from_rows(ctx: RunContext, schema: str, table: str, since: int = 0) -> Optional[TargetTable]:
    """A table with rows but no CREATE TABLE seen: create it from the rows' column types, if they have them."""
    stats = ctx.row_stats.get(table_key(schema, table))
    if stats and not stats.defines_columns:
        # only key-only deletes (delete-only-output-handle-key-columns): they remove rows the lake never had,
        # and must not define the table (its later inserts would lose every other column)
        log.info("%s.%s: only key-only deletes so far; the table is created by its first insert", schema, table)
        return None
    if not stats or not stats.column_types:
        key = table_key(schema, table)
        if stats and key not in ctx.pending:  # asked again by the per-table flush after the batch step's plan
            ctx.pending.add(key)
            if ctx.report is not None:
                ctx.report.pending_tables.append(f"{schema}.{table}")
        return None
    table_schema = schema_from_row_types(stats.schema, stats.table, stats.column_types, stats.key_columns)
    return create(ctx, table_schema, since, ctx.summary(**{CREATED_FROM_PROPERTY: "row-types"}))


def add_columns_rows_carry(ctx: RunContext, schema: str, table: str, target: TargetTable, stats: TableStats,
                           upto_ts: int) -> TargetTable:
    """Columns the table's rows in ``(watermark, upto_ts]`` carry but the table lacks (a table typed from
    earlier rows that did not carry them): added as nullable columns, like an ADD COLUMN DDL, in one commit whose
    snapshot keeps the watermark and says why (``tidb.ddl``). Without this their values would be dropped."""
    layouts = stats.layouts
    if not layouts or not stats.defines_columns:
        return target
    above = set().union(*[names for names, ts in layouts.items() if target.watermark < ts <= upto_ts] or [set()])
    # names a DDL applied ahead of the rows below it took away (dropped, or renamed from): not columns to add
    key = table_key(schema, table)
    above -= ctx.dropped_in_run.get(key, set())
    above -= {old.lower() for _, old, _ in ctx.renamed_in_run.get(key, ())}
    missing = [(name, descriptor) for name, descriptor in stats.column_types
               if name.lower() in above and target.column(name) is None]
    if not missing:
        return target
    jtable = ctx.ji.load(target.namespace, target.name)
    tx = jtable.newTransaction()
    update = tx.updateSchema().caseSensitive(False)
    for name, descriptor in missing:
        mysql = parse_type(descriptor)
        update = update.addColumn(name, ctx.ji.type_of(iceberg_type(mysql)), column_doc(mysql, None))
    update.commit()
    names = ", ".join(name for name, _ in missing)
    ctx.ji.commit_marker(tx, ctx.summary(**{RESOLVED_TS_PROPERTY: target.watermark,
                                            "tidb.ddl": f"ADD COLUMN {names} (carried by row images)"}))
    tx.commitTransaction()
    log.info("%s.%s: added column(s) %s that its row images carry", schema, table, names)
    return ctx.target(schema, table, refresh=True)


def bucket_when_grown(ctx: RunContext, schema: str, table: str, target: TargetTable, row_events: int
                      ) -> TargetTable:
    """The table, partitioned by its configured buckets first when it is unpartitioned and its rows and the
    run's ``row_events`` for it reach ``merge.bucket_min_rows`` (``iceberg.tables.buckets_for``), so this run's
    write already goes into buckets. A table created in this run is left as its creation chose (from the same
    rows); a keyless table, or one configured with ``bucket_count = 0``, is never bucketed."""
    if (not target.exists or target.partitioned or not target.keys_required
            or ctx.ji.staged_watermark(target.namespace, target.name) is not None):
        return target
    buckets = configured_buckets(ctx, schema, table, target.rows + row_events)
    if not buckets:
        return target
    add_buckets(ctx.ji, target, buckets)
    log.info("%s.%s: partitioned by %d buckets of %s from now on (%d rows and %d row events this run)",
             schema, table, buckets, target.keys[0].name, target.rows, row_events)
    return ctx.target(schema, table, refresh=True)


def create(ctx: RunContext, table_schema: TableSchema, watermark: int, summary: dict[str, str]) -> TargetTable:
    """Create a lake table with its configured write mode, its first snapshot at ``watermark``; bucketed when
    the run brings it at least ``merge.bucket_min_rows`` row events (``iceberg.tables.buckets_for``: a table that
    grows later is bucketed then, ``bucket_when_grown``).

    Staged (``JavaIceberg.create_table``): its catalog commit waits for its first rows, or for anything else
    that uses it, or for the end of the run's flushes (``engine``), whichever comes first."""
    schema, table = table_schema.schema, table_schema.table
    stats = ctx.row_stats.get(table_key(schema, table))
    buckets = configured_buckets(ctx, schema, table, stats.rows if stats else 0)
    write_mode = ctx.settings.table_option(schema, table, "write_mode")
    create_table(ctx.ji, table_schema, ctx.changefeed, watermark, write_mode, buckets, summary, staged=True)
    return ctx.target(schema, table, refresh=True)


def configured_buckets(ctx: RunContext, schema: str, table: str, rows: int) -> int:
    """The buckets the table's settings (``[tables."schema.table"]``, else ``[merge]``) give it at ``rows`` rows
    (``iceberg.tables.buckets_for``)."""
    options = ctx.settings.table_merge(schema, table)
    return buckets_for(options.bucket_count, options.bucket_min_rows, rows)
