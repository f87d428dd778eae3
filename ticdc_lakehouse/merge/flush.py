"""Merge one table's changes in one commit-ts range into its Iceberg table.

The MERGE and the new watermark (``tidb.resolved-ts`` in the snapshot summary) commit together, so after a crash
the table's own summary says exactly what it already holds and the rerun continues after it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Optional

from ticdc_lakehouse.faults import fault_point
from ticdc_lakehouse.iceberg.commit import run_with_snapshot_properties
from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, JavaIceberg, watermark_of
from ticdc_lakehouse.iceberg.tables import TargetTable, quote
from ticdc_lakehouse.merge.changes import OP, PRESENT, change_set

_view_ids = itertools.count()


@dataclass(frozen=True)
class FlushResult:
    table: str
    after_ts: int
    upto_ts: int
    merged: bool  # a MERGE ran (False: nothing in range, only the watermark moved)


def merge_sql(catalog: str, target: TargetTable, source_view: str) -> str:
    """The MERGE statement for a typed change set (see ``changes.merge_source``)."""
    table = f"{quote(catalog)}.{quote(target.namespace)}.{quote(target.name)}"
    equals = "=" if target.keys_required else "<=>"
    on = " AND ".join(f"t.{quote(k.name)} {equals} s.{quote(k.name)}" for k in target.keys)
    key_names = {k.name.lower() for k in target.keys}
    assignments = []
    for position, column in enumerate(target.columns):
        if column.name.lower() in key_names:
            continue
        name = quote(column.name)
        assignments.append(f"t.{name} = CASE WHEN s.{quote(PRESENT + str(position))} THEN s.{name} ELSE t.{name} END")
    names = ", ".join(quote(c.name) for c in target.columns)
    values = ", ".join(f"s.{quote(c.name)}" for c in target.columns)
    update = f"WHEN MATCHED THEN UPDATE SET {', '.join(assignments)}\n" if assignments else ""
    return (
        f"MERGE INTO {table} AS t USING {quote(source_view)} AS s ON {on}\n"
        f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE\n"
        f"{update}"
        f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})"
    )


def flush_table(
    spark,
    ji: JavaIceberg,
    catalog: str,
    events,
    upstream_schema: str,
    upstream_table: str,
    target: TargetTable,
    upto_ts: int,
    has_rows_in_range: bool,
    summary: Mapping[str, str],
    after_ts: Optional[int] = None,
) -> FlushResult:
    """Apply the table's row events with ``watermark < commit_ts <= upto_ts`` and record ``upto_ts``.

    ``after_ts`` overrides the lower bound (-1 for protocols without resolved ts, which rely on offsets).
    """
    lower = target.watermark if after_ts is None else after_ts
    label = f"{target.namespace}.{target.name}"
    if after_ts is None and upto_ts <= target.watermark:
        return FlushResult(label, lower, upto_ts, False)
    properties = {**summary, RESOLVED_TS_PROPERTY: str(upto_ts)}
    merged = False
    if has_rows_in_range:
        source = change_set(events, upstream_schema, upstream_table, lower, upto_ts, target.columns, target.keys)
        view = f"_lakehouse_changes_{next(_view_ids)}"
        source.createOrReplaceTempView(view)
        statement = merge_sql(catalog, target, view)
        try:
            run_with_snapshot_properties(spark, properties, lambda: spark.sql(statement))
        finally:
            spark.catalog.dropTempView(view)
        merged = True
    jtable = ji.load(target.namespace, target.name)
    if watermark_of(jtable) < upto_ts:
        # Nothing changed (or the MERGE wrote no file): an empty snapshot still records the watermark.
        ji.commit_marker(jtable, properties)
    target.watermark = max(target.watermark, upto_ts)
    fault_point("merge.after_table_commit")
    return FlushResult(label, lower, upto_ts, merged)
