"""The rows of small tables after their change sets, for task-side writers that rewrite each table whole.

Why: in an incremental run most tables hold a few hundred or thousand rows and get a few changes. A MERGE per
table costs a chain of Spark jobs and commits (about 0.4 s a table on 2 cores, whatever its size), so a run's cost
grew with its number of tables. A small table is cheaper to rewrite: its rows (read at the snapshot the run planned
against) meet its change set in one join, and the result is exactly what the MERGE would leave. Tables of one layout
share one frame (``changes.tables_change_set``, the lake rows of each with its ``TABLE_INDEX``), so the driver plans
one frame per layout and the writers of ``batch_write`` write them all in one job; the driver then commits each
table's new files in one overwrite (``table_commit.commit_written``).

The join follows ``flush.merge_sql`` exactly: a delete removes its key; an upsert takes the change's value of every
column, except a column some change did not carry (``changes.partial_positions``), which keeps the table's value
unless the change carried it; keys no change touches keep their row as it is.

Row lineage (format v3): a row keeps its ``_row_id`` wherever it moves, and its ``_last_updated_sequence_number``
unless a change wrote it, as Iceberg's own MERGE keeps them. So a table read at the rewrite's snapshot says which
rows changed, not that all of them did: the rewritten files carry both fields (NULL where Iceberg assigns them:
the new rows' ids, the written rows' sequence number).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ticdc_lakehouse.core.sql_names import qualified, quote
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.frame_columns import (DROPPED, LAST_UPDATED, LINEAGE_FIELD_IDS, OP, PRESENT, REMOVED, ROW_ID,
                                                  WRITTEN)
from ticdc_lakehouse.merge.table_events import TABLE_INDEX

#: the columns a rewrite's rows carry to the writer beside the table's own (and the lineage fields, if any)
CARRIED = (TABLE_INDEX, WRITTEN, REMOVED, DROPPED)


@dataclass(frozen=True)
class LakeTable:
    """A table to rewrite, read at the snapshot its plan saw: its catalog, namespace and name, that snapshot, and
    its column name for each of the frame's columns (None: it has none there, a NULL)."""

    catalog: str
    namespace: str
    name: str
    snapshot_id: int
    names: tuple[Optional[str], ...]


#: the read split of a rewritten table: its whole (a task per table, not Iceberg's adaptive split of a small table
#: into the session's parallelism: four tasks of a few rows each)
ONE_SPLIT_BYTES = 1 << 40


def lake_rows_sql(tables: Sequence[LakeTable], columns: Sequence[TargetColumn], lineage: bool = False) -> str:
    """One Spark SQL query of the rows of several tables as one frame: each table's columns (its ``names`` for
    ``columns``, by the frame's names, in their order), with its position in ``tables`` as ``TABLE_INDEX``;
    ``lineage``: and the row-lineage fields.

    Why one statement: read as a DataFrame each, selected and unioned one by one, 204 small tables cost the driver
    about 4 s of analyses (each step analyses the growing union again); one query is parsed and analysed once
    (0.4 s)."""

    def value(name: Optional[str], column: TargetColumn) -> str:
        if name is None:
            return f"CAST(NULL AS {column.spark_type}) AS {quote(column.name)}"
        return f"{quote(name)} AS {quote(column.name)}"

    kept = "".join(f", {quote(name)}" for name in LINEAGE_FIELD_IDS) if lineage else ""
    selects = []
    for index, table in enumerate(tables):
        if len(table.names) != len(columns):
            raise ValueError(f"{table.namespace}.{table.name}: {len(table.names)} names for {len(columns)} columns")
        values = ", ".join(value(name, column) for name, column in zip(table.names, columns))
        selects.append(f"SELECT {values}{kept}, CAST({index} AS INT) AS {quote(TABLE_INDEX)} "
                       f"FROM {qualified(table.catalog, table.namespace, table.name)} "
                       f"VERSION AS OF {int(table.snapshot_id)} WITH ('split-size' = '{ONE_SPLIT_BYTES}')")
    return " UNION ALL ".join(selects)


def rewritten_rows(lake: DataFrame, changes: DataFrame, columns: Sequence[TargetColumn],
                   keys: Sequence[TargetColumn], partial: Sequence[int]) -> DataFrame:
    """Every row the tables hold after their changes, under the tables' column names, with ``TABLE_INDEX``,
    ``WRITTEN``, ``REMOVED`` and ``DROPPED``, and the row-lineage fields where ``lake`` has them (see the module
    doc).

    ``lake``: ``lake_rows``; ``changes``: the tables' change set (``changes.merge_source`` with ``TABLE_INDEX``:
    ``_op``, every column by name, ``_present_<i>`` for the ``partial`` positions). Columns are renamed by position
    before the join, so no upstream name can clash with another or with the join's own columns."""
    key_names = {key.name.lower() for key in keys}
    flagged = set(partial)
    lineage = ROW_ID in lake.columns
    kept = [F.col(ROW_ID).alias("_l_row_id"), F.col(LAST_UPDATED).alias("_l_updated")] if lineage else []
    left = lake.select(F.col(TABLE_INDEX).alias("_l_table"),
                       *[F.col(quote(c.name)).alias(f"_l{i}") for i, c in enumerate(columns)], *kept)
    right = changes.select(F.col(TABLE_INDEX).alias("_r_table"), F.col(OP).alias("_r_op"),
                           *[F.col(quote(c.name)).alias(f"_r{i}") for i, c in enumerate(columns)],
                           *[F.col(f"{PRESENT}{i}").alias(f"_r_present{i}") for i in sorted(flagged)])
    on = F.col("_l_table") == F.col("_r_table")
    for i, column in enumerate(columns):
        if column.name.lower() in key_names:
            on = on & (F.col(f"_l{i}") == F.col(f"_r{i}"))
    joined = left.join(right, on, "full_outer")
    changed = F.col("_r_table").isNotNull()
    in_lake = F.col("_l_table").isNotNull()
    values = []
    for i, column in enumerate(columns):
        mine, theirs = F.col(f"_l{i}"), F.col(f"_r{i}")
        if column.name.lower() in key_names:
            value = F.when(changed, theirs).otherwise(mine)
        elif i in flagged:
            value = F.when(changed & F.col(f"_r_present{i}"), theirs).otherwise(mine)
        else:
            value = F.when(changed, theirs).otherwise(mine)
        values.append(value.alias(column.name))
    deleted = changed & (F.col("_r_op") == "D")
    if lineage:  # see the module doc
        values += [F.col("_l_row_id").alias(ROW_ID),
                   F.when(changed, F.lit(None).cast("bigint")).otherwise(F.col("_l_updated")).alias(LAST_UPDATED)]
    return joined.select(
        *values,
        F.coalesce(F.col("_r_table"), F.col("_l_table")).alias(TABLE_INDEX),
        (changed & ~deleted).cast("int").alias(WRITTEN),
        (changed & in_lake).cast("int").alias(REMOVED),
        deleted.alias(DROPPED),
    )

