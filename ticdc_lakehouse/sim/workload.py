"""A realistic TiCDC workload for a sample shop schema, with the upstream truth to check the lake against.

It simulates what TiCDC sends for a TiDB cluster: DDL broadcast to every partition, transactions whose rows are
dispatched by primary key, resolved events that lag differently per partition, a processor restart that replays
a partition's tail, and updates that change a primary key (sent as delete + insert, often to two partitions).
The simulated upstream keeps every table's rows, so ``state_at(ts)`` says what the lake must equal at any cut.

Used by ``lakehouse demo``, by the tests, and by the benchmarks. Deterministic for a given seed.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ticdc_lakehouse.core.model import (
    DELETE,
    INSERT,
    UPDATE,
    ColumnSchema,
    DDLEvent,
    Event,
    Position,
    ResolvedEvent,
    RowChange,
    TableSchema,
)

START_TIME = datetime(2026, 11, 1, 8, 0, 0, tzinfo=timezone.utc)
TSO_LOGICAL_BITS = 18

Row = dict[str, Optional[str]]


def tso_at(moment: datetime, logical: int = 0) -> int:
    return (int(moment.timestamp() * 1000) << TSO_LOGICAL_BITS) | logical


@dataclass
class UpstreamTable:
    schema: str
    name: str
    columns: list[ColumnSchema]
    primary_key: tuple[str, ...]
    version: int
    rows: dict[tuple, Row] = field(default_factory=dict)
    # with ``Workload(quick_pick=True)``: the keys of ``rows`` in a list (and each one's index), to pick in O(1)
    keys: list[tuple] = field(default_factory=list, repr=False, compare=False)
    key_index: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)

    def table_schema(self) -> TableSchema:
        return TableSchema(self.schema, self.name, tuple(self.columns), self.primary_key, self.version)

    def types(self) -> dict[str, str]:
        return {c.name: c.mysql_type for c in self.columns}

    def key_of(self, row: Row) -> tuple:
        return tuple(row[k] for k in self.primary_key)

    def index_key(self, key: tuple) -> None:
        self.key_index[key] = len(self.keys)
        self.keys.append(key)

    def unindex_key(self, key: tuple) -> None:
        """Swap-remove: the last key takes the removed one's place."""
        at = self.key_index.pop(key)
        last = self.keys.pop()
        if at < len(self.keys):
            self.keys[at] = last
            self.key_index[last] = at


def _create_sql(table: UpstreamTable) -> str:
    parts = []
    for column in table.columns:
        null = " NOT NULL" if column.name in table.primary_key or not column.nullable else ""
        parts.append(f"`{column.name}` {column.mysql_type}{null}")
    parts.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in table.primary_key) + ")")
    return f"CREATE TABLE `{table.schema}`.`{table.name}` (" + ", ".join(parts) + ")"


SAMPLE_TABLES: list[tuple[str, list[tuple[str, str, bool]], tuple[str, ...]]] = [
    (
        "customers",
        [
            ("id", "int", False),
            ("name", "varchar(64)", True),
            ("email", "varchar(128)", True),
            ("balance", "decimal(12,2)", True),
            ("vip", "tinyint", True),
            ("created_at", "datetime", True),
        ],
        ("id",),
    ),
    (
        "orders",
        [
            ("id", "bigint", False),
            ("customer_id", "int", True),
            ("amount", "decimal(10,2)", True),
            ("status", "enum('new','paid','shipped','cancelled')", True),
            ("note", "text", True),
            ("qty", "int", True),
            ("big", "bigint unsigned", True),
            ("updated_at", "timestamp", True),
        ],
        ("id",),
    ),
    (
        "order_items",
        [
            ("order_id", "bigint", False),
            ("line", "int", False),
            ("sku", "varchar(32)", True),
            ("price", "double", True),
            ("attrs", "json", True),
            ("blobby", "blob", True),
        ],
        ("order_id", "line"),
    ),
]

