"""Rows that arrive below a committed cut: a replay of what the lake holds, or a change the lake never got.

TiCDC promises that once a partition's resolved ts passed ``t``, no change at or below ``t`` follows in it. The
merge relies on that: a table's rows at or below its watermark are never applied again (which is also what makes
a rerun over the same offsets idempotent). So a row newly landed *after* a cut was committed, with a commit ts at
or below the cut, is either

* a **replay** (TiCDC re-sends from its own checkpoint after a restart: at-least-once): equal to what the lake
  held at that ts, nothing to do; or
* a **late** change: a broken promise upstream; the lake does not have it and never will unless someone repairs.

Neither may vanish unseen: each such row is kept in ``_lakehouse.below_cut`` with its Kafka position, commit ts,
table, values and verdict, counted in the run report and shown by ``lakehouse status``.

Which rows are "new": those at an offset at or after the landed end the last checkpoint recorded
(``Checkpoint.landed_end``). Rows before it were read by an earlier run already (a partition restarts at its first
unapplied row, so applied rows are re-read routinely: those are not below-the-cut arrivals).

Cost: the decode tasks' per-table minimum commit ts (``staged_stats``) answers the common case with no Spark job:
when no table has a row at or below its threshold, nothing is looked at. Otherwise one filter over the cached
events finds the new rows below it; only tables that have some are compared with the lake, in Spark (a join of
the typed rows with the table as of the snapshot that covered their ts). Only counts and snapshot ids reach the
driver, never rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from typing import Mapping, Optional, Sequence

from pyspark.sql import functions as F

from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
from ticdc_lakehouse.iceberg.tables import describe
from ticdc_lakehouse.runtime.local_frame import local_frame
from ticdc_lakehouse.merge.changes import PRESENT, typed_changes
from ticdc_lakehouse.merge.plan import PartitionKey, TableKey, table_key
from ticdc_lakehouse.core.model import DELETE
from ticdc_lakehouse.core.sql_names import qualified, quote

REPLAY = "replay"
LATE = "late"

BELOW_CUT_DDL = (
    "changefeed string, topic string, partition int, offset bigint, seq int, commit_ts bigint, cut_ts bigint, "
    "schema_name string, table_name string, op string, row_after string, row_before string, verdict string, "
    "compared_snapshot_id bigint, run_id string, recorded_at timestamp"
)


@dataclass
class BelowCut:
    """What a run found below the cut: per verdict the number of row events, and the tables concerned."""

    late: int = 0
    replay: int = 0
    tables: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"late": self.late, "replay": self.replay, "tables": self.tables}


def thresholds(cut: int, watermarks: Mapping[TableKey, int], min_ts: Mapping[TableKey, int]) -> dict[TableKey, int]:
    """Per table with rows, the ts at or below which a new row would be dropped: the committed cut, or the table's
    watermark when that is lower (a halted table applies its later rows when resumed). Only tables whose smallest
    row ts reaches it (pure: the no-job gate)."""
    found = {}
    for key, low in min_ts.items():
        bound = min(cut, watermarks.get(key, cut))
        if bound > 0 and low <= bound:
            found[key] = bound
    return found


def new_rows_below(events, landed_end: Mapping[PartitionKey, int], bounds: Mapping[TableKey, int]):
    """Row events newly landed since the last checkpoint (offset >= its landed end) at or below their table's
    bound; a partition the checkpoint does not know is new from offset 0."""
    fresh = None
    for (topic, partition), end in sorted(landed_end.items()):
        seen = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < end)
        fresh = seen if fresh is None else (fresh | seen)
    below = None
    for (schema, table), bound in sorted(bounds.items()):
        hit = ((F.lower("schema_name") == schema) & (F.lower("table_name") == table) & (F.col("commit_ts") <= bound))
        below = hit if below is None else (below | hit)
    rows = events.filter((F.col("kind") == "row") & below)
    return rows if fresh is None else rows.filter(~fresh)


def covering_snapshots(jtable) -> list[tuple[int, int]]:
    """``(watermark, snapshot id)`` of the main branch's ancestry, one per watermark (its newest snapshot), in
    ascending watermark order: a row at ts ``t`` is compared with the first one whose watermark is >= ``t``."""
    newest: dict[int, int] = {}
    snapshot = jtable.currentSnapshot()
    while snapshot is not None:
        value = snapshot.summary().get(RESOLVED_TS_PROPERTY)
        if value and int(value) not in newest:
            newest[int(value)] = int(snapshot.snapshotId())
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return sorted(newest.items())


def verdicts(spark, catalog: str, rows, target, snapshots: Sequence[tuple[int, int]]):
    """Each row event of one table with its verdict (``replay``/``late``) and the snapshot it was compared with.

    An insert or update is a replay when the lake row of its key at the covering snapshot holds every value the
    event carries; a delete when that snapshot has no row of its key. A key-changing update is judged as its two
    halves (delete of the old key, write of the new one): late when either is. All in Spark."""
    columns, keys = target.columns, target.keys
    key_names = [k.name.lower() for k in keys]
    non_keys = [i for i, c in enumerate(columns) if c.name.lower() not in key_names]
    typed = typed_changes(rows, columns, keys, non_keys, carried=("topic",)).select(
        "topic", "partition", "offset", "seq", "op", "commit_ts", *[f"_k{j}" for j in range(len(keys))],
        *[f"_c{i}" for i in non_keys], *[f"{PRESENT}{i}" for i in non_keys])
    marks = local_frame(spark, [(w, s, (snapshots[i - 1][0] if i else -1)) for i, (w, s) in enumerate(snapshots)],
                        "watermark bigint, snapshot_id bigint, previous bigint")
    placed = typed.join(F.broadcast(marks), (F.col("commit_ts") > F.col("previous"))
                        & (F.col("commit_ts") <= F.col("watermark")), "left")
    ids = [r[0] for r in placed.select("snapshot_id").distinct().collect() if r[0] is not None]
    judged = []
    for snapshot_id in ids:
        lake = spark.sql(f"SELECT * FROM {qualified(catalog, target.namespace, target.name)} "
                         f"VERSION AS OF {int(snapshot_id)}")
        lake_columns = {c.lower(): c for c in lake.columns}
        lake = lake.select(F.lit(True).alias("_found"),
                           *[F.col(quote(lake_columns[c.name.lower()])).alias(f"_l{i}")
                             for i, c in enumerate(columns) if c.name.lower() in lake_columns])
        mine = placed.filter(F.col("snapshot_id") == snapshot_id)
        position = {c.name.lower(): i for i, c in enumerate(columns)}
        on = [mine[f"_k{j}"].eqNullSafe(lake[f"_l{position[name]}"]) for j, name in enumerate(key_names)]
        joined = mine.join(lake, reduce(lambda a, b: a & b, on), "left")
        same = F.lit(True)
        for i in non_keys:
            if f"_l{i}" in lake.columns:
                same = same & (~F.col(f"{PRESENT}{i}") | F.col(f"_c{i}").eqNullSafe(F.col(f"_l{i}")))
        found = F.coalesce(F.col("_found"), F.lit(False))
        replay = F.when(F.col("op") == DELETE, ~found).otherwise(found & same)
        judged.append(joined.select("topic", "partition", "offset", "seq", "snapshot_id",
                                    replay.alias("_replay")))
    unplaced = placed.filter(F.col("snapshot_id").isNull()).select(
        "topic", "partition", "offset", "seq", "snapshot_id", F.lit(False).alias("_replay"))
    every = reduce(lambda a, b: a.unionByName(b), judged, unplaced)
    per_event = every.groupBy("topic", "partition", "offset", "seq").agg(
        F.min(F.col("_replay").cast("int")).alias("_replay"), F.max("snapshot_id").alias("compared_snapshot_id"))
    return rows.join(per_event, ["topic", "partition", "offset", "seq"]).select(
        "topic", "partition", "offset", "seq", "commit_ts", "schema_name", "table_name", "op",
        F.to_json("after").alias("row_after"), F.to_json("before").alias("row_before"),
        F.when(F.col("_replay") == 1, F.lit(REPLAY)).otherwise(F.lit(LATE)).alias("verdict"),
        "compared_snapshot_id")


def find_and_record(ctx, checkpoint, min_ts: Mapping[TableKey, int], say) -> Optional[BelowCut]:
    """The run's rows below the cut (see the module doc), recorded in ``_lakehouse.below_cut``; None when the
    decode stats already show there are none (no Spark job ran)."""
    if not checkpoint.resolved_ts:
        return None
    # only tables whose rows reach the cut at all (no catalog read otherwise); not ctx.target: its cache stays as
    # it was for the run
    targets = {key: describe(ctx.ji, *key) for key, low in min_ts.items() if low <= checkpoint.resolved_ts}
    watermarks = {key: target.watermark for key, target in targets.items() if target.exists}
    bounds = thresholds(checkpoint.resolved_ts, watermarks, {k: v for k, v in min_ts.items() if k in watermarks})
    if not bounds:
        return None
    rows = new_rows_below(ctx.events, checkpoint.landed_end, bounds)
    counts = {table_key(r[0], r[1]): r[2] for r in
              rows.groupBy(F.lower("schema_name"), F.lower("table_name")).count().collect()}
    found = BelowCut()
    if not counts:
        return found
    for key in sorted(counts):
        target = targets[key]
        jtable = ctx.ji.load(target.namespace, target.name)
        table_rows = rows.filter((F.lower("schema_name") == key[0]) & (F.lower("table_name") == key[1]))
        judged = verdicts(ctx.spark, ctx.settings.catalog_name, table_rows, target, covering_snapshots(jtable))
        judged = judged.persist()  # recorded, then counted
        try:
            ctx.state.record_below_cut(ctx.changefeed, judged, checkpoint.resolved_ts, ctx.run_id)
            tally = {r[0]: r[1] for r in judged.groupBy("verdict").count().collect()}
        finally:
            judged.unpersist()
        found.late += tally.get(LATE, 0)
        found.replay += tally.get(REPLAY, 0)
        found.tables.append(f"{target.namespace}.{target.name}")
    if found.late:
        say(f"{ctx.changefeed}: {found.late} row change(s) arrived below the committed cut {checkpoint.resolved_ts} "
            f"and differ from the lake (late: upstream broke its resolved-ts promise); not applied, kept in "
            f"_lakehouse.below_cut (verdict 'late') for repair")
    if found.replay:
        say(f"{ctx.changefeed}: {found.replay} replayed row change(s) below the cut skipped (equal to the lake)")
    return found
