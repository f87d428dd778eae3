"""The row events of one upstream table in a commit-ts range: where every change set and every value check starts.

Its own module because both the change-set transforms (``changes``) and the invalid-value step
(``value_checks.set_aside_invalid``) start from it, and ``changes`` types values with ``value_checks``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def table_rows(events: DataFrame, schema: str, table: str, after_ts: int, upto_ts: int) -> DataFrame:
    """Row events of one upstream table with ``after_ts < commit_ts <= upto_ts`` (names case-insensitive)."""
    return events.filter(
        (F.col("kind") == "row")
        & (F.lower(F.col("schema_name")) == schema.lower())
        & (F.lower(F.col("table_name")) == table.lower())
        & (F.col("commit_ts") > after_ts)
        & (F.col("commit_ts") <= upto_ts)
    )