# The mid-stream DDL a benchmark workload can ask for (``Workload.scripted_ddl``), in the order.
DDL_KINDS = ("widen", "drop", "create", "truncate", "rename", "add")


#: the types of the copies' own columns (``Workload.create_sample_tables(distinct=True)``), besides DECIMALs
_EXTRA_TYPES = ("int", "varchar(40)", "datetime", "bigint unsigned", "double", "text", "enum('x','y','z')", "json",
                "blob", "timestamp", "bigint", "tinyint")


def distinct_type(i: int) -> str:
    """The type of the ``i``-th copy's own column: every third a DECIMAL of one of 36 precisions and scales, the
    others one of ``_EXTRA_TYPES`` in turn."""
    if i % 3 == 0:
        return f"decimal({10 + i % 9},{i % 4})"
    return _EXTRA_TYPES[i % len(_EXTRA_TYPES)]


class Workload:
    """A deterministic upstream + TiCDC simulator. Call ``run_script`` (or the pieces), then encode."""

    def __init__(self, seed: int = 7, partitions: int = 3, schema: str = "shop", partial_updates: bool = False,
                 keep_history: bool = True, quick_pick: bool = False) -> None:
        """``partial_updates``: updates carry only the key and the columns they change, in both images (as
        protocols that send only updated columns do), instead of TiCDC's default whole rows.

        For benchmark-sized workloads (100k+ transactions): ``keep_history=False`` keeps no copy of every table
        per change (``state_at`` then knows only the latest state), and ``quick_pick=True`` picks the rows to
        update or delete in O(1) instead of scanning the table (another, still deterministic, choice)."""
        self.rng = random.Random(seed)
        self.partial_updates = partial_updates
        self.keep_history = keep_history
        self.quick_pick = quick_pick
        self.partitions = partitions
        self.schema = schema
        self.tables: dict[str, UpstreamTable] = {}
        self.moment = START_TIME
        self.last_ts = 0
        self.sent: dict[int, list[Event]] = {p: [] for p in range(partitions)}
        self.flushed: dict[int, int] = {p: 0 for p in range(partitions)}
        self.resolved: dict[int, int] = {p: 0 for p in range(partitions)}
        self.history: list[tuple[int, dict[str, UpstreamTable]]] = []
        self.next_id: dict[str, int] = {}
        self.lags = [0] + [self.rng.randint(1, 4) for _ in range(partitions - 1)]
        self.txn_ts: list[int] = []

    # -- time --------------------------------------------------------------------------------------------
    def _next_ts(self) -> int:
        self.moment += timedelta(milliseconds=self.rng.randint(200, 1500))
        ts = tso_at(self.moment, self.rng.randint(0, 1000))
        ts = max(ts, self.last_ts + 1)
        self.last_ts = ts
        return ts

    def _remember(self, ts: int) -> None:
        if self.keep_history:
            self.history.append((ts, copy.deepcopy(self.tables)))
        else:
            self.history = [(ts, self.tables)]

    def _send(self, partition: int, event: Event) -> None:
        self.sent[partition].append(event)

    def _pos(self, partition: int) -> Position:
        return Position("ticdc", partition, len(self.sent[partition]))

    # -- DDL ---------------------------------------------------------------------------------------------
    def ddl(self, query: str, ddl_type: str, table: Optional[str], mutate: Callable[[], None]) -> int:
        """Run a DDL upstream at a new ts and broadcast it to every partition."""
        ts = self._next_ts()
        pre = self.tables[table].table_schema() if table and table in self.tables else None
        mutate()
        target = self.tables.get(table) if table else None
        if target is not None:
            target.version = ts
        post = target.table_schema() if target is not None else None
        for p in range(self.partitions):
            self._send(p, DDLEvent(self.schema, table or "", ts, query, ddl_type, self._pos(p),
                                   table_schema=post, pre_table_schema=pre))
        self._remember(ts)
        return ts

    def create_sample_tables(self, count: int = len(SAMPLE_TABLES), distinct: bool = False) -> None:
        """The database and ``count`` tables: the sample tables, then copies of their shapes (``customers_1``,
        ``orders_1``, ``order_items_1``, ``customers_2``...). ``distinct``: each copy has a column of its own as
        well (``extra_<i>``, of one of a dozen types and some thirty DECIMALs: ``distinct_type``), so no two
        tables share their columns, nor most of them their column types, as in most real databases."""
        self.ddl(f"CREATE DATABASE `{self.schema}`", "CREATE_SCHEMA", None, lambda: None)
        for i in range(count):
            self.create_sample_copy(i, distinct)

    def create_sample_copy(self, i: int, distinct: bool = False) -> str:
        """CREATE TABLE of the ``i``-th sample-shaped table (see ``create_sample_tables``); returns its name."""
        name, columns, pk = SAMPLE_TABLES[i % len(SAMPLE_TABLES)]
        if i >= len(SAMPLE_TABLES):
            name = f"{name}_{i // len(SAMPLE_TABLES)}"
            if distinct:
                columns = [*columns, (f"extra_{i}", distinct_type(i), True)]
        self.create_table(name, columns, pk)
        return name

    def show_create_tables(self) -> str:
        """The CREATE TABLE statements of every current table, as ``SHOW CREATE TABLE`` upstream would give them."""
        return "".join(_create_sql(self.tables[name]) + ";\n" for name in sorted(self.tables))

    def create_table(self, name: str, columns: list[tuple[str, str, bool]], primary_key: tuple[str, ...]) -> int:
        """CREATE TABLE of a table of ``(name, type, nullable)`` columns; rows come with the next transactions."""
        table = UpstreamTable(self.schema, name, [ColumnSchema(c, t, nullable) for c, t, nullable in columns],
                              primary_key, 0)

        def create() -> None:
            self.tables[name] = table

        ts = self.ddl(_create_sql(table), "CREATE_TABLE", name, create)
        self.next_id[name] = 1
        return ts

    def truncate_table(self, name: str) -> int:
        """TRUNCATE TABLE: every row is gone, without row events."""

        def mutate() -> None:
            table = self.tables[name]
            table.rows.clear()
            table.keys.clear()
            table.key_index.clear()

        return self.ddl(f"TRUNCATE TABLE `{self.schema}`.`{name}`", "TRUNCATE_TABLE", name, mutate)

    def scripted_ddl(self, kind: str) -> int:
        """One of ``DDL_KINDS`` on the sample tables: widen ``orders.qty`` to bigint, drop
        ``order_items.blobby``, create the next sample-shaped table, truncate ``customers``, rename
        ``customers.email``, add ``orders.discount``."""
        if kind == "widen":
            return self.modify_column("orders", "qty", "bigint")
        if kind == "drop":
            return self.drop_column("order_items", "blobby")
        if kind == "create":
            self.create_sample_copy(len(self.tables))
            return self.last_ts
        if kind == "truncate":
            return self.truncate_table("customers")
        if kind == "rename":
            return self.rename_column("customers", "email", "contact_email")
        if kind == "add":
            return self.add_column("orders", "discount", "decimal(5,2)")
        raise ValueError(f"unknown DDL kind {kind!r}; expected one of {DDL_KINDS}")

    def drop_table(self, name: str) -> int:
        """DROP TABLE: the table and its rows are gone upstream from this ts on."""

        def mutate() -> None:
            self.tables.pop(name)
            self.next_id.pop(name, None)

        return self.ddl(f"DROP TABLE `{self.schema}`.`{name}`", "DROP_TABLE", name, mutate)

    def add_column(self, table: str, column: str, mysql_type: str) -> int:
        def mutate() -> None:
            t = self.tables[table]
            t.columns.append(ColumnSchema(column, mysql_type, True))
            for row in t.rows.values():
                row[column] = None

        return self.ddl(f"ALTER TABLE `{self.schema}`.`{table}` ADD COLUMN `{column}` {mysql_type} NULL",
                        "ADD_COLUMN", table, mutate)

    def modify_column(self, table: str, column: str, mysql_type: str) -> int:
        def mutate() -> None:
            t = self.tables[table]
            t.columns = [replace(c, mysql_type=mysql_type) if c.name == column else c for c in t.columns]

        return self.ddl(f"ALTER TABLE `{self.schema}`.`{table}` MODIFY COLUMN `{column}` {mysql_type}",
                        "MODIFY_COLUMN", table, mutate)

    def rename_column(self, table: str, old: str, new: str) -> int:
        def mutate() -> None:
            t = self.tables[table]
            t.columns = [replace(c, name=new) if c.name == old else c for c in t.columns]
            for row in t.rows.values():
                row[new] = row.pop(old)

        return self.ddl(f"ALTER TABLE `{self.schema}`.`{table}` RENAME COLUMN `{old}` TO `{new}`",
                        "RENAME_COLUMN", table, mutate)

    def drop_column(self, table: str, column: str) -> int:
        def mutate() -> None:
            t = self.tables[table]
            t.columns = [c for c in t.columns if c.name != column]
            for row in t.rows.values():
                row.pop(column, None)

        return self.ddl(f"ALTER TABLE `{self.schema}`.`{table}` DROP COLUMN `{column}`", "DROP_COLUMN", table, mutate)

    def rename_table(self, old: str, new: str) -> int:
        def mutate() -> None:
            t = self.tables.pop(old)
            t.name = new
            self.tables[new] = t
            self.next_id[new] = self.next_id.pop(old)

        ts = self._next_ts()
        pre = self.tables[old].table_schema()
        mutate()
        post = self.tables[new].table_schema()
        query = f"RENAME TABLE `{self.schema}`.`{old}` TO `{self.schema}`.`{new}`"
        for p in range(self.partitions):
            self._send(p, DDLEvent(self.schema, new, ts, query, "RENAME_TABLE", self._pos(p),
                                   table_schema=post, pre_table_schema=pre))
        self._remember(ts)
        return ts

    # -- rows --------------------------------------------------------------------------------------------
    def _value(self, table: UpstreamTable, column: ColumnSchema) -> Optional[str]:
        rng = self.rng
        base = column.mysql_type.split("(")[0].split(" ")[0]
        if column.nullable and column.name not in table.primary_key and rng.random() < 0.08:
            return None
        if base in ("int", "tinyint"):
            return str(rng.randint(-100, 100000) if base == "int" else rng.randint(0, 1))
        if base == "bigint":
            if "unsigned" in column.mysql_type:
                return str(rng.choice([0, 1, 2**63, 2**64 - 1, rng.randint(0, 2**64 - 1)]))
            return str(rng.randint(-(2**40), 2**40))
        if base == "decimal":
            precision, scale = (int(x) for x in column.mysql_type[column.mysql_type.index("(") + 1 : -1].split(","))
            whole = rng.randint(0, 10 ** min(precision - scale, 6) - 1)
            frac = rng.randint(0, 10**scale - 1)
            sign = "-" if rng.random() < 0.1 else ""
            return f"{sign}{whole}.{frac:0{scale}d}" if scale else f"{sign}{whole}"
        if base == "double":
            return repr(rng.choice([0.5, -1.25, 3.0, 1e-3, rng.randint(0, 1000) / 8]))
        if base in ("varchar", "text"):
            words = ["alpha", "beta", "γάμμα", "データ", "emoji 🎉", "o'quote", 'dq"x', "back\\slash",
                     "tab\tnl\n"]
            return " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))[:32]
        if base == "enum":
            elements = [e.strip("'") for e in column.mysql_type[5:-1].split(",")]
            return rng.choice(elements)
        if base in ("datetime", "timestamp"):
            moment = self.moment.replace(tzinfo=None) - timedelta(seconds=rng.randint(0, 86400))
            return moment.strftime("%Y-%m-%d %H:%M:%S")
        if base == "json":
            return json.dumps({"k": rng.randint(0, 9), "tags": ["a", "b"][: rng.randint(0, 2)]})
        if base == "blob":
            return base64.b64encode(bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 12)))).decode()
        raise ValueError(f"no generator for {column.mysql_type}")

    def _new_row(self, table: UpstreamTable) -> Row:
        row = {c.name: self._value(table, c) for c in table.columns}
        if table.primary_key == ("id",):
            row["id"] = str(self.next_id[table.name])
            self.next_id[table.name] += 1
        else:
            row[table.primary_key[0]] = str(self.rng.randint(1, 40))
            row[table.primary_key[1]] = str(self.next_id[table.name])
            self.next_id[table.name] += 1
        return row

    def _partition_of(self, table: UpstreamTable, key: tuple) -> int:
        return zlib.crc32(f"{table.schema}.{table.name}:{key}".encode()) % self.partitions

    def _row_event(self, table: UpstreamTable, ts: int, op: str, after: Optional[Row], before: Optional[Row]) -> None:
        image = after if after is not None else before
        partition = self._partition_of(table, table.key_of(image))
        if op == DELETE and before is not None and self.rng.random() < 0.5:
            before = {k: before[k] for k in table.primary_key}  # delete-only-handle-key-columns
        types = table.types()
        if op == UPDATE and self.partial_updates and after is not None and before is not None:
            sent = [name for name in after if name in table.primary_key or after[name] != before.get(name)]
            after, before = {k: after[k] for k in sent}, {k: before[k] for k in sent if k in before}
            types = {k: types[k] for k in sent}
        self._send(partition, RowChange(
            schema=table.schema, table=table.name, commit_ts=ts, op=op,
            after=dict(after) if after is not None else None, before=dict(before) if before is not None else None,
            key_columns=table.primary_key, column_types=types, position=self._pos(partition),
            schema_version=table.version,
        ))

    def _picker(self, table: UpstreamTable, touched: set[tuple[str, tuple]]) -> Optional[Callable[[], tuple]]:
        """A function choosing a live row's key not yet changed in this transaction; None when there is none.
        The scan runs before the transaction's roll is used, as it always did (the demo's output depends on it)."""
        if self.quick_pick:
            changed = sum(1 for name, key in touched if name == table.name and key in table.key_index)
            return (lambda: self._quick_choice(table, touched)) if len(table.keys) > changed else None
        live = [k for k in table.rows if (table.name, k) not in touched]
        return (lambda: self.rng.choice(live)) if live else None

    def _quick_choice(self, table: UpstreamTable, touched: set[tuple[str, tuple]]) -> tuple:
        for _ in range(8):
            key = table.keys[self.rng.randrange(len(table.keys))]
            if (table.name, key) not in touched:
                return key
        return self.rng.choice([k for k in table.keys if (table.name, k) not in touched])

    def _put_row(self, table: UpstreamTable, row: Row) -> tuple:
        key = table.key_of(row)
        if self.quick_pick and key not in table.rows:
            table.index_key(key)
        table.rows[key] = row
        return key

    def _pop_row(self, table: UpstreamTable, key: tuple) -> Row:
        if self.quick_pick:
            table.unindex_key(key)
        return table.rows.pop(key)

    def transaction(self, changes: int = 4, only: Optional[Sequence[str]] = None) -> int:
        """One upstream transaction of random inserts, updates, deletes and primary-key changes; ``only``: the
        tables it may touch (a changefeed whose other tables are idle), else any."""
        ts = self._next_ts()
        touched: set[tuple[str, tuple]] = set()
        names = sorted(self.tables) if only is None else sorted(only)
        for _ in range(changes):
            table = self.tables[self.rng.choice(names)]
            roll = self.rng.random()
            pick = self._picker(table, touched)
            if roll < 0.45 or pick is None:
                row = self._new_row(table)
                key = self._put_row(table, row)
                touched.add((table.name, key))
                self._row_event(table, ts, INSERT, row, None)
            elif roll < 0.75:
                key = pick()
                old = table.rows[key]
                new = dict(old)
                for column in table.columns:
                    if column.name not in table.primary_key and self.rng.random() < 0.5:
                        new[column.name] = self._value(table, column)
                table.rows[key] = new
                touched.add((table.name, key))
                self._row_event(table, ts, UPDATE, new, old)
            elif roll < 0.9:
                key = pick()
                old = self._pop_row(table, key)
                touched.add((table.name, key))
                self._row_event(table, ts, DELETE, None, old)
            else:  # primary-key change: TiCDC sends delete(old key) + insert(new key)
                key = pick()
                old = self._pop_row(table, key)
                new = dict(old)
                new[table.primary_key[-1]] = str(self.next_id[table.name])
                self.next_id[table.name] += 1
                new_key = self._put_row(table, new)
                touched.update({(table.name, key), (table.name, new_key)})
                self._row_event(table, ts, DELETE, None, old)
                self._row_event(table, ts, INSERT, new, None)
        self.txn_ts.append(ts)
        self._remember(ts)
        return ts

    def resolve(self, final: bool = False) -> None:
        """Resolved events: each partition lags by its own number of transactions (none when ``final``)."""
        for p in range(self.partitions):
            lag = 0 if final else self.lags[p]
            if len(self.txn_ts) <= lag:
                continue
            ts = (self.txn_ts[-1 - lag] if lag else self.last_ts) + 1
            if ts > self.resolved[p]:
                self.resolved[p] = ts
                self._send(p, ResolvedEvent(ts, self._pos(p)))

    @classmethod
    def started(cls, seed: int, partitions: int, transactions: int, changes: int = 3) -> "Workload":
        """The sample tables created and resolved everywhere, then ``transactions`` of ``changes`` rows each
        (no resolved event after them yet: the caller decides what the partitions promise)."""
        workload = cls(seed=seed, partitions=partitions)
        workload.create_sample_tables()
        workload.resolve(final=True)
        for _ in range(transactions):
            workload.transaction(changes)
        return workload

    def bootstrap(self) -> None:
        """Simple protocol BOOTSTRAP: every table's current schema, to every partition, with commit ts 0."""
        for table in self.tables.values():
            for p in range(self.partitions):
                self._send(p, DDLEvent(table.schema, table.name, 0, "", "CREATE_TABLE", self._pos(p),
                                       table_schema=table.table_schema(), is_bootstrap=True))

    def replay_tail(self, partition: int, count: int) -> None:
        """A processor restart: the partition's last ``count`` events are sent again."""
        tail = [e for e in self.sent[partition][-count:]]
        for event in tail:
            self._send(partition, replace(event, position=self._pos(partition)))

    def run_script(self, transactions: int = 60, with_ddl: bool = True) -> None:
        """The standard scenario: create tables, a workload with DDL in the middle, replays, lagging resolved."""
        if not self.tables:
            self.create_sample_tables()
            self.resolve(final=True)
        for i in range(transactions):
            self.transaction(self.rng.randint(1, 5))
            if i % 3 == 2:
                self.resolve()
            if with_ddl and i == transactions // 3:
                self.add_column("orders", "discount", "decimal(5,2)")
                self.modify_column("orders", "qty", "bigint")
            if with_ddl and i == transactions // 2:
                self.rename_column("customers", "email", "contact_email")
                self.drop_column("order_items", "blobby")
            if i == (2 * transactions) // 3:
                self.replay_tail(self.rng.randrange(self.partitions), 5)
        self.resolve()

    # -- the truth ---------------------------------------------------------------------------------------
    def global_resolved_ts(self) -> int:
        return min(self.resolved.values())

    def state_at(self, ts: int) -> dict[str, UpstreamTable]:
        """Upstream tables after every change with commit ts <= ``ts``."""
        state: dict[str, UpstreamTable] = {}
        for at, tables in self.history:
            if at > ts:
                break
            state = tables
        return state

    def expected_json(self, ts: int) -> dict[str, list[dict[str, Any]]]:
        """``schema.table`` -> rows ordered by primary key, as ``lakehouse sql --format json`` prints them."""
        return {f"{t.schema}.{t.name}": expected_rows(t) for t in self.state_at(ts).values()}

    # -- encoding ----------------------------------------------------------------------------------------
    def new_events(self) -> dict[int, list[Event]]:
        """Events sent since the last call (to grow an archive incrementally)."""
        fresh = {p: self.sent[p][self.flushed[p]:] for p in range(self.partitions)}
        self.flushed = {p: len(self.sent[p]) for p in range(self.partitions)}
        return fresh


