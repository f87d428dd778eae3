"""Commit ts for row events whose message carries none (Confluent Avro tombstones, Avro rows without the TiDB
extension), decided once for the whole run instead of inside a decode task.

A decoder can only guess such a ts from the events it saw before in its own task: a tombstone at the start of a
Spark task would get 0 (or whatever the previous task left), and a replayed row would move depending on how the
segments were split. Here the guess is a pure function of the run's events: the greatest real commit ts before
the event on its partition in Kafka order, else ``fallback``. TiCDC writes a partition in commit order, so that
keeps the event's place among its neighbours; the merge then orders events at one made-up ts by Kafka position
(``changes._delivery_order``), as TiCDC's own Avro decoder applies tombstones (tiflow
``pkg/sink/codec/avro/decoder.go``).

Only events with ``ts_made_up`` and ts 0 are filled: Canal-JSON's made-up ts (its millisecond ``es``) is already a
function of the message alone.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window


def fill_made_up_ts(events: DataFrame, fallback: int) -> DataFrame:
    """``events`` with every made-up ts 0 replaced as the module doc says (a window per Kafka partition, run in
    the executors)."""
    made_up = F.coalesce(F.col("ts_made_up"), F.lit(False)) & (F.col("commit_ts") == 0)
    real = F.when((F.col("kind").isin("row", "ddl")) & ~F.coalesce(F.col("ts_made_up"), F.lit(False)),
                  F.col("commit_ts"))
    before = (Window.partitionBy("topic", "partition").orderBy("offset", "seq")
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    last_real = F.max(real).over(before)
    return events.select(
        *[F.when(made_up, F.coalesce(last_real, F.lit(fallback))).otherwise(F.col(c)).alias(c)
          if c == "commit_ts" else F.col(c) for c in events.columns]
    )
