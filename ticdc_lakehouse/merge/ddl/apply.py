"""Apply upstream DDL to Iceberg, once, in commit-ts order.

Each DDL on an existing table commits its schema change together with an empty snapshot whose summary records
the DDL's commit ts (one Iceberg transaction). So "has this DDL been applied?" is simply "is the table's watermark
>= its commit ts?", which makes every DDL idempotent across crashes and reruns. Catalog-level operations (create,
drop, rename) check the catalog state instead.

A DDL Iceberg cannot express (narrowing a type, say) halts that table at that commit ts: its later rows and DDL
wait in the landed segments, the reason shows in ``lakehouse status``, other tables go on.
"""

from __future__ import annotations

import functools
import logging
from typing import Iterable, Optional, Sequence

from ticdc_lakehouse.merge.ddl import parse as dp
from ticdc_lakehouse.core.column_defaults import UnknownDefault, existing_row_value
from ticdc_lakehouse.iceberg.commit import run_with_snapshot_properties
from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY, watermark_of
from ticdc_lakehouse.iceberg.tables import CREATED_FROM_PROPERTY, UNKNOWN_DEFAULT_PROPERTY
from ticdc_lakehouse.merge import table_work
from ticdc_lakehouse.merge.plan import DDLRecord, table_key
from ticdc_lakehouse.merge.run_state import RunContext
from ticdc_lakehouse.core.model import ColumnSchema, TableSchema
from ticdc_lakehouse.core.mysql_types import column_doc, holds_every_value, iceberg_type, parse_type, widening
from ticdc_lakehouse.core.sql_names import qualified, quote, sql_string
from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.runtime.parallel import map_at_most
from ticdc_lakehouse.runtime.state import HaltedTable
from ticdc_lakehouse.core.values import to_bytes

log = logging.getLogger(__name__)


class CannotApply(Exception):
    """The DDL cannot be expressed in Iceberg: the table halts with this reason."""


def changes_of(record: DDLRecord) -> list:
    """The schema changes of a DDL record; Simple's tableSchema wins over parsing SQL for CREATE TABLE."""
    if record.table_schema is not None and record.ddl_type in ("CREATE_TABLE", "CREATE"):
        return [dp.CreateTable(record.table_schema, True)]
    if not record.query:
        return []
    return list(_parsed(record.query, record.schema, record.ddl_type))


@functools.lru_cache(maxsize=4096)
def _parsed(query: str, schema: str, ddl_type: Optional[str]) -> tuple:
    """``parse_ddl``, once per statement: a run asks for a DDL's changes four times (removals, the columns each
    DDL touches, the runs of independent creates, the apply), and sqlglot's tokenizer made that a second of a
    204-table backfill's driver time. The changes are frozen dataclasses, so sharing them is safe."""
    return tuple(dp.parse_ddl(query, schema, ddl_type))


def _touched(change) -> list[tuple[str, str]]:
    if isinstance(change, dp.RenameTable):
        return [(change.old_schema, change.old_table), (change.new_schema, change.new_table)]
    if isinstance(change, dp.CreateTable):
        return [(change.table.schema, change.table.table)]
    if isinstance(change, dp.TableChange) and change.schema and change.table:
        return [(change.schema, change.table)]
    return []


#: dropped tables are moved here, not deleted: their data stays for old cuts until maintenance purges them,
#: and their presence proves the DROP was applied (a rerun must not apply older DDL to a re-created table)
DROPPED_NAMESPACE = "_lakehouse_dropped"


def dropped_name(schema: str, table: str, ts: int) -> str:
    return f"{schema}__{table}__{ts}"


def drop_to_graveyard(ctx: RunContext, target, schema: str, table: str, ts: int) -> None:
    ctx.ji.create_namespace(DROPPED_NAMESPACE)
    ctx.ji.rename_table(target.namespace, target.name, DROPPED_NAMESPACE,
                        dropped_name(schema.lower(), table.lower(), ts))
    ctx.forget(schema, table)
    ctx.gone[table_key(schema, table)] = ts


