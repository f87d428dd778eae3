"""Create lake tables from the upstream's CREATE TABLE statements, before their rows arrive.

A changefeed usually starts on tables that already exist upstream, so their CREATE TABLE is never in the stream.
Row events of Open Protocol and Craft carry neither ENUM/SET members nor DECIMAL precision, so a table the merge has
to create from its rows shows ENUM/SET values as their index/bitmask and DECIMALs as (38, scale).
``lakehouse create-tables --ddl FILE`` reads the upstream's own definitions
(``SHOW CREATE TABLE`` output, ``mysqldump --no-data``, ``USE db;`` statements allowed) and creates each table
the lake does not hold yet, at watermark 0, the way a CREATE TABLE from the stream would: every row event of the
table is then merged into it with its exact types.

A table the lake already holds keeps its definition, with one repair: the ENUM/SET columns it was typed with from
row events (no members known, values stored as index/bitmask numbers) learn their members from the script, and
their values are rewritten as member names in one snapshot that keeps the table's watermark, so the table reads as
upstream does and later rows are typed with names (``learn_members``). Other row-typed approximations stay:
DECIMAL(38, s) holds the same values exactly (Iceberg cannot narrow a decimal). Rerunning the command changes
nothing. A CREATE TABLE that does arrive in the stream later replaces a table created here (its commit ts is above
watermark 0), as it replaces one created from rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.merge.ddl.parse import CreateSchema, CreateTable, Unsupported, parse_ddl
from ticdc_lakehouse.iceberg.commit import callback_session, run_with_snapshot_properties
from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, JavaIceberg, watermark_of
from ticdc_lakehouse.iceberg.tables import CHANGEFEED_PROPERTY, CREATED_FROM_PROPERTY, create_table, mysql_type_of_doc
from ticdc_lakehouse.runtime.locks import changefeed_lock
from ticdc_lakehouse.merge.changes import NUMBER_PATTERN, names_from_numbers_sql
from ticdc_lakehouse.core.model import TableSchema
from ticdc_lakehouse.core.mysql_types import MySQLType, column_doc, comment_from_doc, parse_type
from ticdc_lakehouse.runtime.spark_session import get_spark
from ticdc_lakehouse.core.sql_names import qualified, quote, sql_string

#: the snapshot summary entry of the snapshot that rewrote ENUM/SET numbers as member names
MEMBERS_FROM = "tidb.members-from"


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


@dataclass(frozen=True)
class MemberRepair:
    """The ENUM/SET columns of an existing lake table that learn their members from a CREATE TABLE (pure result
    of ``members_to_learn``): (lake column name, its MySQL type with members), and the ones that cannot."""

    columns: tuple[tuple[str, MySQLType], ...] = ()
    refused: tuple[str, ...] = ()


def members_to_learn(lake_columns: Sequence[tuple[str, Optional[MySQLType]]], table: TableSchema) -> MemberRepair:
    """Which ENUM/SET columns of a lake table (name, MySQL type from its doc) typed without members take them from
    the upstream definition ``table`` (names matched case-insensitively, as MySQL does).

    Refused: a column whose members include a number, because its stored values could then be names or indexes
    (a stored "2" would be ambiguous), which would also make a rerun after a crash convert a name a second time."""
    upstream = {c.name.lower(): parse_type(c.mysql_type) for c in table.columns}
    columns, refused = [], []
    for name, lake in lake_columns:
        declared = upstream.get(name.lower())
        if lake is None or declared is None or not lake.members_unknown:
            continue
        if declared.base != lake.base or not declared.elements:
            continue
        if any(member.isdigit() for member in declared.elements):
            refused.append(f"{name}: a member is a number, so stored numbers cannot be told from names")
            continue
        columns.append((name, declared))
    return MemberRepair(tuple(columns), tuple(refused))


def learn_members(spark: Any, jtable: Any, catalog: str, namespace: str, name: str, repair: MemberRepair,
                  changefeed: str) -> None:
    """Rewrite the repair's columns as member names, then record the members in the column docs.

    The values first, in one UPDATE whose snapshot keeps the table's watermark (and says why it exists), then the
    docs (a schema change, no snapshot). A crash between the two leaves names and bare docs: the rerun's UPDATE
    finds no number left to convert (numbers are never names, see ``members_to_learn``) and records the docs."""
    assignments = ", ".join(f"{quote(c)} = {names_from_numbers_sql(quote(c), t.base, t.elements)}"
                            for c, t in repair.columns)
    numbers = " OR ".join(f"{quote(c)} RLIKE {sql_string(NUMBER_PATTERN)}" for c, _ in repair.columns)
    statement = f"UPDATE {qualified(catalog, namespace, name)} SET {assignments} WHERE {numbers}"
    properties = {RESOLVED_TS_PROPERTY: str(watermark_of(jtable)), CHANGEFEED_PROPERTY: changefeed,
                  MEMBERS_FROM: "ddl-file"}
    run_with_snapshot_properties(spark, properties, lambda: spark.sql(statement))
    jtable.refresh()
    update = jtable.updateSchema()
    for column, declared in repair.columns:
        doc = jtable.schema().findField(column).doc()
        update = update.updateColumnDoc(column, column_doc(declared, comment_from_doc(doc) if doc else None))
    update.commit()


def create_tables(settings: Settings, text: str, default_schema: str = "", changefeed: str | None = None,
                  spark: Any = None) -> dict[str, Any]:
    """Create the tables of a DDL script that the lake does not hold yet, and teach the tables it holds the
    ENUM/SET members they were typed without (see the module doc).

    Holds the changefeed's lock, so no merge creates the same table from rows or writes rows meanwhile. Returns
    what was created, what existed already, the members learned (table -> columns), the columns that could not
    learn theirs (with why) and the statements ignored."""
    found = tables_in_ddl(text, default_schema)
    name = settings.changefeed(changefeed).name
    created: list[str] = []
    existing: list[str] = []
    learned: dict[str, list[str]] = {}
    refused: dict[str, list[str]] = {}
    result = {"ok": bool(found.tables), "changefeed": name, "created": created, "existing": existing,
              "members_learned": learned, "members_refused": refused, "ignored": found.ignored}
    if not found.tables:  # nothing to create: no lock, no Spark session
        return result
    with changefeed_lock(settings, name, purpose="create-tables"):
        session = spark or get_spark(settings, "lakehouse-create-tables")
        ji = JavaIceberg(session, settings.catalog_name)
        # a repair commits through a py4j callback, whose thread would keep the process alive after the command
        with callback_session(session):
            for table in found.tables:
                namespace, lake_name = ji.resolve(table.schema, table.table)
                label = f"{namespace}.{lake_name}"
                if not ji.table_exists(namespace, lake_name):
                    create_table(ji, table, name, 0, *settings.table_layout(table.schema, table.table),
                                 {CREATED_FROM_PROPERTY: "ddl-file", CHANGEFEED_PROPERTY: name})
                    created.append(label)
                    continue
                existing.append(label)
                jtable = ji.load(namespace, lake_name)
                lake_columns = [(str(f.name()), mysql_type_of_doc(f.doc())) for f in jtable.schema().columns()]
                repair = members_to_learn(lake_columns, table)
                if repair.refused:
                    refused[label] = list(repair.refused)
                if repair.columns:
                    learn_members(session, jtable, settings.catalog_name, namespace, lake_name, repair, name)
                    learned[label] = [column for column, _ in repair.columns]
    return result
