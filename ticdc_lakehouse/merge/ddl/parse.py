"""Turn a TiDB DDL statement into the schema changes the merge engine applies to Iceberg.

TiCDC forwards DDL as SQL text (plus a type code). Only some protocols also send the table's columns (Simple's
``tableSchema``); for the others the statement is all there is. :func:`parse_ddl` reads it with sqlglot's MySQL
dialect and returns plain :data:`SchemaChange` values, one per effect, in statement order. It decides nothing
about Iceberg: whether a type change is allowed is ``mysql_types.widening``'s call, done by the merge engine.

Decisions worth knowing:

* **Names are kept exactly as written** (case, spaces, unicode; backtick quoting removed, ````` un-doubled).
  TiDB compares table names case-insensitively by default (``lower_case_table_names=2`` behaviour) and column
  names always case-insensitively, so a consumer must look tables and columns up case-insensitively; a CHANGE
  COLUMN that only changes case is reported as a rename, because it is one for Iceberg.
* Unqualified table names resolve to ``default_schema``: pass the schema TiCDC reports for the event (the
  session's current database is not in the stream).
* Column types are the normalized descriptors of ``mysql_types`` with SQL's defaults for bare types
  (``DECIMAL`` -> ``decimal(10,0)``, ``BIT`` -> ``bit(1)``). Primary-key columns are NOT NULL, as in MySQL.
* Without a primary key, ``TableSchema.primary_key`` is the handle TiCDC picks (tiflow ``findHandleIndex``):
  among UNIQUE keys whose columns are all NOT NULL, the one with the fewest columns, the earliest declared on a
  tie (table-level keys are declared before column-level ``UNIQUE`` attributes, as TiDB numbers them).
* Virtual generated columns are left out: TiCDC never sends their values. Stored ones are ordinary columns.
* Defaults: None for no default or ``DEFAULT NULL``; a string or number literal as its value text (``'a''b'`` ->
  ``a'b``, ``-1``, ``1.50``); TRUE/FALSE as ``1``/``0``; ``CURRENT_TIMESTAMP``/``NOW()`` as
  ``CURRENT_TIMESTAMP[(fsp)]``; anything else (``b'101'``, ``(uuid())``) as its SQL text.
* Statements that change rows without row events (``TRUNCATE``/``DROP``/``EXCHANGE PARTITION``, ``RECOVER`` and
  ``FLASHBACK TABLE``) are :class:`Unsupported`, never silently metadata-only.

sqlglot does not know a few TiDB/MySQL forms. They are handled in narrow, commented places, never by a SQL parser
of our own: a dialect subclass that fixes type aliases sqlglot maps wrongly (``INT8``, ``REAL``, ``LONG``,
``FLOAT UNSIGNED``); a token-level removal of words that carry no schema (``CLUSTERED``, ``AUTO_RANDOM(n)``,
``COLUMN_FORMAT``/``STORAGE``); a CREATE TABLE retried without its table options (``PARTITION BY ... (...)``,
``TTL = ...``); and small regexes that only *classify* statements sqlglot turns into an opaque ``Command`` or
rejects (RENAME TABLE, partition/TiFlash/TTL/placement clauses, RECOVER/FLASHBACK, and ``ADD COLUMN (a int, b
int)``, whose column list is then parsed by sqlglot again).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from dataclasses import dataclass
from typing import Iterable, Optional, Union

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from ticdc_lakehouse.core import mysql_types
from ticdc_lakehouse.core.model import ColumnSchema, TableSchema

# ---------------------------------------------------------------------------------------------------------------
# Schema changes
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableChange:
    """What every change to one table carries: the table's name (``table`` may be empty for a
    :class:`MetadataOnly` or :class:`Unsupported` statement on a whole database). The subclasses add their fields
    after these two, so positional construction is ``Kind(schema, table, ...)``."""

    schema: str
    table: str


@dataclass(frozen=True, slots=True)
class CreateSchema:
    schema: str


@dataclass(frozen=True, slots=True)
class DropSchema:
    schema: str


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableSchema
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateTableLike(TableChange):
    like_schema: str
    like_table: str


@dataclass(frozen=True, slots=True)
class DropTable(TableChange):
    """DROP TABLE: the table is moved aside, its data kept for older cuts."""


@dataclass(frozen=True, slots=True)
class TruncateTable(TableChange):
    """TRUNCATE TABLE: every row goes, without row events."""


@dataclass(frozen=True, slots=True)
class RenameTable:
    old_schema: str
    old_table: str
    new_schema: str
    new_table: str


@dataclass(frozen=True, slots=True)
class AddColumn(TableChange):
    column: ColumnSchema
    after: Optional[str] = None
    first: bool = False


@dataclass(frozen=True, slots=True)
class DropColumn(TableChange):
    name: str


@dataclass(frozen=True, slots=True)
class RenameColumn(TableChange):
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ModifyColumn(TableChange):
    """MODIFY / CHANGE: the column's full new definition (MySQL restates type, nullability, default, comment).

    ``after``/``first`` carry a position clause (``MODIFY c int AFTER b``), a move of the column.
    """

    name: str
    column: ColumnSchema
    after: Optional[str] = None
    first: bool = False


@dataclass(frozen=True, slots=True)
class SetDefault(TableChange):
    column: str
    default: Optional[str]


@dataclass(frozen=True, slots=True)
class MetadataOnly(TableChange):
    """A statement with no effect on the Iceberg schema or rows (indexes, table options, TiFlash, views...).

    ``statement_kind`` is one of: ``ADD_INDEX``, ``DROP_INDEX``, ``ALTER_INDEX``, ``RENAME_INDEX``,
    ``ADD_PRIMARY_KEY``, ``DROP_PRIMARY_KEY`` (the row events' key columns change; the merge engine may want to
    look), ``ADD_FOREIGN_KEY``, ``DROP_FOREIGN_KEY``, ``ADD_CHECK``, ``DROP_CONSTRAINT``, ``TABLE_OPTION``,
    ``TABLE_CHARSET``, ``TABLE_COMMENT``, ``AUTO_INCREMENT``, ``CACHE``, ``PARTITION`` (only the partitioning
    changes that keep rows), ``SET_TIFLASH_REPLICA``, ``PLACEMENT_POLICY``, ``RESOURCE_GROUP``, ``TTL``,
    ``COLUMN_VISIBILITY``, ``ADD_VIRTUAL_COLUMN``/``MODIFY_VIRTUAL_COLUMN`` (never replicated),
    ``CREATE_TEMPORARY_TABLE``/``DROP_TEMPORARY_TABLE``, ``CREATE_VIEW``/``DROP_VIEW``/``ALTER_VIEW``,
    ``CREATE_SEQUENCE``/``DROP_SEQUENCE``, ``VIEW``/``SEQUENCE`` (statements only classified by the fallback),
    ``ALTER_DATABASE``, or the protocol's ``ddl_type`` for unreadable index DDL. ``table`` is empty for
    statements on a database or the cluster.
    """

    statement_kind: str


@dataclass(frozen=True, slots=True)
class Unsupported(TableChange):
    """A statement (or clause) that cannot be mapped; the merge engine must surface it, not ignore it."""

    reason: str


SchemaChange = Union[
    CreateSchema,
    DropSchema,
    CreateTable,
    CreateTableLike,
    DropTable,
    TruncateTable,
    RenameTable,
    AddColumn,
    DropColumn,
    RenameColumn,
    ModifyColumn,
    SetDefault,
    MetadataOnly,
    Unsupported,
]

#: ddl_type values (preamble list) whose statements never touch the Iceberg schema, used when SQL is unreadable.
_METADATA_DDL_TYPES = {"ADD_INDEX", "DROP_INDEX"}


class _Unmappable(Exception):
    """Raised inside the mapping when a statement part has no schema-change equivalent."""


# ---------------------------------------------------------------------------------------------------------------
# sqlglot dialect: MySQL with TiDB's type aliases right
# ---------------------------------------------------------------------------------------------------------------


class _TiCDCLakehouseMySQL(MySQL):
    """sqlglot's MySQL dialect with the MySQL meanings of type aliases sqlglot maps to other databases' types.

    sqlglot reads ``INT8`` as TINYINT, ``REAL`` as FLOAT and ``LONG`` as BIGINT; in MySQL they are BIGINT,
    DOUBLE and MEDIUMTEXT. It also rejects ``INT3``, ``MIDDLEINT``, ``NATIONAL CHAR``, ``LONG VARCHAR`` and
    ``FLOAT UNSIGNED``. (FLOAT UNSIGNED is read as FLOAT: the deprecated flag does not change stored values.)
    """

    class Tokenizer(MySQL.Tokenizer):
        KEYWORDS = {
            **MySQL.Tokenizer.KEYWORDS,
            "INT8": TokenType.BIGINT,
            "INT3": TokenType.MEDIUMINT,
            "MIDDLEINT": TokenType.MEDIUMINT,
            "REAL": TokenType.DOUBLE,
            "LONG": TokenType.MEDIUMTEXT,
            "LONG VARCHAR": TokenType.MEDIUMTEXT,
            "LONG VARBINARY": TokenType.MEDIUMBLOB,
            "NATIONAL CHAR": TokenType.NCHAR,
            "NATIONAL CHARACTER": TokenType.NCHAR,
            "NATIONAL VARCHAR": TokenType.NVARCHAR,
            "NCHAR VARCHAR": TokenType.NVARCHAR,
        }

    class Parser(MySQL.Parser):
        SIGNED_TO_UNSIGNED_TYPE_TOKEN = {
            **MySQL.Parser.SIGNED_TO_UNSIGNED_TYPE_TOKEN,
            TokenType.FLOAT: TokenType.FLOAT,
        }


_DIALECT = _TiCDCLakehouseMySQL()

# sqlglot DataType name -> (mysql_types name, unsigned)
_DTYPES: dict[str, tuple[str, bool]] = {
    "TINYINT": ("tinyint", False),
    "UTINYINT": ("tinyint", True),
    "SMALLINT": ("smallint", False),
    "USMALLINT": ("smallint", True),
    "MEDIUMINT": ("mediumint", False),
    "UMEDIUMINT": ("mediumint", True),
    "INT": ("int", False),
    "UINT": ("int", True),
    "BIGINT": ("bigint", False),
    "UBIGINT": ("bigint", True),
    "BOOLEAN": ("tinyint", False),
    "SERIAL": ("bigint", True),
    "FLOAT": ("float", False),
    "DOUBLE": ("double", False),
    "UDOUBLE": ("double", True),
    "DECIMAL": ("decimal", False),
    "UDECIMAL": ("decimal", True),
    "DATE": ("date", False),
    "DATETIME": ("datetime", False),
    "TIMESTAMP": ("timestamp", False),
    "TIMESTAMPTZ": ("timestamp", False),  # sqlglot's name for MySQL TIMESTAMP
    "TIMESTAMPLTZ": ("timestamp", False),
    "TIME": ("time", False),
    "YEAR": ("year", False),
    "CHAR": ("char", False),
    "NCHAR": ("char", False),
    "VARCHAR": ("varchar", False),
    "NVARCHAR": ("varchar", False),
    "BINARY": ("binary", False),
    "VARBINARY": ("varbinary", False),
    "TINYTEXT": ("tinytext", False),
    "TEXT": ("text", False),
    "MEDIUMTEXT": ("mediumtext", False),
    "LONGTEXT": ("longtext", False),
    "TINYBLOB": ("tinyblob", False),
    "BLOB": ("blob", False),
    "MEDIUMBLOB": ("mediumblob", False),
    "LONGBLOB": ("longblob", False),
    "JSON": ("json", False),
    "ENUM": ("enum", False),
    "SET": ("set", False),
    "BIT": ("bit", False),
    "VECTOR": ("vector", False),
}


# ---------------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------------


def parse_ddl(query: str, default_schema: str, ddl_type: Optional[str] = None) -> list[SchemaChange]:
    """The schema changes of ``query`` (one or more statements), in order.

    ``default_schema`` qualifies unqualified names; ``ddl_type`` (the normalized type the protocol reported) is
    only consulted when the SQL cannot be read at all. Never raises for bad SQL: what cannot be mapped becomes
    :class:`Unsupported` with the reason. An empty query yields no change.
    """
    try:
        statements = _split_statements(query)
    except TokenError as exc:
        return [Unsupported(default_schema, "", f"cannot tokenize DDL: {exc}")]
    changes: list[SchemaChange] = []
    current_schema = default_schema
    for sql in statements:
        use = _use_statement(sql)
        if use is not None:
            current_schema = use
            continue
        changes.extend(_statement(sql, current_schema, ddl_type))
    return changes


def _statement(sql: str, schema: str, ddl_type: Optional[str]) -> list[SchemaChange]:
    cleaned = _strip_tidb_only_words(sql)
    if _RENAME_TABLE.match(cleaned):  # sqlglot only has RENAME TABLE as an opaque Command
        return _rename_tables(cleaned, schema)
    tree = _parse_one(cleaned)
    if tree is None or isinstance(tree, exp.Command):
        return _fallback(cleaned, schema, ddl_type)
    try:
        return _map_tree(tree, schema)
    except _Unmappable as exc:
        return [Unsupported(schema, _table_hint(tree), str(exc))]


class _QuietCommandFallback(logging.Filter):
    """Drop sqlglot's "Falling back to parsing as a 'Command'" warning, only while this module is parsing.

    For us a Command is an expected outcome that :func:`_fallback` classifies; the warning would be one log line
    per partition or TiFlash statement in the merge job. A thread-local flag leaves other sqlglot users alone.
    """

    active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.active, "on", False)


logging.getLogger("sqlglot").addFilter(_QuietCommandFallback())


def _parse_one(sql: str) -> Optional[exp.Expression]:
    _QuietCommandFallback.active.on = True
    try:
        trees = [t for t in _DIALECT.parse(sql) if t is not None]
    except (ParseError, TokenError):
        return None
    finally:
        _QuietCommandFallback.active.on = False
    return trees[0] if len(trees) == 1 else None


# ---------------------------------------------------------------------------------------------------------------
# Tokens: statement splitting and TiDB-only words
# ---------------------------------------------------------------------------------------------------------------


def _split_statements(query: str) -> list[str]:
    """Split on top-level semicolons using sqlglot's tokenizer (semicolons inside quotes are not separators)."""
    tokens = _DIALECT.tokenize(query)
    statements: list[str] = []
    start = 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            statements.append(query[start : tok.start])
            start = tok.end + 1
    statements.append(query[start:])
    return [s.strip() for s in statements if _has_code(s)]


