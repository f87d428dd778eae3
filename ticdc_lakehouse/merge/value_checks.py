"""Every value is checked against its lake column before it reaches a write: stored exactly, or a reason why not.

Decoders hand over canonical strings (``values.py``) that say what the message held; the lake column may still be
narrower than the value (a DECIMAL(5,2) given ``12345.67``, a scale the table was created with, text in an INT
key from a broken producer). A plain CAST would round, wrap, give NULL or (under ANSI mode) fail the whole MERGE on
every run. So each value is judged with ANSI-safe expressions only (patterns, ``try_cast``, range checks): a
value that is not exact for its column yields a one-line reason, never NULL or a rounded number.

How the merge uses it (``changes.typed_value``, ``table_work.flush``): the typed value of a column is
guarded by :func:`text_problem`; a change set holding a bad value fails its MERGE with :data:`INVALID_VALUE`
(nothing commits), and only then the driver asks for the bad events (:func:`invalid_events`, a filter run in the
executors) to dead-letter them (or halt the table in ``hold`` mode), and merges the rest. The common case, a clean
change set, costs one more expression per column and no extra Spark job.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Optional, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column
from pyspark.sql import functions as F

from ticdc_lakehouse.iceberg.columns import TargetColumn, mysql_base
from ticdc_lakehouse.merge.table_events import carry_renames, table_rows
from ticdc_lakehouse.core.mysql_types import iceberg_type, parse_type
from ticdc_lakehouse.core.sql_names import quote, sql_string

log = logging.getLogger(__name__)

#: the text every invalid-value failure starts with, so the flush can tell it from other failures
INVALID_VALUE = "lakehouse-invalid-value"

#: how much of a bad value the reason quotes
QUOTED_CHARS = 64

_DECIMAL_TYPE = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_INTEGER_TYPES = {"tinyint", "smallint", "int", "bigint"}
_DATE = r"^-?[0-9]{4}-[0-9]{2}-[0-9]{2}$"
#: at most 6 fraction digits: the lake keeps microseconds, more digits would be cut
_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$"
_FLOAT_SPECIAL = r"(?i)^[+-]?(inf|infinity|nan)$"
#: whole base64 units, the last one with or without its padding: a text of 4n+1 characters is no bytes (Spark's
#: unbase64 fails on it with its own error, which the flush could not dead-letter)
_BASE64 = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?$"


def decimal_pattern(precision: int, scale: int) -> str:
    """The canonical decimal texts (plain, no exponent) that ``decimal(precision,scale)`` holds exactly: at most
    ``precision - scale`` integer digits after leading zeros, at most ``scale`` fraction digits before trailing
    zeros. A pattern, not a cast: a cast rounds the fraction silently even under ANSI mode."""
    integer, fraction = precision - scale, scale
    return rf"^[+-]?0*[0-9]{{0,{integer}}}(\.[0-9]{{0,{fraction}}}0*)?$"


def name_sql(column: TargetColumn) -> str:
    """Spark SQL of the name an event's images hold ``column``'s value under: the name itself, or for a slot of
    several tables' columns (``TargetColumn.name_from``) the event's table's name for it (NULL: none)."""
    return quote(column.name_from) if column.name_from else sql_string(column.name)


def raw_sql(values: str, column: TargetColumn) -> str:
    """Spark SQL of the canonical string of ``column`` in the map column ``values`` (NULL when the map holds none,
    or the column is a slot its event's table does not use)."""
    return f"{quote(values)}[{name_sql(column)}]"


def try_cast_sql(raw: str, spark_type: str) -> str:
    """ANSI-safe cast of a canonical string: NULL where the text is not a value of the type (checked before)."""
    return f"try_cast({raw} AS {spark_type})"


