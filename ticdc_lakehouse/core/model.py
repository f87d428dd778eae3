"""The one change-event model every protocol decodes into.

The merge job never looks at a protocol again: it sees ``RowChange``, ``DDLEvent``, ``ResolvedEvent`` and
``DecodeFailure``, each carrying the Kafka position it came from.

Column values travel as **canonical strings** (see ``ticdc_lakehouse.core.values``): exact for DECIMAL and BIGINT
UNSIGNED, base64 for binary, ISO-like for temporal types. They are typed once, in Spark executors, by the target
Iceberg column type. That keeps the decoded stream one fixed Arrow schema whatever the tables look like, and it
never passes a value through a float.

Each column also carries a *type descriptor*: the MySQL column type as SQL text, lower case (``"int"``,
``"bigint unsigned"``, ``"decimal(10,2)"``, ``"enum('a','b')"``, ``"blob"``). A *bare* ``"enum"``/``"set"``
descriptor means the value is the 1-based index / the bitmask (Open Protocol, Craft); a descriptor with elements
means the value is the element name(s), comma separated for SET.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

INSERT = "I"
UPDATE = "U"
DELETE = "D"
#: the ops by the statement name TiCDC's JSON protocols write (Simple's ``type``, Canal-JSON's ``type``)
OPS_BY_NAME = {"INSERT": INSERT, "UPDATE": UPDATE, "DELETE": DELETE}


class Position(NamedTuple):
    """Where a message sits in Kafka. ``seq`` orders several events packed into one message.

    A named tuple, not a frozen dataclass: decoders build one for every event, and a tuple is the cheapest
    immutable record Python has (see ``decode.common.positions``). It compares and hashes as the tuple of its fields.
    """

    topic: str
    partition: int
    offset: int
    seq: int = 0


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    """One column of a table schema carried by a DDL (Simple tableSchema, Debezium, Avro) or parsed from SQL."""

    name: str
    mysql_type: str  # type descriptor, e.g. "decimal(10,2)", "bigint unsigned", "enum('a','b')"
    nullable: bool = True
    default: Optional[str] = None
    comment: Optional[str] = None


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's columns in order, and its primary key (or the handle key TiCDC chose)."""

    schema: str
    table: str
    columns: tuple[ColumnSchema, ...]
    primary_key: tuple[str, ...] = ()
    version: Optional[int] = None  # Simple protocol schemaVersion


@dataclass(slots=True)
class RowChange:
    """A row insert, update or delete at ``commit_ts``.

    ``after`` is the new row (insert/update), ``before`` the old one (update when old values are sent; delete,
    possibly with only the handle-key columns). Values are canonical strings or None for SQL NULL.
    ``column_types`` maps every column present to its type descriptor. It is read-only: decoders share one dict
    between the rows of a table (copy it before changing it).
    """

    schema: str
    table: str
    commit_ts: int
    op: str  # INSERT | UPDATE | DELETE
    after: Optional[dict[str, Optional[str]]]
    before: Optional[dict[str, Optional[str]]]
    key_columns: tuple[str, ...]
    column_types: dict[str, str]
    position: Position
    table_id: Optional[int] = None
    schema_version: Optional[int] = None
    #: the decoder made ``commit_ts`` up (no TSO in the message: Canal-JSON's millisecond ``es``, Confluent Avro
    #: rows without ``_tidb_commit_ts`` and every tombstone): it orders by Kafka position, not as one transaction
    ts_made_up: bool = False


@dataclass(slots=True)
class DDLEvent:
    """A DDL statement committed upstream at ``commit_ts``.

    ``ddl_type`` is a normalized name (``CREATE_TABLE``, ``ADD_COLUMN``, ...; TiDB's action codes are mapped in
    ``ticdc_lakehouse.decode.common.tidb_ddl_actions``), ``OTHER`` when unknown. ``table_schema`` is the table after the DDL
    where the protocol sends it (Simple's tableSchema), so CREATE TABLE does not depend on parsing SQL.
    ``is_bootstrap`` marks Simple BOOTSTRAP messages: they carry a schema and no statement to execute.
    """

    schema: str
    table: str
    commit_ts: int
    query: str
    ddl_type: str
    position: Position
    start_ts: Optional[int] = None
    table_schema: Optional[TableSchema] = None
    pre_table_schema: Optional[TableSchema] = None
    is_bootstrap: bool = False


@dataclass(slots=True)
class ResolvedEvent:
    """A partition's promise that nothing with a smaller commit ts is still to come on it."""

    ts: int
    position: Position


@dataclass(slots=True)
class DecodeFailure:
    """A message that could not be decoded: routed to the dead-letter table, never dropped silently."""

    reason: str
    position: Position
    key: Optional[bytes] = None
    value: Optional[bytes] = None


Event = Union[RowChange, DDLEvent, ResolvedEvent, DecodeFailure]


class DecodeError(Exception):
    """Raised by a decoder for a message it cannot read. The caller turns it into a ``DecodeFailure``."""


class SourceUnavailable(Exception):
    """Raised by a decoder when something the message depends on cannot be reached (the schema registry is down,
    refuses our credentials, answers 5xx): the message may be perfectly good, so it must not be dead-lettered.
    It fails the run before anything is committed; the next run (or an Airflow retry) decodes it again."""


@dataclass(slots=True)
class Message:
    """One landed Kafka record, as a decoder sees it."""

    topic: str
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple[tuple[str, Optional[bytes]], ...] = field(default_factory=tuple)
    timestamp: Optional[int] = None

    def position(self, seq: int = 0) -> Position:
        return Position(self.topic, self.partition, self.offset, seq)
