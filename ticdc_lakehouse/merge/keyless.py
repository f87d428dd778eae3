"""The change set of a table with no usable key (no PRIMARY KEY, no NOT NULL UNIQUE handle: a force-replicated
table), as counts of whole rows.

Upstream such a table is a multiset: two rows may be equal in every column, a DELETE removes one of them (TiCDC
sends one event per row removed), an UPDATE is the old image removed and the new one added. A MERGE keyed by the
whole row cannot do that: it would collapse equal inserts into one row and delete every copy on one delete.

So the change set is a signed count per distinct row image (``_delta``): +1 per insert, -1 per delete, -1/+1 per
update. Counts add up in any order, so no ordering of changes is needed at all (a made-up ts cannot misorder a
keyless table). The apply (``flush.apply_staged`` with null-safe equality) deletes every lake row equal to a
changed image and appends ``copies in the lake + _delta`` of it again, on a staging branch fast-forwarded with
the watermark in one commit.

Why this and not a row number per image: a row number must be matched against the same numbering of the lake's
rows, which the lake would then have to keep as a hidden column through every later schema change; a count is
computed afresh from the lake each time, holds no state, and stays exact whatever order the changes came in.

Replays: TiCDC delivers at least once; a replayed transaction resends the same events after its first copy.
Changes already applied are filtered by the table's watermark like every table's; within one run a replayed
copy is told apart from a transaction that really changed several equal rows by where it sits: a transaction's
events of one table are consecutive on its partition, so a *block* (a run of the table's events with one commit
ts, in Kafka order, ended by any other of its events or a resolved event) is one delivery, and an image's count
at one ts is the largest count of any one block, not the sum over blocks. (A copy that follows the original
directly, with nothing in between, cannot be told from a transaction with twice the rows.)

Idempotent: a rerun after a crash starts from the lake's counts as its last commit left them and applies only the
changes above its watermark.
"""

from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.changes import OP, typed_value
from ticdc_lakehouse.merge.table_events import table_rows
from ticdc_lakehouse.core.model import DELETE, INSERT

DELTA = "_delta"


def _full_old_image() -> Column:
    """An update's old image: the staged ``before`` keeps only the columns the update changed
    (``events_arrow.old_image``); the others are the new image's."""
    return F.expr("map_concat(map_filter(after, (k, v) -> NOT map_contains_key(before, k)), before)")


def _signed_images() -> Column:
    image = lambda sign, values: F.struct(F.lit(sign).alias("sign"), values.alias("image"))  # noqa: E731
    op = F.col("op")
    return (F.when(op == INSERT, F.array(image(1, F.col("after"))))
            .when(op == DELETE, F.array(image(-1, F.col("before"))))
            .when(F.col("before").isNull(), F.array(image(1, F.col("after"))))  # no old image sent: nothing to remove
            .otherwise(F.array(image(-1, _full_old_image()), image(1, F.col("after")))))


def keyless_deltas(events: DataFrame, schema: str, table: str, after_ts: int, upto_ts: int,
                   columns: Sequence[TargetColumn], rows: Optional[DataFrame] = None) -> DataFrame:
    """Every row image the table's changes in ``(after_ts, upto_ts]`` add or remove, typed as the target's
    columns (under their own names), with its net count ``_delta`` (never 0). See the module doc.

    ``rows``: the table's row events in the range when the caller took them from ``events`` already
    (``table_rows``: ``flush`` checks they are there before they net out, see ``read_check``)."""
    if rows is None:
        rows = table_rows(events, schema, table, after_ts, upto_ts)
    # a resolved event between two copies also ends a block: what follows it is another delivery
    with_resolved = rows.unionByName(events.filter(F.col("kind") == "resolved"))
    in_kafka_order = Window.partitionBy("topic", "partition").orderBy("offset", "seq")
    previous = F.lag("kind").over(in_kafka_order), F.lag("commit_ts").over(in_kafka_order)
    same = (previous[0] == "row") & (previous[1] == F.col("commit_ts"))
    new_block = ~F.coalesce(same, F.lit(False))
    blocks = with_resolved.withColumn("_block", F.sum(new_block.cast("long")).over(
        in_kafka_order.rowsBetween(Window.unboundedPreceding, Window.currentRow))).filter(F.col("kind") == "row")
    signed = blocks.select("commit_ts", "topic", "partition", "_block", "named_enums",
                           F.explode(_signed_images()).alias("_signed"))
    # typed_value reads a top-level map column by name (a struct field path is not one)
    images = signed.select("commit_ts", "topic", "partition", "_block", "named_enums",
                           F.col("_signed.sign").alias("_sign"), F.col("_signed.image").alias("_image"))
    names = [f"_c{i}" for i in range(len(columns))]
    typed = images.select(
        "commit_ts", "topic", "partition", "_block", "_sign",
        *[typed_value("_image", F.col("named_enums"), column).alias(name)
          for column, name in zip(columns, names)],
    )
    per_block = typed.groupBy("commit_ts", "topic", "partition", "_block", "_sign", *names).count()
    per_ts = per_block.groupBy("commit_ts", "_sign", *names).agg(F.max("count").alias("_copies"))
    net = per_ts.groupBy(*names).agg(F.sum(F.col("_sign") * F.col("_copies")).alias(DELTA))
    return net.filter(F.col(DELTA) != 0).select(
        *[F.col(name).alias(column.name) for column, name in zip(columns, names)], DELTA)


def keyless_source(target_rows: DataFrame, deltas: DataFrame, columns: Sequence[TargetColumn]) -> DataFrame:
    """The staged apply's source (``flush.apply_staged``): each changed image once as ``_op = 'D'`` (every lake
    row equal to it is removed), then as many ``'I'`` copies as the lake should hold: its copies in the lake now
    plus ``_delta`` (never below zero: a delete of a row the lake never had, e.g. one older than the changefeed,
    removes nothing)."""
    names = [c.name for c in columns]
    lake = target_rows.alias("t")
    changed = deltas.alias("s")
    present = lake.join(changed.select(*[F.col(f"s.`{_escape(n)}`") for n in names]), _null_safe(names, "t", "s"),
                        "left_semi")
    counts = present.groupBy(*[F.col(f"`{_escape(n)}`") for n in names]).count().alias("c")
    joined = changed.join(counts, _null_safe(names, "s", "c"), "left")
    wanted = F.greatest(F.coalesce(F.col("c.count"), F.lit(0)) + F.col(f"s.{DELTA}"), F.lit(0))
    images = joined.select(*[F.col(f"s.`{_escape(n)}`").alias(n) for n in names], wanted.alias("_wanted"))
    removed = images.select(F.lit(DELETE).alias(OP), *[F.col(f"`{_escape(n)}`") for n in names])
    added = images.filter(F.col("_wanted") > 0).select(
        F.lit(INSERT).alias(OP), *[F.col(f"`{_escape(n)}`") for n in names],
        F.explode(F.sequence(F.lit(1), F.col("_wanted").cast("int"))).alias("_copy"),
    ).drop("_copy")
    return removed.unionByName(added)


def _escape(name: str) -> str:
    return name.replace("`", "``")


def _null_safe(names: Sequence[str], left: str, right: str) -> Column:
    condition = None
    for name in names:
        same = F.col(f"{left}.`{_escape(name)}`").eqNullSafe(F.col(f"{right}.`{_escape(name)}`"))
        condition = same if condition is None else (condition & same)
    return condition