def removals(records: Iterable[DDLRecord]) -> dict[tuple[str, str], list[tuple[int, Optional[tuple[str, str]]]]]:
    """Per table, this run's DDLs that drop it (new name None) or rename it away: (commit ts, new name)."""
    result: dict[tuple[str, str], list[tuple[int, Optional[tuple[str, str]]]]] = {}
    for record in records:
        try:
            changes = changes_of(record)
        except Exception:  # noqa: BLE001 - unparsable: it removes nothing
            continue
        for change in changes:
            if isinstance(change, dp.RenameTable):
                key = table_key(change.old_schema, change.old_table)
                result.setdefault(key, []).append((record.commit_ts, (change.new_schema, change.new_table)))
            elif isinstance(change, dp.DropTable):
                result.setdefault(table_key(change.schema, change.table), []).append((record.commit_ts, None))
            elif isinstance(change, dp.DropSchema):
                result.setdefault((change.schema.lower(), "*"), []).append((record.commit_ts, None))
    return result


def removal_applied(ctx: RunContext, schema: str, table: str, ts: int, depth: int = 0) -> bool:
    """Was a later DROP or RENAME of this table (in this run) applied before, by a run that then crashed?"""
    candidates = ctx.removals.get(table_key(schema, table), []) + ctx.removals.get((schema.lower(), "*"), [])
    for later, new_name in candidates:
        if later <= ts:
            continue
        if new_name is None:
            graveyard = dropped_name(schema.lower(), table.lower(), later)
            if ctx.ji.table_exists(DROPPED_NAMESPACE, graveyard):
                return True
        else:
            renamed = ctx.target(new_name[0], new_name[1], refresh=True)
            if renamed.exists and renamed.watermark >= later:
                return True
            if depth < 8 and not renamed.exists and removal_applied(ctx, new_name[0], new_name[1], later, depth + 1):
                return True
    return False


#: summary property of the marker snapshot of a DDL applied without its barrier (see ``deferrable``)
DDL_TS_PROPERTY = "tidb.ddl-ts"


def deferrable(changes: list) -> bool:
    """Whether the table's rows below a DDL (its parsed ``changes``) merge to the same result under the schema
    after it, so the DDL needs no barrier (no MERGE before it): statements that only add nullable columns with no
    value for existing rows, or change no column at all (indexes, comments, defaults). Older rows simply lack the
    new column, which the MERGE already reads as "not sent" (NULL on insert, kept on update). These are the most
    frequent DDL, and each barrier costs a MERGE of the table."""
    try:
        if not changes or len({table_key(c.schema, c.table) for c in changes}) != 1:
            return False
        for change in changes:
            if isinstance(change, (dp.MetadataOnly, dp.SetDefault)):
                continue
            if not isinstance(change, dp.AddColumn):
                return False
            if default_fill(parse_type(change.column.mysql_type), change.column) is not None:
                return False
        return True
    except Exception:  # noqa: BLE001 - anything unusual takes the barrier
        return False


def column_names(changes: list) -> frozenset[str]:
    """The column names (lower case) a statement's column changes name: added, dropped, renamed (both names),
    modified (both names)."""
    names: set[str] = set()
    for change in changes:
        if isinstance(change, dp.AddColumn):
            names.add(change.column.name.lower())
        elif isinstance(change, dp.DropColumn):
            names.add(change.name.lower())
        elif isinstance(change, dp.RenameColumn):
            names |= {change.old.lower(), change.new.lower()}
        elif isinstance(change, dp.ModifyColumn):
            names |= {change.name.lower(), (change.column.name or change.name).lower()}
    return frozenset(names)


def columns_by_table(records: Iterable[DDLRecord]) -> dict[tuple[str, str], list[tuple[int, frozenset[str]]]]:
    """Per table, each of the run's DDLs on it and the column names it names (``column_names``)."""
    result: dict[tuple[str, str], list[tuple[int, frozenset[str]]]] = {}
    for record in records:
        try:
            changes = changes_of(record)
        except Exception:  # noqa: BLE001 - unparsable: it halts its table anyway
            continue
        for key in {table_key(c.schema, c.table) for c in changes if isinstance(c, dp.TableChange) and c.table}:
            result.setdefault(key, []).append((record.commit_ts, column_names(changes)))
    return result


