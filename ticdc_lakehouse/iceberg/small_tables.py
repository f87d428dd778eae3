"""Rows of a small Iceberg table, read in the driver's JVM by Iceberg's own generic reader: no Spark job.

Why: every run reads the control tables (its changefeed's latest checkpoint, its halted tables, its held
messages) before its first Spark job, and each holds a few rows per run. As a Spark query each was a plan, a job
and a task: 1.7 s of a steady-state run's critical path for the checkpoint alone, where Iceberg's generic reader
of the same files takes a tenth of that. The reader applies the table's deletes (deletion vectors included) like
any Iceberg reader. Each row crosses the gateway as one JSON text (Iceberg's ``SingleValueParser`` of the row's
struct, keyed by field id), not one call per field; values come back as a pyspark ``Row`` would give them.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any, Mapping

from ticdc_lakehouse.iceberg.java_api import JavaIceberg


def read_rows(ji: JavaIceberg, namespace: str, table: str, equal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``namespace.table`` whose columns equal ``equal`` (column -> value), each as a dict of every
    column. For tables of at most a few thousand rows: each row is a few gateway calls."""
    jtable = ji.load(namespace, table)
    schema = json.loads(str(ji.java("org.apache.iceberg.SchemaParser").toJson(jtable.schema())))
    fields = [(str(f["id"]), str(f["name"]), f["type"]) for f in schema.get("fields", [])]
    expressions = ji.java("org.apache.iceberg.expressions.Expressions")
    scan = ji.java("org.apache.iceberg.data.IcebergGenerics").read(jtable)
    for column, value in equal.items():
        scan = scan.where(expressions.equal(column, value))
    struct = jtable.schema().asStruct()
    internal = ji.java("org.apache.iceberg.data.InternalRecordWrapper")(struct)  # Java time values -> Iceberg's
    parser = ji.java("org.apache.iceberg.SingleValueParser")
    rows = []
    records = scan.build()
    try:
        iterator = records.iterator()
        while iterator.hasNext():
            values = json.loads(str(parser.toJson(struct, internal.wrap(iterator.next()))))
            rows.append({name: _value(kind, values.get(field_id)) for field_id, name, kind in fields})
    finally:
        records.close()
    # the filter again, on the few rows read: it holds whatever the reader makes of a file's residual filter
    return [row for row in rows if all(row[column] == value for column, value in equal.items())]


def _value(kind: Any, text: Any) -> Any:
    """One field of ``SingleValueParser``'s JSON as pyspark gives it: timestamps as naive local datetimes (what
    ``Row`` holds), dates as dates, numbers, strings and booleans as they are."""
    if text is None:
        return None
    if kind in ("timestamptz", "timestamp"):
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is not None:
            return datetime.fromtimestamp(moment.timestamp())
        return moment
    if kind == "date":
        return date.fromisoformat(text)
    if kind in ("boolean", "int", "long", "float", "double", "string"):
        return text
    raise TypeError(f"reading a {kind} column of a small table is not supported")
