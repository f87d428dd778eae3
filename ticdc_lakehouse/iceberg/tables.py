"""Target tables: naming, describing, creating and committing watermarks.

Upstream ``schema.table`` becomes Iceberg ``<catalog>.<schema>.<table>`` spelled as upstream created it; later
events find it ignoring case, as TiDB does. Every column keeps the upstream name and carries its MySQL type as the
Iceberg field doc, so ENUM elements, unsignedness and precision survive into the lake and drive later type decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, JavaIceberg, watermark_of
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.core.model import ColumnSchema, TableSchema
from ticdc_lakehouse.core.mysql_types import MySQLType, column_doc, iceberg_type, parse_type, type_from_doc

CHANGEFEED_PROPERTY = "tidb.changefeed"
#: the snapshot summary entry telling where a table's definition came from (row-types, bootstrap, ddl-file)
CREATED_FROM_PROPERTY = "tidb.created-from"
#: prefix of the table properties naming columns whose older rows hold NULL where TiDB returns an expression
#: default it evaluated when the column was added (``CURRENT_TIMESTAMP``): a value no message carries
UNKNOWN_DEFAULT_PROPERTY = "lakehouse.unknown-default."
UPSTREAM_NAME_PROPERTY = "tidb.upstream-name"

_ICEBERG_TO_SPARK = {
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
}


def spark_type_of(iceberg_type: str) -> str:
    text = iceberg_type.replace(" ", "").lower()
    if text.startswith("decimal"):
        return text
    return _ICEBERG_TO_SPARK.get(text, text)


@dataclass
class TargetTable:
    """What the merge needs to know of one Iceberg table, read fresh from the catalog."""

    namespace: str
    name: str
    columns: list[TargetColumn] = field(default_factory=list)
    keys: list[TargetColumn] = field(default_factory=list)
    watermark: int = 0
    exists: bool = False
    #: the keys are Iceberg identifier fields, which are required: never NULL, so the MERGE can join with a plain
    #: ``=`` (which keeps the change set's partitioning) instead of the null-safe ``<=>`` a keyless table needs
    keys_required: bool = False
    #: the table's current partition spec has a field (a bucket of its first key, as this product creates it)
    partitioned: bool = False
    #: the rows its current snapshot's data files hold (``total-records``; deleted rows still count), 0 for none
    rows: int = 0

    def column(self, name: str) -> Optional[TargetColumn]:
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)


def mysql_type_of_doc(doc: Optional[str]) -> Optional[MySQLType]:
    """The MySQL type recorded in a column doc (``mysql:<descriptor>``), None for other docs."""

    if not doc:
        return None
    try:
        return type_from_doc(doc)
    except ValueError:
        return None


def descriptor_of_doc(doc: Optional[str]) -> Optional[str]:
    """The MySQL type descriptor recorded in a column doc, None for other docs."""
    mysql = mysql_type_of_doc(doc)
    return mysql.descriptor() if mysql is not None else None


def describe(ji: JavaIceberg, schema: str, table: str) -> TargetTable:
    namespace, name = ji.resolve(schema, table)
    if not ji.listed(namespace, name):
        return TargetTable(namespace, name)
    jtable = ji.read_view(namespace, name)
    fields, key_names = ji.columns_of(jtable)
    columns = [TargetColumn(field, spark_type_of(kind), descriptor_of_doc(doc), required)
               for field, kind, required, doc in fields]
    identifier = {n.lower() for n in key_names}
    keys = [c for c in columns if c.name.lower() in identifier]
    staged = ji.staged_watermark(namespace, name)
    watermark = staged if staged is not None else watermark_of(jtable)
    return TargetTable(namespace, name, columns, keys or list(columns), watermark, True, bool(keys),
                       not jtable.spec().isUnpartitioned(), table_records(jtable.currentSnapshot()))


def table_records(snapshot) -> int:
    """The rows in a snapshot's data files (its summary's ``total-records``; deleted rows still count), 0 for
    none: what a MERGE reads of the table."""
    if snapshot is None:
        return 0
    return int(snapshot.summary().get("total-records") or 0)


def buckets_for(bucket_count: int, bucket_min_rows: int, rows: int) -> int:
    """The buckets a keyed table is partitioned into when it holds (or is about to hold) ``rows`` rows: the
    configured ``bucket_count`` from ``bucket_min_rows`` rows on, else none (0: unpartitioned).

    Why: buckets let a MERGE into a big table join by bucket and write its deletes file by file, but every write
    gives each bucket a file of its own. A table of a few hundred rows written as 16 files of a dozen rows each,
    every run, is what most tables of a changefeed of hundreds would be: thousands of tiny files a run, for
    readers and the catalog to carry. Such a table is unpartitioned until it grows (``add_buckets``)."""
    return bucket_count if bucket_count > 0 and rows >= bucket_min_rows else 0


def add_buckets(ji: JavaIceberg, target: TargetTable, bucket_count: int) -> None:
    """Partition an unpartitioned keyed table by ``bucket_count`` buckets of its first key column from now on,
    as ``create_table`` partitions a big one (Iceberg's partition evolution: one metadata commit, no snapshot, no
    file rewritten). Its earlier files keep the unpartitioned spec and stay readable and deletable as they are;
    the next rewrite of a small table, or ``lakehouse maintain``'s compaction of small files, puts their rows in
    buckets."""
    jtable = ji.load(target.namespace, target.name)
    key = target.keys[0].name
    term = ji.java("org.apache.iceberg.expressions.Expressions").bucket(key, bucket_count)
    jtable.updateSpec().addField(f"{key}_bucket", term).commit()


#: Iceberg format of the tables this version creates: v3, whose merge-on-read deletes are deletion vectors (one
#: Puffin blob per data file) instead of a pile of position-delete files; ``lakehouse maintain --upgrade-format``
#: brings older tables to it
FORMAT_VERSION = 3


def table_properties(changefeed: str, upstream: str, write_mode: str, extra: Mapping[str, str] = {}) -> dict[str, str]:
    mode = "merge-on-read" if write_mode == "merge-on-read" else "copy-on-write"
    props = {
        "format-version": str(FORMAT_VERSION),
        "write.merge.mode": mode,
        "write.update.mode": mode,
        "write.delete.mode": mode,
        "write.parquet.compression-codec": "zstd",
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "50",
        "write.distribution-mode": "hash",
        CHANGEFEED_PROPERTY: changefeed,
        UPSTREAM_NAME_PROPERTY: upstream,
    }
    props.update(extra)
    return props


def create_table(
    ji: JavaIceberg,
    table_schema: TableSchema,
    changefeed: str,
    commit_ts: int,
    write_mode: str,
    bucket_count: int,
    summary: Mapping[str, str] = {},
    staged: bool = False,
) -> None:
    """Create the Iceberg table for an upstream schema, atomically with its first watermark snapshot.

    Partitioned by ``bucket_count`` buckets of the first key column (0: unpartitioned; see ``buckets_for``), so
    a merge rewrites only the buckets its keys fall in. Key columns are required and become Iceberg identifier
    fields. ``staged``: committed with the table's first rows (``JavaIceberg.create_table``).
    """

    namespace, name = ji.resolve(table_schema.schema, table_schema.table)
    ji.create_namespace(namespace)
    keys = [k for k in table_schema.primary_key]
    key_set = {k.lower() for k in keys}
    columns = []
    for c in table_schema.columns:
        mysql = parse_type(c.mysql_type)
        columns.append((c.name, iceberg_type(mysql), c.name.lower() in key_set, column_doc(mysql, c.comment)))
    jschema = ji.build_schema(columns, keys)
    spec = ji.bucket_spec(jschema, keys[0] if keys and bucket_count > 0 else None, bucket_count)
    props = table_properties(changefeed, f"{table_schema.schema}.{table_schema.table}", write_mode)
    ji.create_table(namespace, name, jschema, spec, props, {RESOLVED_TS_PROPERTY: str(commit_ts), **summary},
                    staged=staged)


def schema_from_row_types(schema: str, table: str, column_types: Sequence[tuple[str, str]],
                          key_columns: Iterable[str]) -> TableSchema:
    """A table schema inferred from a row event's column types: used when rows of a table arrive with no
    CREATE TABLE in the stream (the changefeed started after the table was created)."""
    columns = tuple(ColumnSchema(name=name, mysql_type=mysql_type) for name, mysql_type in column_types)
    return TableSchema(schema=schema, table=table, columns=columns, primary_key=tuple(key_columns))