def _has_code(sql: str) -> bool:
    try:
        return bool(_DIALECT.tokenize(sql))
    except TokenError:
        return True


_ATTRIBUTE_PREDECESSORS = {TokenType.R_PAREN, TokenType.NULL, TokenType.PRIMARY_KEY, TokenType.NUMBER,
                           TokenType.STRING, *_TiCDCLakehouseMySQL.Parser.TYPE_TOKENS}
_ATTRIBUTE_WORDS = {"UNSIGNED", "SIGNED", "ZEROFILL", "AUTO_INCREMENT", "KEY", "UNIQUE", "CLUSTERED", "NONCLUSTERED"}


def _in_column_attributes(prev: Optional[Token]) -> bool:
    """True when the previous token ends a column type or attribute, so the next word is an attribute too.

    A whitelist, so that a table or column *named* ``storage`` or ``auto_random`` (after TABLE, ``(``, ``,``,
    ADD, ...) is never touched.
    """
    if prev is None:
        return False
    return prev.token_type in _ATTRIBUTE_PREDECESSORS or prev.text.upper() in _ATTRIBUTE_WORDS


def _strip_tidb_only_words(sql: str) -> str:
    """Blank out TiDB/MySQL words sqlglot cannot parse and that carry no schema information.

    ``CLUSTERED``/``NONCLUSTERED`` after a primary key, ``AUTO_RANDOM[(n[, m])]``, ``COLUMN_FORMAT x`` and
    ``STORAGE x`` in a column definition. (TiDB's SHOW CREATE TABLE puts the TiDB ones in ``/*T![...] */``
    comments, which sqlglot already skips; users write them bare.) Done on sqlglot tokens, so identifiers and
    strings containing these words are untouched, and a column *named* ``storage`` stays.
    """
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError:
        return sql
    spans: list[tuple[int, int]] = []
    prev: Optional[Token] = None  # the last token that stays
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        word = tok.text.upper() if tok.token_type == TokenType.VAR else None
        if word in ("CLUSTERED", "NONCLUSTERED") and prev is not None and (
            prev.token_type == TokenType.R_PAREN or prev.text.upper().endswith("KEY")
        ):
            spans.append((tok.start, tok.end))
        elif word == "AUTO_RANDOM" and _in_column_attributes(prev):
            end = tok.end
            if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
                j = i + 1
                while j < len(tokens) and tokens[j].token_type != TokenType.R_PAREN:
                    j += 1
                if j < len(tokens):
                    end = tokens[j].end
                    i = j
            spans.append((tok.start, end))
        elif word in ("COLUMN_FORMAT", "STORAGE") and _in_column_attributes(prev) and i + 1 < len(tokens):
            spans.append((tok.start, tokens[i + 1].end))
            i += 1
        else:
            prev = tok
        i += 1
    for start, end in reversed(spans):
        sql = sql[:start] + " " + sql[end + 1 :]
    return sql