def _fits(raw: str, spark_type: str, base: str, elements: Sequence[str]) -> Optional[tuple[str, str]]:
    """(SQL condition true when the non-NULL text ``raw`` is exact for the column, what it must be) or None when
    every text is (strings)."""
    casted = f"{try_cast_sql(raw, spark_type)} IS NOT NULL"
    if base in ("enum", "set") and elements:
        # DECIMAL(20,0): a 64-member SET's bitmasks reach 2^64-1, past BIGINT (changes.names_from_numbers_sql
        # spells them with conv)
        number = f"try_cast({raw} AS DECIMAL(20,0))"
        limit = len(elements) if base == "enum" else (1 << len(elements)) - 1
        what = f"an {base} member index up to {limit}" if base == "enum" else f"a set bitmask up to {limit}"
        return f"(NOT {raw} RLIKE '^[0-9]+$' OR ({number} IS NOT NULL AND {number} <= {limit}))", what
    decimal = _DECIMAL_TYPE.fullmatch(spark_type)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        pattern = sql_string(decimal_pattern(precision, scale))
        return f"({raw} RLIKE {pattern} AND {casted})", f"a decimal({precision},{scale}) without rounding"
    if spark_type in _INTEGER_TYPES:
        return f"({raw} RLIKE '^-?[0-9]+$' AND {casted})", f"an integer in the {spark_type} range"
    if spark_type in ("float", "double"):
        finite = f"abs({try_cast_sql(raw, spark_type)}) != CAST('Infinity' AS {spark_type})"
        special = f"{raw} RLIKE {sql_string(_FLOAT_SPECIAL)}"
        return f"({casted} AND ({finite} OR {special}))", f"a {spark_type} in its range"
    zero = f"{raw} LIKE '0000-00-00%'"  # MySQL's zero date: NULL by the product's rule (changes.py)
    if spark_type == "date":
        return f"({zero} OR ({raw} RLIKE {sql_string(_DATE)} AND {casted}))", "a date (YYYY-MM-DD)"
    if spark_type in ("timestamp_ntz", "timestamp"):
        return (f"({zero} OR ({raw} RLIKE {sql_string(_TIMESTAMP)} AND {casted}))",
                "a datetime (YYYY-MM-DD HH:MM:SS[.ffffff])")
    if spark_type == "binary":
        return f"{raw} RLIKE {sql_string(_BASE64)}", "bytes (base64)"
    if spark_type == "boolean":
        return f"{raw} IN ('0', '1', 'true', 'false', 'TRUE', 'FALSE')", "a boolean"
    return None


def never_a_problem(column: TargetColumn) -> bool:
    """Whether no text is ever a problem for ``column``, whatever its MySQL type: a column of plain strings (not
    ENUM/SET members) that is not required. Its MySQL type then only describes it (``column_slots.signature``)."""
    base, elements = mysql_base(column.mysql_type)
    return not column.required and _fits("x", column.spark_type.lower(), base, elements) is None


def iceberg_text(descriptor: Optional[str]) -> Optional[str]:
    """The Iceberg type a MySQL descriptor maps to (None without one), to say a stored type only where it differs."""

    return iceberg_type(parse_type(descriptor)) if descriptor else None


def value_problem_sql(values: str, column: TargetColumn, named: Optional[str] = None, marked: bool = True) -> str:
    """Spark SQL of why the value of ``column`` in map ``values`` cannot be stored exactly, NULL when it can.

    ``named``: SQL true when the event sent ENUM/SET names (not numbers) for the column. A NULL is a problem only
    in a required column (a key the table is keyed by). ``marked``: the text starts with :data:`INVALID_VALUE`
    (for a failure the flush must recognise; a dead letter's error goes without)."""
    return text_problem_sql(raw_sql(values, column), column, named, marked)


