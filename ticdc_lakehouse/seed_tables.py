"""Create lake tables from the upstream's CREATE TABLE statements, before their rows arrive.

A changefeed usually starts on tables that already exist upstream, so their CREATE TABLE is never in the stream.
Row events of Open Protocol and Craft carry neither ENUM/SET members nor DECIMAL precision, so a table the merge has to create from its rows shows ENUM/SET values as their index/bitmask and
DECIMALs as (38, scale). ``lakehouse create-tables --ddl FILE`` reads the upstream's own definitions
(``SHOW CREATE TABLE`` output, ``mysqldump --no-data``, ``USE db;`` statements allowed) and creates each table
the lake does not hold yet, at watermark 0, the way a CREATE TABLE from the stream would: every row event of the
table is then merged into it with its exact types.

Tables the lake already holds are left alone (rerunning the command changes nothing); a CREATE TABLE that does
arrive in the stream later replaces a table created here (its commit ts is above watermark 0), as it replaces one
created from rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ticdc_lakehouse.config import Settings
from ticdc_lakehouse.ddl_parse import CreateSchema, CreateTable, Unsupported, parse_ddl
from ticdc_lakehouse.model import TableSchema

#: the snapshot summary entry telling where a table's definition came from
CREATED_FROM = "tidb.created-from"


@dataclass
class DDLTables:
    """The tables a DDL script defines, and the statements of it that define none (with why)."""

    tables: list[TableSchema] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def tables_in_ddl(text: str, default_schema: str = "") -> DDLTables:
    """The CREATE TABLE statements of a DDL script, in order (pure).

    CREATE DATABASE is expected and skipped; any other statement is listed in ``ignored``: this command defines
    tables, it does not replay a history (the stream does that)."""
    found = DDLTables()
    for change in parse_ddl(text, default_schema):
        if isinstance(change, CreateTable):
            if not change.table.schema:
                found.ignored.append(f"CREATE TABLE {change.table.table}: no database (qualify it, add USE db; or "
                                     "pass --database)")
            else:
                found.tables.append(change.table)
        elif isinstance(change, Unsupported):
            found.ignored.append(f"{change.schema}.{change.table}: {change.reason}".lstrip("."))
        elif not isinstance(change, CreateSchema):
            found.ignored.append(f"not a CREATE TABLE: {type(change).__name__} "
                                 f"{getattr(change, 'schema', '')}.{getattr(change, 'table', '')}")
    return found


def create_tables(settings: Settings, text: str, default_schema: str = "", changefeed: str | None = None,
                  spark: Any = None) -> dict[str, Any]:
    """Create the tables of a DDL script that the lake does not hold yet (see the module doc).

    Holds the changefeed's lock, so no merge creates the same table from rows meanwhile. Returns what was
    created, what existed already and the statements ignored."""
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.iceberg.tables import CHANGEFEED_PROPERTY, create_table
    from ticdc_lakehouse.locks import changefeed_lock
    from ticdc_lakehouse.spark_session import get_spark

    found = tables_in_ddl(text, default_schema)
    name = settings.changefeed(changefeed).name
    created: list[str] = []
    existing: list[str] = []
    if not found.tables:  # nothing to create: no lock, no Spark session
        return {"ok": False, "changefeed": name, "created": created, "existing": existing, "ignored": found.ignored}
    with changefeed_lock(settings, name):
        session = spark or get_spark(settings, "lakehouse-create-tables")
        ji = JavaIceberg(session, settings.catalog_name)
        for table in found.tables:
            namespace, lake_name = ji.resolve(table.schema, table.table)
            label = f"{namespace}.{lake_name}"
            if ji.table_exists(namespace, lake_name):
                existing.append(label)
                continue
            create_table(ji, table, name, 0, *settings.table_layout(table.schema, table.table),
                         {CREATED_FROM: "ddl-file", CHANGEFEED_PROPERTY: name})
            created.append(label)
    return {"ok": True, "changefeed": name, "created": created, "existing": existing, "ignored": found.ignored}
