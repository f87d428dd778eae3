"""A DataFrame of the few rows the driver holds (a checkpoint, a halt, a list of skipped offsets).

Why not ``spark.createDataFrame(rows, ddl)``: it parallelizes the pickled rows, so a Python worker must unpickle
them in a Spark task. At the end of a merge the decode stage's workers are gone, and that one-row job waited half
a second for a new one (the checkpoint write, measured on the merge bench's event log). Rows made of literals are
evaluated in the JVM. Meant for a handful of rows: each value is one literal in the plan.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Optional, Sequence

from ticdc_lakehouse.core.sql_names import quote, sql_string


@lru_cache(maxsize=256)
def row_schema(ddl: str) -> Any:
    """The ``StructType`` of a Spark DDL string such as ``"name string, ts bigint"``, parsed once per process.

    Why: pyspark parses a DDL string in the JVM at every use (``mapInArrow``'s schema, ``local_frame``), through a
    gateway path that first looks up each of its package names as a class (each a miss on every jar of the class
    path) and then runs Spark's SQL parser: a tenth of the driver JVM's gateway time in a four-table backfill, for
    the same few strings. A ``StructType`` is plain Python data, shared by every session of the process. The
    project's own strings (plain names, atomic types, ``decimal(p,s)``, ``array<>``, ``map<>``) are read here
    without the JVM (``simple_row_schema``): a fresh driver's first parses were a quarter of a second of its start
    (the SQL parser warming up), before the first job; anything else (a ``timestamp`` among them) goes to Spark's
    parser."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = simple_row_schema(ddl)
    if schema is None:
        schema = _parse_datatype_string(ddl)
    if not isinstance(schema, StructType):
        raise ValueError(f"not a row schema: {ddl!r}")
    return schema


#: the pyspark type Spark's parser reads ``timestamp`` as, by the session's ``spark.sql.timestampType``
SESSION_TIMESTAMPS = {"TIMESTAMP_LTZ": "TimestampType", "TIMESTAMP_NTZ": "TimestampNTZType"}


def session_row_schema(spark: Any, ddl: str) -> Any:
    """``row_schema`` of ``ddl`` as ``spark``'s own parser reads it, ``timestamp`` included (the session's
    ``spark.sql.timestampType``), still without the parser for the project's strings.

    Why: the control tables' strings hold ``timestamp``. A deployment's first run created its five control tables
    from them through Spark's parser (``StructType.fromDDL``) right after the session started, before its first
    job: 0.36-0.43 s in a fresh driver (the parser's first use), against 0.03 s through the schemas' JSON. The
    session is asked only for a string that holds ``timestamp``: most frames' strings do not, and each question is a
    gateway call."""
    schema = _simple_row_schema(ddl, None)
    if schema is None:
        timestamp = SESSION_TIMESTAMPS.get(str(spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")).upper())
        schema = _simple_row_schema(ddl, timestamp) if timestamp is not None else None
    return schema if schema is not None else row_schema(ddl)


@lru_cache(maxsize=256)
def _simple_row_schema(ddl: str, timestamp: Optional[str]) -> Any:
    return simple_row_schema(ddl, timestamp)


#: Spark DDL names of the atomic types ``simple_row_schema`` reads, and their pyspark types' names
_ATOMIC_TYPES = {
    "string": "StringType", "boolean": "BooleanType", "tinyint": "ByteType", "smallint": "ShortType",
    "int": "IntegerType", "integer": "IntegerType", "bigint": "LongType", "float": "FloatType",
    "double": "DoubleType", "binary": "BinaryType", "date": "DateType", "timestamp_ntz": "TimestampNTZType",
}  # not ``timestamp``: Spark reads it as the session's ``spark.sql.timestampType``, which a deployment may set
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def simple_row_schema(ddl: str, timestamp: Optional[str] = None) -> Any:
    """``ddl`` as a ``StructType`` when each field is a name (plain or back-quoted) and a type of
    ``_ATOMIC_TYPES``, ``decimal(p,s)``, ``array<T>`` or ``map<K,V>`` of those, all nullable; None for anything else
    (``NOT NULL``, comments, structs), which the caller hands to Spark's parser. ``timestamp``: the pyspark type
    name ``timestamp`` stands for (``session_row_schema``); None: not read here."""
    from pyspark.sql.types import StructField, StructType

    fields = []
    for part in _top_level_split(ddl, ","):
        name, kind = _split_name(part.strip())
        data_type = _simple_type(kind.strip().lower(), timestamp)
        if name is None or data_type is None:
            return None
        fields.append(StructField(name, data_type, True))
    return StructType(fields) if fields else None


def _split_name(field: str) -> tuple[Optional[str], str]:
    """A field's name (plain, or back-quoted with doubled back-quotes inside, as ``sql_names.quote`` writes it)
    and the text after it; None for a name outside that subset."""
    if not field.startswith("`"):
        name, _, kind = field.partition(" ")
        return (name if _NAME.fullmatch(name) else None), kind
    position, name = 1, []
    while True:
        end = field.find("`", position)
        if end < 0:
            return None, ""
        name.append(field[position:end])
        if field.startswith("``", end):  # a doubled back-quote stands for one
            name.append("`")
            position = end + 2
            continue
        rest = field[end + 1:]
        return ("".join(name) if rest.startswith(" ") else None), rest


def _simple_type(text: str, timestamp: Optional[str] = None) -> Any:
    """The pyspark type of one type name of ``simple_row_schema``'s subset, or None."""
    from pyspark.sql import types

    if text in _ATOMIC_TYPES:
        return getattr(types, _ATOMIC_TYPES[text])()
    if text == "timestamp" and timestamp is not None:
        return getattr(types, timestamp)()
    decimal = _DECIMAL.fullmatch(text)
    if decimal:
        return types.DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    if text.startswith("array<") and text.endswith(">"):
        element = _simple_type(text[len("array<"):-1].strip(), timestamp)
        return None if element is None else types.ArrayType(element, True)
    if text.startswith("map<") and text.endswith(">"):
        parts = _top_level_split(text[len("map<"):-1], ",")
        if len(parts) != 2:
            return None
        key, value = (_simple_type(p.strip(), timestamp) for p in parts)
        return None if key is None or value is None else types.MapType(key, value, True)
    return None


def _top_level_split(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside ``<>`` and ``()``."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def local_frame(spark: Any, rows: Sequence[Sequence[Any]], ddl: str) -> Any:
    """The rows (tuples in the order of ``ddl``'s fields) as a DataFrame of the schema ``ddl`` (a Spark DDL
    string such as ``"name string, ts bigint"``), computed without a Python worker."""
    from pyspark.sql import functions as F

    fields = session_row_schema(spark, ddl).fields
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(f"a row of {len(row)} values for {len(fields)} fields: {row!r}")
    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in fields])
    text = _values_sql(rows, fields)
    if text is not None:
        return spark.sql(text)
    structs = [F.struct(*[F.lit(value).cast(f.dataType).alias(f.name) for value, f in zip(row, fields)])
               for row in rows]
    return spark.range(1, numPartitions=1).select(F.inline(F.array(*structs)))


_SIMPLE_TYPES = ("string", "int", "bigint", "smallint", "tinyint", "boolean", "double")


def _values_sql(rows: Sequence[Sequence[Any]], fields: Sequence[Any]) -> Optional[str]:
    """The rows as one ``SELECT ... FROM VALUES`` statement when every field has a simple type and every value is
    a string, integer, boolean, float or None; else None. One gateway call whatever the number of rows (the
    struct of literals costs a few calls per value: seconds for a few hundred rows)."""
    types = [f.dataType.simpleString() for f in fields]
    if any(t not in _SIMPLE_TYPES for t in types):
        return None
    literals = []
    for row in rows:
        values = []
        for value in row:
            if value is None:
                values.append("NULL")
            elif isinstance(value, bool):
                values.append("TRUE" if value else "FALSE")
            elif isinstance(value, int):
                values.append(str(value))
            elif isinstance(value, float) and math.isfinite(value):
                values.append(repr(value) + "D")
            elif isinstance(value, str):
                values.append(sql_string(value))
            else:
                return None
        literals.append("(" + ", ".join(values) + ")")
    columns = ", ".join(f"col{i + 1}" for i in range(len(fields)))
    typed = ", ".join(f"CAST(col{i + 1} AS {t}) AS {quote(f.name)}" for i, (f, t) in enumerate(zip(fields, types)))
    return f"SELECT {typed} FROM VALUES {', '.join(literals)} AS rows({columns})"