def _use_statement(sql: str) -> Optional[str]:
    if not re.match(r"\s*USE\b", sql, re.IGNORECASE):
        return None
    tree = _parse_one(sql)
    if isinstance(tree, exp.Use) and isinstance(tree.this, exp.Table):
        return _ident(tree.this.this)
    return None


# ---------------------------------------------------------------------------------------------------------------
# Mapping sqlglot trees
# ---------------------------------------------------------------------------------------------------------------


def _map_tree(tree: exp.Expression, schema: str) -> list[SchemaChange]:
    if isinstance(tree, exp.Create):
        return _create(tree, schema)
    if isinstance(tree, exp.Drop):
        return _drop(tree, schema)
    if isinstance(tree, exp.Alter):
        return _alter(tree, schema)
    if isinstance(tree, exp.TruncateTable):
        if tree.args.get("is_database"):
            raise _Unmappable("TRUNCATE DATABASE is not a TiDB statement")
        return [TruncateTable(*_table_name(t, schema)) for t in tree.expressions]
    raise _Unmappable(f"not a DDL statement: {type(tree).__name__}")


def _create(tree: exp.Create, schema: str) -> list[SchemaChange]:
    kind = (tree.args.get("kind") or "").upper()
    target = tree.this
    if kind in ("DATABASE", "SCHEMA"):
        return [CreateSchema(_schema_name(target))]
    if kind == "TABLE":
        return _create_table(tree, schema)
    if kind == "INDEX":
        index = target
        table = index.args.get("table") if isinstance(index, exp.Index) else None
        if not isinstance(table, exp.Table):
            raise _Unmappable("CREATE INDEX without a table")
        return [MetadataOnly(*_table_name(table, schema), "ADD_INDEX")]
    if kind in ("VIEW", "SEQUENCE"):
        table = target.this if isinstance(target, exp.Schema) else target
        return [MetadataOnly(*_table_name(table, schema), f"CREATE_{kind}")]
    raise _Unmappable(f"CREATE {kind or '?'} is not supported")