def expected_value(mysql_type: str, canonical: Optional[str]) -> Any:
    """A canonical upstream value as the lake's JSON output shows it."""
    from ticdc_lakehouse.core.mysql_types import iceberg_type, parse_type

    if canonical is None:
        return None
    spark_type = iceberg_type(parse_type(mysql_type))
    if spark_type in ("int", "bigint"):
        return int(canonical)
    if spark_type in ("float", "double"):
        return float(canonical)
    if spark_type.startswith("decimal"):
        scale = int(spark_type[spark_type.index(",") + 1 : -1])
        from decimal import Decimal

        return format(Decimal(canonical).quantize(Decimal(1).scaleb(-scale)), "f")
    if spark_type == "timestamp_ntz":
        return datetime.fromisoformat(canonical).isoformat()
    return canonical


def expected_rows(table: UpstreamTable) -> list[dict[str, Any]]:
    types = table.types()

    def sort_key(row: Row) -> tuple:
        return tuple(int(row[k]) for k in table.primary_key)

    return [
        {c.name: expected_value(types[c.name], row.get(c.name)) for c in table.columns}
        for row in sorted(table.rows.values(), key=sort_key)
    ]


def encoder_for(protocol: str):
    """The encoder the registry names for ``protocol`` (see ``decode.protocols``)."""
    from ticdc_lakehouse.decode.protocols import spec_of

    return spec_of(protocol).make_encoder()


