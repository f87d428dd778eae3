"""A DataFrame of the few rows the driver holds (a checkpoint, a halt, a list of skipped offsets).

Why not ``spark.createDataFrame(rows, ddl)``: it parallelizes the pickled rows, so a Python worker must unpickle
them in a Spark task. At the end of a merge the decode stage's workers are gone, and that one-row job waited half
a second for a new one (the checkpoint write, measured on the merge bench's event log). Rows made of literals are
evaluated in the JVM. Meant for a handful of rows: each value is one literal in the plan.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Optional, Sequence

from ticdc_lakehouse.core.sql_names import quote, sql_string


@lru_cache(maxsize=256)
def row_schema(ddl: str) -> Any:
    """The ``StructType`` of a Spark DDL string such as ``"name string, ts bigint"``, parsed once per process.

    Why: pyspark parses a DDL string in the JVM at every use (``mapInArrow``'s schema, ``local_frame``), through a
    gateway path that first looks up each of its package names as a class (each a miss on every jar of the class
    path) and then runs Spark's SQL parser: a tenth of the driver JVM's gateway time in a four-table backfill, for
    the same few strings. A ``StructType`` is plain Python data, shared by every session of the process."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = _parse_datatype_string(ddl)
    if not isinstance(schema, StructType):
        raise ValueError(f"not a row schema: {ddl!r}")
    return schema


def local_frame(spark: Any, rows: Sequence[Sequence[Any]], ddl: str) -> Any:
    """The rows (tuples in the order of ``ddl``'s fields) as a DataFrame of the schema ``ddl`` (a Spark DDL
    string such as ``"name string, ts bigint"``), computed without a Python worker."""
    from pyspark.sql import functions as F

    fields = row_schema(ddl).fields
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