def _drop(tree: exp.Drop, schema: str) -> list[SchemaChange]:
    kind = (tree.args.get("kind") or "").upper()
    tables = tree.args.get("tables") or []
    if kind in ("DATABASE", "SCHEMA"):
        return [DropSchema(_schema_name(t)) for t in tables]
    if kind == "TABLE" and tree.args.get("temporary"):
        return [MetadataOnly(*_table_name(t, schema), "DROP_TEMPORARY_TABLE") for t in tables]
    if kind == "TABLE":
        return [DropTable(*_table_name(t, schema)) for t in tables]
    if kind in ("VIEW", "SEQUENCE"):
        return [MetadataOnly(*_table_name(t, schema), f"DROP_{kind}") for t in tables]
    if kind == "INDEX":
        on = tree.args.get("cluster")
        if isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table):
            return [MetadataOnly(*_table_name(on.this, schema), "DROP_INDEX")]
        raise _Unmappable("DROP INDEX without ON <table>")
    raise _Unmappable(f"DROP {kind or '?'} is not supported")


def _create_table(tree: exp.Create, schema: str) -> list[SchemaChange]:
    target = tree.this
    table_expr = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table_expr, exp.Table):
        raise _Unmappable("CREATE TABLE without a table name")
    db, name = _table_name(table_expr, schema)
    props = tree.args.get("properties")
    prop_list = list(props.expressions) if props else []
    like_nodes = [p for p in prop_list if isinstance(p, exp.LikeProperty)]
    if isinstance(target, exp.Schema):
        like_nodes += [e for e in target.expressions if isinstance(e, exp.LikeProperty)]
    if like_nodes:
        like = like_nodes[0].this
        if not isinstance(like, exp.Table):
            raise _Unmappable("CREATE TABLE ... LIKE without a table")
        return [CreateTableLike(db, name, *_table_name(like, schema))]
    if tree.args.get("expression") is not None:
        return [Unsupported(db, name, "CREATE TABLE ... SELECT: TiDB does not replicate its rows as row events")]
    if any(isinstance(p, exp.TemporaryProperty) for p in prop_list):
        return [MetadataOnly(db, name, "CREATE_TEMPORARY_TABLE")]  # TiCDC replicates no temporary-table rows
    if not isinstance(target, exp.Schema):
        raise _Unmappable("CREATE TABLE without a column list")
    table = _table_schema(db, name, target.expressions)
    return [CreateTable(table, if_not_exists=bool(tree.args.get("exists")))]


@dataclass(frozen=True)
class _Col:
    """A parsed column definition with the attributes that decide the key and whether TiCDC sends it."""

    column: ColumnSchema
    primary: bool = False
    unique: bool = False
    virtual: bool = False


def _table_schema(db: str, name: str, elements: Iterable[exp.Expression]) -> TableSchema:
    cols: list[_Col] = []
    table_pk: Optional[list[str]] = None
    table_uniques: list[Optional[list[str]]] = []
    for element in elements:
        node = element
        if isinstance(node, exp.Constraint):  # CONSTRAINT name PRIMARY KEY / UNIQUE ...
            inner = node.expressions
            node = inner[0] if len(inner) == 1 else node
        if isinstance(node, exp.ColumnDef):
            if node.args.get("kind") is None:
                if node.find(exp.IndexColumnConstraint):
                    continue  # "VECTOR INDEX idx ((...))": sqlglot reads the index as a kind-less column
                raise _Unmappable(f"column {_ident(node.this)!r} has no type")
            cols.append(_column(node))
        elif isinstance(node, exp.PrimaryKey):
            table_pk = _key_columns(node.expressions)
        elif isinstance(node, exp.UniqueColumnConstraint):
            key = node.this
            table_uniques.append(_key_columns(key.expressions) if isinstance(key, exp.Schema) else None)
        # KEY/INDEX/FULLTEXT, FOREIGN KEY, CHECK: no schema effect

    by_lower = {c.column.name.lower(): i for i, c in enumerate(cols)}

    def resolve(names: Optional[list[str]]) -> Optional[list[int]]:
        if names is None:
            return None
        idx = [by_lower.get(n.lower()) for n in names]
        return None if any(i is None for i in idx) else [i for i in idx if i is not None]

    pk_idx: Optional[list[int]] = None
    if table_pk is not None:
        pk_idx = resolve(table_pk)
        if pk_idx is None:
            raise _Unmappable(f"PRIMARY KEY names a column that is not in the table: {table_pk}")
    else:
        column_pk = [i for i, c in enumerate(cols) if c.primary]
        pk_idx = column_pk or None
    if pk_idx:
        for i in pk_idx:
            cols[i] = dataclasses.replace(cols[i], column=dataclasses.replace(cols[i].column, nullable=False))
    else:
        candidates = [resolve(u) for u in table_uniques] + [[i] for i, c in enumerate(cols) if c.unique]
        best: Optional[list[int]] = None
        for cand in candidates:
            if not cand or any(cols[i].virtual or cols[i].column.nullable for i in cand):
                continue
            if best is None or len(cand) < len(best):
                best = cand
        pk_idx = best

    visible = tuple(c.column for c in cols if not c.virtual)
    key = tuple(cols[i].column.name for i in pk_idx or [])
    return TableSchema(schema=db, table=name, columns=visible, primary_key=key)