def encode_partitions(events: dict[int, list[Event]], protocol: str,
                      max_batch_size: int = 1) -> dict[int, list[tuple]]:
    """Per partition, ``(key, value, headers, timestamp_ms)`` records in send order.

    ``max_batch_size`` > 1 batches consecutive row events the way TiCDC does (its default is 16; a DDL or
    resolved event closes the batch and goes alone), for the protocols whose encoder batches (Open, Craft)."""
    encoder = encoder_for(protocol)
    batching = max_batch_size > 1 and hasattr(encoder, "encode_rows")
    records: dict[int, list[tuple]] = {}
    for partition, items in events.items():
        out: list[tuple] = []
        rows: list[RowChange] = []

        def close_rows() -> None:
            for start in range(0, len(rows), max_batch_size):
                key, value = encoder.encode_batch(rows[start : start + max_batch_size])
                out.append((key, value, [], (rows[start].commit_ts >> TSO_LOGICAL_BITS) or None))
            rows.clear()

        for event in items:
            if batching and isinstance(event, RowChange):
                rows.append(event)
                continue
            close_rows()
            key, value = encoder.encode(event)
            ts = getattr(event, "commit_ts", None) or getattr(event, "ts", 0)
            out.append((key, value, [], (ts >> TSO_LOGICAL_BITS) or None))
        close_rows()
        records[partition] = out
    return records


def write_to_archive(workload: Workload, archive_dir: Path | str, topic: str, protocol: str,
                     compression: str = "none", max_batch_size: int = 1) -> int:
    """Append the workload's new events to a Kafka log directory; returns how many records were written.
    ``max_batch_size``: as for :func:`encode_partitions` (16 for TiCDC's default batching)."""
    from ticdc_lakehouse.sim.archive_writer import write_archive

    records = encode_partitions(workload.new_events(), protocol, max_batch_size)
    write_archive(archive_dir, topic, records, compression=compression, records_per_batch=20, batches_per_segment=3)
    return sum(len(r) for r in records.values())