def carried(ctx: RunContext, record: DDLRecord) -> bool:
    """Whether the rows of the DDL's table below it are carried into the schema after it, so it needs no barrier
    (no merge of those rows before it): it is applied ahead of them, and the table's rows of the whole run are
    written once, typed by the new schema (``deferrable``: added nullable columns, defaults, metadata; also
    dropped columns, whose values the rows below then simply lose; renamed columns, whose values the change set
    reads under the old name below the DDL (``changes.carry_renames``); and a type change every old value
    survives (``mysql_types.holds_every_value``)).

    Not for a key column (a key change needs the barrier), a keyless table, or a column another DDL of the run
    also names (a column dropped and added again must not take the old values back)."""
    try:
        changes = changes_of(record)
    except Exception:  # noqa: BLE001 - a DDL we cannot parse keeps its barrier
        return False
    if deferrable(changes):
        return True
    try:
        tables = {table_key(c.schema, c.table) for c in changes}
        if len(tables) != 1 or not all(isinstance(c, dp.TableChange) for c in changes):
            return False
        target = ctx.target(changes[0].schema, changes[0].table)
        if not target.exists or not target.keys_required:
            return False
        keys = {k.name.lower() for k in target.keys}
        for change in changes:
            if isinstance(change, (dp.MetadataOnly, dp.SetDefault, dp.DropColumn, dp.RenameColumn)):
                continue
            if isinstance(change, dp.AddColumn):
                if default_fill(parse_type(change.column.mysql_type), change.column) is not None:
                    return False
            elif isinstance(change, dp.ModifyColumn):
                existing = target.column(change.name)
                if (existing is None or not existing.mysql_type
                        or (change.column.name or change.name).lower() != change.name.lower()
                        or not holds_every_value(parse_type(existing.mysql_type), parse_type(change.column.mysql_type))):
                    return False
            else:
                return False
        named = column_names(changes)
        if named & keys:
            return False
        others = ctx.run_columns.get(next(iter(tables)), [])
        return not any(ts != record.commit_ts and names & named for ts, names in others)
    except Exception:  # noqa: BLE001 - anything unusual takes the barrier
        return False


def tables_blocked(ctx: RunContext, record: DDLRecord, carried_below: bool = False) -> list[tuple[str, str]]:
    """Tables whose rows below the DDL's ts must be merged before it is applied (the DDL barrier): none when
    its rows are ``carried_below`` (see ``carried``), or for a TRUNCATE (the rows below it are gone upstream: its
    commit moves the table's watermark to its ts, so they are never merged; without resolved events a flush
    does not start at the watermark, so there the barrier stays)."""
    try:
        changes = changes_of(record)
    except Exception:  # noqa: BLE001 - a DDL we cannot parse still blocks its own table
        return [(record.schema, record.table)] if record.table else []
    truncates = bool(changes) and all(isinstance(c, dp.TruncateTable) for c in changes)
    if carried_below or deferrable(changes) or (truncates and ctx.resolved_mode):
        return []
    blocked: list[tuple[str, str]] = []
    for change in changes:
        if isinstance(change, dp.DropSchema):
            blocked.extend(_tables_in_schema(ctx, change.schema))
        for schema, table in _touched(change):
            blocked.append((schema, table))
    seen = set()
    unique = []
    for schema, table in blocked:
        key = table_key(schema, table)
        if key not in seen:
            seen.add(key)
            unique.append((schema, table))
    return unique


def _tables_in_schema(ctx: RunContext, schema: str) -> list[tuple[str, str]]:
    namespace = ctx.ji.find_namespace(schema)
    return [(namespace, name) for name in ctx.ji.list_tables(namespace)] if namespace else []


def apply_ddl(ctx: RunContext, record: DDLRecord, carried_below: bool = False) -> None:
    """Apply one DDL (all the changes of its statement); halt the table on what Iceberg cannot express.
    ``carried_below``: applied ahead of the table's rows below it (see ``carried``)."""
    _report_applied(ctx, record, _apply(ctx, record, carried_below))


def independent_creates(records: Sequence[DDLRecord], start: int) -> list[DDLRecord]:
    """The records from ``start`` on that are each one plain CREATE TABLE of a table none of the others names:
    the order among them changes nothing, so they may be applied at once (``apply_creates``)."""
    run: list[DDLRecord] = []
    seen: set[tuple[str, str]] = set()
    for record in records[start:]:
        try:
            changes = changes_of(record)
        except Exception:  # noqa: BLE001 - applied alone (it halts its table)
            break
        if len(changes) != 1 or not isinstance(changes[0], dp.CreateTable):
            break
        key = table_key(changes[0].table.schema, changes[0].table.table)
        if key in seen:
            break
        seen.add(key)
        run.append(record)
    return run