def _key_columns(parts: Iterable[exp.Expression]) -> Optional[list[str]]:
    """Column names of a key; None when a part is an expression (functional index), which cannot be a handle."""
    names: list[str] = []
    for part in parts:
        node = part.this if isinstance(part, (exp.Ordered, exp.ColumnPrefix)) else part
        if isinstance(node, exp.Column) and not node.table:
            node = node.this
        if not isinstance(node, exp.Identifier):
            return None
        names.append(node.this)
    return names


def _column(cd: exp.ColumnDef) -> _Col:
    name = _ident(cd.this)
    dt = cd.args.get("kind")
    if not isinstance(dt, exp.DataType):
        raise _Unmappable(f"column {name!r} has no type")
    nullable = True
    primary = unique = virtual = False
    default: Optional[str] = None
    comment: Optional[str] = None
    charset: Optional[str] = None
    zerofill = False
    for constraint in cd.constraints:
        kind = constraint.kind if isinstance(constraint, exp.ColumnConstraint) else constraint
        if isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            primary = True
        elif isinstance(kind, exp.UniqueColumnConstraint):
            unique = True
        elif isinstance(kind, exp.DefaultColumnConstraint):
            default = _default_text(kind.this)
        elif isinstance(kind, exp.CommentColumnConstraint):
            comment = _string_value(kind.this)
        elif isinstance(kind, exp.CharacterSetColumnConstraint):
            charset = kind.this.name if isinstance(kind.this, exp.Expression) else str(kind.this)
        elif isinstance(kind, exp.ZeroFillColumnConstraint):
            zerofill = True
        elif isinstance(kind, exp.ComputedColumnConstraint):
            virtual = not kind.args.get("persisted")
    mysql_type = _mysql_type(name, dt, charset=charset, unsigned=zerofill)
    if dt.this.name == "SERIAL":  # SERIAL = BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
        nullable, unique = False, True
    column = ColumnSchema(
        name=name, mysql_type=mysql_type, nullable=nullable and not primary, default=default, comment=comment
    )
    return _Col(column, primary=primary, unique=unique, virtual=virtual)


def _mysql_type(column: str, dt: exp.DataType, *, charset: Optional[str], unsigned: bool) -> str:
    try:
        name, dtype_unsigned = _DTYPES[dt.this.name]
    except KeyError:
        raise _Unmappable(f"column {column!r}: type {dt.sql(dialect=_DIALECT)} is not a TiDB type") from None
    params: list[int] = []
    elements: list[str] = []
    for arg in dt.expressions:
        value = arg.this if isinstance(arg, exp.DataTypeParam) else arg
        if isinstance(value, exp.Literal) and value.is_string:
            elements.append(value.this)
        elif isinstance(value, exp.Literal) and value.this.isdigit():
            params.append(int(value.this))
        else:
            raise _Unmappable(f"column {column!r}: cannot read type parameter {arg.sql(dialect=_DIALECT)}")
    try:
        t = mysql_types.make_type(
            name,
            unsigned=unsigned or dtype_unsigned,
            params=params,
            elements=elements,
            charset=charset,
            sql_defaults=True,
        )
    except ValueError as exc:
        raise _Unmappable(f"column {column!r}: {exc}") from None
    return t.descriptor()


_NOW_FUNCTIONS = {"NOW", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"}


def _default_text(node: exp.Expression) -> Optional[str]:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Introducer) and isinstance(node.expression, exp.Literal):
        return node.expression.this  # _utf8mb4'abc', as TiDB restores string defaults
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + node.this.this
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, (exp.CurrentTimestamp, exp.Localtimestamp, exp.Localtime)) or (
        isinstance(node, exp.Anonymous) and str(node.this).upper() in _NOW_FUNCTIONS
    ):
        args = [a for a in node.args.values() if isinstance(a, exp.Literal)]
        if isinstance(node, exp.Anonymous):
            args = [a for a in node.expressions if isinstance(a, exp.Literal)]
        return "CURRENT_TIMESTAMP" + (f"({args[0].this})" if args and args[0].this != "0" else "")
    return node.sql(dialect=_DIALECT)


def _string_value(node: exp.Expression) -> str:
    return node.this if isinstance(node, exp.Literal) else node.sql(dialect=_DIALECT)


# ---------------------------------------------------------------------------------------------------------------
# ALTER TABLE
# ---------------------------------------------------------------------------------------------------------------

_TABLE_OPTION_KINDS: dict[type, str] = {
    exp.CharacterSetProperty: "TABLE_CHARSET",
    exp.CollateProperty: "TABLE_CHARSET",
    exp.AutoIncrementProperty: "AUTO_INCREMENT",
    exp.SchemaCommentProperty: "TABLE_COMMENT",
    exp.SequenceProperties: "CACHE",
}
_CLAUSE_MODIFIERS = (exp.AlgorithmProperty, exp.LockProperty)  # ALGORITHM=..., LOCK=...: how, not what