def text_problem_sql(raw: str, column: TargetColumn, named: Optional[str] = None, marked: bool = True) -> str:
    """:func:`value_problem_sql` of the canonical text the SQL expression ``raw`` holds."""
    base, elements = mysql_base(column.mysql_type)
    described = column.mysql_type or column.spark_type
    if iceberg_text(column.mysql_type) != column.spark_type:
        described += f", stored as {column.spark_type}"
    start = f"{INVALID_VALUE + ': ' if marked else ''}column "
    if column.name_from:  # a slot: the event's table's name for it
        head = f"concat({sql_string(start)}, {name_sql(column)}, {sql_string(f' ({described}): ')})"
    else:
        head = sql_string(f"{start}{column.name} ({described}): ")
    quoted = f"substring({raw}, 1, {QUOTED_CHARS})"
    checks = []
    if column.required:
        # a slot its event's table does not use holds NULL without being a column of the table
        used = f"{name_sql(column)} IS NOT NULL AND " if column.name_from else ""
        checks.append(f"WHEN {used}{raw} IS NULL THEN concat({head}, 'NULL in a key column')")
    fits = _fits(raw, column.spark_type.lower(), base, elements)
    if fits is not None:
        condition, what = fits
        if named is not None and base in ("enum", "set") and elements:
            condition = f"({named} OR {condition})"
        checks.append(f"WHEN {raw} IS NOT NULL AND NOT {condition} THEN "
                      f"concat({head}, 'value ', {quoted}, ' is not {what}')")
    if not checks:
        return "CAST(NULL AS STRING)"
    return "CASE " + " ".join(checks) + " END"


def named_sql(column: TargetColumn) -> str:
    """SQL true when an event sent member names for ``column`` (its ``named_enums`` lists it)."""
    return f"coalesce(array_contains(named_enums, {name_sql(column)}), false)"


def text_problem(raw: str, column: TargetColumn) -> Column:
    """:func:`text_problem_sql` as a Column (NULL: the text is exact for the column), ENUM/SET values read as
    numbers (the caller knows which the event sent as names)."""
    return F.expr(text_problem_sql(raw, column))


def guarded(typed: Column, problem: Column) -> Column:
    """``typed``, or a failure of the whole job with the problem's text where there is one: a change set never
    writes a value that is not exact (see module doc)."""
    return F.when(problem.isNull(), typed).otherwise(F.raise_error(problem))


def with_problems(rows, columns: Sequence[TargetColumn], keys: Sequence[TargetColumn]):
    """``rows`` (row events of one table, see ``table_events.table_rows``) with ``_problem``: why the event cannot be
    written exactly, NULL when it can: the first bad value of its image (of a delete's old image only the key
    columns: its other values are never written, nor typed, see ``changes.typed_changes``), or of its old image's
    key columns (a key-changing update)."""
    image = F.when(F.col("op") == "D", F.col("before")).otherwise(F.col("after"))
    key_names = {key.name.lower() for key in keys}
    writes = F.col("op") != "D"
    checks = []
    for column in columns:
        check = F.expr(value_problem_sql("_image", column, named_sql(column), marked=False))
        checks.append(check if column.name.lower() in key_names else F.when(writes, check))
    checks += [F.when(F.map_contains_key(F.col("before"), key.name),
                      F.expr(value_problem_sql("before", key, named_sql(key), marked=False))) for key in keys]
    problem = F.coalesce(*checks) if checks else F.lit(None).cast("string")
    return rows.withColumn("_image", image).withColumn("_problem", problem).drop("_image")


def invalid_events(rows, columns: Sequence[TargetColumn], keys: Sequence[TargetColumn]):
    """The row events of ``rows`` holding a value their column cannot store exactly, the reason in ``_problem``
    (a filter: it runs in the executors)."""
    return with_problems(rows, columns, keys).filter(F.col("_problem").isNotNull())


def valid_events(rows, columns: Sequence[TargetColumn], keys: Sequence[TargetColumn]):
    """The row events of ``rows`` whose values all fit (the complement of :func:`invalid_events`)."""
    return with_problems(rows, columns, keys).filter(F.col("_problem").isNull()).drop("_problem")


def table_mark(schema: Column, table: Column) -> Column:
    """The end of an invalid-value failure naming its event's table: `` [table <schema>.<table>]`` (names as the
    event carried them; see :func:`failed_tables`)."""
    return F.concat(F.lit(" [table "), schema, F.lit("."), table, F.lit("]"))