def apply_creates(ctx: RunContext, records: Sequence[DDLRecord], parallelism: int) -> None:
    """Apply ``independent_creates`` records ``parallelism`` at a time (a table creation is a few catalog calls
    and metadata writes: hundreds of new tables one by one cost minutes); the report lists them in ts order."""
    def create(record: DDLRecord) -> Optional[list]:
        changes = _apply(ctx, record, False)
        fault_point("merge.after_ddl")  # per statement, as one by one: a crash with some of them created
        return changes

    applied = map_at_most(create, records, parallelism, "create")
    for record, changes in zip(records, applied):
        _report_applied(ctx, record, changes)


def _apply(ctx: RunContext, record: DDLRecord, carried_below: bool) -> Optional[list]:
    """``apply_ddl`` without the report: the changes of the statement when it was applied, else None."""
    try:
        changes = changes_of(record)
    except Exception as exc:  # noqa: BLE001
        if record.table:
            ctx.halt(record.schema, record.table, record.commit_ts, record.query, f"cannot parse DDL: {exc}")
        else:
            log.error("cannot parse DDL at %s (%s): %s", record.commit_ts, record.query, exc)
        return None
    applied = False
    deferred = carried_below or deferrable(changes)  # applied ahead of the rows below it (see tables_blocked)
    for group in _group_alters(changes):
        targets = _touched(group[0])
        if any(table_key(s, t) in ctx.halted and ctx.halted[table_key(s, t)] <= record.commit_ts for s, t in targets):
            continue
        try:
            if isinstance(group[0], ALTER_CHANGES):
                applied |= _alter_table(ctx, record, group, deferred)
            else:
                applied |= _apply_change(ctx, record, group[0])
        except CannotApply as exc:
            schema, table = targets[0] if targets else (record.schema, record.table)
            ctx.halt(schema, table, record.commit_ts, record.query, str(exc))
        except Exception as exc:  # noqa: BLE001 - an Iceberg validation error: halt, never crash the run
            schema, table = targets[0] if targets else (record.schema, record.table)
            ctx.halt(schema, table, record.commit_ts, record.query, f"{type(exc).__name__}: {_short(exc)}")
    return changes if applied else None


def _report_applied(ctx: RunContext, record: DDLRecord, changes: Optional[list]) -> None:
    if changes is not None and ctx.report is not None:
        ctx.report.ddls_applied.append(f"{record.commit_ts}: {record.query}")
        for name in _lake_tables(ctx, [touched for change in changes for touched in _touched(change)]):
            if name not in ctx.report.ddl_tables:
                ctx.report.ddl_tables.append(name)


def _lake_tables(ctx: RunContext, touched: list[tuple[str, str]]) -> list[str]:
    """``namespace.table`` of the lake tables a DDL left in place (a dropped or renamed-away table has none)."""
    names = []
    for schema, table in touched:
        namespace, name = ctx.ji.resolve(schema, table)
        if ctx.ji.table_exists(namespace, name):
            names.append(f"{namespace}.{name}")
    return names


#: changes of one existing table's columns: all of one statement commit together, with the watermark
ALTER_CHANGES = (dp.AddColumn, dp.DropColumn, dp.RenameColumn, dp.ModifyColumn, dp.SetDefault, dp.MetadataOnly,
                 dp.Unsupported)


def _group_alters(changes: list) -> list[list]:
    """Consecutive column changes of one table form one group (one ALTER TABLE with several clauses is one
    atomic Iceberg commit at its ts); every other change stands alone."""
    groups: list[list] = []
    for change in changes:
        if (isinstance(change, ALTER_CHANGES) and groups and isinstance(groups[-1][0], ALTER_CHANGES)
                and table_key(change.schema, change.table) == table_key(groups[-1][0].schema, groups[-1][0].table)):
            groups[-1].append(change)
        else:
            groups.append([change])
    return groups


def _short(exc: Exception) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "Exception:" in line:
            return line.strip()[:500]
    return text.strip().splitlines()[0][:500] if text.strip() else type(exc).__name__