def _alter(tree: exp.Alter, schema: str) -> list[SchemaChange]:
    kind = (tree.args.get("kind") or "").upper()
    if kind != "TABLE":
        target = tree.this
        return [MetadataOnly(*_table_name(target, schema), f"ALTER_{kind or 'OTHER'}")]
    db, table = _table_name(tree.this, schema)
    changes: list[SchemaChange] = []
    for action in tree.args.get("actions") or []:
        changes.extend(_alter_action(action, db, table, schema))
    for option in tree.args.get("options") or []:
        if isinstance(option, _CLAUSE_MODIFIERS):
            continue
        changes.append(MetadataOnly(db, table, _TABLE_OPTION_KINDS.get(type(option), "TABLE_OPTION")))
    if not changes:
        changes.append(MetadataOnly(db, table, "TABLE_OPTION"))
    return changes


def _position(cd: exp.ColumnDef) -> tuple[Optional[str], bool]:
    pos = cd.args.get("position")
    if not isinstance(pos, exp.ColumnPosition):
        return None, False
    where = str(pos.args.get("position") or "").upper()
    if where == "FIRST":
        return None, True
    ref = pos.this
    return (_ident(ref.this if isinstance(ref, exp.Column) else ref), False) if ref is not None else (None, False)


def _alter_action(action: exp.Expression, db: str, table: str, default_schema: str) -> list[SchemaChange]:
    """One ALTER TABLE clause on ``db``.``table``; ``default_schema`` qualifies an unqualified RENAME target."""
    if isinstance(action, exp.ColumnDef):
        if action.args.get("kind") is None and action.find(exp.IndexColumnConstraint):
            return [MetadataOnly(db, table, "ADD_INDEX")]  # ADD VECTOR INDEX, read by sqlglot as a column
        col = _column(action)
        if col.virtual:
            return [MetadataOnly(db, table, "ADD_VIRTUAL_COLUMN")]
        after, first = _position(action)
        out: list[SchemaChange] = [AddColumn(db, table, col.column, after=after, first=first)]
        if col.primary:
            out.append(MetadataOnly(db, table, "ADD_PRIMARY_KEY"))
        elif col.unique:
            out.append(MetadataOnly(db, table, "ADD_INDEX"))
        return out
    if isinstance(action, exp.ModifyColumn):
        cd = action.this
        col = _column(cd)
        rename_from = action.args.get("rename_from")
        old = _ident(rename_from) if rename_from is not None else col.column.name
        if col.virtual:
            return [MetadataOnly(db, table, "MODIFY_VIRTUAL_COLUMN")]
        after, first = _position(cd)
        out = []
        if old != col.column.name:
            out.append(RenameColumn(db, table, old, col.column.name))
        out.append(ModifyColumn(db, table, col.column.name, col.column, after=after, first=first))
        return out
    if isinstance(action, exp.RenameColumn):
        old_node, new_node = action.this, action.args.get("to")
        return [RenameColumn(db, table, _ident(_column_ident(old_node)), _ident(_column_ident(new_node)))]
    if isinstance(action, exp.AlterColumn):
        column = _ident(action.this)
        if action.args.get("drop"):
            return [SetDefault(db, table, column, None)]
        if "default" in action.args and action.args["default"] is not None:
            return [SetDefault(db, table, column, _default_text(action.args["default"]))]
        if action.args.get("visible") is not None:
            return [MetadataOnly(db, table, "COLUMN_VISIBILITY")]
        return [Unsupported(db, table, f"ALTER COLUMN clause not supported: {action.sql(dialect=_DIALECT)}")]
    if isinstance(action, exp.Drop):
        kind = (action.args.get("kind") or "").upper()
        if kind == "COLUMN":
            return [DropColumn(db, table, _ident(_column_ident(c))) for c in action.args.get("tables") or []]
        drop_kinds = {"INDEX": "DROP_INDEX", "KEY": "DROP_INDEX", "FOREIGN KEY": "DROP_FOREIGN_KEY"}
        return [MetadataOnly(db, table, drop_kinds.get(kind, "DROP_CONSTRAINT"))]
    if isinstance(action, exp.DropPrimaryKey):
        return [MetadataOnly(db, table, "DROP_PRIMARY_KEY")]
    if isinstance(action, exp.AddConstraint):
        return [MetadataOnly(db, table, _constraint_kind(c)) for c in action.expressions]
    if isinstance(action, exp.AlterRename):
        new = action.this
        if not isinstance(new, exp.Table):
            raise _Unmappable("RENAME without a table name")
        # like MySQL/TiDB: an unqualified new name is in the current (default) database, not the old table's
        new_db = _ident(new.args["db"]) if new.args.get("db") else default_schema
        return [RenameTable(db, table, new_db, _ident(new.this))]
    if isinstance(action, exp.AlterIndex):
        return [MetadataOnly(db, table, "ALTER_INDEX")]
    if isinstance(action, exp.RenameIndex):
        return [MetadataOnly(db, table, "RENAME_INDEX")]
    if isinstance(action, exp.Property):
        return [MetadataOnly(db, table, "TABLE_OPTION")]
    return [Unsupported(db, table, f"ALTER TABLE clause not supported: {action.sql(dialect=_DIALECT)}")]


def _constraint_kind(node: exp.Expression) -> str:
    if isinstance(node, exp.Constraint) and node.expressions:
        node = node.expressions[0]
    if isinstance(node, (exp.PrimaryKey, exp.PrimaryKeyColumnConstraint)):
        return "ADD_PRIMARY_KEY"
    if isinstance(node, exp.ForeignKey):
        return "ADD_FOREIGN_KEY"
    if isinstance(node, exp.CheckColumnConstraint):
        return "ADD_CHECK"
    return "ADD_INDEX"


