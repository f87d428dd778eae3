"""The row events of upstream tables in commit-ts ranges: where every change set and every value check starts.

Its own module because both the change-set transforms (``changes``) and the invalid-value step
(``value_checks.set_aside_invalid``) start from it, and ``changes`` types values with ``value_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ticdc_lakehouse.core.sql_names import quote
from ticdc_lakehouse.runtime.local_frame import local_frame

#: the column of a several-table change set saying which table (its index in the ranges) a change belongs to
TABLE_INDEX = "_lakehouse_table"
#: the column of the run's cached events naming an event's table, lower-cased (see ``clustered_by_table``)
TABLE_KEY = "_lakehouse_table_key"
#: the column of the run's decoded events kept as files naming an event's table (``decoded_files``): ``schema``,
#: ``KEY_SEPARATOR``, ``table`` with ASCII letters lower-cased when both names are ASCII; NULL for a table named
#: otherwise (Spark's lower-casing may make such a name equal to another spelling, so every pass reads them);
#: empty for an event of no table (resolved ts, a schema's DDL)
STAGED_KEY = "_lakehouse_staged_key"
#: between the schema and table names in ``TABLE_KEY`` and ``STAGED_KEY`` (no MySQL identifier holds it)
KEY_SEPARATOR = "\u0000"


def clustered_by_table(events: DataFrame) -> DataFrame:
    """The decoded events with ``TABLE_KEY`` (schema and table name, lower-cased), sorted by it within each
    partition, as the run caches them.

    Why: each change set (a table, or several of one layout) scans the cached events for its own. Spark keeps the
    least and greatest value of every column for each cached batch and skips a batch a filter on ``TABLE_KEY``
    cannot match; clustered, a table's events fill a few batches of each partition, so a change set reads about
    its own events instead of the whole run's (unclustered: every change set read every event, and a run of 204
    tables of distinct columns spent minutes scanning). The sort is Spark's, spilling to disk when short of
    memory; the event order it changes does not count (a change set orders a key's changes by commit ts and
    delivery position)."""
    return with_table_key(events).sortWithinPartitions(TABLE_KEY)


def with_table_key(events: DataFrame) -> DataFrame:
    """The decoded events with ``TABLE_KEY``, in the order they come: the decode tasks hand their events over
    grouped by table already (``decode_stage.grouped_by_table``), so the run caches them so, without Spark's
    sort (``clustered_by_table`` sorts: for events in any order)."""
    return events.withColumn(TABLE_KEY, F.concat_ws(KEY_SEPARATOR, F.lower(F.col("schema_name")),
                                                    F.lower(F.col("table_name"))))


def _table_key(schema: str, table: str) -> Column:
    """``TABLE_KEY`` of a table: lower-cased by Spark as the cached events' is, a literal once planned."""
    return F.concat_ws(KEY_SEPARATOR, F.lower(F.lit(schema)), F.lower(F.lit(table)))


def _table_key_text(schema: str, table: str) -> Optional[str]:
    """``TABLE_KEY`` of a table as Python text, where Python lower-cases it as Spark does (ASCII names); None
    for other names (``_table_key``: Spark's own lower-casing, whose rules for other letters may differ)."""
    if not (schema.isascii() and table.isascii()):
        return None
    return f"{schema.lower()}{KEY_SEPARATOR}{table.lower()}"


#: the longest IN list Spark keeps as a list (``spark.sql.optimizer.inSetConversionThreshold``): above it a hash
#: set, which a cached batch's bounds cannot rule out
PRUNING_IN_LIST = 10


def _clustered_condition(events: DataFrame, tables: Sequence[tuple[str, str]]) -> Column:
    """A condition on ``TABLE_KEY`` (or ``STAGED_KEY``) true for every event of ``tables`` (it may hold for
    others, which the caller's own condition drops), so that Spark never reads the cached batches (or the files'
    row groups) it rules out: in the cache, a few tables by their keys, more by the range of their keys (tables of
    one layout often share a name's stem: ``orders_1``...); in files, by the set of their keys. Always true for
    events without either column (not clustered: a test's frame)."""
    if not tables:
        return F.lit(True)
    # ASCII names, lower-cased here: a few gateway calls for any number of tables, where each table's key as a
    # Spark expression cost eleven (2,244 of a 204-table run's 26,700)
    texts = [_table_key_text(schema, table) for schema, table in tables]
    in_python = all(text is not None for text in texts)
    if STAGED_KEY in events.columns:
        if not in_python:
            return F.lit(True)  # a table named outside ASCII: its events' key is NULL, as others' may be
        # every key, however many: Spark pushes a long list down to Parquet as a set, which rules out each row
        # group holding none of them (a range would keep every group between the least and greatest)
        return F.col(STAGED_KEY).isin(texts) | F.col(STAGED_KEY).isNull()
    if TABLE_KEY not in events.columns:
        return F.lit(True)
    keys = texts if in_python else [_table_key(schema, table) for schema, table in tables]
    if len(keys) <= PRUNING_IN_LIST:
        return F.col(TABLE_KEY).isin(keys)
    if in_python:  # UTF-8 orders text as code points do: the least and greatest keys are Spark's too
        return F.col(TABLE_KEY).between(min(texts), max(texts))
    return F.col(TABLE_KEY).between(F.least(*keys), F.greatest(*keys))