def _summary(ctx: RunContext, record: DDLRecord) -> dict[str, str]:
    return ctx.summary(**{RESOLVED_TS_PROPERTY: record.commit_ts, "tidb.ddl": record.query[:2000]})


def _apply_change(ctx: RunContext, record: DDLRecord, change) -> bool:
    ts = record.commit_ts
    ji = ctx.ji
    if isinstance(change, dp.CreateSchema):
        if ji.find_namespace(change.schema) is None:
            ji.create_namespace(change.schema)
        return True
    if isinstance(change, dp.DropSchema):
        for schema, table in _tables_in_schema(ctx, change.schema):
            target = ctx.target(schema, table, refresh=True)
            if target.exists and target.watermark < ts:
                drop_to_graveyard(ctx, target, change.schema, table, ts)
        namespace = ji.find_namespace(change.schema)
        if namespace is not None and not ji.list_tables(namespace):
            ji.drop_namespace(namespace)
        return True
    if isinstance(change, dp.CreateTable):
        return _create(ctx, record, change.table)
    if isinstance(change, dp.CreateTableLike):
        like = ctx.target(change.like_schema, change.like_table, refresh=True)
        if not like.exists:
            raise CannotApply(
                f"CREATE TABLE LIKE: source table {change.like_schema}.{change.like_table} does not exist"
            )
        columns = tuple(ColumnSchema(c.name, _descriptor(c)) for c in like.columns)
        keys = tuple(k.name for k in like.keys) if len(like.keys) < len(like.columns) else ()
        return _create(ctx, record, TableSchema(change.schema, change.table, columns, keys))
    if isinstance(change, dp.RenameTable):
        return _rename(ctx, record, change)
    if isinstance(change, dp.DropTable):
        target = ctx.target(change.schema, change.table, refresh=True)
        if target.exists and target.watermark < ts:
            drop_to_graveyard(ctx, target, change.schema, change.table, ts)
        else:
            ctx.gone[table_key(change.schema, change.table)] = ts
        return True
    if isinstance(change, dp.TruncateTable):
        target = ctx.target(change.schema, change.table, refresh=True)
        if not target.exists:
            if removal_applied(ctx, change.schema, change.table, ts):
                return False
            raise CannotApply(f"table {change.schema}.{change.table} does not exist in the lake")
        if target.watermark >= ts:
            return False
        tx = ji.load(target.namespace, target.name).newTransaction()
        always = ctx.spark._jvm.org.apache.iceberg.expressions.Expressions.alwaysTrue()
        delete = tx.newDelete().deleteFromRowFilter(always)
        for key, value in _summary(ctx, record).items():
            delete = delete.set(key, value)
        delete.commit()
        tx.commitTransaction()
        target.watermark = ts
        return True
    raise CannotApply(f"unhandled change {type(change).__name__}")


def _alter_table(ctx: RunContext, record: DDLRecord, changes: list, deferred: bool) -> bool:
    """All column changes of one statement on one table: one transaction with the watermark snapshot.

    A column added with a default (or NOT NULL, whose implicit default MySQL uses) holds that value in every
    existing upstream row: the lake fills it with an UPDATE that carries the watermark instead, so a crash
    between the schema change and the fill re-runs the fill (the column already exists, the watermark is older).
    """
    ts = record.commit_ts
    first = changes[0]
    target = ctx.target(first.schema, first.table, refresh=True)
    if not target.exists:
        if all(isinstance(c, dp.MetadataOnly) for c in changes) or removal_applied(ctx, first.schema, first.table, ts):
            return False
        target = _predating_table(ctx, first.schema, first.table, ts)
    if target.watermark >= ts:
        return False  # applied before (a rerun, or a DDL replay)
    jtable = ctx.ji.load(target.namespace, target.name)
    summary = _summary(ctx, record)
    if deferred:
        # Applied ahead of the rows below it: its snapshot keeps the table's watermark (those rows are not merged
        # yet) and names the DDL's ts instead, which is how a rerun knows it is applied. Its new columns are
        # NULL in the table until the run's rows are merged (see staged_stats.columns_sent).
        key = table_key(first.schema, first.table)
        added = ctx.added_in_run.setdefault(key, {})
        for change in changes:
            if isinstance(change, dp.AddColumn):
                added[change.column.name.lower()] = ts
            elif isinstance(change, dp.RenameColumn):  # the rows below carry the old name
                renames = ctx.renamed_in_run.setdefault(key, [])
                if (ts, change.old, change.new) not in renames:
                    renames.append((ts, change.old, change.new))
            elif isinstance(change, dp.DropColumn):  # the rows below carry it: not a column to add back
                ctx.dropped_in_run.setdefault(key, set()).add(change.name.lower())
        if _deferred_marker_exists(jtable, ts):
            return False
        summary = {**summary, RESOLVED_TS_PROPERTY: str(target.watermark), DDL_TS_PROPERTY: str(ts)}
    tx = jtable.newTransaction()
    fills: list[tuple[str, str]] = []
    for change in changes:
        fill = _schema_change(ctx, tx, target, change)
        if fill is not None:
            fills.append(fill)
    if not fills:
        ctx.ji.commit_marker(tx, summary)
        tx.commitTransaction()
    else:
        tx.commitTransaction()
        _fill_defaults(ctx, target, fills, summary)
    ctx.target(first.schema, first.table, refresh=True)
    return True