def _column_ident(node: Optional[exp.Expression]) -> exp.Expression:
    if isinstance(node, (exp.Column, exp.Table)):
        return node.this
    if node is None:
        raise _Unmappable("missing column name")
    return node


# ---------------------------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------------------------


def _ident(node: object) -> str:
    if isinstance(node, exp.Identifier):
        return node.this
    if isinstance(node, exp.Expression) and isinstance(node.this, str):
        return node.this
    if isinstance(node, str):
        return node
    raise _Unmappable(f"not a name: {node!r}")


def _schema_name(node: exp.Expression) -> str:
    """sqlglot puts the name of CREATE DATABASE in ``this`` and of CREATE/DROP SCHEMA in ``db``."""
    if isinstance(node, exp.Table):
        name = node.args.get("this") or node.args.get("db")
        if name is not None:
            return _ident(name)
    raise _Unmappable(f"not a database name: {node!r}")


def _table_name(table: exp.Expression, default_schema: str) -> tuple[str, str]:
    if not isinstance(table, exp.Table):
        raise _Unmappable(f"not a table name: {table.sql(dialect=_DIALECT)}")
    if table.args.get("catalog"):
        raise _Unmappable(f"three-part name {table.sql(dialect=_DIALECT)} is not a MySQL table name")
    db = table.args.get("db")
    return (_ident(db) if db else default_schema), _ident(table.this)


def _table_hint(tree: exp.Expression) -> str:
    """Best-effort table name for an Unsupported report."""
    table = tree.find(exp.Table)
    if isinstance(table, exp.Table) and isinstance(table.this, exp.Identifier):
        return table.this.this
    return ""


# ---------------------------------------------------------------------------------------------------------------
# Fallbacks for statements sqlglot cannot parse (regexes classify; column lists still go through sqlglot)
# ---------------------------------------------------------------------------------------------------------------

_NAME = r"(?:`(?:[^`]|``)+`|[^\s`.,;()]+)"
_QNAME = rf"(?P<{{g}}1>{_NAME})(?:\s*\.\s*(?P<{{g}}2>{_NAME}))?"


def _qname(group: str) -> str:
    return _QNAME.format(g=group)


_RENAME_TABLE = re.compile(r"\s*RENAME\s+TABLES?\s+(?P<pairs>.+?)\s*$", re.IGNORECASE | re.DOTALL)
_RENAME_PAIR = re.compile(rf"\s*{_qname('old')}\s+TO\s+{_qname('new')}\s*(?:,|$)", re.IGNORECASE | re.DOTALL)
_ALTER_TABLE = re.compile(
    rf"\s*ALTER\s+(?:(?:ONLINE|OFFLINE|IGNORE)\s+)*TABLE\s+{_qname('t')}\s*(?P<rest>.*?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_ADD_COLUMNS = re.compile(r"ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?\((?P<defs>.*)\)", re.IGNORECASE | re.DOTALL)
_RENAME_TO = re.compile(rf"RENAME\s+(?:TO\s+|AS\s+)?{_qname('n')}", re.IGNORECASE | re.DOTALL)
_ROW_CHANGING_PARTITION = re.compile(r"(?:TRUNCATE|DROP|EXCHANGE)\s+PARTITION\b", re.IGNORECASE)
_METADATA_CLAUSES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?:(?:ADD|COALESCE|REORGANIZE|ANALYZE|CHECK|OPTIMIZE|REBUILD|REPAIR|DISCARD|IMPORT)\s+"
                r"PARTITION\b|REMOVE\s+PARTITIONING\b|PARTITION\s+BY\b|(?:FIRST|LAST)\s+PARTITION\b)", re.I),
     "PARTITION"),
    (re.compile(rf"PARTITION\s+{_NAME}\s+ATTRIBUTES\b", re.I), "TABLE_OPTION"),
    (re.compile(r"SET\s+TIFLASH\s+REPLICA\b", re.I), "SET_TIFLASH_REPLICA"),
    (re.compile(r"(?:DEFAULT\s+)?PLACEMENT\s+POLICY\b", re.I), "PLACEMENT_POLICY"),
    (re.compile(r"(?:REMOVE\s+TTL\b|TTL\b|TTL_ENABLE\b|TTL_JOB_INTERVAL\b)", re.I), "TTL"),
    (re.compile(r"CONVERT\s+TO\b", re.I), "TABLE_CHARSET"),
    (re.compile(r"(?:COMPACT|ATTRIBUTES|CACHE|NOCACHE|SECONDARY_LOAD|SECONDARY_UNLOAD|STATS_OPTIONS|"
                r"AUTO_ID_CACHE|AUTO_RANDOM_BASE|SHARD_ROW_ID_BITS|PRE_SPLIT_REGIONS)\b", re.I), "TABLE_OPTION"),
    (re.compile(r"ADD\s+(?:VECTOR\s+|COLUMNAR\s+|FULLTEXT\s+|UNIQUE\s+)?(?:INDEX|KEY)\b", re.I), "ADD_INDEX"),
]
_OTHER_STATEMENTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\s*(?:CREATE|ALTER|DROP)\s+PLACEMENT\s+POLICY\b", re.I), "PLACEMENT_POLICY"),
    (re.compile(r"\s*(?:CREATE|ALTER|DROP)\s+RESOURCE\s+GROUP\b", re.I), "RESOURCE_GROUP"),
    (re.compile(r"\s*(?:CREATE|ALTER|DROP)\s+SEQUENCE\b", re.I), "SEQUENCE"),
    (re.compile(r"\s*(?:CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:ALGORITHM\s*=\s*\w+\s+)?"
                r"(?:DEFINER\s*=\s*\S+\s+)?(?:SQL\s+SECURITY\s+\w+\s+)?VIEW\b", re.I), "VIEW"),
]
_ALTER_DATABASE = re.compile(
    r"\s*ALTER\s+(?:DATABASE|SCHEMA)\b\s*"
    rf"(?:(?!(?:SET|DEFAULT|CHARACTER|CHARSET|COLLATE|READ|ENCRYPTION|PLACEMENT)\b){_qname('d')})?",
    re.IGNORECASE,
)
_INDEX_STATEMENT = re.compile(
    rf"\s*(?P<verb>CREATE|DROP)\s+(?:\w+\s+)?INDEX\s+{_NAME}\s+ON\s+{_qname('t')}", re.IGNORECASE | re.DOTALL
)
_ROW_RESTORING = re.compile(
    r"\s*(?P<what>RECOVER\s+TABLE|FLASHBACK\s+TABLE|FLASHBACK\s+(?:DATABASE|SCHEMA)|FLASHBACK\s+CLUSTER)\b"
    rf"(?:\s+(?!(?:TO|BY)\b){_qname('r')})?",
    re.IGNORECASE,
)
_CREATE_TABLE_HEAD = re.compile(r"\s*CREATE\s+(?:GLOBAL\s+)?(?:TEMPORARY\s+)?TABLE\b", re.IGNORECASE)


