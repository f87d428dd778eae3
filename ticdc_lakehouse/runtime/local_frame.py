"""A DataFrame of the few rows the driver holds (a checkpoint, a halt, a list of skipped offsets).

Why not ``spark.createDataFrame(rows, ddl)``: it parallelizes the pickled rows, so a Python worker must unpickle
them in a Spark task. At the end of a merge the decode stage's workers are gone, and that one-row job waited half
a second for a new one (the checkpoint write, measured on the merge bench's event log). Rows made of literals are
evaluated in the JVM. Meant for a handful of rows: each value is one literal in the plan.
"""

from __future__ import annotations

from typing import Any, Sequence


def local_frame(spark: Any, rows: Sequence[Sequence[Any]], ddl: str) -> Any:
    """The rows (tuples in the order of ``ddl``'s fields) as a DataFrame of the schema ``ddl`` (a Spark DDL
    string such as ``"name string, ts bigint"``), computed without a Python worker."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = _parse_datatype_string(ddl)
    if not isinstance(schema, StructType):
        raise ValueError(f"not a row schema: {ddl!r}")
    fields = schema.fields
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(f"a row of {len(row)} values for {len(fields)} fields: {row!r}")
    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in fields])
    structs = [F.struct(*[F.lit(value).cast(f.dataType).alias(f.name) for value, f in zip(row, fields)])
               for row in rows]
    return spark.range(1, numPartitions=1).select(F.inline(F.array(*structs)))