def _predating_table(ctx: RunContext, schema: str, table: str, ts: int):
    """The lake table an ALTER of a table it does not hold yet applies to: one that existed before the
    changefeed (its CREATE TABLE was never in the stream) and whose rows are in this run is created from their
    types first, with its rows below the DDL merged, so the DDL then applies to it (a no-op where the rows
    already typed its effect, e.g. a column they carry). A table with no rows in the run either: nothing in the
    lake to change (its later rows type it as they come), ``CannotApply`` says so."""
    if table_key(schema, table) in ctx.row_stats:
        table_work.flush(ctx, schema, table, ts - 1)
        target = ctx.target(schema, table, refresh=True)
        if target.exists:
            return target
    raise CannotApply(f"table {schema}.{table} does not exist in the lake and has no rows to type it from; create "
                      "it with `lakehouse create-tables`, then `lakehouse resume` it")


def _deferred_marker_exists(jtable, ts: int) -> bool:
    """Whether a deferred DDL at ``ts`` was applied after the table's last merge (walks back to that merge)."""
    snapshot = jtable.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        if summary.get(DDL_TS_PROPERTY) == str(ts):
            return True
        if summary.get(RESOLVED_TS_PROPERTY) and not summary.get(DDL_TS_PROPERTY):
            return False  # the last merge or barrier DDL: nothing deferred after it is this one
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return False


def _fill_defaults(ctx: RunContext, target, fills: list[tuple[str, str]], summary: dict[str, str]) -> None:
    table = qualified(ctx.settings.catalog_name, target.namespace, target.name)
    assignments = ", ".join(f"{quote(c)} = coalesce({quote(c)}, {value})" for c, value in fills)
    condition = " OR ".join(f"{quote(c)} IS NULL" for c, _ in fills)
    statement = f"UPDATE {table} SET {assignments} WHERE {condition}"
    run_with_snapshot_properties(ctx.spark, summary, lambda: ctx.spark.sql(statement))
    jtable = ctx.ji.load(target.namespace, target.name)
    if watermark_of(jtable) < int(summary[RESOLVED_TS_PROPERTY]):
        ctx.ji.commit_marker(jtable, summary)  # nothing to fill (an empty table)


def default_fill(mysql, column) -> Optional[str]:
    """The Spark SQL literal existing rows take for a newly added column (``column_defaults``: exactly what TiDB
    gives them), or None: NULL, or an expression such as CURRENT_TIMESTAMP whose value TiDB computed when the
    DDL ran and no message carries (logged; those rows stay NULL)."""
    try:
        value = existing_row_value(mysql, column.default, column.nullable)
    except UnknownDefault as exc:
        log.warning("column %s: existing rows left NULL: %s", column.name, exc)
        return None
    except ValueError as exc:  # a literal we cannot read: halt the table rather than guess its rows' value
        raise CannotApply(f"column {column.name}: cannot tell the value existing rows take: {exc}") from None
    if value is None:
        return None
    spark_type = iceberg_type(mysql)
    if spark_type == "binary":
        return "X'" + to_bytes(value).hex() + "'"
    if spark_type == "string":
        return sql_string(value)
    return f"CAST({sql_string(value)} AS {spark_type})"


