"""Pure DataFrame transforms from decoded row events to the typed change set of one table.

``table_rows`` -> ``typed_changes`` -> ``collapse_to_last`` -> ``merge_source``: each is a
function of DataFrames, with no I/O, in the style of ``transform(df)`` jobs, so tests can check each step on small
frames and the whole chain runs in executors (nothing is collected).

Why this order: values are typed *before* the collapse, so the collapse's shuffle carries narrow typed columns
instead of the string maps (and their repeated column names); and the collapse is partitioned by the typed key
that the MERGE joins on, so Spark reuses that partitioning for the join instead of shuffling the source again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ticdc_lakehouse.iceberg.columns import TargetColumn, mysql_base
from ticdc_lakehouse.merge.table_events import TABLE_INDEX, TableRange, carry_renames, table_rows, tables_rows
from ticdc_lakehouse.merge.value_checks import (
    guarded, name_sql, named_sql, raw_sql, table_mark, text_problem, text_problem_sql, try_cast_sql,
)
from ticdc_lakehouse.core.model import DELETE, UPDATE
from ticdc_lakehouse.core.sql_names import sql_string
from ticdc_lakehouse.merge.frame_columns import OP, PRESENT


#: an ENUM index or SET bitmask as row events carry it, and as tables typed without the members store it
NUMBER_PATTERN = "^[0-9]+$"


def names_from_numbers_sql(raw: str, base: str, elements: Sequence[str]) -> str:
    """Spark SQL of the member names of an ENUM index / SET bitmask that the SQL expression ``raw`` holds as text,
    and of any other value (a name already) as it is: index 0 is MySQL's empty error value, an index past the
    members NULL, a bitmask the names of its bits joined by commas. The one definition of that rule: the merge
    types row values with it (``typed_value``), ``lakehouse create-tables`` rewrites stored numbers with it."""
    members = "array(" + ", ".join(sql_string(e) for e in elements) + ")"
    if base == "enum":
        # ANSI casts: an index too long for INT is past the members like any other (try_cast: NULL, no error);
        # element_at is reached only with an index inside the array
        number = f"try_cast({raw} AS INT)"
        names = (f"CASE WHEN {number} = 0 THEN '' WHEN {number} BETWEEN 1 AND {len(elements)} "
                 f"THEN element_at({members}, {number}) END")
    else:
        # A SET of 64 members has bitmasks up to 2^64-1, past BIGINT: conv reads the digits as an unsigned 64-bit
        # number and spells its bits, lowest first once reversed (a bitmask past 64 bits fails the ANSI conv)
        bits = f"reverse(conv({raw}, 10, 2))"
        names = (f"array_join(filter({members}, (lakehouse_member, lakehouse_bit) -> "
                 f"substring({bits}, lakehouse_bit + 1, 1) = '1'), ',')")
    return f"CASE WHEN {raw} RLIKE {sql_string(NUMBER_PATTERN)} THEN {names} ELSE {raw} END"


@dataclass(frozen=True)
class CheckedValue:
    """A column's value typed without failing (``typed``: NULL where the text is no value of the type) and why the
    text cannot be stored exactly (``problem``: NULL when it can), as two expressions.

    Why two: the merge computes both in one projection and guards them in the next (``typed_changes``), so Spark
    reads each value out of its row image, matches it and casts it once. Written as one guarded expression, each
    lookup and cast appeared three to six times, inside branches that Spark's common-subexpression elimination
    does not reach (a delete's values are never typed), and every copy ran."""

    typed: Column
    problem: Column
    #: ``typed`` gives a value or NULL for any text; False where it may fail instead (``unbase64``, ``conv``)
    safe: bool = True

    def guarded(self) -> Column:
        """The typed value, or a failure of the job naming the column and value (``value_checks.guarded``)."""
        return guarded(self.typed, self.problem)

    def typed_if_exact(self) -> Column:
        """``typed`` for a projection whose next one guards it: evaluated for every text where that cannot fail,
        else only where the text is exact (an invalid text would fail the job with Spark's error, not with the
        one naming the column and value that the flush dead-letters)."""
        return self.typed if self.safe else F.when(self.problem.isNull(), self.typed)


def typed_value(values: str, named_enums: Column, column: TargetColumn) -> Column:
    """The value of ``column`` in the canonical-string map column named ``values``, typed as the column's Spark
    type exactly, or a failure of the job naming the column and value (``value_checks``): never a silent NULL or
    a rounded number (see ``checked_text``)."""
    return checked_value(values, named_enums, column).guarded()


def checked_value(values: str, named_enums: Column, column: TargetColumn) -> CheckedValue:
    """``checked_text`` of the value of ``column`` in the canonical-string map column named ``values``."""
    return checked_text(raw_sql(values, column), named_enums, column)


def checked_text(raw: str, named_enums: Column, column: TargetColumn) -> CheckedValue:
    """The canonical text the SQL expression ``raw`` holds, typed as ``column``'s Spark type, and why it is not
    exact for the column (``value_checks``). Casts are ANSI-safe ``try_cast``: the problem says where they gave
    NULL for a text that was not NULL.

    ENUM and SET arrive as index/bitmask from most protocols and as names from others (the event lists those in
    ``named_enums``); the element list comes from the target column's MySQL type. An index or bitmask past the
    members is an invalid value here (``names_from_numbers_sql`` alone makes it NULL, for stored numbers).
    """
    text = F.expr(raw)
    spark_type = column.spark_type.lower()
    base, elements = mysql_base(column.mysql_type)
    if base in ("enum", "set") and elements:
        is_named = F.coalesce(F.array_contains(named_enums, F.expr(name_sql(column))), F.lit(False))
        by_number = F.expr(names_from_numbers_sql(raw, base, elements))
        # names are not numbers to check; a bitmask past 64 bits fails conv (the problem names it first)
        return CheckedValue(F.when(is_named, text).otherwise(by_number),
                            F.when(~is_named, text_problem(raw, column)), safe=False)
    elif spark_type == "binary":
        return CheckedValue(F.unbase64(text), text_problem(raw, column), safe=False)  # fails on a bad length
    elif spark_type == "string":
        typed = text
    elif spark_type == "boolean":
        typed = text.isin("1", "true", "TRUE")
    elif spark_type in ("date", "timestamp_ntz", "timestamp"):
        # MySQL zero dates have no calendar value: they become NULL, as every JDBC reader shows them.
        typed = F.when(text.startswith("0000-00-00"), F.lit(None)).otherwise(F.expr(try_cast_sql(raw, spark_type)))
    else:
        typed = F.expr(try_cast_sql(raw, spark_type))
    return CheckedValue(typed, text_problem(raw, column))


def in_table(problem: Column) -> Column:
    """A value's problem (NULL: none) with its event's table (``value_checks.table_mark``), so that a failure of
    several tables' write job says which table to set apart (``batch_flush``). The mark is built only for a value
    that has a problem: built for every value, its strings cost 8% of a 4-table run's write jobs."""
    return F.when(problem.isNotNull(), F.concat(problem, table_mark(F.col("schema_name"), F.col("table_name"))))


def typed_changes(rows: DataFrame, columns: Sequence[TargetColumn], keys: Sequence[TargetColumn],
                  partial: Sequence[int], carried: Sequence[str] = (), keys_move: bool = True) -> DataFrame:
    """Every row event with its typed key (``_k<i>``) and values (``_c<i>``, by the column's position in
    ``columns``; NULL for a delete, which writes no value), a key-changing UPDATE turned into DELETE(old key) +
    UPDATE(new key).

    For each column some event did not carry (``partial``, see ``partial_positions``) a ``_present_<i>`` flag says
    whether this event carried it (absent values keep the target's value on update). The other columns need no
    flag: every event carried them, and a flag would cost a map lookup per event and column for nothing.
    ``carried``: other columns kept as they are (``TABLE_INDEX`` of a several-table change set).

    Key changes: TiCDC normally splits such updates itself (possibly into different partitions at one commit ts);
    older versions and some settings send one update with the old key in ``before``: both forms end up the same.
    The decode stage keeps only the changed columns of an update's old image (``events_arrow.old_image``: those
    whose text differs), so an update whose old image holds a key column moved its row; a key column the old
    image does not hold kept its value. Canonical texts of one type are equal exactly when their values are (and a
    split that moved nothing, a delete and a write of one key at one position, would still leave the write).

    One projection reads, types and checks every value (``CheckedValue``) and leaves the images (string maps)
    behind; only then are the key-changing updates exploded into their two variants, and the projection after
    that guards each value (a failure of the job where a value is not exact), over narrow typed rows. Each
    projection of rows that still carry the maps copies them (the merge's stages run without whole-stage code
    generation, see ``spark_session``), and that copying had cost more than the typing. The variant that deletes
    an old key checks that key; a delete's other values are never checked (it writes none).

    ``keys_move``: False when no update of the rows changed a key column (``key_changes_possible``, from the decode
    tasks' aggregates): no old key is then read or checked and nothing is exploded (TiCDC splits a key-changing
    update into a delete and an insert by default; a 275k-event backfill's write jobs took 1 s less without it).
    """
    key_index = {key.name.lower(): i for i, key in enumerate(keys)}
    flagged = set(partial)
    enums = F.col("named_enums")
    keys_move = keys_move and bool(keys)
    selected: list[Column] = [F.col(c) for c in ("op", "commit_ts", "partition", "offset", "seq", "ts_made_up",
                                                 *carried)]
    checked: list[str] = []  # the (typed, problem) columns the guards read, and the old keys' helpers
    for i, key in enumerate(keys):
        new_text = (f"CASE WHEN op = {sql_string(DELETE)} THEN {raw_sql('before', key)} "
                    f"ELSE {raw_sql('after', key)} END")
        new_key = checked_text(new_text, enums, key)
        selected += [new_key.typed_if_exact().alias(f"_kt{i}"), in_table(new_key.problem).alias(f"_kp{i}")]
        checked += [f"_kt{i}", f"_kp{i}"]
        if keys_move:
            old_key = checked_value("before", enums, key)
            old_held = F.coalesce((F.col("op") == UPDATE)
                                  & F.map_contains_key(F.col("before"), F.expr(name_sql(key))), F.lit(False))
            selected += [old_key.typed_if_exact().alias(f"_okt{i}"),
                         F.when(old_held, in_table(old_key.problem)).alias(f"_okp{i}"), old_held.alias(f"_oh{i}")]
            checked += [f"_okt{i}", f"_okp{i}", f"_oh{i}"]
    values: list[int] = []
    for position, column in enumerate(columns):
        if column.name.lower() in key_index:
            continue
        value = checked_value("after", enums, column)
        selected += [value.typed_if_exact().alias(f"_t{position}"), in_table(value.problem).alias(f"_p{position}")]
        checked += [f"_t{position}", f"_p{position}"]
        values.append(position)
        if position in flagged:
            selected.append(F.map_contains_key(F.col("after"), F.expr(name_sql(column))).alias(f"{PRESENT}{position}"))
    typed = rows.select(*selected)
    is_delete = F.col("op") == DELETE  # the event's own op: the old-key variant carries its update's values
    new_keys = [CheckedValue(F.col(f"_kt{i}"), F.col(f"_kp{i}")).guarded() for i in range(len(keys))]
    if keys_move:
        # an update moved its row when its old image holds a key column (``_oh<i>``)
        split = F.col("_oh0")
        for i in range(1, len(keys)):
            split = split | F.col(f"_oh{i}")
        exploded = typed.withColumn("_variant", F.explode(
            F.when(split, F.array(F.lit(0), F.lit(1))).otherwise(F.array(F.lit(0)))))
        is_old = F.col("_variant") == 1
        op = F.when(is_old, F.lit(DELETE)).otherwise(F.col("op"))
        new_keys = [F.when(is_old & F.col(f"_oh{i}"), CheckedValue(F.col(f"_okt{i}"), F.col(f"_okp{i}")).guarded())
                    .otherwise(key) for i, key in enumerate(new_keys)]
    else:
        exploded, op = typed, F.col("op")
    helpers = {"op", *checked}
    return exploded.select(
        op.alias("op"),
        *[F.col(c) for c in typed.columns if c not in helpers],
        # a delete writes no value: only its key is read (and checked), its old image's other columns never are
        *[F.when(~is_delete, CheckedValue(F.col(f"_t{p}"), F.col(f"_p{p}")).guarded()).alias(f"_c{p}")
          for p in values],
        *[key.alias(f"_k{i}") for i, key in enumerate(new_keys)],
    )


def key_changes_possible(keys: Sequence[TargetColumn], changed: Optional[frozenset[str]],
                         renames: Sequence[tuple[int, str, str]] = ()) -> bool:
    """Whether an update among the rows may have changed a key column: ``changed`` holds the columns (lower case)
    some update's old image changed (``staged_stats``; None: not known), under the names the events carried, so
    a column renamed in the run (``renames``: (ts, old, new)) counts under each of its names."""
    if changed is None:
        return True
    names = {key.name.lower() for key in keys}
    grown = True
    while grown:  # a chain of renames (a -> b -> c) reaches every name of a key column
        known = len(names)
        for _, old, new in renames:
            if old.lower() in names or new.lower() in names:
                names |= {old.lower(), new.lower()}
        grown = len(names) > known
    return not names.isdisjoint(changed)


def _delivery_order(descending: bool) -> list[Column]:
    """The order of a key's changes: commit ts; at one real TSO a delete before a write (one transaction: a
    primary-key change moving another row onto this key); then delivery (partition, offset, seq: replays are
    identical). A ts the decoder made up (``RowChange.ts_made_up``: Canal-JSON's milliseconds, Avro tombstones)
    is no transaction: two transactions may share it (an insert, then a delete, in one millisecond), so such a
    change keeps its Kafka order instead of moving a delete ahead."""
    writes_last = F.when(F.coalesce(F.col("ts_made_up"), F.lit(False)), F.lit(1)).otherwise(
        (F.col("op") != DELETE).cast("int"))
    columns = [F.col("commit_ts"), writes_last, F.col("partition"), F.col("offset"), F.col("seq")]
    return [c.desc() for c in columns] if descending else [c.asc() for c in columns]


def collapse_to_last(keyed: DataFrame, key_count: int, partial_positions: Sequence[int] = (),
                     table_column: Sequence[str] = (), partitions: Optional[int] = None) -> DataFrame:
    """Keep the last change of each key (see ``_delivery_order``).

    ``partial_positions``: the non-key columns (``_c<i>``) that some change did not carry. For those, the kept
    change takes the value of the latest change since the key's last delete that carried the column, and its
    ``_present_<i>`` flag says whether any did: updates that each send only their changed columns add up, and a
    key inserted in the run keeps the columns its later partial updates did not send. Changes before a delete
    never contribute (the row they changed is gone).

    ``table_column``: ``(TABLE_INDEX,)`` for a several-table change set: a key is a key within its table.

    ``partitions``: the collapse's shuffle partitions (else the session's ``spark.sql.shuffle.partitions``). Each
    is a task of every step after the collapse, down to the write tasks, which write a file each: a table of a
    few hundred changes needs one, not the session's four (``batch_write.writer_tasks``).
    """
    key_names = [*table_column, *[f"_k{i}" for i in range(key_count)]]
    if partitions is not None:
        # hash-partitioned by the keys, as the windows below require: Spark adds no exchange of its own
        keyed = keyed.repartition(partitions, *key_names)
    last_first = Window.partitionBy(*key_names).orderBy(*_delivery_order(descending=True))
    ranked = keyed.withColumn("_rank", F.row_number().over(last_first))
    if partial_positions:
        so_far = Window.unboundedPreceding, Window.currentRow
        in_order = Window.partitionBy(*key_names).orderBy(*_delivery_order(descending=False)).rowsBetween(*so_far)
        is_delete = F.col("op") == DELETE
        ranked = ranked.withColumn("_lives", F.sum(is_delete.cast("int")).over(in_order))  # deletes so far
        since_delete = (Window.partitionBy(*key_names, "_lives").orderBy(*_delivery_order(descending=False))
                        .rowsBetween(*so_far))
        carried = {}
        for i in partial_positions:
            # a struct, so that a NULL the change did carry is told apart from a column it did not carry
            sent = F.when(F.col(f"{PRESENT}{i}") & ~is_delete, F.struct(F.col(f"_c{i}").alias("v")))
            carried[i] = F.last(sent, ignorenulls=True).over(since_delete)
        replaced = {name for i in carried for name in (f"_c{i}", f"{PRESENT}{i}")}
        ranked = ranked.select(
            *[c for c in ranked.columns if c not in replaced],
            *[latest.getField("v").alias(f"_c{i}") for i, latest in carried.items()],
            *[latest.isNotNull().alias(f"{PRESENT}{i}") for i, latest in carried.items()],
        ).drop("_lives")
    return ranked.filter(F.col("_rank") == 1).drop("_rank")


def merge_source(collapsed: DataFrame, columns: Sequence[TargetColumn], keys: Sequence[TargetColumn],
                 partial: Sequence[int], carried: Sequence[str] = ()) -> DataFrame:
    """The MERGE source: ``_op``, ``_commit_ts``, every target column under its own name, and the presence flags
    of the ``partial`` columns (the only ones ``flush.merge_sql`` reads); ``carried`` columns as they are."""
    key_index = {key.name.lower(): i for i, key in enumerate(keys)}
    flagged = set(partial)
    selected: list[Column] = [F.col("op").alias(OP), F.col("commit_ts").alias("_commit_ts"),
                              *[F.col(c) for c in carried]]
    for position, column in enumerate(columns):
        if column.name.lower() in key_index:
            selected.append(F.col(f"_k{key_index[column.name.lower()]}").alias(column.name))
        else:
            selected.append(F.col(f"_c{position}").alias(column.name))
            if position in flagged:
                selected.append(F.col(f"{PRESENT}{position}"))
    return collapsed.select(*selected)


def partial_positions(columns: Sequence[TargetColumn], keys: Sequence[TargetColumn],
                      always_sent: Optional[frozenset[str]]) -> list[int]:
    """Positions of the non-key columns some change did not carry (``always_sent``: the lower-case names every
    change carried, None when there are no updates: inserts and deletes carry whole rows)."""
    if always_sent is None:
        return []
    key_names = {key.name.lower() for key in keys}
    return [i for i, column in enumerate(columns)
            if column.name.lower() not in key_names and column.name.lower() not in always_sent]


def change_set(events: DataFrame, schema: str, table: str, after_ts: int, upto_ts: int,
               columns: Sequence[TargetColumn], keys: Sequence[TargetColumn],
               always_sent: Optional[frozenset[str]] = frozenset(),
               renames: Sequence[tuple[int, str, str]] = (), keys_move: bool = True,
               partitions: Optional[int] = None) -> DataFrame:
    """The whole chain for one table and one ts range (``always_sent``: see ``partial_positions``; ``renames``:
    see ``table_events.carry_renames``; ``keys_move``: see ``typed_changes``; ``partitions``: see
    ``collapse_to_last``)."""
    rows = carry_renames(table_rows(events, schema, table, after_ts, upto_ts), renames)
    partial = partial_positions(columns, keys, always_sent)
    typed = typed_changes(rows, columns, keys, partial, keys_move=keys_move)
    return merge_source(collapse_to_last(typed, len(keys), partial, partitions=partitions), columns, keys, partial)


def tables_change_set(events: DataFrame, ranges: Sequence[TableRange], columns: Sequence[TargetColumn],
                      keys: Sequence[TargetColumn], always_sent: Optional[frozenset[str]] = frozenset(),
                      keys_move: bool = True, partitions: Optional[int] = None) -> DataFrame:
    """The change sets of several tables with the same columns, keys and ``always_sent``, as one frame: the same
    chain as ``change_set``, each change with ``TABLE_INDEX`` (its table's position in ``ranges``), collapsed per
    table and key.

    Why: a changefeed's tables often share their layout (sharded tables, tables of one application). Typing
    and collapsing them in one plan costs the driver one plan's analysis, not one per table (see
    ``table_commit.append_tables``). Tables of different columns share one as slots (``column_slots``:
    ``columns`` and ``keys`` are then the slots, and each range holds its table's names for them)."""
    rows = tables_rows(events, ranges, [column.name_from for column in columns if column.name_from])
    partial = partial_positions(columns, keys, always_sent)
    carried = (TABLE_INDEX,)
    typed = typed_changes(rows, columns, keys, partial, carried, keys_move)
    return merge_source(collapse_to_last(typed, len(keys), partial, carried, partitions), columns, keys, partial,
                        carried)


#: the column types whose typing and checks ``warm_sql_parser`` parses once: the common shapes of TiDB tables
_WARM_COLUMNS = (
    TargetColumn("id", "bigint", "bigint", required=True), TargetColumn("n", "int", "int"),
    TargetColumn("amount", "decimal(12,2)", "decimal(12,2)"), TargetColumn("name", "string", "varchar(64)"),
    TargetColumn("at", "timestamp_ntz", "datetime"), TargetColumn("day", "date", "date"),
    TargetColumn("ratio", "double", "double"), TargetColumn("flag", "boolean", "tinyint(1)"),
    TargetColumn("kind", "string", "enum('a','b')"),
)


def warm_sql_parser(spark) -> None:
    """Parse the SQL of a change set's typing and value checks (``checked_text``) for a few common column types,
    once, so that the run's first change sets find Spark's parser warm.

    Why: the typing projection is built from SQL text (``value_checks``), and Spark's parser starts cold in every
    fresh driver: its first parse costs about 80 ms (the generated parser's tables), each new shape of expression
    tens of ms more (ANTLR learns its predictions as it parses), then about 2 ms. A run met all of that while it
    planned its write frames, between the decode and the writes, where nothing else runs. Parsed once the session is
    handed over, beside the merge's reading of its state and the decode, the frames meet a warm parser. Only
    parsed, never analysed or run: nothing in the session changes."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    for column in _WARM_COLUMNS:
        raw = raw_sql("after", column)
        texts = [raw, try_cast_sql(raw, column.spark_type), text_problem_sql(raw, column), named_sql(column)]
        if column.required:
            texts.append(f"CASE WHEN op = {sql_string(DELETE)} THEN {raw_sql('before', column)} ELSE {raw} END")
        base, elements = mysql_base(column.mysql_type)
        if base in ("enum", "set"):
            texts.append(names_from_numbers_sql(raw, base, elements))
        for text in texts:
            parser.parseExpression(text)