def failed_tables(error: BaseException, tables: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``tables`` (schema, table) an invalid-value failure names (:func:`table_mark`, names compared
    case-insensitively, as TiDB's are); empty when it names none of them."""
    text = str(error).lower()
    return [(schema, table) for schema, table in tables if f" [table {schema}.{table}]".lower() in text]


def is_invalid_value_failure(error: BaseException) -> bool:
    """Whether a Spark failure is a change set's guarded value (see :func:`guarded`)."""
    return INVALID_VALUE in str(error)


def reason_of(error: BaseException) -> str:
    """The first line of a guarded-value failure that names the column and value (for logs)."""
    for line in str(error).splitlines():
        if INVALID_VALUE + ":" in line:
            return line[line.index(INVALID_VALUE):].strip()
    return str(error).splitlines()[0] if str(error) else type(error).__name__


#: dead letters of values are written by the flush threads of one run: one Iceberg commit at a time
_DEAD_LETTER_LOCK = threading.Lock()


#: the ``query`` of a table halted at a row event (hold mode), and its resolution by ``lakehouse skip-message``
ROW_HALT = "row event at {topic}/{partition}/{offset}"
ROW_SKIPPED = "skipped-row"


def set_aside_invalid(ctx, schema: str, table: str, target, lower: int, upto_ts: int, holding: bool,
                      renames: Sequence[tuple[int, str, str]] = ()):
    """After a change set failed on a bad value: find the table's bad row events in ``lower < ts <= upto_ts``
    (in the executors) and set them aside. ``dead-letter`` mode records each in ``_lakehouse.dead_letters``
    (topic, partition, offset, the table, column, value and why) and returns the valid events to merge instead.
    ``hold`` mode halts the table at the first bad event's commit ts (``lakehouse status`` shows it with
    :data:`ROW_HALT`) and returns the events with the new upper bound below it; a row the operator skipped there
    (``lakehouse skip-message T/P/O``) is dead-lettered instead. Returns (events, upto_ts). ``renames``: see
    ``table_events.carry_renames``."""
    rows = carry_renames(table_rows(ctx.events, schema, table, lower, upto_ts), renames)
    label = f"{schema}.{table}"
    where = F.format_string(ROW_HALT.replace("{topic}", "%s").replace("{partition}", "%d").replace("{offset}", "%d"),
                            "topic", "partition", "offset")
    bad = (invalid_events(rows, target.columns, target.keys)
           .withColumn("error", F.concat(F.lit(f"{label}: "), F.col("_problem"))).drop("_problem")
           .withColumn("_where", where))
    if holding:
        skipped = [h.query for h in ctx.state.halted(ctx.changefeed, include_resolved=True)
                   if h.resolution == ROW_SKIPPED and (h.schema.lower(), h.table.lower()) == (schema.lower(),
                                                                                              table.lower())]
        held = bad.filter(~F.col("_where").isin(skipped)) if skipped else bad
        first = held.orderBy("commit_ts", "partition", "offset", "seq").select(
            "commit_ts", "_where", "error").first()
        if first is not None:
            ctx.halt(schema, table, first["commit_ts"], first["_where"], first["error"])
            upto_ts = first["commit_ts"] - 1
        bad = bad.filter(F.col("_where").isin(skipped) & (F.col("commit_ts") <= upto_ts))
    bad = bad.drop("_where").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with _DEAD_LETTER_LOCK:
            count = bad.count()
            if count:
                ctx.state.record_dead_letters(ctx.changefeed, bad, ctx.run_id)
            if ctx.report is not None:
                ctx.report.dead_letters += count
        if count:
            log.warning("%s: %d row event(s) with values the table cannot store exactly sent to the dead-letter "
                        "table", label, count)
        return valid_events(rows, target.columns, target.keys), upto_ts
    finally:
        bad.unpersist()