@dataclass(frozen=True)
class TableRange:
    """The row events of upstream ``schema.table`` with ``after_ts < commit_ts <= upto_ts``; ``names``: in a
    frame of tables of different columns, the table's column name for each slot (``column_slots``)."""

    schema: str
    table: str
    after_ts: int
    upto_ts: int
    names: tuple[Optional[str], ...] = ()


def table_rows(events: DataFrame, schema: str, table: str, after_ts: int, upto_ts: int) -> DataFrame:
    """Row events of one upstream table with ``after_ts < commit_ts <= upto_ts`` (names case-insensitive)."""
    return events.filter(
        _clustered_condition(events, [(schema, table)])
        & (F.col("kind") == "row")
        & (F.lower(F.col("schema_name")) == schema.lower())
        & (F.lower(F.col("table_name")) == table.lower())
        & (F.col("commit_ts") > after_ts)
        & (F.col("commit_ts") <= upto_ts)
    )


def tables_rows(events: DataFrame, ranges: Sequence[TableRange], name_columns: Sequence[str] = ()) -> DataFrame:
    """Row events of several upstream tables, each in its own range, with ``TABLE_INDEX`` (the position of its
    range in ``ranges``), and each ``name_columns`` column holding its range's ``names`` (the table's column name
    for each slot, see ``column_slots``).

    Why a join and not one filter per table: one plan serves any number of tables (the ranges are a small
    broadcast frame of literals), so planning it costs the same for 2 tables or 2,000."""
    spark = events.sparkSession
    for r in ranges:
        if len(r.names) != len(name_columns):
            raise ValueError(f"{r.schema}.{r.table}: {len(r.names)} slot names for {len(name_columns)} slots")
    names_ddl = "".join(f", {quote(column)} string" for column in name_columns)
    wanted = local_frame(spark, [(r.schema.lower(), r.table.lower(), index, r.after_ts, r.upto_ts, *r.names)
                                 for index, r in enumerate(ranges)],
                         f"_schema string, _table_name string, {TABLE_INDEX} int, _after bigint, _upto bigint"
                         + names_ddl)
    clustered = _clustered_condition(events, [(r.schema, r.table) for r in ranges])
    rows = events.filter(clustered & (F.col("kind") == "row"))
    joined = rows.join(F.broadcast(wanted), (F.lower(rows["schema_name"]) == wanted["_schema"])
                       & (F.lower(rows["table_name"]) == wanted["_table_name"]))
    return joined.filter((F.col("commit_ts") > F.col("_after")) & (F.col("commit_ts") <= F.col("_upto"))).drop(
        "_schema", "_table_name", "_after", "_upto")


def carry_renames(rows: DataFrame, renames: Sequence[tuple[int, str, str]]) -> DataFrame:
    """Row events with the columns renamed by a DDL applied ahead of them (``ddl_apply.carried``) under their
    new names: for each (ts, old, new) in ts order, an event below ts holding ``old`` in its images (and in
    ``named_enums``) holds it as ``new``. Later events already carry the new name."""
    for ts, old, new in renames:
        below = F.col("commit_ts") < ts
        lowered = old.lower()

        def renamed(name: Column, lowered: str = lowered, new: str = new) -> Column:
            return F.when(F.lower(name) == lowered, F.lit(new)).otherwise(name)

        def carried(column: str) -> Column:
            if column in ("after", "before"):
                moved = F.transform_keys(F.col(column), lambda k, _: renamed(k))
            elif column == "named_enums":
                moved = F.transform(F.col(column), lambda name: renamed(name))
            else:
                return F.col(column)
            return F.when(below, moved).otherwise(F.col(column)).alias(column)

        rows = rows.select(*[carried(c) for c in rows.columns])
    return rows