def unknown_default(mysql, column) -> Optional[str]:
    """The expression default (``CURRENT_TIMESTAMP``, ``(uuid())``) of an added column, whose value TiDB computed
    for the existing rows when the DDL ran and no message carries; None for any other default."""
    try:
        existing_row_value(mysql, column.default, column.nullable)
    except UnknownDefault:
        return str(column.default)
    except ValueError:
        return None  # a literal default_fill refuses (the table halts there)
    return None


def _descriptor(column) -> str:
    """A MySQL descriptor for a lake column (its recorded one, else the closest to its Iceberg type)."""
    if column.mysql_type:
        return column.mysql_type
    return {"int": "int", "bigint": "bigint", "string": "text", "binary": "blob"}.get(
        column.spark_type, column.spark_type
    )


def _schema_change(ctx: RunContext, tx, target, change) -> Optional[tuple[str, str]]:
    """One schema change inside the table's transaction; keeps ``target``'s column list in step so later
    clauses of the same statement see earlier ones. Returns (column, SQL literal) to fill existing rows with."""
    ji = ctx.ji
    if isinstance(change, dp.MetadataOnly) or isinstance(change, dp.SetDefault):
        return None  # recorded by the marker snapshot (tidb.ddl), no schema change
    if isinstance(change, dp.Unsupported):
        raise CannotApply(change.reason)
    # an update is opened only for a change that makes one: one left open (a column already there) would fail
    # the transaction's next operation ("last operation has not committed")
    if isinstance(change, dp.AddColumn):
        column = change.column
        mysql = parse_type(column.mysql_type)
        fill = default_fill(mysql, column)
        if target.column(column.name) is not None:
            return (column.name, fill) if fill else None  # already there (a rerun before the fill, or inferred)
        update = tx.updateSchema().caseSensitive(False).addColumn(
            column.name, ji.type_of(iceberg_type(mysql)), column_doc(mysql, column.comment))
        if change.first:
            update = update.moveFirst(column.name)
        elif change.after:
            update = update.moveAfter(column.name, change.after)
        update.commit()
        target.columns.append(TargetColumn(column.name, iceberg_type(mysql), mysql.descriptor()))
        expression = unknown_default(mysql, column)
        if expression is not None:  # said where a user looks (lakehouse status), not only in the run's log
            tx.updateProperties().set(UNKNOWN_DEFAULT_PROPERTY + column.name, expression).commit()
        return (column.name, fill) if fill else None
    elif isinstance(change, dp.DropColumn):
        existing = target.column(change.name)
        if existing is None:
            return None
        if existing in target.keys and len(target.keys) < len(target.columns):
            raise CannotApply(f"cannot drop primary-key column {change.name!r} (an Iceberg identifier field)")
        update = tx.updateSchema().caseSensitive(False).deleteColumn(existing.name)
        target.columns.remove(existing)
    elif isinstance(change, dp.RenameColumn):
        existing = target.column(change.old)
        if existing is None:
            if target.column(change.new) is not None:
                return None
            raise CannotApply(f"column {change.old!r} does not exist")
        update = tx.updateSchema().caseSensitive(False).renameColumn(existing.name, change.new)
        index = target.columns.index(existing)
        target.columns[index] = TargetColumn(change.new, existing.spark_type, existing.mysql_type)
    elif isinstance(change, dp.ModifyColumn):
        existing = target.column(change.name)
        if existing is None:
            raise CannotApply(f"column {change.name!r} does not exist")
        new_type = parse_type(change.column.mysql_type)
        old_type = parse_type(existing.mysql_type) if existing.mysql_type else None
        old_spark = existing.spark_type
        new_spark = iceberg_type(new_type)
        verdict = (widening(old_type, new_type) if old_type is not None
                   else ("same" if old_spark == new_spark else "unsupported"))
        if verdict == "unsupported" and old_spark != new_spark:
            raise CannotApply(
                f"MODIFY COLUMN {change.name}: {existing.mysql_type or old_spark} -> {change.column.mysql_type} "
                f"({old_spark} -> {new_spark}) is not a type change Iceberg allows; resolve it (e.g. recreate the "
                "table), then `lakehouse resume` the table"
            )
        update = tx.updateSchema().caseSensitive(False)
        if new_spark != old_spark:
            update = update.updateColumn(existing.name, ji.type_of(new_spark))
        update = update.updateColumnDoc(existing.name, column_doc(new_type, change.column.comment))
        if change.column.name and change.column.name != existing.name:
            update = update.renameColumn(existing.name, change.column.name)
        index = target.columns.index(existing)
        target.columns[index] = TargetColumn(change.column.name or existing.name, new_spark, new_type.descriptor())
    else:
        raise CannotApply(f"unhandled schema change {type(change).__name__}")
    update.commit()
    return None