def _unquote_name(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _qualified(m: re.Match[str], group: str, default_schema: str) -> tuple[str, str]:
    first, second = m.group(f"{group}1"), m.group(f"{group}2")
    if second is None:
        return default_schema, _unquote_name(first)
    return _unquote_name(first), _unquote_name(second)


def _rename_tables(sql: str, schema: str) -> list[SchemaChange]:
    """RENAME TABLE a TO b[, c TO d...]: sqlglot has no tree for it, so a regex reads the name pairs."""
    m = _RENAME_TABLE.match(sql)
    assert m is not None
    pairs = m.group("pairs")
    changes: list[SchemaChange] = []
    pos = 0
    while pos < len(pairs):
        p = _RENAME_PAIR.match(pairs, pos)
        if not p or p.end() == pos:
            return [Unsupported(schema, "", f"cannot read RENAME TABLE: {sql[:200]}")]
        changes.append(RenameTable(*_qualified(p, "old", schema), *_qualified(p, "new", schema)))
        pos = p.end()
    return changes


def _fallback(sql: str, schema: str, ddl_type: Optional[str]) -> list[SchemaChange]:
    """Statements sqlglot cannot parse (or turns into an opaque Command): classify them, never guess columns."""
    if _CREATE_TABLE_HEAD.match(sql):
        trimmed = _without_table_options(sql)
        tree = _parse_one(trimmed) if trimmed is not None else None
        if not isinstance(tree, exp.Create):
            return [Unsupported(schema, "", f"cannot parse CREATE TABLE: {sql[:200]}")]
        try:
            return _map_tree(tree, schema)
        except _Unmappable as exc:
            return [Unsupported(schema, _table_hint(tree), str(exc))]
    m = _ALTER_TABLE.match(sql)
    if m:
        return _alter_fallback(m, schema)
    m = _ROW_RESTORING.match(sql)
    if m:
        what = m.group("what").upper()
        db, table = schema, ""
        if m.group("r1") and "TABLE" in what:
            db, table = _qualified(m, "r", schema)
        elif m.group("r1") and "CLUSTER" not in what:
            db = _unquote_name(m.group("r1"))
        return [Unsupported(db, table, f"restores rows that are not replicated as row events: {sql[:200]}")]
    m = _ALTER_DATABASE.match(sql)
    if m:
        db = _unquote_name(m.group("d2") or m.group("d1")) if m.group("d1") else schema
        return [MetadataOnly(db, "", "ALTER_DATABASE")]
    m = _INDEX_STATEMENT.match(sql)
    if m:
        kind = "ADD_INDEX" if m.group("verb").upper() == "CREATE" else "DROP_INDEX"
        return [MetadataOnly(*_qualified(m, "t", schema), kind)]
    for pattern, kind in _OTHER_STATEMENTS:
        if pattern.match(sql):
            return [MetadataOnly(schema, "", kind)]
    if ddl_type in _METADATA_DDL_TYPES:
        return [MetadataOnly(schema, "", ddl_type)]
    return [Unsupported(schema, "", f"cannot parse DDL: {sql[:200]}")]


def _alter_fallback(m: re.Match[str], schema: str) -> list[SchemaChange]:
    db, table = _qualified(m, "t", schema)
    rest = m.group("rest")
    add = _ADD_COLUMNS.fullmatch(rest)
    if add:
        # ADD COLUMN (a int, b int): let sqlglot read the column list as a CREATE TABLE body
        tree = _parse_one(f"CREATE TABLE `_` ({add.group('defs')})")
        if isinstance(tree, exp.Create) and isinstance(tree.this, exp.Schema):
            try:
                out: list[SchemaChange] = []
                for element in tree.this.expressions:
                    if isinstance(element, exp.ColumnDef):
                        out.extend(_alter_action(element, db, table, schema))
                    else:
                        out.append(MetadataOnly(db, table, "ADD_INDEX"))
                return out
            except _Unmappable as exc:
                return [Unsupported(db, table, str(exc))]
    rename = _RENAME_TO.fullmatch(rest)
    if rename:
        # like MySQL/TiDB: an unqualified new name is in the current (default) database, not the old table's
        return [RenameTable(db, table, *_qualified(rename, "n", schema))]
    if _ROW_CHANGING_PARTITION.match(rest):
        return [Unsupported(db, table, f"changes rows without row events: {rest[:200]}")]
    for pattern, kind in _METADATA_CLAUSES:
        if pattern.match(rest):
            return [MetadataOnly(db, table, kind)]
    return [Unsupported(db, table, f"cannot parse ALTER TABLE clause: {rest[:200]}")]


def _without_table_options(sql: str) -> Optional[str]:
    """CREATE TABLE cut after its column list: table options (PARTITION BY, TTL, placement) hold no columns."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError:
        return None
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                rest = tokens[i + 1 :]
                if any(t.token_type in (TokenType.SELECT, TokenType.LIKE) for t in rest):
                    return None
                return sql[: tok.end + 1]
    return None