def _create(ctx: RunContext, record: DDLRecord, table_schema) -> bool:
    target = ctx.target(table_schema.schema, table_schema.table, refresh=True)
    if not target.exists and removal_applied(ctx, table_schema.schema, table_schema.table, record.commit_ts):
        return False  # created, then dropped or renamed away, before (a rerun re-reads the whole sequence)
    if target.exists:
        if target.watermark >= record.commit_ts:
            return False
        # Upstream created it fresh at this ts: what we hold is older (e.g. inferred from rows): replace it.
        ctx.ji.drop_table(target.namespace, target.name)
    table_work.create(ctx, table_schema, record.commit_ts, _summary(ctx, record))
    return True


def _rename(ctx: RunContext, record: DDLRecord, change) -> bool:
    ts = record.commit_ts
    old = ctx.target(change.old_schema, change.old_table, refresh=True)
    new = ctx.target(change.new_schema, change.new_table, refresh=True)
    if new.exists and new.watermark >= ts:
        ctx.gone[table_key(change.old_schema, change.old_table)] = ts
        return False
    if old.exists and old.watermark < ts:
        if new.exists:
            raise CannotApply(f"RENAME: target {change.new_schema}.{change.new_table} already exists in the lake")
        namespace = ctx.ji.find_namespace(change.new_schema) or change.new_schema
        ctx.ji.create_namespace(namespace)
        ctx.ji.rename_table(old.namespace, old.name, namespace, change.new_table)
    elif not new.exists:
        if removal_applied(ctx, change.new_schema, change.new_table, ts):
            ctx.gone[table_key(change.old_schema, change.old_table)] = ts
            return False
        raise CannotApply(f"RENAME: source {change.old_schema}.{change.old_table} does not exist in the lake")
    ctx.forget(change.old_schema, change.old_table)
    ctx.gone[table_key(change.old_schema, change.old_table)] = ts
    renamed = ctx.target(change.new_schema, change.new_table, refresh=True)
    jtable = ctx.ji.load(renamed.namespace, renamed.name)
    tx = jtable.newTransaction()
    props = tx.updateProperties().set("tidb.upstream-name", f"{change.new_schema}.{change.new_table}")
    props.commit()
    ctx.ji.commit_marker(tx, _summary(ctx, record))
    tx.commitTransaction()
    ctx.target(change.new_schema, change.new_table, refresh=True)
    return True


def apply_bootstrap(ctx: RunContext, record: DDLRecord) -> None:
    """Simple's BOOTSTRAP: create a missing table from the schema (never alters an existing one)."""
    table_schema = record.table_schema
    if table_schema is None:
        return
    target = ctx.target(table_schema.schema, table_schema.table)
    if target.exists:
        return
    table_work.create(ctx, table_schema, 0, ctx.summary(**{CREATED_FROM_PROPERTY: "bootstrap"}))


def apply_resolutions(ctx: RunContext, resolutions: Iterable[HaltedTable]) -> None:
    """Operator decisions on halted tables: ``skip`` marks the DDL as applied (the operator changed the table
    by hand), ``retry`` simply lets the run apply it again."""
    for halt in resolutions:
        if halt.resolution != "skip":
            continue
        target = ctx.target(halt.schema, halt.table, refresh=True)
        if target.exists and target.watermark < halt.ddl_ts:
            jtable = ctx.ji.load(target.namespace, target.name)
            ctx.ji.commit_marker(
                jtable, ctx.summary(**{RESOLVED_TS_PROPERTY: halt.ddl_ts, "tidb.ddl-skipped": halt.query[:2000]})
            )
            ctx.target(halt.schema, halt.table, refresh=True)


__all__ = ["apply_creates", "apply_ddl", "apply_bootstrap", "apply_resolutions", "carried", "independent_creates",
           "tables_blocked"]
